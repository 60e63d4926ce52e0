"""An agentgym env as a verifiers environment, played through verifiers' own rollout
machinery (``Env.serving`` / ``run_episode``: interception server, eval client, trace):
the model is a local OpenAI-compatible server that replies with a scripted agent's actions.

The reward must be agentgym's score of the same actions played in-process, and an
``infra_failed`` episode must fail the verifiers episode, not score 0.

verifiers pins ``mcp==2.0.0`` (``agentgym[mcp]`` needs 2.3), so these run in ``.venv-peers``
(``make test-peers``); elsewhere they skip, unless ``AGENTGYM_REQUIRE_PEERS=1``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the envs
from agentgym.testing import ProbeEnv

HAVE_VERIFIERS = importlib.util.find_spec("verifiers") is not None
PROBE_ID = "agentgym-test/VerifiersProbe-v0"
if PROBE_ID not in gym.registry:
    gym.register(id=PROBE_ID, entry_point=ProbeEnv)


@pytest.fixture
def verifiers_installed() -> None:
    if HAVE_VERIFIERS:
        return
    message = "verifiers is not installed (make peers-env, then run with .venv-peers/bin/pytest -m peers)"
    if os.environ.get("AGENTGYM_REQUIRE_PEERS", "") not in ("", "0", "false"):
        pytest.fail(f"AGENTGYM_REQUIRE_PEERS=1 but {message}", pytrace=False)
    pytest.skip(message)


# ---- the model: a chat-completions server that plays scripted replies ---------------

class ScriptedModel:
    """Replies to a conversation with the next scripted action of its task: the script is
    found by the conversation's first user message (the task's prompt), the position by
    how many assistant messages the conversation already holds."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[str]] = {}
        self.requests: list[dict[str, Any]] = []

    def reply(self, body: dict[str, Any]) -> str:
        self.requests.append(body)
        messages = body["messages"]
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        script = self.scripts[prompt if isinstance(prompt, str) else json.dumps(prompt)]
        turn = sum(m["role"] == "assistant" for m in messages)
        return script[min(turn, len(script) - 1)]


def _completion(model: str, text: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _chunks(model: str, text: str) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    yield {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


@pytest.fixture
def scripted_model() -> Iterator[tuple[ScriptedModel, str]]:
    model = ScriptedModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            text = model.reply(body)
            if body.get("stream"):
                payload = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in _chunks(body["model"], text))
                payload += b"data: [DONE]\n\n"
                content_type = "text/event-stream"
            else:
                payload, content_type = json.dumps(_completion(body["model"], text)).encode(), "application/json"
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


# ---- the same actions played in-process: the reference -----------------------------

def play_in_process(env_id: str, seed: int, actions: list[str] | None, **kwargs: Any) -> tuple[str, list[str], dict]:
    """The task's prompt, the actions played (the oracle's when ``actions`` is None) and
    the final ``info`` of that episode in-process."""
    from agentgym.policies import oracle_policy

    env = gym.make(env_id, **kwargs)
    try:
        obs, info = env.reset(seed=seed)
        prompt, played = info["messages"][-1]["content"], []
        for turn in range(20):
            action = oracle_policy(env, obs, info) if actions is None else actions[turn]
            played.append(action)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                return prompt, played, info
        raise AssertionError("the episode did not end in 20 turns")
    finally:
        env.close()


def run_episodes(env: Any, base_url: str) -> list[Any]:
    import verifiers.v1 as vf

    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=base_url, api_key_var="AGENTGYM_TEST_KEY"))

    async def play() -> list[Any]:
        async with env.serving():
            return await asyncio.gather(*(env.run_episode(task, ctx) for task in env.taskset))

    return asyncio.run(play())


# ---- tests ---------------------------------------------------------------------------

@pytest.mark.peers
@pytest.mark.parametrize(("env_id", "wrong_answer"), [("agentgym/Calculator-v0", -12345.5),
                                                      ("agentgym/Search-v1", "nobody at all")])
