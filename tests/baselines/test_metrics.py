"""``metrics.jsonl`` holds one run: a new run in a used directory starts it afresh, and a
resumed one drops the rows of steps it runs again (both were appended to the old rows,
which ``agentgym plot`` and the ablation then read as the run's)."""

import json

from baselines.metrics import MetricsLogger


def _steps(path):
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_a_new_run_starts_the_file_and_a_resumed_one_keeps_only_steps_up_to_its_checkpoint(tmp_path):
    first = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(5):
        first.log(step, {"reward/mean": 0.1 * step})
    first.close()  # (stopped at step 4; its last checkpoint was step 2)

    resumed = MetricsLogger(tmp_path, tensorboard=False, fresh=False)
    assert resumed.drop_after(2) == 2
    resumed.log(3, {"reward/mean": 0.3})
    resumed.close()
    assert _steps(tmp_path / "metrics.jsonl") == [0, 1, 2, 3]

    again = MetricsLogger(tmp_path, tensorboard=False)
    again.log(1, {"reward/mean": float("nan")})
    again.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 1, "reward/mean": None}]
