"""The process backend (bubblewrap) against the attacks of issue 23, as root and as a user.

Each test is agent code an adversarial agent would send, and asserts the property that
must hold on the *host*: no process that runs agent code is host root, the host's kernel
settings (``/proc/sys``) and device nodes (``/dev``) are unchanged, nothing outside the
interpreter and its libraries is visible, and an ordinary user without Docker gets a
working sandbox (or a refusal that :func:`isolation_support` already reported).
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio

from sandboxes import ProcessSandbox, SandboxConfig
from sandboxes.process import isolation_support, process_tree

pytestmark = pytest.mark.skipif(isolation_support().bwrap is None,
                                reason=f"no bubblewrap sandbox here: {isolation_support().reason}")
module_loop = pytest.mark.asyncio(loop_scope="module")

PROJECT = Path(__file__).resolve().parents[2]
CONFIG = SandboxConfig(mem_limit="512m", tmpfs_size="64m", pids_limit=64)
DEVICE_NODES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"]
SYSCTLS = ["/proc/sys/kernel/printk_ratelimit", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
           "/proc/sys/fs/file-max", "/proc/sys/kernel/modprobe", "/proc/sys/vm/overcommit_memory",
           "/proc/sys/kernel/pid_max", "/proc/sysrq-trigger"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox():
    sb = await ProcessSandbox(CONFIG).start()
    yield sb
    await sb.close()


async def _value(sb, code: str):
    result = await sb.run(textwrap.dedent(code), timeout=30)
    assert result.status == "ok", result
    return eval(result.value)  # noqa: S307 - reprs of builtins the cell made


def _device_stats() -> dict[str, tuple]:
    out = {}
    for path in DEVICE_NODES:
        st = os.stat(path)
        out[path] = (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_rdev)
    return out


def _restore_device_times(before: dict[str, tuple]) -> None:
    """Put back what a successful attack changed (owner and mode are never changed by the
    attack cells: they chmod/chown to the values the nodes already have)."""
    for path, (_, _, _, mtime_ns, _) in before.items():
        if os.stat(path).st_mtime_ns != mtime_ns:
            os.utime(path, ns=(mtime_ns, mtime_ns))


def _sysctl_values() -> dict[str, str]:
    out = {}
    for path in SYSCTLS:
        try:
            with open(path) as f:
                out[path] = f.read()
        except OSError as e:  # write-only files (sysrq-trigger, drop_caches on some kernels)
            out[path] = f"unreadable: {e.errno}"
    return out


def _host_credentials(pid: int) -> dict | None:
    """The host's view of a process: its command name, its four uids and gids, its groups."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "pid": pid,
        "name": fields["Name"].strip(),
        "argv0": os.path.basename(cmdline[0].decode(errors="replace")) if cmdline else "",
        "uids": [int(x) for x in fields["Uid"].split()],
        "gids": [int(x) for x in fields["Gid"].split()],
        "groups": fields["Groups"].split(),
        "cmdline": b" ".join(cmdline).decode(errors="replace"),
    }


def _sandbox_processes(sb: ProcessSandbox) -> list[dict]:
    """Every process of the sandbox but bubblewrap's own (its launcher and its PID 1 reaper
    never run anything of the agent's) and the shell that joins the cgroup before it."""
    found = []
    for pid in process_tree(sb._proc.pid):
        creds = _host_credentials(pid)
        if creds is not None and creds["name"] not in ("bwrap", "sh"):
            found.append(creds)
    return found


# --- as root (and whatever user runs the suite) ---------------------------------------


@module_loop
async def test_no_process_that_runs_agent_code_is_host_root(sandbox):
    """Issue 23, item 4: bubblewrap run by root mapped the sandbox uid to host root."""
    await _value(sandbox, """
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'agent-marker'])
        1
    """)
    procs = _sandbox_processes(sandbox)
    assert any("agent-marker" in p["cmdline"] for p in procs), procs
    assert any("worker.py" in p["cmdline"] for p in procs), procs
    for p in procs:
        assert 0 not in p["uids"] and 0 not in p["gids"], p
        assert p["groups"] in ([], [str(p["gids"][0])]), p
    await sandbox.reset()


