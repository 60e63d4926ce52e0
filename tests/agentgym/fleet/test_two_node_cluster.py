"""A two-node Ray cluster on one machine (``ray start --head`` + ``ray start --address``),
the nodes offering different resources so that placement is real: env workers asking for
``agentgym_env_slots`` must land on the node that declared them. After shutdown no actor,
raylet or GCS process of the cluster is left."""

from __future__ import annotations

import contextlib
import json
import threading
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym.errors import ConfigError
from agentgym.fleet import ENV_SLOTS, EnvFleet, FleetConfig

SLOTS_NODE = 8
SEARCH = "agentgym/Search-v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_pids(marker: str) -> set[int]:
    """Processes whose command line names this cluster's temp dir or port, with all
    their descendants (workers and agents do not repeat the marker)."""
    roots = set()
    tree: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            tree[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if marker in cmdline:
            roots.add(int(entry.name))
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, parent in tree.items() if parent in frontier and pid not in found}
        found |= frontier
    return found


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _start(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run([_ray_cli(), "start", "--disable-usage-stats", *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _stop(pids: set[int], wait_gone) -> set[int]:
    """SIGTERM, then SIGKILL what is left after 5 s (some Ray processes were seen to
    outlive SIGTERM for longer); the pids still alive 20 s after that."""
    for sig, grace_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 20)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        pids = wait_gone(pids, grace_s)
    return pids


@contextlib.contextmanager
def _cluster(node_slots: list[int], wait_gone) -> Iterator[str]:
    """A head with 1 CPU and no env slots, and one more node per entry of ``node_slots``
    (1 CPU, that many env slots). Teardown stops exactly this cluster's processes (found by
    its temp dir and port; ``ray stop`` would stop every Ray on the machine) and checks
    they are all gone."""
    temp_dir = tempfile.mkdtemp(prefix="agr", dir="/tmp")  # short: Ray's socket paths live under it
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token"}  # the nodes and the driver share ~/.ray/auth_token
    if not (Path.home() / ".ray" / "auth_token").exists():
        subprocess.run([_ray_cli(), "get-auth-token", "--generate"], env=env, capture_output=True, check=True)
    previous_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "token"
    mine = lambda: _cluster_pids(temp_dir) | _cluster_pids(f":{port}")  # noqa: E731
    started: set[int] = set()
    try:
        _start(["--head", f"--port={port}", f"--ray-client-server-port={_free_port()}", "--num-cpus=1",
                f"--temp-dir={temp_dir}", "--include-dashboard=false"], env)
        for slots in node_slots:
            _start([f"--address=127.0.0.1:{port}", "--num-cpus=1", f"--resources={json.dumps({ENV_SLOTS: slots})}",
                    f"--dashboard-agent-listen-port={_free_port()}"], env)
        started = mine()
        yield f"127.0.0.1:{port}"
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        left = _stop(mine() | started, wait_gone)
        if previous_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous_mode
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert len(started) >= 2 + len(node_slots), "expected a GCS and a raylet per node at least: the leak check would prove nothing"
    assert left == set() and wait_gone(started, 10) == set(), "processes of the cluster outlived its shutdown"


@pytest.fixture(scope="module")
def two_nodes(ray_installed, wait_gone) -> Iterator[str]:
    """A head (no env slots) and a node with 8 env slots."""
    with _cluster([SLOTS_NODE], wait_gone) as address:
        yield address


def test_placement_follows_the_resources_each_node_offers(two_nodes, wait_gone):
    import ray

    from agentgym.fleet import connect

    session = connect(two_nodes)
    assert not session.started_here
    nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    slot_node = next(node for node, res in nodes.items() if res.get(ENV_SLOTS) == SLOTS_NODE)

    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=4, placement="env_slots")) as fleet:
        assert {w.node_id for w in fleet.workers} == {slot_node}  # the head offers no env slots
        report = fleet.run_episodes(40)
        pids = {w.pid for w in fleet.workers}
    assert (report.success_rate, report.infra_failed, report.lost, report.completed) == (1.0, 0, [], 40)
    assert wait_gone(pids, 30) == set()

    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=2, cpus_per_worker=1)) as fleet:
        assert {w.node_id for w in fleet.workers} == set(nodes)  # one CPU per node: one worker each
        pids = {w.pid for w in fleet.workers}
    assert wait_gone(pids, 30) == set()

    with pytest.raises(ConfigError, match=f"offer 12 {ENV_SLOTS}.*actual value: 8"):
        EnvFleet(SEARCH, {}, FleetConfig(workers=3, slots=4, placement="env_slots"))
    session.shutdown()


def _process_tree(root: int) -> set[int]:
    tree = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                tree[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = {root}, {root}
    while frontier:
        frontier = {pid for pid, parent in tree.items() if parent in frontier and pid not in found}
        found |= frontier
    return found


def test_a_node_dying_mid_run_loses_no_episode_and_counts_none_twice(ray_installed, wait_gone):
    """Two slot nodes with room for one worker each. Mid-run, one node dies (its raylet and
    everything under it SIGKILLed: the worker and the node's agents). Ray cannot restart the
    worker (no other node has room), so it is written off; the episodes it was playing are
    re-run on the surviving worker. Every episode is reported exactly once, none is lost."""
    from agentgym.fleet import connect

    episodes = 60
    with _cluster([2, 2], wait_gone) as address:
        session = connect(address)
        config = FleetConfig(workers=2, slots=2, placement="env_slots", reruns=2,
                             start_timeout_s=45)  # 15 s timed out beside a training run (a loaded 2-core CI machine)
        with EnvFleet(SEARCH, {}, config) as fleet:
            assert len({w.node_id for w in fleet.workers}) == 2  # one worker per slot node
            doomed = fleet.workers[1]
            raylet = int(Path(f"/proc/{doomed.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            node_pids = _process_tree(raylet)
            assert doomed.pid in node_pids and "raylet" in Path(f"/proc/{raylet}/cmdline").read_bytes().decode(errors="replace")
            done: list[int] = []
            result: dict[str, object] = {}
            runner = threading.Thread(target=lambda: result.update(
                report=fleet.run_episodes(episodes, on_episode=lambda r: done.append(r.index))))
            runner.start()
            deadline = time.monotonic() + 120
            while len(done) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(done) >= 5, "the run never got going"
            for pid in node_pids:  # the node dies: raylet, worker, agents
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            runner.join(timeout=240)
            assert not runner.is_alive(), "the drain hung on a dead node"
            report = result["report"]
            drained = fleet.last_drain
        session.shutdown()
    assert wait_gone(node_pids, 10) == set()
    assert report.lost == [] and report.completed == episodes
    assert sorted(r.index for r in report.episodes) == list(range(episodes))  # each exactly once
    assert drained.worker_deaths >= 1 and drained.reruns >= 1  # the node died with episodes in flight
    assert report.infra_failed == 0 and report.success_rate == 1.0
