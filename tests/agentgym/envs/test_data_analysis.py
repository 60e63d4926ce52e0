"""DataAnalysis-v1 through a real sandbox: ProcessSandbox here, Docker under the marker."""

from __future__ import annotations

import json
import re
import time

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs.data_analysis import DataAnalysisEnv
from agentgym.errors import ConfigError
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes
from sandboxes.errors import SandboxCrashedError
from tasks.data_analysis.tiers import TEMPLATES

ENV_ID = "agentgym/DataAnalysis-v1"


# the process backend (unit tests need no Docker), and no pool left after the module
pytestmark = pytest.mark.usefixtures("process_sandbox", "close_pools_after_module")


@pytest.fixture
def env():
    e = gym.make(ENV_ID)
    yield e.unwrapped
    e.close()


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def oracle_episode(env: DataAnalysisEnv, seed: int) -> dict:
    env.reset(seed=seed)
    for _ in range(env.max_turns):
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            return info
    raise AssertionError("oracle did not finish")


def _assert_oracle_solves(report, **expected_info):
    assert report.lost == [] and report.infra_failed == 0
    failures = [(e.task_id, e.info.get("score_reason")) for e in report.episodes if not e.success]
    assert failures == []
    for key, value in expected_info.items():
        assert {e.info[key] for e in report.episodes} == {value}


@pytest.mark.parametrize("tier", [1, 2, 3, 4])
def test_oracle_solves_every_tier_through_process_sandbox(tier):
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=1000 * tier,
                          env_kwargs={"tier": tier})
    _assert_oracle_solves(report, tier=tier)


@pytest.mark.parametrize("template", [t.id for t in TEMPLATES])
def test_oracle_solves_every_template_through_process_sandbox(template):
    report = run_episodes(ENV_ID, oracle_policy, episodes=4, concurrency=2, seed=77,
                          env_kwargs={"template": template})
    _assert_oracle_solves(report, template=template)


def test_first_observation_lists_files_columns_and_rows(env):
    obs, info = env.reset(seed=5)
    q = env.task.question
    for f in q.file_info:
        assert f.name in obs and f"({f.rows} rows)" in obs
        assert ", ".join(f.columns) in obs
    assert q.text in obs
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ["python", "answer"]
    answer_params = info["tools"][1]["function"]["parameters"]
    assert answer_params == q.schema.json_schema()


def test_reset_is_deterministic_and_task_id_replays(env):
    obs1, info1 = env.reset(seed=42)
    obs2, info2 = env.reset(seed=42)
    assert obs1 == obs2 and info1["task_id"] == info2["task_id"]
    truth = env.task.question.truth
    obs3, _ = env.reset(options={"task_id": info1["task_id"]})
    assert obs3 == obs1 and env.task.question.truth == truth
    with pytest.raises(ConfigError):
        env.reset(options={"task_id": "nonsense"})


def test_only_the_data_files_reach_the_sandbox(env):
    env.reset(seed=3)
    obs, *_ = env.step(call("python", code="import os\nprint(sorted(os.listdir('.')))"))
    assert obs.count(".csv") == len(env.task.question.files)
    for name in env.task.question.files:
        assert name in obs


def test_state_persists_across_turns_and_code_errors_are_agent_errors(env):
    env.reset(seed=4)
    env.step(call("python", code="x = 41"))
    obs, *_ = env.step(call("python", code="x + 1"))
    assert "Out: 42" in obs
    obs, reward, terminated, truncated, info = env.step(call("python", code="1/0"))
    assert "ZeroDivisionError" in obs and not (terminated or truncated)
    assert info["tool_results"][0]["status"] == "agent_error"