@module_loop
async def test_concurrent_root_sandboxes_do_not_share_a_host_uid(sandbox):
    """Per-user kernel limits (inotify instances, pipe buffers, RLIMIT_NPROC, pending
    signals) are counted per host uid: sandboxes that shared one would share them."""
    if os.geteuid() != 0:
        pytest.skip("a user's sandboxes all run as that user (no other uid is theirs to map)")
    other = await ProcessSandbox(CONFIG).start()
    try:
        await other.run("1")
        uids = [{p["uids"][0] for p in _sandbox_processes(sb)} for sb in (sandbox, other)]
        assert all(len(u) == 1 for u in uids), uids
        assert uids[0] != uids[1], uids
        assert all(u < 2**31 for group in uids for u in group)
    finally:
        await other.close()


@module_loop
async def test_agent_code_cannot_write_host_kernel_settings(sandbox):
    """Issue 23, item 4: /proc/sys was writable (printk_ratelimit changed on the host;
    core_pattern, which can run a program as host root, opened for writing)."""
    before = _sysctl_values()
    try:
        seen = await _value(sandbox, f"""
            import os
            out = {{}}
            for path in {SYSCTLS!r}:
                try:
                    fd = os.open(path, os.O_WRONLY)
                except OSError as e:
                    out[path] = 'refused'
                    continue
                out[path] = 'opened'
                if path.endswith('printk_ratelimit'):  # the one setting safe to change for a test
                    try:
                        old = int(open(path).read())
                        os.write(fd, str(old + 7).encode())
                        out[path] = 'written'
                    except OSError:
                        pass
                os.close(fd)
            out
        """)
        assert set(seen.values()) == {"refused"}, seen
        assert _sysctl_values() == before
    finally:
        ratelimit = SYSCTLS[0]
        if os.geteuid() == 0 and _sysctl_values()[ratelimit] != before[ratelimit]:
            Path(ratelimit).write_text(before[ratelimit])


@module_loop
async def test_proc_sys_is_a_read_only_mount_inside(sandbox):
    seen = await _value(sandbox, """
        import os
        mounts = [line.split() for line in open('/proc/self/mountinfo')]
        sys_mounts = [m for m in mounts if m[4] == '/proc/sys']
        (len(sys_mounts) > 0 and all('ro' in m[5].split(',') for m in sys_mounts), os.path.exists('/proc/sys/kernel'))
    """)
    assert seen == (True, True)


@module_loop
async def test_agent_code_cannot_change_the_hosts_device_nodes(sandbox):
    """Issue 23, item 5: chmod, chown and utime on /dev/null & co. reached the host's nodes
    (chmod 000 /dev/null breaks every process on the machine; an mtime carried data into the
    next episode and into a new pool)."""
    before = _device_stats()
    try:
        seen = await _value(sandbox, f"""
            import os
            out = {{}}
            for path in {DEVICE_NODES!r}:
                st = os.stat(path)
                attacks = {{
                    'chmod': lambda: os.chmod(path, st.st_mode & 0o7777),  # same mode: harmless if it lands
                    'chown': lambda: os.chown(path, st.st_uid, st.st_gid),
                    'utime': lambda: os.utime(path, (1234567890, 1234567890)),
                    'touch': lambda: os.utime(path, None),
                }}
                for name, attack in attacks.items():
                    try:
                        attack()
                        out[f'{{path}} {{name}}'] = 'done'
                    except OSError:
                        out[f'{{path}} {{name}}'] = 'refused'
            with open('/dev/null', 'w') as f:  # still a working /dev/null
                f.write('x')
            out['read /dev/zero'] = open('/dev/zero', 'rb').read(4) == bytes(4)
            out
        """)
        assert seen.pop("read /dev/zero") is True
        assert set(seen.values()) == {"refused"}, seen
        assert _device_stats() == before
    finally:
        _restore_device_times(before)


