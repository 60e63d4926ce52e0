"""The GPU check's CPU dry run: three PPO-EWMA steps, each followed by a verified sync."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_dry_run_passes(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path / "gc"), "PYTHON": sys.executable, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    steps = [line for line in out.splitlines() if line.startswith("gpu_check: step")]
    assert len(steps) == 3 and all("[ok]" in s for s in steps), out[-3000:]
    assert "moved by 0.00e+00" not in out
    assert "PASS" in out
