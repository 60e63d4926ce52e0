"""No retriever service outlives what started it (issue 29): not a stress run that is
SIGKILLed while the service is stalled (SIGSTOPped), and not a restart that was still
sleeping through its downtime when the harness closed the service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from agentgym.lifeline import live_children, process_state
from agentgym.readiness.services import RetrieverProcess

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds processes through /proc")

STALLED_STRESS_RUN = """
from agentgym.readiness import FaultPlan, StressConfig, run_stress
run_stress(StressConfig("agentgym/Search-v1", episodes=100000, concurrency=4, adversarial=0.0,
                        faults=FaultPlan({"stall": 0.5}, stall_s=(120.0, 120.0)), check_containers=False))
"""


def retrievers_marked(marker: str) -> dict[int, str]:
    """Live ``serve-retriever`` processes whose environment carries ``marker`` -> state."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"serve-retriever" not in f.read():
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        state = process_state(int(entry))
        if state is not None:
            found[int(entry)] = state
    return found


def wait_for(predicate, timeout_s: float, every_s: float = 0.1):
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(every_s)


def kill_all(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_sigkilled_stress_run_leaves_no_retriever_even_a_stalled_one():
    marker = f"AGENTGYM_TEST_RUN={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    runner = subprocess.Popen([sys.executable, "-c", STALLED_STRESS_RUN], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stalled = wait_for(lambda: {p for p, s in retrievers_marked(marker).items() if s == "T"}, 180.0)
        assert stalled, f"the stress run never stalled its retriever: {retrievers_marked(marker)}"
        runner.kill()
        runner.wait(10)
        left = wait_for(lambda: not retrievers_marked(marker), 10.0) or retrievers_marked(marker)
        assert left is True, f"retriever processes outlived the killed run: {left}"
    finally:
        runner.kill()
        kill_all(retrievers_marked(marker))


def _my_retrievers(port: int) -> list[int]:
    """This process's children serving the retriever on ``port``."""
    return [pid for pid, cmdline in live_children().items()
            if b"serve-retriever" in cmdline and str(port).encode() in cmdline]


def test_a_restart_still_in_its_downtime_when_the_service_closes_starts_nothing():
    service = RetrieverProcess().start()
    port = service.port
    restarting = threading.Thread(target=service.restart, kwargs={"down_s": 1.5})
    try:
        restarting.start()
        time.sleep(0.3)  # the old process is gone; the restart sleeps through its downtime
        service.close()
        restarting.join(30)
        time.sleep(1.0)
        assert _my_retrievers(port) == []
        assert service.pid is None
    finally:
        service.close()
        kill_all(_my_retrievers(port))