@module_loop
async def test_a_device_node_time_set_in_one_episode_is_not_seen_by_the_next():
    """The covert channel of item 5 end to end: one sandbox tries to stamp /dev/null, a new
    sandbox reads it."""
    before = _device_stats()
    try:
        first = await ProcessSandbox(CONFIG).start()
        try:
            await first.run("import os\ntry:\n    os.utime('/dev/null', (424242, 424242))\nexcept OSError:\n    pass")
        finally:
            await first.close()
        second = await ProcessSandbox(CONFIG).start()
        try:
            seen = await _value(second, "import os\nint(os.stat('/dev/null').st_mtime)")
        finally:
            await second.close()
        assert seen != 424242
        assert _device_stats() == before
    finally:
        _restore_device_times(before)


@module_loop
async def test_only_the_interpreter_and_its_libraries_are_visible(sandbox):
    """Issue 23, item 7: all of /usr was visible (a docker CLI in /usr/local/bin, the
    system's dist-packages importable after a sys.path.append)."""
    system_packages = [p for p in ("/usr/lib/python3/dist-packages", "/usr/local/lib/python3/dist-packages",
                                   f"/usr/local/lib/python3.{sys.version_info.minor}/dist-packages")
                       if os.path.isdir(p)]
    importable = sorted({name.split("-")[0].split(".")[0] for p in system_packages for name in os.listdir(p)
                         if name.isidentifier() or name.endswith(".py")} - {"__pycache__"})[:40]
    seen = await _value(sandbox, f"""
        import importlib, os, sys
        out = {{}}
        for path in ['/usr/local/bin/docker', '/usr/local/bin', '/usr/bin/docker', '/bin/sh', '/usr/bin/env',
                     '/usr/bin/perl', '/usr/share/doc', '/usr/include', '/usr/lib/python3', '/usr/local/lib',
                     '/usr/sbin', '/usr/lib/git-core', '/usr/libexec', '/etc/passwd', '/etc/apt',
                     *{system_packages!r}]:
            out[path] = os.path.lexists(path)
        sys.path += {system_packages!r}
        imported = []
        for name in {importable!r}:
            if name.removesuffix('.py') in sys.builtin_module_names or name.removesuffix('.py') in sys.stdlib_module_names:
                continue
            try:
                importlib.import_module(name.removesuffix('.py'))
                imported.append(name)
            except BaseException:
                pass
        out['imported from the system'] = imported
        executables = []
        for top in os.listdir('/'):
            if top in ('proc', 'dev', 'sys', 'tmp', 'opt', 'run') or os.path.realpath('/' + top) == os.getcwd():
                continue
            for root, dirs, files in os.walk('/' + top):
                for name in files:
                    path = os.path.join(root, name)
                    if os.access(path, os.X_OK) and '.so' not in name and not name.endswith('.py'):
                        executables.append(path)
        stdlib = [os.path.dirname(os.__file__) + '/']  # the interpreter's own files (some test data is +x)
        executables = sorted(p for p in executables if os.path.realpath(p) != os.path.realpath(sys.executable)
                             and not any(os.path.realpath(p).startswith(d) for d in stdlib))
        out['executables'] = executables[:20] + ([f'... {{len(executables)}} in all'] if len(executables) > 20 else [])
        out
    """)
    assert seen.pop("imported from the system") == []
    assert seen.pop("executables") == []
    assert not any(seen.values()), {k: v for k, v in seen.items() if v}


