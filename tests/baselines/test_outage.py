"""A run whose infrastructure is down stops (after a checkpoint) instead of stepping on
nothing: every episode of a stalled engine is dropped, so the learner sees no data and
nothing in the curves says why."""

from __future__ import annotations

import logging

from baselines.outage import OutageWatch


def _step(dropped: int, kept: int) -> dict[str, float]:
    return {"rollout/dropped_infra_failed": float(dropped), "rollout/episodes": float(kept)}


def test_outage_steps_in_a_row_stop_and_a_healthy_step_starts_the_count_again(caplog):
    watch = OutageWatch(0.5, 3)
    down = {"python: could not start a sandbox pool: the engine did not answer": 16}
    assert not watch.observe(_step(16, 0), down)
    assert not watch.observe(_step(16, 0), down)
    assert not watch.observe(_step(8, 8), {})  # half failed is not more than half: the count restarts
    assert not watch.observe(_step(9, 7), down)
    assert not watch.observe(_step(16, 0), down)
    with caplog.at_level(logging.ERROR, logger="baselines.outage"):
        assert watch.observe(_step(16, 0), down)
    assert "in each of the last 3 steps" in caplog.text and "48 x python: could not start a sandbox pool" in caplog.text
    assert "resume=true" in caplog.text


def test_zero_outage_steps_never_stops():
    watch = OutageWatch(0.5, 0)
    assert not any(watch.observe(_step(16, 0), {"x": 16}) for _ in range(10))


def test_a_step_with_no_episodes_at_all_is_not_an_outage():
    """(A team step whose seats were all idle, say.) Nothing failed: nothing to stop for."""
    watch = OutageWatch(0.5, 1)
    assert not watch.observe(_step(0, 0), {})


def _calculator_on_a_dead_engine(**kwargs):
    import gymnasium as gym

    from tests.baselines.test_trainer_e2e import _EngineDown

    return _EngineDown(gym.make("agentgym/Calculator-v0", **kwargs))


def test_a_training_run_on_a_dead_engine_stops_after_a_checkpoint(tmp_path, trained_model_dir, caplog):
    """``agentgym train`` on an env whose every reset fails as infrastructure: it stops at
    step 2 of 5 (``rollout.outage_steps=2``), saves a checkpoint to resume from, names the
    cause, and exits with code 3, so a scheduler can tell it from a finished run."""
    import gymnasium as gym
    from typer.testing import CliRunner

    from agentgym.cli import app

    if "agentgym-test/DeadEngine-v0" not in gym.registry:
        gym.register("agentgym-test/DeadEngine-v0", entry_point=_calculator_on_a_dead_engine)
    args = [f"model.path={trained_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "device=cpu",
            "env.id=agentgym-test/DeadEngine-v0", "env.kwargs={difficulty: 1}", "steps=5", "eval_every=0",
            "sft.episodes=0", "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.outage_steps=2"]
    with caplog.at_level(logging.ERROR, logger="baselines.outage"):
        result = CliRunner().invoke(app, ["train", "--config", "baselines/configs/calculator_cpu.yaml", *args])
    assert result.exit_code == 3, result.output
    printed = " ".join(result.stdout.split())
    assert "'alarm/infra_outage_at_step': 2.0" in printed and "rerun with resume=true" in printed
    assert "could not start a sandbox pool: the engine did not answer in time" in caplog.text
    assert (tmp_path / "run" / "checkpoint").exists()
