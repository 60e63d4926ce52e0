"""The shared runner with scripted policies: records, resume, summary, compare."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from typer.testing import CliRunner

from agentgym.cli import app
from agentgym.evaluation import (EvalPlan, FingerprintMismatchError, PolicyAgent, RunFileError, compare_runs,
                                 read_run, run_eval, summarize)
from agentgym.evaluation.stats import mcnemar_exact, pass_at_k, wilson_interval
from agentgym.policies import oracle_policy, random_text_policy


def test_pass_at_k_is_the_chance_that_k_draws_hold_a_success():
    for n, c, k in [(5, 2, 2), (6, 1, 3), (4, 4, 1), (5, 0, 5)]:
        outcomes = [True] * c + [False] * (n - c)
        draws = list(itertools.combinations(outcomes, k))
        assert math.isclose(pass_at_k(n, c, k), sum(any(d) for d in draws) / len(draws))


def test_wilson_interval_covers_the_rate_about_95_percent_of_the_time():
    rng = random.Random(0)
    p, n, hits = 0.9, 30, 0
    for _ in range(2000):
        wins = sum(rng.random() < p for _ in range(n))
        lo, hi = wilson_interval(wins, n)
        hits += lo <= p <= hi
    assert 0.92 <= hits / 2000 <= 0.98


def test_mcnemar_counts_only_discordant_pairs():
    same = mcnemar_exact([True, False] * 20, [True, False] * 20)
    assert same == {"a_only": 0, "b_only": 0, "p_value": 1.0}
    one_way = mcnemar_exact([True] * 8 + [False] * 30, [False] * 8 + [False] * 30)
    assert one_way["a_only"] == 8 and one_way["p_value"] == pytest.approx(2 / 2 ** 8)


def _policy_run(path, policy=oracle_policy, name="oracle", tasks=10, samples=1, seed=0, **env_kwargs):
    plan = EvalPlan("agentgym/Calculator-v0", tasks=tasks, samples=samples, concurrency=4, seed=seed,
                    env_kwargs=env_kwargs)
    return run_eval(plan, PolicyAgent(name, policy), out=path)


def test_a_killed_run_resumes_without_replaying_or_double_counting(tmp_path):
    path = tmp_path / "run.jsonl"
    _policy_run(path, tasks=10)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5]) + lines[5][:40])  # killed while writing episode 5's line
    kept = {json.loads(line)["episode"] for line in lines[1:5]}
    plan = EvalPlan("agentgym/Calculator-v0", tasks=10, concurrency=4)
    replayed: list[int] = []
    result = run_eval(plan, PolicyAgent("oracle", oracle_policy), out=path, resume=True,
                      on_record=lambda r: replayed.append(r["episode"]))
    assert result.played == 6 and sorted(replayed) == sorted(set(range(10)) - kept)
    episodes = [json.loads(line)["episode"] for line in path.read_text().splitlines()[1:]]
    assert sorted(episodes) == list(range(10))
    assert summarize(result.header, result.records)["episodes"] == 10


def test_resume_refuses_another_runs_file(tmp_path):
    path = tmp_path / "run.jsonl"
    _policy_run(path, tasks=3)
    with pytest.raises(RunFileError, match="seed"):
        run_eval(EvalPlan("agentgym/Calculator-v0", tasks=3, seed=7), PolicyAgent("oracle", oracle_policy),
                 out=path, resume=True)


def test_samples_give_pass_at_k_over_the_same_task(tmp_path):
    result = _policy_run(tmp_path / "run.jsonl", tasks=4, samples=3)
    by_task: dict[int, set] = {}
    for r in result.records:
        by_task.setdefault(r["task_index"], set()).add(r["task_id"])
    assert len(by_task) == 4 and all(len(ids) == 1 for ids in by_task.values())  # k samples, one task
    samples = summarize(result.header, result.records)["samples"]
    assert samples["k"] == 3 and samples["pass@3"] == samples["pass@1"] == samples["mean@3"] == 1.0


def test_summary_slices_by_template_and_hops_on_search(tmp_path):
    plan = EvalPlan("agentgym/Search-v1", tasks=12, concurrency=4)
    result = run_eval(plan, PolicyAgent("oracle", oracle_policy))
    summary = summarize(result.header, result.records)
    assert sum(g["n"] for g in summary["slices"]["num_hops"].values()) == 12
    assert summary["slices"]["template"] and summary["tools"]["search"]["usage_frac"] > 0


def test_compare_pairs_tasks_and_refuses_different_envs(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    _policy_run(a, tasks=20)
    _policy_run(b, random_text_policy, "random", tasks=20)
    _policy_run(c, tasks=20, difficulty=2)
    report = compare_runs(a, b)
    assert report["overall"]["n"] == 20 and report["overall"]["a_only"] == 20 and report["overall"]["diff"] == -1.0
    assert report["overall"]["p_value"] < 1e-4
    with pytest.raises(FingerprintMismatchError, match="difficulty: 1 vs 2"):
        compare_runs(a, c)
    refused = CliRunner().invoke(app, ["eval", "compare", str(a), str(c)])
    assert refused.exit_code == 2 and "difficulty" in refused.stderr


def test_run_and_eval_write_one_record_format(tmp_path):
    out = tmp_path / "run.jsonl"
    result = CliRunner().invoke(app, ["run", "agentgym/Calculator-v0", "--episodes", "5", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["success_rate"] == summary["success"] == 1.0 and summary["records"] == str(out)
    run = read_run(out)
    assert run.header.agent == {"kind": "policy", "name": "oracle"} and len(run.records) == 5
    keys = {"episode", "task_index", "sample", "seed", "task_id", "reward", "success", "infra_failed", "turns",
            "messages", "tool_calls", "tokens", "latency_s", "info", "agent", "sampling"}
    assert all(keys <= set(r) for r in run.records)
    rebuilt = CliRunner().invoke(app, ["eval", "summary", str(out), "--json"])
    assert json.loads(rebuilt.stdout)["success"] == 1.0


def test_team_policy_runs_through_the_same_runner(tmp_path):
    out = tmp_path / "team.jsonl"
    result = CliRunner().invoke(app, ["run", "agentgym/SearchTeam-v1", "--episodes", "3", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    run = read_run(out)
    assert len(run.records) == 3 and all(r["success"] for r in run.records)
    assert all(len(r["seats"]) == 3 and r["info"]["agents"] for r in run.records)


def test_plain_progress_lines_off_a_terminal(tmp_path, capsys):
    import io

    from agentgym.commands.eval import Progress

    stream = io.StringIO()
    with Progress("calc", 20, stream=stream) as progress:
        for i in range(20):
            progress({"success": i % 2 == 0, "infra_failed": False})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("[calc] 20/20 episodes, success 50.0%, infra-failed 0")
