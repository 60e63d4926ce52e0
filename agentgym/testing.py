"""Checkers and fakes for env authors (the way Gymnasium ships ``check_env``).

* ``check_tool_env(env)`` runs Gymnasium's ``check_env`` and then agentgym's contract:
  reset info keys, hostile actions never raising, stepping after the end raising
  ``EpisodeFinishedError``, the oracle finishing an episode.
* ``ProbeEnv`` is a tiny ``ToolEnv`` with knobs for latency, infrastructure faults and
  output size, used by agentgym's own tests and benchmarks (no Docker, no data).
"""

from __future__ import annotations

import asyncio
import json
import re
import types
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import check_env

from agentgym.env import ToolEnv
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.errors import AgentError, EpisodeFinishedError, InfraError
from agentgym.policies import play_oracle
from agentgym.tools import Tool

__all__ = ["check_tool_env", "ProbeEnv", "ProbeFamily", "ProbeTask", "HOSTILE_ACTIONS", "load_docs_family"]

HOSTILE_ACTIONS: tuple[Any, ...] = (
    "",
    "   \n\t ",
    "<tool_call>{not json</tool_call>",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "answer", "arguments": {"unexpected": [1, 2]}}</tool_call>',
    '<tool_call>{"name": "answer", "arguments": "not an object"}</tool_call>',
    "<tool_call>" + "[" * 5000 + "</tool_call>",
    "<search></search><python></python>",
    b"\xff\xfe<tool_call>\x80</tool_call>",
    "x" * (10 * 1024 * 1024),
)


def check_tool_env(env: Any, *, oracle_steps: int = 50) -> None:
    """Raise ``AssertionError`` (or the env's own error) when ``env`` breaks the contract."""
    base: ToolEnv = env.unwrapped
    check_env(base, skip_render_check=True)
    obs, info = env.reset(seed=0)
    for key in ("messages", "tools", "task_id", "fingerprint"):
        assert key in info, f"reset info lacks {key!r}"
    assert info["messages"] and all({"role", "content"} <= set(m) for m in info["messages"])
    for action in HOSTILE_ACTIONS:
        if base.episode_done:  # a hostile action may legitimately end the episode
            env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and obs, f"hostile action {str(action)[:40]!r} gave an empty observation"
        assert env.observation_space.contains(obs)
    env.reset(seed=1)
    last = play_oracle(env, oracle_steps)
    if last is None:
        raise AssertionError(f"the oracle did not finish an episode in {oracle_steps} steps")
    info = last[4]
    assert {"tool_calls", "truncations", "infra_failed", "answer", "fingerprint", "task_id"} <= set(info)
    assert info.get("success"), f"the oracle did not solve task {info['task_id']}: the env or its data is broken"
    try:
        env.step(base.oracle_action())
    except EpisodeFinishedError:
        pass
    else:
        raise AssertionError("stepping after the end did not raise EpisodeFinishedError")


@dataclass(frozen=True)
class ProbeTask:
    task_id: str
    secret: int


class ProbeFamily(TaskFamily):
    """A minimal family: guess the secret number, with tools that misbehave on request.

    Args:
        latency_s: every ``echo`` call sleeps this long (tests overlap of tool calls).
        infra_failures: the first N calls of ``flaky`` raise ``InfraError``.
        big_output_chars: ``dump`` returns this many characters.
        tool_max_retries: retries of ``flaky``.
    """

    name = "Probe"

    def __init__(self, latency_s: float = 0.0, infra_failures: int = 0, big_output_chars: int = 10_000,
                 tool_max_retries: int = 2) -> None:
        self.latency_s = latency_s
        self.infra_failures = infra_failures
        self.big_output_chars = big_output_chars
        self.tool_max_retries = tool_max_retries
        self.flaky_calls = 0

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> ProbeTask:
        secret = int(rng.integers(0, 1000))
        return ProbeTask(f"probe-{secret}", secret)

    def tools(self, task: ProbeTask | None) -> dict[str, Tool]:
        async def echo(text: str) -> str:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            return text

        async def flaky() -> str:
            self.flaky_calls += 1
            if self.flaky_calls <= self.infra_failures:
                raise InfraError(f"injected failure {self.flaky_calls}")
            return "recovered"

        async def dump() -> str:
            return "".join(chr(ord("a") + i % 26) for i in range(self.big_output_chars))

        async def reveal() -> str:
            assert task is not None
            return str(task.secret)

        async def answer(answer: int) -> str:
            if answer < 0:
                raise AgentError("the secret is never negative.")
            return "ok"

        obj = lambda props, req: {"type": "object", "properties": props, "required": req,  # noqa: E731
                                  "additionalProperties": False}
        tools = [
            Tool("echo", "Return the text.", obj({"text": {"type": "string"}}, ["text"]), echo, timeout_s=5),
            Tool("flaky", "Fails with an infrastructure error at first.", obj({}, []), flaky,
                 max_retries=self.tool_max_retries),
            Tool("dump", "Return a long text.", obj({}, []), dump, max_output_chars=1000),
            Tool("reveal", "Return the secret.", obj({}, []), reveal),
            Tool(ANSWER_TOOL, "Answer with the secret.", obj({"answer": {"type": "integer"}}, ["answer"]), answer),
        ]
        return {t.name: t for t in tools}

    def prompt(self, task: ProbeTask) -> str:
        return "Find the secret number with reveal, then answer it."

    def score(self, task: ProbeTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return float(answer["answer"] == task.secret), {}

    def oracle_action(self, task: ProbeTask, episode: EpisodeView) -> str:
        revealed = [r for r in episode.results if r.name == "reveal" and r.status == "ok"]
        if not revealed:
            return '<tool_call>{"name": "reveal", "arguments": {}}</tool_call>'
        return f"<tool_call>{json.dumps({'name': ANSWER_TOOL, 'arguments': {'answer': int(revealed[0].output)}})}</tool_call>"


class ProbeEnv(ToolEnv):
    """``ToolEnv(ProbeFamily(...))``: the env the core tests and benchmarks drive; takes
    ``ProbeFamily``'s knobs and ``ToolEnv``'s settings as keyword arguments."""

    family_class = ProbeFamily


# ---- the docs' example family -------------------------------------------------
# The "Write your own environment" family is meant to be copied; the tests run exactly
# that text, so the docs cannot drift from what works.
_BLOCK = re.compile(r"<!-- example-family:[^>]*-->\n```python\n(.*?)```", re.S)


def load_docs_family(page: Path | None = None) -> types.ModuleType:
    """Execute the example family blocks of the docs' "Write your own environment" page,
    in order, as one module (the family and its env, registered once, then the team env
    over it), so the page's code stays tested.

    Needs the source tree (``docs/`` sits beside the packages), as the tests have it.
    """
    import sys

    import gymnasium as gym

    path = page or Path(__file__).resolve().parents[1] / "docs" / "writing-an-env.md"
    blocks = _BLOCK.findall(path.read_text(encoding="utf-8"))
    if not blocks:
        raise LookupError(f"no example-family block in {path}")
    module = types.ModuleType("readme_unit_conversion")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    code = "\n".join(blocks)  # the family, then the team built on it
    if "myorg/UnitConversion-v0" in gym.registry:  # a second load in one process
        code = code.replace('gym.register("myorg/UnitConversion-v0"', 'dict(id="myorg/UnitConversion-v0"')
    exec(compile(code, f"{path}:example-family", "exec"), module.__dict__)  # noqa: S102 - our own docs
    return module
