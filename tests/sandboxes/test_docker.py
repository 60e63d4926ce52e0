"""Docker-only behaviour: isolation flags, faults from outside, leaks, several engines.

Kept to well under four minutes on a 2-core machine: containers are few and shared.
"""

from __future__ import annotations

import ast
import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from sandboxes.supervised import RUNTIME_DIR

from sandboxes import DockerSandbox, PoolConfig, SandboxConfig, SandboxInfraError, SandboxPool
from sandboxes.docker import AGENT_UIDS, DockerBackend, agent_user, container_options
from sandboxes.engine import connect
from sandboxes.image import build_image, image_tag
from sandboxes.reaper import OWNER_LABEL, owner_id, reap_orphans
from sandboxes.reliability import RetryPolicy

pytestmark = pytest.mark.docker

FAST = dict(retry=RetryPolicy(initial_s=0.05, max_wait_s=0.1))


def _owned_by(client, pid: int) -> list:
    prefix = f"{socket.gethostname()}:{pid}:"
    # The raw listing carries the labels; Container objects would inspect each one, and a
    # container can go between the listing and the inspection.
    labelled = client.api.containers(all=True, filters={"label": OWNER_LABEL})
    return [c for c in labelled if c["Labels"][OWNER_LABEL].startswith(prefix)]


def test_rebuilding_an_unchanged_recipe_is_a_no_op(engine_url):
    build_image(engine_urls=[engine_url])  # whatever the state, the image exists after this
    start = time.monotonic()
    info = build_image(engine_urls=[engine_url])
    assert not info.built and time.monotonic() - start < 10
    assert info.tag == image_tag() and info.image_id.startswith("sha256:")
    assert {"python", "numpy", "pandas", "scipy"} <= set(info.versions)


@pytest.mark.asyncio(loop_scope="module")
async def test_container_has_every_isolation_setting(engine_url):
    config = SandboxConfig(mem_limit="256m", tmpfs_size="32m", shm_size="16m", pids_limit=50, cpus=0.5)
    async with DockerSandbox(config, engine_url=engine_url) as sb:
        attrs = connect(engine_url).api.inspect_container(sb.container_id)
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == 50
        assert host["Memory"] == host["MemorySwap"] == 256 * 2**20
        assert host["NanoCpus"] == 500_000_000
        assert set(host["Tmpfs"]) == {"/tmp", "/workspace", "/dev/shm", "/dev/pts"}
        assert host["Tmpfs"]["/dev/pts"].startswith("ro,")  # no pseudo-terminals (the host's one table)
        # Inodes capped too: empty files and user xattrs are kernel memory size= does not cap.
        assert all(f"nr_inodes={config.tmpfs_inodes}" in host["Tmpfs"][p] for p in ("/tmp", "/workspace", "/dev/shm"))
        assert host["Sysctls"]["kernel.msgmni"] == "32"  # SysV queues: few and small
        assert host["CapAdd"] == ["SETUID", "SETGID", "KILL"]  # the supervisor's; agent code has none
        assert host["Binds"] == [f"{RUNTIME_DIR}:/opt/agentgym:ro"]  # nothing writable on the host
        assert host["LogConfig"]["Type"] == "none"
        assert attrs["Config"]["OpenStdin"] and attrs["Config"]["StdinOnce"]
        assert attrs["Config"]["Entrypoint"][0] == "/usr/bin/tini"
        assert attrs["Config"]["Labels"][OWNER_LABEL] == owner_id()
        env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
        assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
        who = await sb.run(
            "import os\n(os.getresuid(), os.getgroups(), open('/proc/1/cmdline').read().split('\\0')[0], "
            "[l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))][:2])"
        )
        ids, groups, init, caps = ast.literal_eval(who.value)
        uid = ids[0]
        assert ids == (uid, uid, uid) and uid in AGENT_UIDS, who.value  # a host uid of its own
        assert (groups, init, caps) == ([], "/usr/bin/tini", ["0000000000000000", "0000000000000000"]), who.value


def test_each_container_runs_agent_code_as_a_host_uid_of_its_own():
    """Per-user kernel limits (inotify, pipe pages, NPROC) are shared by a uid's processes
    host-wide; see the red-team test that held them. The configured user still wins."""
    users = {agent_user(SandboxConfig()) for _ in range(64)}
    assert len(users) == 64 and all(u == g and int(u) in AGENT_UIDS for u, g in users)
    options = container_options(SandboxConfig(), "image", "owner")
    uid = options["entrypoint"][options["entrypoint"].index("--sandbox-user") + 1].partition(":")[0]
    assert f"uid={uid},gid={uid}" in options["tmpfs"]["/workspace"]  # the workdir is that uid's
    assert agent_user(SandboxConfig(user="1234:5678")) == ("1234", "5678")
    assert agent_user(SandboxConfig(user="1234")) == ("1234", "1234")


