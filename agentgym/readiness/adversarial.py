"""Adversarial actions: what a policy early in training (or a hostile one) writes.

The library is built from the env's tool specs, so it fits any env: malformed calls,
calls to tools that do not exist, arguments that break the schema or are huge, and for
each tool whose parameters suggest an attack surface, inputs aimed at it — code that
loops, allocates, forks or prints without end for a ``code`` parameter (a Python
sandbox), query syntax and huge queries for a ``query`` parameter, pathological
expressions for an ``expression`` parameter.

An env must survive every one of them: the step returns an observation that tells the
agent what went wrong, the episode goes on or ends normally, and no resource leaks.
:mod:`agentgym.readiness.stress` mixes them into oracle episodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["ActionCategory", "AdversarialAction", "adversarial_actions", "CODE_ATTACKS", "BOUNDARY_ATTACKS",
           "CANARY", "CANARY_PATTERN", "MixedPolicy"]

ActionCategory = Literal["malformed", "unknown_tool", "invalid_args", "huge_args", "runaway_code",
                         "flood_output", "crash_code", "trust_boundary", "query_syntax", "pathological_input"]

# Code aimed at a Python sandbox: each must end as a status (timeout, oom, crash, error)
# without hurting the host or other episodes.
CODE_ATTACKS: dict[str, tuple[ActionCategory, str]] = {
    "busy_loop": ("runaway_code", "while True:\n    pass"),
    "sleep_forever": ("runaway_code", "import time\ntime.sleep(10**6)"),
    "allocate_forever": ("runaway_code", "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 2**20))"),
    "fork_bomb": ("runaway_code", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"),
    "thread_bomb": ("runaway_code",
                    "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()"),
    "recursion": ("runaway_code", "def f(n):\n    return f(n + 1)\nf(0)"),
    "print_huge": ("flood_output", "print('x' * 50_000_000)"),
    "print_forever": ("flood_output", "while True:\n    print('flood ' * 1000)"),
    "huge_repr": ("flood_output", "list(range(5_000_000))"),
    "stderr_flood": ("flood_output", "import sys\nfor _ in range(200_000):\n    sys.stderr.write('e' * 100)"),
    "exit_process": ("crash_code", "import os\nos._exit(3)"),
    "kill_self": ("crash_code", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
    "system_exit": ("crash_code", "raise SystemExit(1)"),
    "keyboard_interrupt": ("crash_code", "raise KeyboardInterrupt"),
    "network": ("crash_code", "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=3)"),
    "fill_disk": ("crash_code", "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 2**20)"),
}

CANARY = "__CANARY__"
"""Placeholder in :data:`BOUNDARY_ATTACKS` that the stress harness replaces with
``agentgym-canary-E<episode>``, so a canary found later names the episode that left it."""
CANARY_PATTERN = r"agentgym-canary-E(\d+)"

# Code that attacks the sandbox as a trust boundary (see "Who is at fault" in DESIGN.md):
# none of it may turn the episode into an infrastructure failure, reach the machinery,
# or leave anything the next episode can see. ``probe_leaks`` looks for what earlier
# episodes planted and prints every canary it finds.
_FIND_ROOT = (
    "import os\n"
    "def _root_pids():\n"
    "    out = []\n"
    "    for p in os.listdir('/proc'):\n"
    "        if p.isdigit() and int(p) > 1:\n"
    "            try:\n"
    "                if os.stat('/proc/' + p).st_uid != os.getuid():\n"
    "                    out.append(int(p))\n"
    "            except OSError:\n"
    "                pass\n"
    "    return out\n"
)
BOUNDARY_ATTACKS: dict[str, str] = {
    "exit_after_return": "import os, threading, time\n"
                         "threading.Thread(target=lambda: (time.sleep(0.05), os._exit(0)), daemon=True).start()",
    "signal_supervisor": _FIND_ROOT + "import signal\nfor p in _root_pids():\n"
                         "    for s in (signal.SIGSTOP, signal.SIGKILL):\n"
                         "        try:\n            os.kill(p, s)\n        except OSError:\n            pass",
    "ptrace_supervisor": _FIND_ROOT + "import ctypes\nlibc = ctypes.CDLL(None)\n"
                         "[libc.ptrace(16, p, 0, 0) for p in _root_pids()]",
    "read_supervisor_memory": _FIND_ROOT + "got = []\nfor p in _root_pids():\n"
                              "    for f in ('mem', 'environ', 'fd/0', 'fd/1'):\n"
                              "        try:\n            got.append(open(f'/proc/{p}/{f}', 'rb').read(64))\n"
                              "        except OSError:\n            pass\ngot",
    "plant_files": "import os, subprocess, sys\n"
                   "for root in ('.', '/tmp', '/dev/shm'):\n"
                   "    d = os.path.join(root, 'hide')\n"
                   "    try:\n"
                   "        os.makedirs(d, exist_ok=True)\n"
                   f"        open(os.path.join(d, 'c'), 'w').write('{CANARY}')\n"
                   "        os.chmod(d, 0)\n"
                   "    except OSError:\n"
                   "        pass\n"
                   "try:\n"
                   f"    open('/dev/mqueue/{CANARY}', 'w').close()\n"
                   "except OSError:\n    pass\n"
                   f"os.symlink('/etc/passwd', '{CANARY}.csv')\n"
                   "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], start_new_session=True)\n"
                   "os.chmod('.', 0o555)",
    "plant_ipc": "import ctypes\nlibc = ctypes.CDLL(None)\n"
                 "libc.msgget(0x5eed, 0o1600)\nlibc.semget(0x5eed, 1, 0o1600)\n"
                 "shm = libc.shmget(0x5eed, 4096, 0o1600)\nlibc.shmat.restype = ctypes.c_void_p\nlibc.shmat(shm, None, 0)",
    "huge_exception": "raise ValueError('x' * 30_000_000)",
    "forge_result": "import os, struct\nfor fd in range(3, 64):\n    try:\n"
                    "        os.write(fd, struct.pack('>II', 60_000_000, 0) + b'{' * 100)\n"
                    "    except OSError:\n        pass",
    "late_output": "import sys, threading\n"
                   "threading.Thread(target=lambda: [sys.stdout.write('{\"seq\": 1}\\n' * 1000) for _ in iter(int, 1)],"
                   " daemon=True).start()",
    "background_fork_storm": "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', "
                             "'import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass'],"
                             " start_new_session=True)",
    # Round two (issue 23): the control pipe, pipe stalls, kernel memory, a zombie leader.
    "frame_bomb": "import sys, os, struct\nbody = b'[' * 500_000\n"
                  "os.write(sys.modules['agentgym_worker'].CTRL_OUT, struct.pack('>II', len(body), 0) + body)",
    "forge_surrogate": "import sys, json, os, struct, time\n"
                       "body = json.dumps({'status': 'ok', 'value': '\\ud800forged', 'cell': 1}).encode()\n"
                       "os.write(sys.modules['agentgym_worker'].CTRL_OUT, struct.pack('>II', len(body), 0) + body)\ntime.sleep(0.2)",
    "stall_requests": "import sys, fcntl, os\nsaved = os.dup(sys.modules['agentgym_worker'].CTRL_IN)\n"
                      "fcntl.fcntl(saved, 1031, 4096)\nr, w = os.pipe()\nos.dup2(r, sys.modules['agentgym_worker'].CTRL_IN)",
    "kernel_memory": "import os, time\n"
                     "try:\n    open('/proc/self/oom_score_adj', 'w').write('0')\nexcept OSError:\n    pass\n"
                     "end = time.monotonic() + 3\nn = 0\n"
                     "for root in ('/tmp', '.', '/dev/shm'):\n"
                     "    while time.monotonic() < end:\n"
                     "        try:\n"
                     "            p = f'{root}/m{n}'\n"
                     "            os.close(os.open(p, os.O_CREAT | os.O_WRONLY))\n"
                     "            n += 1\n"
                     "            for k in range(16):\n"
                     "                os.setxattr(p, f'user.k{k}', b'v' * 65536)\n"
                     "        except OSError:\n"
                     "            break\n"
                     "n",
    "zombie_leader": "import ctypes, os, platform, threading, time\n"
                     "nr = {'x86_64': 60, 'aarch64': 93}.get(platform.machine())\n"
                     "if nr and os.fork() == 0:\n"
                     "    os.setsid()\n"
                     "    def tamper():\n"
                     "        while True:\n"
                     "            for path in ('leak.csv', '/tmp/leak.csv'):\n"
                     "                try:\n"
                     f"                    open(path, 'w').write('{CANARY}')\n"
                     "                except OSError:\n"
                     "                    pass\n"
                     "            time.sleep(0.01)\n"
                     "    threading.Thread(target=tamper).start()\n"
                     "    ctypes.CDLL(None).syscall(nr, 0)\n"
                     "time.sleep(0.1)",
    # Round four: what attaches to the workdir itself, FIFOs where transfers write, and
    # host-wide tables and per-user limits held between cells.
    "attach_to_workdir": "import os\n"
                         "for root in ('.', '/tmp', '/dev/shm'):\n"
                         "    try:\n"
                         f"        os.setxattr(root, 'user.note', b'{CANARY}')\n"
                         "        os.setxattr(root, 'system.posix_acl_default', bytes.fromhex("
                         "'0200000001000000ffffffff04000000ffffffff10000000ffffffff20000000ffffffff'))\n"
                         "    except OSError:\n"
                         "        pass",
    "plant_fifos": "import glob, os\n"
                   "for name in [p + '.agentgym-upload' for p in glob.glob('*')] + ['data.csv.agentgym-upload']:\n"
                   "    try:\n        os.mkfifo(name)\n    except OSError:\n        pass",
    "hold_host_tables": "import ctypes, fcntl, os, platform\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                        "held = globals().setdefault('held', [])\n"
                        "if platform.machine() == 'x86_64':\n"
                        "    for _ in range(64):\n"
                        "        ctx = ctypes.c_ulong(0)\n"
                        "        if libc.syscall(206, 1024, ctypes.byref(ctx)) != 0:\n"
                        "            break\n"
                        "        held.append(ctx)\n"
                        "for _ in range(256):\n"
                        "    fd = libc.inotify_init1(0)\n"
                        "    if fd < 0:\n        break\n"
                        "    held.append(fd)\n"
                        "for _ in range(80):\n"
                        "    try:\n"
                        "        r, w = os.pipe()\n        held += [r, w]\n        fcntl.fcntl(w, 1031, 1 << 20)\n"
                        "    except OSError:\n        break",
    "probe_leaks": "import os, re\nfound = set()\n"
                   f"pattern = re.compile({CANARY_PATTERN!r})\n"
                   "for root in ('.', '/tmp', '/dev/shm', '/dev/mqueue'):\n"
                   "    for top, dirs, files in os.walk(root):\n"
                   "        for f in files + dirs:\n"
                   "            path = os.path.join(top, f)\n"
                   "            found.update(pattern.findall(f))\n"
                   "            try:\n"
                   "                if os.path.isfile(path) and not os.path.islink(path):\n"
                   "                    found.update(pattern.findall(open(path, errors='replace').read(4096)))\n"
                   "            except OSError:\n"
                   "                pass\n"
                   "for root in ('.', '/tmp', '/dev/shm'):\n"
                   "    try:\n"
                   "        for attr in os.listxattr(root):\n"
                   "            found.update(pattern.findall(os.getxattr(root, attr).decode(errors='replace')))\n"
                   "    except OSError:\n"
                   "        pass\n"
                   "for kind in ('msg', 'sem', 'shm'):\n"
                   "    if open('/proc/sysvipc/' + kind).read().count('\\n') > 1:\n"
                   "        found.add('sysv-' + kind)\n"
                   "print('LEAKS', sorted(found))",
}

QUERY_ATTACKS: dict[str, str] = {
    "empty_query": "",
    "query_syntax": 'title:( AND OR NOT "unbalanced ~ ^ * [ { \\',
    "wildcards": "* ? *a* ~~~~ ^^^",
    "unicode_noise": "\u202e\u200b\ufeff\U0001f600 \x00 \ud7ff",
    "many_terms": " ".join(f"term{i}" for i in range(2000)),
}

EXPRESSION_ATTACKS: dict[str, str] = {
    "power_tower": "9**9**9**9",
    "deep_parens": "(" * 5000 + "1" + ")" * 5000,
    "dunder": "__import__('os').system('true')",
    "division_by_zero": "1/0",
}


@dataclass(frozen=True)
class AdversarialAction:
    """One adversarial action (the whole text of a turn)."""

    name: str
    category: ActionCategory
    text: str


def _call(name: str, arguments: Any, parser: str, tag_params: dict[str, str]) -> str | None:
    if parser == "tags":
        if isinstance(arguments, dict) and len(arguments) == 1:
            (param, value), = arguments.items()
            if tag_params.get(name) == param and isinstance(value, str):
                return f"<{name}>{value}</{name}>"
        return None
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def _malformed(parser: str) -> list[AdversarialAction]:
    out = [
        AdversarialAction("empty", "malformed", ""),
        AdversarialAction("prose", "malformed", "I think I should search for it. Let me think about it more."),
        AdversarialAction("bad_json", "malformed", "<tool_call>{not json at all</tool_call>"),
        AdversarialAction("unclosed", "malformed", '<tool_call>{"name": "answer", "arguments": {"answer": '),
        AdversarialAction("json_array", "malformed", "<tool_call>[1, 2, 3]</tool_call>"),
        AdversarialAction("no_name", "malformed", '<tool_call>{"arguments": {}}</tool_call>'),
        AdversarialAction("args_not_object", "malformed", '<tool_call>{"name": "answer", "arguments": [1]}</tool_call>'),
        AdversarialAction("deep_nesting", "malformed", "<tool_call>" + "[" * 20000 + "</tool_call>"),
        AdversarialAction("control_chars", "malformed", "\x00\x01\x02<tool_call>\x7f\x1b[31m</tool_call>"),
        AdversarialAction("huge_action", "malformed", "y" * 2_000_000),
    ]
    if parser == "tags":
        out += [AdversarialAction("empty_tags", "malformed", "<search></search><answer>  </answer>"),
                AdversarialAction("unclosed_tag", "malformed", "<search>unfinished query")]
    return out


def adversarial_actions(tool_specs: list[dict[str, Any]], parser: str = "hermes", *,
                        tag_params: dict[str, str] | None = None, max_action_chars: int = 32_768,
                        include: frozenset[str] | None = None, exclude: frozenset[str] = frozenset()) -> list[AdversarialAction]:
    """The adversarial actions for an env with these tools (``info["tools"]`` of a reset).

    Args:
        parser: ``"hermes"`` or ``"tags"`` (the env's ``parser.name``).
        tag_params: the tag parser's tag -> parameter map (default Search-R1's tags).
        max_action_chars: the env's limit; "huge" arguments are sized just under it so
            they reach the tool instead of being cut by the env.
        include, exclude: keep only / drop actions by name (e.g. drop ``fork_bomb`` where
            the sandbox cannot bound processes).
    """
    tag_params = tag_params or {"search": "query", "python": "code", "answer": "answer"}
    actions = _malformed(parser)
    huge = "A" * max(64, max_action_chars - 400)
    for spec in tool_specs:
        fn = spec["function"]
        name, props = fn["name"], fn["parameters"].get("properties", {})
        strings = [p for p, s in props.items() if "string" in _types(s)]
        candidates: list[tuple[str, ActionCategory, Any]] = [
            (f"{name}:no_args", "invalid_args", {}),
            (f"{name}:extra_arg", "invalid_args", {**{p: "x" for p in strings}, "__proto__": 1}),
        ]
        if strings:
            candidates.append((f"{name}:wrong_type", "invalid_args", {strings[0]: 12345}))
            candidates.append((f"{name}:huge_arg", "huge_args", {strings[0]: huge}))
        code_attacks = {**CODE_ATTACKS, **{k: ("trust_boundary", v) for k, v in BOUNDARY_ATTACKS.items()}}
        attack_sets = (("code", code_attacks), ("query", {k: ("query_syntax", v) for k, v in QUERY_ATTACKS.items()}),
                       ("expression", {k: ("pathological_input", v) for k, v in EXPRESSION_ATTACKS.items()}))
        for param, attacks in attack_sets:
            if param in strings:
                for key, (category, value) in attacks.items():
                    candidates.append((f"{name}:{key}", category, {param: value}))
        for action_name, category, args in candidates:
            text = _call(name, args, parser, tag_params)
            if text is not None:
                actions.append(AdversarialAction(action_name, category, text))
    for unknown in ("rm_rf", "__import__", "x" * 5000):
        text = _call(unknown, {}, "hermes", tag_params) if parser == "hermes" else f"<{unknown[:40]}>x</{unknown[:40]}>"
        actions.append(AdversarialAction(f"unknown_tool:{unknown[:12]}", "unknown_tool", text))
    if include is not None:
        actions = [a for a in actions if a.name.split(":")[-1] in include or a.name in include]
    return [a for a in actions if a.name.split(":")[-1] not in exclude and a.name not in exclude]


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


class MixedPolicy:
    """The oracle, except that each turn is adversarial with probability ``rate``.

    Deterministic per episode: the caller passes the episode's generator to
    :meth:`choose`. Adversarial turns use up the turn budget, so episodes with many of
    them may end truncated; that is expected and reported, not a failure.
    """

    def __init__(self, actions: list[AdversarialAction], rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"Expected an adversarial rate in [0, 1], actual value: {rate}")
        if rate > 0 and not actions:
            raise ValueError("Expected at least one adversarial action when rate > 0")
        self.actions = actions
        self.rate = rate

    def choose(self, rng: np.random.Generator) -> AdversarialAction | None:
        """An adversarial action for this turn, or ``None`` for the oracle's."""
        if self.rate <= 0 or rng.random() >= self.rate:
            return None
        return self.actions[int(rng.integers(len(self.actions)))]
