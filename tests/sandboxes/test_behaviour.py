"""What agent code can and cannot do in a sandbox, on every backend.

Each test leaves the shared sandbox usable for the next one; that is part of what is
being tested.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_state_persists_across_calls(sandbox):
    assert (await sandbox.run("x = 20")).status == "ok"
    result = await sandbox.run("import numpy as np\nx + 22")
    assert result.status == "ok" and result.value == "42"
    assert (await sandbox.run("x")).value == "20"


async def test_value_stdout_stderr_are_separate(sandbox):
    result = await sandbox.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\n'v'")
    assert (result.status, result.stdout, result.stderr, result.value) == ("ok", "out\n", "err\n", "'v'")
    assert (await sandbox.run("y = 1")).value is None


async def test_exception_gives_error_status_and_user_traceback(sandbox):
    result = await sandbox.run("def f():\n    return 1 / 0\nf()")
    assert result.status == "error"
    assert result.error == "ZeroDivisionError: division by zero"
    assert "<cell-" in result.stderr and "worker.py" not in result.stderr
    syntax = await sandbox.run("def (")
    assert syntax.status == "error" and syntax.error.startswith("SyntaxError")


async def test_infinite_loop_times_out_within_deadline_and_sandbox_stays_usable(sandbox):
    await sandbox.run("kept = 'yes'")
    start = time.monotonic()
    result = await sandbox.run("while True:\n    pass", timeout=1.0)
    elapsed = time.monotonic() - start
    assert result.status == "timeout"
    assert elapsed <= 1.0 + 0.1, f"timeout took {elapsed:.3f}s"
    assert not result.state_lost  # an interruptible loop keeps the interpreter
    assert (await sandbox.run("kept")).value == "'yes'"


async def test_code_that_ignores_interrupts_is_killed_and_reports_state_lost(sandbox):
    await sandbox.run("kept = 1")
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    start = time.monotonic()
    result = await sandbox.run(code, timeout=0.5)
    elapsed = time.monotonic() - start
    assert result.status == "timeout" and result.state_lost
    assert elapsed <= 0.5 + sandbox.config.grace_s + 0.1, f"kill took {elapsed:.3f}s"
    after = await sandbox.run("1 + 1")
    assert after.status == "ok" and after.value == "2"
    assert (await sandbox.run("kept")).status == "error"  # the state really was lost


async def test_process_count_is_capped(sandbox, requires):
    requires(sandbox.backend_name, "pids")
    code = (
        "import os, time\n"
        "children = 0\n"
        "for _ in range(1000):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    children += 1\n"
        "children"
    )
    result = await sandbox.run(code, timeout=20)
    assert result.status == "ok", result
    assert int(result.value) < sandbox.config.pids_limit
    await sandbox.reset()  # reset kills the sleeping children
    assert (await sandbox.run("1")).value == "1"


async def test_fork_bomb_is_contained(sandbox, requires):
    requires(sandbox.backend_name, "pids")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    start = time.monotonic()
    result = await sandbox.run(bomb, timeout=2.0)
    assert result.status == "timeout"
    assert time.monotonic() - start < 10
    await sandbox.reset()
    check = await sandbox.run("import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])")
    assert check.status == "ok" and int(check.value) < 10, check


async def test_memory_bomb_reports_oom(sandbox):
    result = await sandbox.run("hog = b'x' * (4 * 1024**3)", timeout=60)
    assert result.status == "oom", result
    assert (await sandbox.run("1 + 1")).value == "2"


async def test_huge_output_is_truncated_without_hang(sandbox):
    start = time.monotonic()
    result = await sandbox.run("import sys\nsys.stdout.write('x' * 100_000_000)\nprint('END')", timeout=60)
    elapsed = time.monotonic() - start
    assert result.status == "ok"
    assert elapsed < 15, f"100 MB of output took {elapsed:.1f}s"
    assert result.stdout_truncated and result.stdout_bytes == 100_000_004
    assert "bytes truncated" in result.stdout and result.stdout.endswith("END\n")
    assert len(result.stdout.encode()) < sandbox.config.output_limit_bytes + 200


async def test_output_from_a_crashing_loop_of_prints_is_kept_head_and_tail(sandbox):
    result = await sandbox.run("for i in range(200000):\n    print(i)\n1/0", timeout=30)
    assert result.status == "error"
    assert result.stdout.startswith("0\n1\n2\n") and result.stdout.endswith("199999\n")


async def test_network_connections_fail(sandbox, requires):
    requires(sandbox.backend_name, "network")
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
        "    outcome = 'connected'\n"
        "except OSError as e:\n"
        "    outcome = type(e).__name__\n"
        "outcome"
    )
    result = await sandbox.run(code, timeout=10)
    assert result.status == "ok" and result.value != "'connected'"


async def test_writing_outside_workdir_fails_and_inside_works(sandbox, requires):
    requires(sandbox.backend_name, "readonly")
    outside = await sandbox.run("open('/usr/agentgym-probe', 'w').write('x')")
    assert outside.status == "error" and ("PermissionError" in outside.error or "Read-only" in outside.error)
    inside = await sandbox.run("open('probe.txt', 'w').write('x')\nopen('probe.txt').read()")
    assert inside.value == "'x'"


async def test_upload_and_download(sandbox):
    await sandbox.upload("data/table.csv", b"a,b\n1,2\n")
    result = await sandbox.run("import pandas as pd\nint(pd.read_csv('data/table.csv').b.sum())")
    assert result.value == "2"
    await sandbox.run("open('out.bin', 'wb').write(bytes(range(256)))")
    assert await sandbox.download("out.bin") == bytes(range(256))
    with pytest.raises(FileNotFoundError):
        await sandbox.download("missing.txt")


async def test_exit_and_hard_exit(sandbox):
    soft = await sandbox.run("exit(3)")
    assert soft.status == "error" and soft.error == "SystemExit: 3" and not soft.state_lost
    for code in (1, 3, 7):  # the status told is the one the code chose, every time
        hard = await sandbox.run(f"import os\nos._exit({code})")
        assert hard.status == "crash" and hard.state_lost, hard
        assert hard.error == f"interpreter exited with status {code}", hard  # (process: was -9, 20 in 30)
        assert (await sandbox.run("2 * 3")).value == "6"


async def test_reset_clears_variables_files_and_processes(sandbox):
    await sandbox.run(
        "secret = 1\nopen('left.txt', 'w').write('x')\nimport subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)"
    )
    await sandbox.reset()
    assert (await sandbox.run("secret")).status == "error"
    assert (await sandbox.run("import os\nos.listdir('.')")).value == "[]"
    if sandbox.describe().get("namespaces", True):
        procs = await sandbox.run("import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])")
        assert int(procs.value) < 10


async def test_a_reset_sandbox_numbers_its_cells_from_one_again(sandbox):
    """An episode's tracebacks name its cells (``<cell-3>``). Counted across resets, the
    number told an agent how many cells earlier episodes ran in this sandbox, and the same
    actions on the same task gave different observations depending on the pool's history."""
    await sandbox.run("x = 1")
    await sandbox.run("y = 2")
    await sandbox.reset()
    first = await sandbox.run("1 / 0")
    await sandbox.reset()
    again = await sandbox.run("1 / 0")
    assert 'File "<cell-1>"' in first.stderr and first.stderr == again.stderr


