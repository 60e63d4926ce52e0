"""``openenv_env(url)``: an OpenEnv server as a Gymnasium text env, with the status
contract: a lost or refusing server is infrastructure (retried at reset, flagged in an
episode), a rejected action is the agent's error."""

import sys
import textwrap

import pytest

import agentgym  # noqa: F401
from agentgym.errors import InfraError
from agentgym.interop.launch import free_port
from agentgym.interop.openenv_client import TELEMETRY_NAME, openenv_env

# A third-party OpenEnv env, written with openenv-core alone: a counter that fails on
# "bad" (the action's fault) and kills its server on "die" (the infrastructure's).
COUNTER_SERVER = textwrap.dedent('''
    import os, sys
    import uvicorn
    from pydantic import Field
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class CountAction(Action):
        message: str = Field(...)

    class CountObservation(Observation):
        prompt: str = ""
        count: int = 0

    class Counter(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            super().__init__()
            self._state = State(step_count=0)

        def reset(self, seed=None, episode_id=None, **kwargs):
            self._state = State(step_count=0)
            return CountObservation(prompt="say 'up' three times", count=0)

        def step(self, action, timeout_s=None, **kwargs):
            if action.message == "bad":
                raise ValueError("say 'up', not 'bad'")
            if action.message == "die":
                os._exit(1)
            self._state.step_count += 1
            n = self._state.step_count
            return CountObservation(prompt=f"count {n}", count=n, done=n >= 3, reward=float(n >= 3))

        @property
        def state(self):
            return self._state

    app = create_fastapi_app(Counter, CountAction, CountObservation, max_concurrent_envs=int(sys.argv[2]))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
''')


def _start_counter(directory, capacity: int):
    import subprocess
    import time
    import urllib.request

    script = directory / "counter_server.py"
    script.write_text(COUNTER_SERVER)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(capacity)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).close()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the counter server did not start")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    """A counter server for two sessions at once (openenv-core takes ~6 s to import: one per module)."""
    proc, url = _start_counter(tmp_path_factory.mktemp("counter"), capacity=2)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def doomed_counter(tmp_path):
    """A counter server of its own, for a test that kills it."""
    proc, url = _start_counter(tmp_path, capacity=1)
    yield url
    proc.kill()
    proc.wait(10)


def test_a_third_party_env_plays_through_with_its_schema_read_from_the_server(counter):
    env = openenv_env(counter)
    try:
        obs, info = env.reset(seed=0)
        assert obs == "say 'up' three times" and info["openenv_observation"]["count"] == 0
        for expected in (1, 2):
            obs, reward, terminated, truncated, info = env.step("up")
            assert (obs, reward, terminated, truncated) == (f"count {expected}", 0.0, False, False)
        obs, reward, terminated, truncated, info = env.step("up")
        assert (reward, terminated, truncated, info["infra_failed"]) == (1.0, True, False, False)
        assert env.action_field == "message"  # from GET /schema
    finally:
        env.close()


def test_a_rejected_action_is_the_agents_error_and_the_episode_goes_on(counter):
    env = openenv_env(counter)
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step("bad")
        assert "rejected your action" in obs and "not 'bad'" in obs
        assert (terminated, truncated, info["infra_failed"], info["status"]) == (False, False, False, "agent_error")
        obs, *_ = env.step("up")
        assert obs == "count 1"  # same session, same episode
        assert env.telemetry.metrics()[f"tool/{TELEMETRY_NAME}/agent_error_rate"] > 0
    finally:
        env.close()


def test_a_server_lost_mid_episode_flags_the_episode_as_infrastructure(doomed_counter):
    env = openenv_env(doomed_counter)
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step("die")
        assert (reward, terminated, truncated, info["infra_failed"]) == (0.0, False, True, True)
        assert "not your fault" in obs and env.episode_done
        with pytest.raises(InfraError, match="after 4 attempts"):  # the server is gone: reset retries, then says so
            env.reset()
        assert env.telemetry.metrics()[f"tool/{TELEMETRY_NAME}/infra_error_rate"] > 0
    finally:
        env.close()


def test_a_full_server_is_retried_then_an_infra_error(counter):
    holders = [openenv_env(counter), openenv_env(counter)]
    second = openenv_env(counter, max_retries=2)
    try:
        for holder in holders:  # the server allows two sessions
            holder.reset()
        with pytest.raises(InfraError, match="after 3 attempts"):
            second.reset()
        assert second.telemetry.to_dict()  # counted
    finally:
        for holder in holders:
            holder.close()
        second.close()
    third = openenv_env(counter)
    try:
        assert third.reset()[0] == "say 'up' three times"  # the slot came back when the holder closed
    finally:
        third.close()
