"""Two gloo processes (DDP, FSDP2) produce the same update as one process on the whole batch.

The batch is split unequally (3 rows / 2 rows) so the global token-mean normaliser and
the padding of micro-batch counts across processes are exercised.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("dist_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(strategy: str, world: int, out: Path, case: str = "unequal") -> dict:
    port = _free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), strategy, str(out), case], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        output, _ = p.communicate(timeout=240)
        assert p.returncode == 0, output[-3000:]
    return torch.load(out, weights_only=False) if case not in ("rng", "replay", "rollout_stats", "trainer", "tiny_model",
                                                                 "reward_watch") else {}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _run("none", 1, tmp_path_factory.mktemp("ref") / "single.pt")


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_process_update_equals_single_process(strategy, reference, tmp_path):
    dist = _run(strategy, 2, tmp_path / f"{strategy}.pt")
    assert dist["loss"] == pytest.approx(reference["loss"], rel=1e-5, abs=1e-6)
    initial = _initial_state()
    changed = 0
    for name, ref in reference["policy"].items():
        torch.testing.assert_close(dist["policy"][name], ref, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
        changed += int(not torch.equal(ref, initial[name]))
    assert changed > 0  # the update did something
    for name, ref in reference["ewma"].items():
        torch.testing.assert_close(dist["ewma"][name], ref, rtol=1e-4, atol=1e-5)


def _initial_state():
    sys.path.insert(0, str(WORKER.parent))
    try:
        from dist_worker import make_model  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return make_model().state_dict()


@pytest.mark.parametrize("strategy, case", [("ddp", "empty_share"), ("fsdp2", "empty_share"), ("ddp", "no_rows")])
def test_a_rank_with_nothing_to_learn_joins_the_step_of_a_rank_that_has(strategy, case, tmp_path):
    """Rank 1's share is empty (filtered out, or no episodes at all) while rank 0 has
    signal: no crash, and the update equals one process's on the rows that carry signal."""
    ref = _run("none", 1, tmp_path / "ref.pt", case)
    dist = _run(strategy, 2, tmp_path / f"{strategy}.pt", case)
    assert dist["optimizer_steps"] == ref["optimizer_steps"] == 2  # 2 epochs, 1 minibatch each
    assert dist["loss"] == pytest.approx(ref["loss"], rel=1e-5, abs=1e-6)
    for name, want in ref["policy"].items():
        torch.testing.assert_close(dist["policy"][name], want, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("strategy, case", [("ddp", "minibatches"), ("fsdp2", "minibatches"), ("ddp", "stale_mis"),
                                            ("fsdp2", "stale_mis"), ("ddp", "copy"), ("fsdp2", "copy")])
def test_two_processes_equal_one_with_several_minibatches(strategy, case, tmp_path):
    """num_minibatches=2 over an unequal 3/2 split: each minibatch must hold the same rows
    as in one process (one permutation of the global batch, each rank its rows of it),
    or the two optimiser steps see different data. ``stale_mis`` adds MIS on rows sampled
    one version ago, all on rank 0: the pass at that version is collective. ``copy`` adds
    ``algo.copy_lr``'s copy step after each policy step: every rank copies the same rows."""
    ref = _run("none", 1, tmp_path / "ref.pt", case)
    dist = _run(strategy, 2, tmp_path / f"{strategy}.pt", case)
    assert dist["optimizer_steps"] == ref["optimizer_steps"] == 4  # 2 epochs x 2 minibatches
    assert dist["loss"] == pytest.approx(ref["loss"], rel=1e-5, abs=1e-6)
    assert dist["entropy"] == pytest.approx(ref["entropy"], rel=1e-5, abs=1e-6)
    assert (ref["copy"] is None) == (case != "copy")
    if case == "copy":
        assert dist["copy"] == pytest.approx(ref["copy"], rel=1e-5)
    for name, want in ref["policy"].items():
        torch.testing.assert_close(dist["policy"][name], want, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    for name, want in ref["ewma"].items():
        torch.testing.assert_close(dist["ewma"][name], want, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_resume_gives_each_rank_its_own_rng_stream_back(tmp_path):
    _run("ddp", 2, tmp_path / "rng", "rng")
    r0, r1 = (torch.load(tmp_path / f"rng.rank{r}", weights_only=False) for r in (0, 1))
    assert not torch.equal(r0["first"], r1["first"])  # the ranks had different streams
    for r in (r0, r1):
        assert torch.equal(r["first"], r["second"])


def test_task_replay_over_two_ranks_equals_one_process(tmp_path):
    """Each rank sees half of a step's groups; the gathered outcome, the buffer and the
    next draw are one process's (the buffer is ordered by seed, not by rank)."""
    _run("none", 1, tmp_path / "one", "replay")
    _run("ddp", 2, tmp_path / "two", "replay")
    one = torch.load(tmp_path / "one.rank0", weights_only=False)
    assert sorted(s for s, _ in one["state"]["buffer"]) == [12, 77, 101, 333]  # the groups that disagreed
    assert one["metrics"]["rollout/informative_tasks_frac"] == 4 / 6
    for rank in (0, 1):
        assert torch.load(tmp_path / f"two.rank{rank}", weights_only=False) == one


def test_two_ranks_report_the_steps_rollout_figures_as_one_process_does(tmp_path):
    """Each rank collects half of a step's episodes. Its counts and tool telemetry were
    logged as the run's (rank 0's half); gathered, they are one process's figures."""
    _run("none", 1, tmp_path / "one", "rollout_stats")
    _run("ddp", 2, tmp_path / "two", "rollout_stats")
    one = torch.load(tmp_path / "one.rank0", weights_only=False)
    assert one["rollout/episodes"] == 5 and one["rollout/dropped_infra_failed"] == 1  # the case is what it says
    assert one["tool/python/calls"] == 15 + 3 + 1 and one["tool/answer/usage_frac"] == 0.0
    for rank in (0, 1):
        two = torch.load(tmp_path / f"two.rank{rank}", weights_only=False)
        for key in ("rollout/episodes", "rollout/dropped_infra_failed", "rollout/generated_tokens",
                    "rollout/no_tool_call_turns"):
            assert two[key] == one[key], key
        tool = sorted(k for k in one if k.startswith("tool/"))
        assert sorted(k for k in two if k.startswith("tool/")) == tool
        for key in tool:  # rates over every call, percentiles over every latency, usage over every episode
            assert two[key] == pytest.approx(one[key]), key
        assert two["rollout/wall_s"] == 3.0 and two["rollout/gen_s"] == 2.0  # the slowest rank's
        assert two["tokens/drift_frac"] == pytest.approx(2 / 3)  # weighted by the episodes each rank checked
        # engines side by side: rank 0 kept episodes 0 and 2 (2 tokens in 1 s), rank 1 episodes 1, 3 and 5 (9 in 2 s)
        assert two["rollout/tokens_per_s"] == pytest.approx(2 / 1.0 + 9 / 2.0)


def test_a_two_rank_trainer_logs_every_ranks_episodes(tmp_path):
    """The trainer logs the gathered figures, not rank 0's share (4 tasks x 2 samples,
    half on each rank): the outage watch and the tool-usage alarms read them."""
    import json

    _run("ddp", 2, tmp_path / "two", "trainer")
    rows = [json.loads(line) for line in (tmp_path / "two.run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1, rows
    assert rows[0]["rollout/episodes"] + rows[0]["rollout/dropped_infra_failed"] == 8, rows[0]
    assert rows[0]["tool/calculate/usage_frac"] is not None
    # The tool-usage floor (1.0, which no random policy meets) is warned about once, by
    # the main process: every rank holds the same global figures.
    assert rows[0]["alert/tool_usage_low/answer"] == 1.0, rows[0]
    warned = [int(Path(f"{tmp_path / 'two'}.warnings.rank{rank}").read_text()) for rank in (0, 1)]
    assert warned[0] >= 1 and warned[1] == 0, warned


def test_two_ranks_alarm_on_the_steps_top_trajectories_over_every_process(tmp_path):
    """The reward-jump alarm's suspects are the step's highest rewards over every rank
    (here both on rank 1, one of them an injection), and every rank reports the same
    alarm as one process holding all the trajectories."""
    _run("none", 1, tmp_path / "one", "reward_watch")
    _run("ddp", 2, tmp_path / "two", "reward_watch")
    one = torch.load(f"{tmp_path / 'one'}.rank0", weights_only=False)
    assert one["first"] == {"alarm/fired": 0.0} and one["suspects"] == ["task-2", "task-3"]
    assert one["second"]["alarm/fired"] == 1.0 and one["second"]["alarm/injection_frac"] == 0.5
    for rank in (0, 1):
        two = torch.load(f"{tmp_path / 'two'}.rank{rank}", weights_only=False)
        assert two == one, (rank, two)


def test_every_rank_loads_the_tiny_model_the_main_process_built(tmp_path):
    """Only rank 0 builds; the build's directory is named by its digest, so the other
    ranks must be told where it is, and they wait for it to exist."""
    _run("ddp", 2, tmp_path / "tiny", "tiny_model")
    paths = [Path(f"{tmp_path / 'tiny'}.rank{rank}").read_text() for rank in (0, 1)]
    assert paths[0] == paths[1] and Path(paths[0]).parent == tmp_path / "tiny.tiny"
    assert (Path(paths[0]) / "agentgym_tiny.json").exists() and (Path(paths[0]) / "model.safetensors").exists()