def test_the_reward_is_agentgyms_score_of_the_played_actions(verifiers_installed, scripted_model, env_id: str,
                                                            wrong_answer: Any) -> None:
    from agentgym.interop.verifiers_env import REWARD_NAME, as_verifiers_env

    model, base_url = scripted_model
    expected = {}
    for seed, wrong in ((0, False), (1, True)):
        prompt, actions, info = play_in_process(env_id, seed, None)
        if wrong:  # the oracle's steps, then a wrong final answer
            answer = json.dumps({"name": "answer", "arguments": {"answer": wrong_answer}})
            actions = actions[:-1] + [f"<tool_call>{answer}</tool_call>"]
            prompt, actions, info = play_in_process(env_id, seed, actions)
        model.scripts[prompt] = actions
        expected[seed] = (info["reward"], info["task_id"], len(actions))
    assert expected[0][0] == 1.0 and expected[1][0] < 1.0  # the reference really differs

    episodes = run_episodes(as_verifiers_env(env_id, seeds=[0, 1]), base_url)

    for seed, episode in zip((0, 1), episodes):
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        reward, task_id, turns = expected[seed]
        assert trace.rewards[REWARD_NAME].score == reward
        assert trace.reward == reward
        record = trace.info["agentgym"]
        assert (record["task_id"], record["infra_failed"], record["reward"]) == (task_id, False, reward)
        assert record["fingerprint"] and trace.num_turns == turns
    # every turn went through the model server, each with the whole conversation so far
    assert len(model.requests) == expected[0][2] + expected[1][2]


@pytest.mark.peers
def test_an_infra_failed_episode_fails_the_rollout_instead_of_scoring(verifiers_installed, scripted_model) -> None:
    from agentgym.interop.verifiers_env import REWARD_NAME, as_verifiers_env

    model, base_url = scripted_model
    flaky = '<tool_call>{"name": "flaky", "arguments": {}}</tool_call>'
    kwargs = {"infra_failures": 100, "tool_max_retries": 1}
    prompt, actions, info = play_in_process(PROBE_ID, 0, [flaky], **kwargs)
    assert info["infra_failed"] is True and info["reward"] == 0.0  # in-process: flagged, reward meaningless
    model.scripts[prompt] = actions

    (episode,) = run_episodes(as_verifiers_env(PROBE_ID, kwargs, seeds=[0]), base_url)

    assert episode.ok is False
    assert episode.errors and "InfraError" in episode.errors[-1].message
    assert "infra_failed" in episode.errors[-1].message
    (trace,) = episode.traces  # the agent's turn happened, and no score was recorded for it
    assert REWARD_NAME not in trace.rewards and not trace.ok
    assert len(model.requests) == 1


@pytest.mark.peers
def test_an_unknown_env_is_a_clear_error(verifiers_installed) -> None:
    from agentgym.errors import ConfigError
    from agentgym.interop.verifiers_env import as_verifiers_env

    env = as_verifiers_env("agentgym/Calculater-v0")
    with pytest.raises(ConfigError, match="did you mean 'agentgym/Calculator-v0'"):
        list(env.taskset)


@pytest.mark.skipif(HAVE_VERIFIERS, reason="verifiers is installed here; this checks the error without it")
def test_without_verifiers_the_error_says_what_to_install() -> None:
    from agentgym.interop import MissingExtraError

    with pytest.raises(MissingExtraError, match=r"pip install 'agentgym\[verifiers\]'"):
        importlib.import_module("agentgym.interop.verifiers_env")


@pytest.mark.peers
def test_the_readme_example_runs(verifiers_installed, scripted_model) -> None:
    """The docs' verifiers block (docs/interop.md), run as written against the scripted oracle."""
    import pathlib
    import re

    model, base_url = scripted_model
    readme = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "interop.md").read_text()
    block = re.search(r"\*\*verifiers \(prime-rl\)\.\*\*.*?```python\n(.*?)```", readme, re.DOTALL)
    assert block is not None, "the verifiers example in docs/interop.md is gone"
    code = block.group(1).replace("http://127.0.0.1:8000/v1", base_url)
    assert base_url in code
    for seed in range(8):
        prompt, actions, info = play_in_process("agentgym/Search-v1", seed, None)
        assert info["reward"] == 1.0
        model.scripts[prompt] = actions
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/interop.md", "exec"), namespace)  # noqa: S102 - the docs' own text
    assert namespace["rewards"] == [1.0] * 8
