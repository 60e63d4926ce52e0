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


def test_gpu_check_search_recipe_dry_run(tmp_path):
    """The Search recipe runs end to end on CPU (tiny sizes: it checks the path, not learning)."""
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--search"], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path / "gc"), "PYTHON": sys.executable, "HOME": str(tmp_path),
                               "ENGINE": "hf", "SEARCH_STEPS": "1"},
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"gpu_check: search step 1: train success \d\.\d\d, rollout \d+ tok/s", out), out[-3000:]
    assert re.search(r"held-out success: \d\.\d{3} \+- \d\.\d{3} -> \d\.\d{3}", out), out[-3000:]
    assert re.search(r"held-out sampled success: .* \(gain [+-]\d\.\d{3} \+- \d\.\d{3}; paired \+- \d\.\d{3}\)", out), out[-3000:]
    assert "DONE" in out