@pytest.mark.asyncio(loop_scope="module")
async def test_hung_supervisor_is_killed_from_outside(engine_url):
    config = SandboxConfig(transport_slack_s=1.5)
    sb = await DockerSandbox(config, engine_url=engine_url).start()
    try:
        await asyncio.to_thread(connect(engine_url).api.pause, sb.container_id)
        start = time.monotonic()
        with pytest.raises(SandboxInfraError):
            await sb.run("1 + 1", timeout=1)
        assert time.monotonic() - start < 1.5 + 2
        assert not sb.healthy
        with pytest.raises(Exception):  # removed from outside
            connect(engine_url).api.inspect_container(sb.container_id)
    finally:
        await sb.close()


@pytest.mark.asyncio(loop_scope="module")
async def test_killing_the_container_mid_call_is_recovered_by_retry_and_replay(engine_url):
    backend = DockerBackend(engine_urls=[engine_url])
    async with SandboxPool(backend, PoolConfig(size=2, **FAST)) as pool:
        async with pool.sandbox() as sb:
            await sb.upload("t.csv", b"a\n1\n2\n3\n")
            await sb.run("import pandas as pd\ndf = pd.read_csv('t.csv')")
            victim = sb.inner
            running = asyncio.create_task(sb.run("import time\ntime.sleep(1.5)\nint(df.a.sum())", timeout=10))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(victim.kill_container)
            result = await running
            assert result.status == "ok" and result.value == "6" and not result.state_lost
            assert sb.inner is not victim and pool.stats.replaced == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_pool_spreads_sandboxes_over_two_engine_urls(engine_url):
    backend = DockerBackend(engine_urls=[engine_url, engine_url], capacity_per_engine=3)
    async with SandboxPool(backend, PoolConfig(size=4, max_parallel_creations=4, **FAST)) as pool:
        await pool.wait_ready(timeout=120)
        assert sorted(backend.load().values()) == [2, 2]
        leases = [await pool.acquire() for _ in range(4)]
        assert {lease.inner.engine_url for lease in leases} == {engine_url}
        results = await asyncio.gather(*(lease.run("6 * 7") for lease in leases))
        assert all(r.value == "42" for r in results)
        for lease in leases:
            await pool.release(lease)


HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from sandboxes import PoolConfig, SandboxPool
    from sandboxes.docker import DockerBackend

    async def main():
        pool = SandboxPool(DockerBackend(engine_urls=[sys.argv[1]]), PoolConfig(size=2, reap_on_start=False))
        await pool.start()
        await pool.wait_ready(timeout=120)
        print("READY", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


@pytest.mark.asyncio(loop_scope="module")
async def test_sigkilled_host_leaves_zero_containers(engine_url, tmp_path):
    """The host's attach connection is the containers' stdin: when the host dies, the
    engine closes it, each supervisor exits and its auto-removed container goes. The
    reaper at the next start is only the backstop (tested below)."""
    client = connect(engine_url)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, engine_url], stdout=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 150)
        assert line.strip() == "READY"
        assert len(_owned_by(client, holder.pid)) == 2
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    end = time.monotonic() + 15
    while _owned_by(client, holder.pid) and time.monotonic() < end:
        await asyncio.sleep(0.2)
    assert _owned_by(client, holder.pid) == []


def test_reap_removes_only_containers_of_dead_owners(engine_url):
    client = connect(engine_url)
    dead_owner = f"{socket.gethostname()}:999999999:1"
    labels = {OWNER_LABEL: dead_owner}
    orphan = client.containers.create(image_tag(), entrypoint=["true"], labels=labels, network_mode="none")
    alive = client.containers.create(
        image_tag(), entrypoint=["true"], labels={OWNER_LABEL: owner_id()}, network_mode="none"
    )
    try:
        removed = reap_orphans([engine_url])
        assert orphan.id in removed and alive.id not in removed
        client.containers.get(alive.id)  # still there
    finally:
        for c in (orphan, alive):
            try:
                c.remove(force=True)
            except Exception:
                pass
