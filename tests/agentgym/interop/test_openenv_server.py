"""``agentgym serve-env``, played by OpenEnv's own client (``GenericEnvClient`` over the
WebSocket session protocol), against the same env in-process."""

import asyncio
import json

import gymnasium as gym
import pytest
from openenv.core import (
    GenericEnvClient,  # agentgym[openenv], installed by make install
)

import agentgym  # noqa: F401
from agentgym.interop.launch import agentgym_server, free_port


@pytest.fixture(scope="module")
def search_url():
    port = free_port()
    with agentgym_server(["serve-env", "agentgym/Search-v1", "--port", str(port), "--max-sessions", "8"],
                         f"http://127.0.0.1:{port}/health") as proc:
        yield f"http://127.0.0.1:{port}"
        assert proc.poll() is None, "the server died during the tests"


async def test_openenv_client_plays_a_search_episode_to_the_end_with_reward_and_info(search_url):
    local = gym.make("agentgym/Search-v1")
    text, info = local.reset(seed=5)
    async with GenericEnvClient(base_url=search_url) as client:
        result = await client.reset(seed=5)
        assert result.observation["text"] == text and not result.done
        assert result.observation["info"]["fingerprint"] == info["fingerprint"]
        assert result.observation["info"]["tools"] == json.loads(json.dumps(info["tools"]))
        steps = 0
        while not result.done:
            action = local.unwrapped.oracle_action()  # the same task on both sides: same seed
            expected = local.step(action)
            result = await client.step({"text": action})
            steps += 1
            assert result.observation["text"] == expected[0]
        final = result.observation["info"]
        assert (result.reward, result.observation["terminated"], result.observation["truncated"]) == (1.0, True, False)
        assert final["infra_failed"] is False and final["success"] is True
        assert final["fingerprint"] == info["fingerprint"] and final["task_id"] == info["task_id"]
        assert final["tool_calls"] == expected[4]["tool_calls"] and steps >= 2
        state = await client.state()
        assert state["step_count"] == steps and state["task_id"] == info["task_id"]
        assert state["fingerprint"] == info["fingerprint"]
    local.close()


def test_openenv_env_plays_the_served_env_with_its_reward_and_fingerprint(search_url):
    """agentgym's own OpenEnv client (openenv_env) against serve-env: the same episode as in-process."""
    from agentgym.interop import openenv_env

    local, remote = gym.make("agentgym/Search-v1"), openenv_env(search_url)
    try:
        text, info = remote.reset(seed=4)
        local_text, local_info = local.reset(seed=4)
        assert text == local_text and info["fingerprint"] == local_info["fingerprint"]
        done = False
        while not done:
            action = local.unwrapped.oracle_action()  # same seed, same task on both sides
            local.step(action)
            _, reward, terminated, truncated, info = remote.step(action)
            done = terminated or truncated
        assert (reward, terminated, info["infra_failed"], info["success"]) == (1.0, True, False, True)
    finally:
        remote.close()
        local.close()


async def test_a_bad_action_is_an_observation_for_the_agent_not_an_error(search_url):
    async with GenericEnvClient(base_url=search_url) as client:
        await client.reset(seed=0)
        result = await client.step({"text": "<tool_call>{not json</tool_call>"})
        assert not result.done and result.reward == 0.0
        assert result.observation["info"]["infra_failed"] is False
        assert result.observation["info"]["tool_results"][0]["status"] == "parse_error"
        assert "not valid JSON" in result.observation["text"]


async def test_misuse_of_the_api_comes_back_as_a_named_error(search_url):
    async with GenericEnvClient(base_url=search_url) as client:
        with pytest.raises(RuntimeError, match="InvalidOptionError"):
            await client.reset(seed=0, difficulty=3)
        with pytest.raises(RuntimeError, match="ResetNeededError"):
            await client.step({"text": "hello"})
        with pytest.raises(RuntimeError, match="Invalid message|validation"):
            await client.step({"message": "not the action's field"})


async def test_reset_options_pick_the_task(search_url):
    local = gym.make("agentgym/Search-v1")
    _, info = local.reset(seed=9)
    async with GenericEnvClient(base_url=search_url) as client:
        result = await client.reset(options={"task_id": info["task_id"]})
        assert result.observation["info"]["task_id"] == info["task_id"]
    local.close()


def _containers_of(pid: int) -> list[str]:
    import socket

    import docker

    from sandboxes.reaper import OWNER_LABEL

    client = docker.from_env()
    try:
        listed = client.api.containers(all=True, filters={"label": OWNER_LABEL})
    finally:
        client.close()
    prefix = f"{socket.gethostname()}:{pid}:"
    return [c["Id"] for c in listed if c["Labels"].get(OWNER_LABEL, "").startswith(prefix)]


@pytest.mark.docker
async def test_a_sandboxed_env_over_openenv_runs_code_and_leaves_no_container_when_stopped():
    import time

    port = free_port()
    with agentgym_server(["serve-env", "agentgym/DataAnalysis-v1", "--port", str(port), "-k", "backend=docker"],
                         f"http://127.0.0.1:{port}/health", timeout_s=300) as proc:
        async with GenericEnvClient(base_url=f"http://127.0.0.1:{port}", message_timeout_s=300) as client:
            await client.reset(seed=0)
            result = await client.step({"text": '<tool_call>{"name": "python", "arguments": {"code": "print(1+1)"}}</tool_call>'})
            assert result.observation["info"]["tool_results"][0]["status"] == "ok"
            assert "2" in result.observation["text"] and not result.observation["info"]["infra_failed"]
            assert _containers_of(proc.pid), "the episode's sandbox should be a container of the server"
            proc.terminate()  # stopped the way a user stops it, with the session and its episode open
            proc.wait(60)  # uvicorn shuts down, then re-raises the signal: the exit status is -SIGTERM
    deadline = time.monotonic() + 60
    while _containers_of(proc.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    assert _containers_of(proc.pid) == []