@module_loop
async def test_the_three_libraries_and_the_stdlib_still_work(sandbox):
    seen = await _value(sandbox, """
        import ctypes, decimal, hashlib, json, lzma, bz2, zlib, sqlite3, ssl, io, datetime, zoneinfo
        import numpy as np, pandas as pd, scipy
        import scipy.stats, scipy.optimize, scipy.linalg, scipy.sparse, scipy.signal, scipy.special, scipy.interpolate
        df = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0]})
        csv = df.to_csv(index=False)
        back = pd.read_csv(io.StringIO(csv))
        when = pd.Timestamp('2024-03-10 12:00', tz='Europe/Paris').tz_convert('UTC').hour
        (int(back['a'].sum()), round(float(scipy.stats.norm.cdf(0)), 3), float(np.linalg.det(np.eye(3))),
         round(float(scipy.optimize.minimize_scalar(lambda x: (x - 2) ** 2).x), 3), when,
         hashlib.sha256(b'x').hexdigest()[:8], str(datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo('UTC'))))
    """)
    assert seen == (6, 0.5, 1.0, 2.0, 11, "2d711642", "2024-01-01 00:00:00+00:00")


@module_loop
async def test_as_root_every_sandbox_process_is_in_the_sandboxes_cgroup(sandbox):
    """The cgroup (pids, memory, CPU) is joined by root before bubblewrap drops to the
    sandbox's uid, so the limits hold for every process it starts."""
    if os.geteuid() != 0 or sandbox._cgroup is None:
        pytest.skip("cgroups are managed as root")
    await _value(sandbox, """
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'cgroup-marker'])
        1
    """)
    names = {d.name for d in sandbox._cgroup.dirs}
    procs = _sandbox_processes(sandbox)
    assert any("cgroup-marker" in p["cmdline"] for p in procs)
    for p in procs:
        cgroup = Path(f"/proc/{p['pid']}/cgroup").read_text()
        assert any(name in cgroup for name in names), (p, cgroup)
    await sandbox.reset()


INODE_FLOOD = """
import os
made = {}
for place in (os.getcwd(), '/tmp', '/dev/shm'):
    n, err = 0, None
    while n < %d:
        try:
            os.close(os.open(f'{place}/e{n}', os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as e:
            err = e.errno
            break
        n += 1
    made[place] = (n, err)
made
"""
"""Empty files in every writable place: ``size=`` counts none of their bytes, but each is
an inode and a dentry of kernel memory that outlives the process that made it."""


def _mounts_under(directory: Path, pid: int | str = "self") -> list[str]:
    """The mountinfo lines of ``pid``'s mount namespace for mounts under ``directory``."""
    return [line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if str(directory) in line]


INODE_SLACK = 16
"""A full tmpfs stops a few entries short of ``nr_inodes`` (its root and the runtime's own
files count too): fewer than this short means the cap, not something else, stopped them."""


@module_loop
async def test_empty_files_stop_at_the_inode_cap_in_every_writable_place():
    """The process backend's tmpfs mounts were capped in bytes only (bubblewrap's
    ``--tmpfs`` takes a size, no inode count): empty files filled the sandbox's memory,
    or, as an ordinary user without a cgroup, the host's. Each writable place now holds
    at most ``tmpfs_inodes`` entries, as in a container, and its mount is gone with the
    sandbox (it never was a host mount)."""
    config = SandboxConfig(mem_limit="512m", tmpfs_size="64m", pids_limit=64, tmpfs_inodes=1024)
    sb = await ProcessSandbox(config).start()
    try:
        directory = sb._dir
        # The capped mounts are in the sandbox's mount namespace (that of the bwrap process
        # the sandbox started), on its own directory, and not in the host's.
        theirs = _mounts_under(directory, sb._proc.pid)
        assert len(theirs) == 3 and all(" tmpfs " in m and f"nr_inodes={config.tmpfs_inodes}" in m
                                        for m in theirs), theirs
        assert not _mounts_under(directory)
        made = await _value(sb, INODE_FLOOD % (4 * config.tmpfs_inodes))
        assert set(made) == {config.workdir, "/tmp", "/dev/shm"}
        for place, (n, err) in made.items():
            assert config.tmpfs_inodes - INODE_SLACK <= n < config.tmpfs_inodes and err == errno.ENOSPC, made
        # The files are on the sandbox's tmpfs, not in the host directories beneath them.
        assert not [p for p in (directory / "mnt").rglob("*") if p.is_file()]
        # Still a working sandbox: a reset empties them and the next cell writes again.
        await sb.reset()
        assert await _value(sb, "import os\nopen('x', 'w').write('1')\nsorted(os.listdir('.'))") == ["x"]
    finally:
        await sb.close()
    assert not directory.exists()


