"""The endpoint judge against a real ``vllm serve`` (the vLLM lane, ``make test-vllm``).

Plumbing, not quality: the tiny model has random weights. What must hold is the status
contract at the HTTP boundary: requests carry the model, the sampling settings and the
verdict schema (vLLM constrains decoding to it); a reply becomes a score only if it
parses as a verdict, anything else is ``JudgeUnavailable`` (infrastructure); a random
judge is refused by calibration; a dead server is ``JudgeUnavailable``, never 0 or 1.
"""

from __future__ import annotations

import asyncio

import pytest

from agentgym.judges import (Criterion, Judge, JudgeDefences, JudgeRefused, JudgeUnavailable, OpenAIChatBackend,
                             Rubric, SamplingSettings)
from agentgym.reliability import RetryPolicy
from tests.baselines.test_vllm_eval import _free_port, served  # noqa: F401 - the shared `vllm serve` fixture

pytestmark = pytest.mark.vllm

RUBRIC = Rubric((Criterion("names_capital", "Names the capital.", reference=("Paris",)),
                 Criterion("one_sentence", "Answers in one sentence."),))
FAST = RetryPolicy(attempts=2, initial_s=0.0, max_wait_s=0.0, deadline_s=120.0)


def _judge(url: str, **kw) -> Judge:
    return Judge(OpenAIChatBackend(url, "tiny"), sampling=SamplingSettings(max_tokens=96), policy=FAST, **kw)


def test_the_served_model_replies_and_a_reply_is_a_verdict_or_a_judge_failure(served):  # noqa: F811
    judge = _judge(served, defences=JudgeDefences(calibrate=False))
    raw = asyncio.run(judge.backend.complete([{"role": "user", "content": "Say hi."}], sampling=judge.sampling,
                                             timeout_s=60))
    assert isinstance(raw, str)
    try:
        verdict = asyncio.run(judge.grade("Capital of France?", "It is Paris.", RUBRIC))
    except JudgeUnavailable:
        return  # the random model ran out of tokens inside the JSON: a judge failure, not a score
    assert 0.0 <= verdict.reward <= 1.0 and set(verdict.marks) == set(RUBRIC.ids)


def test_a_random_judge_is_refused_or_unavailable_at_opening(served):  # noqa: F811
    with pytest.raises((JudgeRefused, JudgeUnavailable)):
        asyncio.run(_judge(served).open())


def test_a_server_that_is_gone_is_infrastructure():
    judge = _judge(f"http://127.0.0.1:{_free_port()}/v1", defences=JudgeDefences(calibrate=False))
    with pytest.raises(JudgeUnavailable, match="ConnectError"):
        asyncio.run(judge.grade("Capital of France?", "It is Paris.", RUBRIC))
