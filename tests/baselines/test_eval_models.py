"""``agentgym eval --model PATH``: a local transformers checkpoint played token-in/token-out."""

from __future__ import annotations

import json

from agentgym.evaluation import EvalPlan, run_eval
from agentgym.evaluation.run import close_agent
from baselines.eval_models import hf_agent


def test_local_checkpoint_plays_token_in_token_out(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from baselines.chat_tokens import ChatTokenizer

    out = tmp_path / "run.jsonl"
    agent = hf_agent(str(tiny_model_dir), {"max_tokens": 24, "max_seq_len": 2048})
    result = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=4, concurrency=4), agent, out=out)
    close_agent(agent)
    assert len(result.records) == 4 and not any(r["infra_failed"] for r in result.records)
    header = json.loads(out.read_text().splitlines()[0])
    assert header["agent"]["kind"] == "hf" and header["sampling"]["temperature"] == 0.0
    chat = ChatTokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))
    for r in result.records:
        turns = [m for m in r["messages"] if m["role"] == "assistant"]
        assert turns and all(m["content"] == chat.decode_action(m["token_ids"]) for m in turns)
        assert r["tokens"]["completion"] == sum(len(m["token_ids"]) for m in turns)
        assert r["tokens"]["prompt"] > len(chat.prompt_ids(r["messages"][:2], None))  # + the tools' schemas


def test_greedy_is_reproducible_across_runs_and_concurrency(tiny_model_dir):
    agent = hf_agent(str(tiny_model_dir), {"max_tokens": 16})
    a = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, concurrency=3), agent)
    b = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, concurrency=1), agent)  # the same agent, run again
    close_agent(agent)
    actions = lambda res: [[m["token_ids"] for m in r["messages"] if m["role"] == "assistant"] for r in res.records]  # noqa: E731
    assert actions(a) == actions(b)


def test_sampled_episodes_are_reproducible_across_runs_and_concurrency(tiny_model_dir):
    """Each episode samples from its own seed (``EpisodePlan.sampling_seed``), so an
    episode draws the same tokens whichever episodes share the engine's call with it."""
    agent = hf_agent(str(tiny_model_dir), {"max_tokens": 16, "temperature": 1.0})
    a = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, samples=2, concurrency=6), agent)
    b = run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, samples=2, concurrency=1), agent)
    close_agent(agent)
    actions = lambda res: [[m["token_ids"] for m in r["messages"] if m["role"] == "assistant"] for r in res.records]  # noqa: E731
    assert actions(a) == actions(b)
    by_task = [(r["task_index"], r["sample"]) for r in a.records]
    first, second = actions(a)[by_task.index((0, 0))], actions(a)[by_task.index((0, 1))]
    assert first != second  # two samples of one task (the same prompt) are two draws


def test_eval_cli_loads_a_local_checkpoint_through_the_entry_point(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from agentgym.cli import app

    out = tmp_path / "run.jsonl"
    result = CliRunner().invoke(app, ["eval", "agentgym/Calculator-v0", "--model", str(tiny_model_dir), "--episodes", "2",
                                      "--max-tokens", "16", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["agent"]["kind"] == "hf" and summary["episodes"] == 2 and summary["tokens"]["completion"] > 0
