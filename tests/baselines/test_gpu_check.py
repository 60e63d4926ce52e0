"""The GPU check's CPU dry run: three PPO-EWMA steps, each followed by a verified sync.

It starts from a model that solves some tasks, so optimiser steps happen; the check has
no way to move the weights itself, so "moved" can only come from training plus sync.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"gpu_check: step \d+: optimizer steps (\d+),.*engine log-probs moved by (\S+),")


def test_gpu_check_dry_run_passes(tmp_path, trained_model_dir):
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path / "gc"), "PYTHON": sys.executable, "HOME": str(tmp_path),
                               "MODEL_PATH": str(trained_model_dir), "ENGINE": "hf"},
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    steps = [STEP.search(line) for line in out.splitlines() if line.startswith("gpu_check: step")]
    assert len(steps) == 3 and all(steps) and all("[ok]" in m.string for m in steps), out[-3000:]
    trained = [float(m.group(2)) for m in steps if int(m.group(1)) > 0]
    assert trained and all(moved > 0 for moved in trained), out[-3000:]
    assert "PASS" in out
