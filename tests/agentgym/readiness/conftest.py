"""Shared helpers for the readiness tests: test-only env ids."""

from __future__ import annotations

import gymnasium as gym
import pytest

from agentgym.testing import ProbeEnv

PROBE_ID = "agentgym-test/Probe-v0"


def register_test_env(env_id: str, entry_point: object, **kwargs: object) -> str:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs)
    return env_id


@pytest.fixture
def probe_env_id() -> str:
    return register_test_env(PROBE_ID, ProbeEnv)