# --- as an ordinary user ----------------------------------------------------------------

NONROOT_USER = "agentgym-nonroot"

NONROOT_SCRIPT = r"""
import asyncio, json, os, sys
sys.path[:0] = json.loads(sys.argv[1])
from sandboxes import ProcessSandbox, SandboxConfig
from sandboxes.process import isolation_support, process_tree

support = isolation_support()
report = {"support": [support.bwrap, support.reason], "uid": os.getuid()}

async def main():
    sb = ProcessSandbox(SandboxConfig(mem_limit="512m", tmpfs_size="64m", pids_limit=64))
    try:
        await sb.start()
    except Exception as e:
        report["start"] = f"{type(e).__name__}: {e}"
        return
    try:
        report["start"] = "ok"
        report["cells"] = {}
        for name, code in json.loads(sys.argv[2]).items():
            r = await sb.run(code, timeout=30)
            report["cells"][name] = [r.status, r.value, r.error]
        uids, bounding = [], []
        for pid in process_tree(sb._proc.pid):
            try:
                status = open(f'/proc/{pid}/status').read()
            except OSError:
                continue
            fields = dict(l.split(':', 1) for l in status.splitlines() if ':' in l)
            uids.append([fields['Name'].strip(), [int(x) for x in fields['Uid'].split()]])
            if pid != sb._proc.pid:  # bwrap's launcher, outside the sandbox's namespaces
                bounding.append([fields['Name'].strip(), fields['CapBnd'].strip()])
        report["host_uids"] = uids
        report["bounding"] = bounding
    finally:
        await sb.close()

asyncio.run(main())
print("REPORT " + json.dumps(report))
"""

NONROOT_CELLS = {
    "answer": "6 * 7",
    "pandas": "import pandas as pd, scipy.stats\nint(pd.DataFrame({'a': [1, 2, 3]})['a'].sum())",
    "sysctl": "import os\nout = []\nfor p in %r:\n    try:\n        os.close(os.open(p, os.O_WRONLY))\n        out.append(p)\n"
              "    except OSError:\n        pass\nout" % SYSCTLS,
    "devices": "import os\nout = []\nfor p in %r:\n    for f in (lambda: os.chmod(p, 0o666), lambda: os.utime(p, None), lambda: os.utime(p, (5, 5))):\n"
               "        try:\n            f()\n            out.append(p)\n        except OSError:\n            pass\nout" % DEVICE_NODES,
    "usr": "import os\n[p for p in ('/usr/local/bin/docker', '/usr/lib/python3/dist-packages', '/bin/sh', '/home') if os.path.exists(p)]",
    # Issue 23 items 1 and 6 and the forged-frame finding, as an ordinary user too: the
    # control pipe's frames are the agent's crash, never an infra error or the next result.
    "frame_bomb": "import sys, os, struct\nbody = b'[' * 500_000\n"
                  "os.write(sys.modules['agentgym_worker'].CTRL_OUT, struct.pack('>II', len(body), 0) + body)\nimport time\ntime.sleep(0.2)",
    "forged": "import sys, json, os, struct, time\n"
              "body = json.dumps({'status': 'ok', 'value': '\\ud800forged', 'cell': 99}).encode()\n"
              "os.write(sys.modules['agentgym_worker'].CTRL_OUT, struct.pack('>II', len(body), 0) + body)\ntime.sleep(0.3)\n'real'",
    "after_forged": "'second'",
    # Without a cgroup, only the inode cap keeps empty files from filling the host's memory.
    "inodes": INODE_FLOOD % (2 * SandboxConfig().tmpfs_inodes),
    # bwrap runs as uid 0 of the user namespace that unshare makes for the mounts: without
    # --cap-drop ALL the agent's bounding set was that namespace's full set.
    "caps": "[l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]",
}


