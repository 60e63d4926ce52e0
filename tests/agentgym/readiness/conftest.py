"""Shared helpers for the readiness tests: test-only env ids and detectors of known bugs
in code this package does not own (so that xfail markers lift themselves when fixed)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from agentgym.parsing import HermesParser
from agentgym.testing import ProbeEnv

PROBE_ID = "agentgym-test/Probe-v0"


def register_test_env(env_id: str, entry_point: object, **kwargs: object) -> str:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs)
    return env_id


def hermes_keeps_duplicate_keys() -> bool:
    """True while the Hermes parser silently keeps the last of duplicated argument keys
    (``{"answer": 41, "answer": 42}`` reads as 42), which lets an agent spray answers."""
    call = HermesParser().parse('<tool_call>{"name": "answer", "arguments": {"answer": 41, "answer": 42}}</tool_call>')
    return call[0].status == "ok"


def reset_keeps_last_results() -> bool:
    """True while ``ToolEnv.reset`` keeps the previous episode's ``last_results`` (stale
    results that an oracle reading them acts on in the new episode)."""
    env = ProbeEnv()
    env.reset(seed=0)
    env.step('<tool_call>{"name": "reveal", "arguments": {}}</tool_call>')
    env.reset(seed=1)
    return bool(env.last_results)


@pytest.fixture
def probe_env_id() -> str:
    return register_test_env(PROBE_ID, ProbeEnv)
