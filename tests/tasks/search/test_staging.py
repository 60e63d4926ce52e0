"""Staging directories left by killed builds are removed at the next start, and only those."""

import os
import signal
import subprocess
import sys

from tasks.search import reap_stale_staging, staging_dir

KILLED_BUILDER = """
import sys, time
from pathlib import Path
from tasks.search import staging_dir
print(staging_dir(Path(sys.argv[1])), flush=True)
time.sleep(60)
"""


def test_a_staging_dir_of_a_sigkilled_builder_is_reaped_and_live_ones_are_kept(tmp_path):
    final = tmp_path / "cache" / "bm25-v1-0123456789abcdef"
    builder = subprocess.Popen([sys.executable, "-c", KILLED_BUILDER, str(final)], stdout=subprocess.PIPE, text=True)
    orphan = builder.stdout.readline().strip()
    os.kill(builder.pid, signal.SIGKILL)
    builder.wait(10)
    mine = staging_dir(final)  # this process is alive: never reaped
    unrelated = final.parent / ".not-a-staging-dir"
    unrelated.mkdir()
    assert os.path.isdir(orphan) and f".staging.{builder.pid}@" in orphan
    assert reap_stale_staging(final.parent) == [type(mine)(orphan)]
    assert not os.path.exists(orphan) and mine.is_dir() and unrelated.is_dir()
    assert reap_stale_staging(tmp_path / "missing") == []