def _interpreter_for(user: str) -> str | None:
    """An interpreter of this Python version the user can run: this one, or the system's."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.path.exists(candidate) and subprocess.run(
            [shutil.which("runuser"), "-u", user, "--", candidate, "-c", "import encodings"], capture_output=True
        ).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def nonroot_user():
    if os.geteuid() != 0:
        pytest.skip("creating a user to run as needs root (run as that user, the whole suite is this test)")
    if not (shutil.which("runuser") and shutil.which("useradd")):
        pytest.skip("runuser/useradd are not installed")
    created = False
    try:
        pwd.getpwnam(NONROOT_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", NONROOT_USER], check=True, capture_output=True)
        created = True
    yield pwd.getpwnam(NONROOT_USER)
    if created and shutil.which("userdel"):
        subprocess.run(["userdel", "-r", NONROOT_USER], capture_output=True)


def test_an_ordinary_user_gets_a_working_sandbox_that_keeps_the_host_safe(nonroot_user):
    """Issue 23: as an ordinary user every start failed (PermissionError on
    /proc/self/setgroups in the zygote's child) while isolation_support() said OK."""
    python = _interpreter_for(nonroot_user.pw_name)
    if python is None:
        pytest.skip(f"no python{sys.version_info.major}.{sys.version_info.minor} that {nonroot_user.pw_name} can run")
    site_dirs = [str(PROJECT), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    devices_before = _device_stats()
    sysctls_before = _sysctl_values()
    try:
        run = subprocess.run(
            [shutil.which("runuser"), "-u", nonroot_user.pw_name, "--", python, "-I", "-c", NONROOT_SCRIPT,
             json.dumps(list(dict.fromkeys(site_dirs))), json.dumps(NONROOT_CELLS)],
            capture_output=True, text=True, timeout=240, cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": nonroot_user.pw_dir, "LANG": "C.UTF-8"},
        )
        lines = [line for line in run.stdout.splitlines() if line.startswith("REPORT ")]
        assert lines, (run.returncode, run.stdout[-2000:], run.stderr[-4000:])
        report = json.loads(lines[-1].removeprefix("REPORT "))
        assert report["uid"] == nonroot_user.pw_uid
        # What isolation_support() says agrees with what a start does.
        assert report["support"][0] is not None, report
        assert report["start"] == "ok", report
        cells = report["cells"]
        assert cells["answer"][:2] == ["ok", "42"], cells
        assert cells["pandas"][:2] == ["ok", "6"], cells
        assert cells["sysctl"][:2] == ["ok", "[]"], cells
        assert cells["devices"][:2] == ["ok", "[]"], cells
        assert cells["usr"][:2] == ["ok", "[]"], cells
        assert cells["frame_bomb"][0] in ("crash", "ok", "error"), cells
        assert cells["forged"][0] in ("crash", "ok", "error"), cells
        assert cells["after_forged"][:2] == ["ok", "'second'"], cells
        assert cells["caps"][:2] == ["ok", repr(["0000000000000000"] * 3)], cells
        # Every process in the sandbox, the supervisor and the workers' zygote included,
        # has an empty bounding set (bwrap, root of unshare's user namespace, kept it full).
        assert len(report["bounding"]) >= 3 and {b for _, b in report["bounding"]} == {"0000000000000000"}, report
        assert cells["inodes"][0] == "ok", cells
        for n, err in eval(cells["inodes"][1]).values():  # noqa: S307 - the cell's dict of tuples
            cap = SandboxConfig().tmpfs_inodes
            assert cap - INODE_SLACK <= n < cap and err == errno.ENOSPC, cells["inodes"]
        for name, uids in report["host_uids"]:
            assert set(uids) == {nonroot_user.pw_uid}, report["host_uids"]
        assert _device_stats() == devices_before
        assert _sysctl_values() == sysctls_before
    finally:
        _restore_device_times(devices_before)