def test_a_library_error_shows_the_agents_frames_and_the_exception_not_the_librarys_frames(env):
    """A wrong file name raises through pandas' frames (about 1,100 characters that a
    1,024-token context could not hold); the agent sees its own line, a count of the
    hidden frames and the exception, and the error is still its own."""
    env.reset(seed=4)
    obs, *_, info = env.step(call("python", code="import pandas as pd\nx = 1\ndf = pd.read_csv('no_such_file.csv')"))
    assert info["tool_results"][0]["status"] == "agent_error"
    assert "FileNotFoundError" in obs and "df = pd.read_csv('no_such_file.csv')" in obs and re.search(r'File "<cell-\d+>", line 3', obs)
    assert "pandas/" not in obs and re.search(r"\[\d+ library frames? hidden\]", obs)
    assert len(obs) < 500
    obs, *_ = env.step(call("python", code="def f(d):\n    return d['a']\nf({})"))  # only the agent's frames: all kept
    assert len(re.findall(r'File "<cell-\d+>"', obs)) == 2 and "hidden" not in obs and "KeyError: 'a'" in obs


def test_name_hints_list_the_directory_under_a_missing_file_or_column_and_nowhere_else():
    """With ``name_hints`` a wrong file or column name is followed by the prompt's own
    listing (what a fix must copy); any other error, a good cell, and an env without
    the kwarg show none. The listing is the prompt's, so it adds nothing about the answer."""
    on = gym.make(ENV_ID, tier=1, name_hints=True)
    try:
        first, _ = on.reset(seed=4)
        listing = first.split("Files in your working directory:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        assert listing.startswith("- ") and ".csv" in listing
        column = re.search(r"\.csv \(\d+ rows\): ([^,\n]+)", listing).group(1)
        for code in ("import pandas as pd\npd.read_csv('no_such_file.csv')",
                     f"import pandas as pd, os\npd.read_csv(os.listdir('.')[0])['{column}_nope']"):
            obs, *_, info = on.step(call("python", code=code))
            assert info["tool_results"][0]["status"] == "agent_error"
            hint = "Files in your working directory:]\n" + listing + "\n</tool_response>"
            assert hint in obs and obs.index("Error") < obs.index(hint), obs
        for code in ("1/0", "x = 1"):
            obs, *_ = on.step(call("python", code=code))
            assert listing not in obs
        assert on.unwrapped.fingerprint.fields["name_hints"] is True
    finally:
        on.close()
    off = gym.make(ENV_ID, tier=1)
    try:
        off.reset(seed=4)
        obs, *_ = off.step(call("python", code="import pandas as pd\npd.read_csv('no_such_file.csv')"))
        assert "FileNotFoundError" in obs and "[hint" not in obs
        assert "name_hints" not in off.unwrapped.fingerprint.fields
    finally:
        off.close()
    with pytest.raises(ConfigError, match="name_hints"):
        DataAnalysisEnv(name_hints="yes")


@pytest.mark.parametrize("stderr, expected", [
    ("", ""),
    ("a warning\n", "a warning\n"),
    ('Traceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n    f()\n'
     '  File "/lib/x.py", line 9, in f\n    g()\n    ^^^\n  File "/lib/y.py", line 2, in g\n    raise E\nE: boom\n',
     'Traceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n    f()\n'
     '  [2 library frames hidden]\nE: boom\n'),
    ('note\nTraceback (most recent call last):\n  File "/lib/a.py", line 1, in a\n    x\nKeyError: 1\n\n'
     'The above exception was the direct cause of the following exception:\n\n'
     'Traceback (most recent call last):\n  File "<cell-2>", line 2\n    df[\n      ^\nSyntaxError: bad\n    more\n',
     'note\nTraceback (most recent call last):\n  [1 library frame hidden]\nKeyError: 1\n\n'
     'The above exception was the direct cause of the following exception:\n\n'
     'Traceback (most recent call last):\n  File "<cell-2>", line 2\n    df[\n      ^\nSyntaxError: bad\n    more\n'),
])
def test_agent_traceback_keeps_cell_frames_and_counts_the_rest(stderr, expected):
    from agentgym.envs.data_analysis import agent_traceback

    assert agent_traceback(stderr) == expected


def test_wrong_and_malformed_answers(env):
    env.reset(seed=7)
    q = env.task.question
    extra = dict(q.schema.json_schema()["properties"])
    bad_keys = {k: 0 for k in extra} | {"also": 1}
    _, reward, terminated, _, info = env.step(call("answer", **bad_keys))
    assert not terminated and info["tool_results"][0]["status"] == "invalid_args"
    wrong = {"int": 10**9, "float": 1e12, "str": "definitely not", "list": ["zz_none"]}
    if q.schema.kind == "fields":
        args = {f.name: wrong[f.kind] for f in q.schema.fields}
    else:
        args = {"value": wrong[q.schema.kind]}
    _, reward, terminated, _, info = env.step(call("answer", **args))
    assert terminated and reward == 0.0 and info["success"] is False


def test_duplicate_keys_in_the_answer_call_score_zero(env):
    env.reset(seed=8, options=None)
    q = env.task.question
    args = json.dumps({"value": q.truth}) if q.schema.kind != "fields" else json.dumps(q.truth)
    first_key = q.schema.keys()[0]
    dup = args[:-1] + f', "{first_key}": ' + json.dumps(args and json.loads(args)[first_key]) + "}"
    text = '<tool_call>{"name": "answer", "arguments": ' + dup + "}</tool_call>"
    obs, reward, terminated, _, info = env.step(text)
    assert not terminated and reward == 0.0 and "more than once" in obs
    assert info["tool_results"][0]["status"] == "parse_error"


def test_the_truth_scores_one(env):
    env.reset(seed=8)
    q = env.task.question
    args = {"value": q.truth} if q.schema.kind != "fields" else dict(q.truth)
    _, reward, terminated, _, info = env.step(call("answer", **args))
    assert terminated and reward == 1.0 and info["correct_fraction"] == 1.0


async def _dead(code, timeout=None):
    raise SandboxCrashedError("container vanished")


def test_sandbox_failures_flag_the_episode_instead_of_scoring_it(env, monkeypatch):
    env.reset(seed=9)
    monkeypatch.setattr(env.family.sandbox, "run", _dead)  # the lease is real; only its run fails
    _, reward, terminated, truncated, info = env.step(call("python", code="1"))
    assert truncated and not terminated and reward == 0.0
    assert info["infra_failed"] is True and info["tool_results"][0]["status"] == "infra_error"
    env.reset(seed=10)  # the next episode gets a working sandbox
    obs, *_ = env.step(call("python", code="6 * 7"))
    assert "Out: 42" in obs


def test_an_interpreter_ended_by_its_own_thread_between_calls_is_the_agents_outcome(env):
    """A daemon thread that exits the interpreter after its cell returned: the next call
    finds a fresh interpreter, says so, and the episode is scored like any other."""
    env.reset(seed=9)
    env.step(call("python", code="import os, threading, time\nx = 1\n"
                  "threading.Thread(target=lambda: (time.sleep(0.2), os._exit(0)), daemon=True).start()"))
    time.sleep(0.6)
    obs, reward, terminated, truncated, info = env.step(call("python", code="6 * 7"))
    assert not info["infra_failed"] and not truncated
    assert info["tool_results"][0]["status"] == "ok"
    assert "Out: 42" in obs and "restarted" in obs and "exited between calls" in obs


def test_agent_code_that_kills_its_interpreter_is_an_agent_error(env):
    """Crashing one's own sandbox must not turn a bad episode into a dropped one."""
    env.reset(seed=11)
    env.step(call("python", code="x = 41"))
    obs, reward, terminated, truncated, info = env.step(call("python", code="import os; os._exit(3)"))
    assert info["infra_failed"] is False and info["tool_results"][0]["status"] == "agent_error"
    assert "restarted" in obs and not truncated
    obs, *_ = env.step(call("python", code="6 * 7"))  # the episode goes on with a fresh interpreter
    assert "Out: 42" in obs


def test_code_past_its_deadline_is_a_timeout_and_the_episode_goes_on():
    e = gym.make(ENV_ID, python_timeout_s=1.0).unwrapped
    try:
        e.reset(seed=12)
        obs, _, terminated, truncated, info = e.step(call("python", code="while True: pass"))
        assert info["tool_results"][0]["status"] == "timeout" and not info["infra_failed"]
        assert not (terminated or truncated)
        obs, *_ = e.step(call("python", code="6 * 7"))
        assert "Out: 42" in obs
    finally:
        e.close()


def test_fingerprint_records_sandbox_versions_and_manifest(env):
    fields = env.fingerprint.fields
    assert fields["sandbox"]["backend"] == "process"
    assert {"pandas", "numpy"} <= set(fields["sandbox"]["versions"])
    assert len(fields["manifest_sha256"]) == 64
    assert fields["observation"].startswith("tracebacks:")  # how errors are rendered is part of what the agent sees
    other = DataAnalysisEnv(tier=2)
    assert str(other.fingerprint) != str(env.fingerprint)


def test_constructor_validates():
    with pytest.raises(ConfigError):
        DataAnalysisEnv(tier=5)
    with pytest.raises(ConfigError):
        DataAnalysisEnv(template="no_such_template")


@pytest.mark.docker
@pytest.mark.parametrize("tier", [1, 2, 3, 4])
def test_oracle_through_docker_sandboxes(tier, monkeypatch):
    """The sandbox image's pandas/numpy differ from the host's: the oracle must still win."""
    monkeypatch.delenv("AGENTGYM_SANDBOX", raising=False)
    report = run_episodes(ENV_ID, oracle_policy, episodes=16, concurrency=8, seed=5000 * tier,
                          env_kwargs={"tier": tier, "backend": "docker"})
    _assert_oracle_solves(report, tier=tier)
    env = gym.make(ENV_ID, backend="docker").unwrapped
    facts = env.fingerprint.fields["sandbox"]
    assert facts["backend"] == "docker" and {"pandas", "numpy"} <= set(facts["versions"])


@pytest.mark.docker
@pytest.mark.parametrize("template", [t.id for t in TEMPLATES])
def test_oracle_through_docker_sandboxes_per_template(template, monkeypatch):
    monkeypatch.delenv("AGENTGYM_SANDBOX", raising=False)
    report = run_episodes(ENV_ID, oracle_policy, episodes=3, concurrency=3, seed=91,
                          env_kwargs={"template": template, "backend": "docker"})
    _assert_oracle_solves(report, template=template)


_SIGTERM_HOLDER = """
import sys, time
import gymnasium as gym, agentgym
env = gym.make("agentgym/DataAnalysis-v1", backend="docker")
env.reset(seed=1)  # the pool and its container start on the runtime thread
print("READY", flush=True)
time.sleep(600)
"""


@pytest.mark.docker
def test_sigterm_of_a_process_using_the_env_leaves_no_container(monkeypatch):
    """Pools start on the runtime thread, but SIGTERM clean-up must still be installed."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    import docker

    monkeypatch.delenv("AGENTGYM_SANDBOX", raising=False)
    client = docker.from_env()
    holder = subprocess.Popen([sys.executable, "-c", _SIGTERM_HOLDER], stdout=subprocess.PIPE, text=True)

    def owned():
        prefix = f"{socket.gethostname()}:{holder.pid}:"
        # ignore_removed: other processes' containers come and go meanwhile (issue 29)
        return [c for c in client.containers.list(all=True, filters={"label": "agentgym.owner"}, ignore_removed=True)
                if c.labels["agentgym.owner"].startswith(prefix)]

    try:
        assert holder.stdout.readline().strip() == "READY"
        assert owned(), "the holder should own at least one container"
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=60)
        deadline = time.monotonic() + 20
        while owned() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert owned() == []
    finally:
        if holder.poll() is None:
            holder.kill()
        for c in owned():
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass  # gone meanwhile: removed
