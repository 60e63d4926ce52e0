"""A tied child dies with its starter, even SIGKILLed, even stopped, even when the thread
that asked for it has ended long before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from agentgym.lifeline import process_state

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

STARTER = r"""
import sys, threading, time
from agentgym.lifeline import popen_tied

def start():
    child = popen_tied([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print(child.pid, flush=True)

thread = threading.Thread(target=start)  # asked from a thread that ends right away
thread.start()
thread.join()
time.sleep(600)
"""


def wait_until_gone(pid: int, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while process_state(pid) is not None:
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_stopped_child_dies_when_its_starter_is_sigkilled():
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        child = int(starter.stdout.readline())
        os.kill(child, signal.SIGSTOP)  # stalled, as the stress harness stalls a service
        time.sleep(0.5)
        assert process_state(child) == "T"  # the thread that asked for it ended: still alive
        starter.kill()
        starter.wait(10)
        assert wait_until_gone(child, 10.0)
    finally:
        starter.kill()
        if child and process_state(child) is not None:
            os.kill(child, signal.SIGKILL)


def test_popen_tied_takes_preexec_fn_itself():
    from agentgym.lifeline import popen_tied

    with pytest.raises(ValueError, match="preexec_fn"):
        popen_tied(["true"], preexec_fn=lambda: None)
