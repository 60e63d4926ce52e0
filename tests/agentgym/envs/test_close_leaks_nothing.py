"""A reset/step/close cycle leaves no socket open and warns of no unclosed transport.

The retriever client keeps connections alive and sandboxes talk over sockets; whatever an
episode opened must be closed by ``env.close()`` (the retriever client's connections) or by
closing the shared pools (the warm sandboxes), never left to the garbage collector.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
import warnings

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.resources import shared_resources
from agentgym.retrieval import LocalRetriever, start_service_in_thread
from agentgym.runtime import run_sync
from tasks.search import load_default_dataset

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts sockets in /proc/self/fd")


def _sockets() -> int:
    """Open sockets of this process (the runtime loop started first: its self-pipe is two)."""
    run_sync(asyncio.sleep(0))
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # closed while listing
            pass
    return count


def _settles_to(expected: int, timeout_s: float = 5.0) -> int:
    """The socket count once it reaches ``expected`` or the timeout passes (peers close late)."""
    end = time.monotonic() + timeout_s
    while (count := _sockets()) > expected and time.monotonic() < end:
        time.sleep(0.05)
    return count


def _episode(env_id: str, **kwargs) -> None:
    """One reset, one oracle step and close, with ResourceWarnings as errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        env = gym.make(env_id, **kwargs)
        env.reset(seed=0)
        env.step(env.unwrapped.oracle_action())
        env.close()
        del env
        gc.collect()


def _registered(prefix: str) -> str:
    return max(i for i in gym.registry if i.startswith(prefix))


@pytest.fixture
def retriever_url():
    index = LocalRetriever.for_corpus(load_default_dataset().corpus).index
    running = start_service_in_thread(index, port=0)
    yield running.url
    running.stop()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_search_with_a_retriever_service_closes_its_connections(retriever_url):
    before = _sockets()
    # Search-v1: the fixture serves the default (v1) corpus, and an env refuses a retriever
    # serving another corpus than its own; what is tested here is the client's sockets
    _episode("agentgym/Search-v1", retriever_url=retriever_url)
    assert _settles_to(before) == before


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_data_analysis_leaves_nothing_open_once_its_pool_is_closed(monkeypatch):
    monkeypatch.setenv("AGENTGYM_SANDBOX", "process")  # no Docker needed
    run_sync(shared_resources().aclose())
    before = _sockets()
    _episode(_registered("agentgym/DataAnalysis-v"))
    run_sync(shared_resources().aclose())
    assert _settles_to(before) == before