async def test_large_value_repr_is_truncated(sandbox):
    result = await sandbox.run("'y' * 1_000_000")
    assert result.value_truncated and len(result.value) < sandbox.config.value_limit_bytes + 200


async def test_interpreter_dying_between_calls_is_reported_on_the_next_call(sandbox):
    await sandbox.run("kept = 1")
    code = "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), os._exit(0))).start()"
    assert (await sandbox.run(code)).status == "ok"
    time.sleep(0.5)
    result = await sandbox.run("1 + 1")
    assert result.status == "ok" and result.value == "2" and result.state_lost


async def test_functions_and_classes_defined_in_a_cell_reach_worker_processes(sandbox):
    """Cells run in a real ``__main__`` module, as a script or notebook does: pickle finds
    what a cell defined, so ``multiprocessing`` and ``ProcessPoolExecutor`` can run it
    (with a plain namespace dict both failed: "attribute lookup square on __main__")."""
    await sandbox.run("import dataclasses\n"
                      "def square(x):\n    return x * x\n"
                      "@dataclasses.dataclass\nclass Point:\n    x: int\n")
    result = await sandbox.run(
        "import multiprocessing, pickle\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "    a = pool.map(square, range(4))\n"
        "with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context('fork')) as ex:\n"
        "    b = list(ex.map(square, [5, 6]))\n"
        "(a, b, pickle.loads(pickle.dumps(Point(3))), __name__)", timeout=30)
    assert result.value == "([0, 1, 4, 9], [25, 36], Point(x=3), '__main__')", result
