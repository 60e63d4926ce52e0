"""DataAnalysis-v2 through a real sandbox: ProcessSandbox here, Docker under the marker."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.envs.data_analysis_v2 import DataAnalysisV2Env
from agentgym.errors import ConfigError
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes
from tasks.data_analysis.splits import HELD_TABLES, HELD_TEMPLATES

ENV_ID = "agentgym/DataAnalysis-v2"


# the process backend (unit tests need no Docker), and no pool left after the module
pytestmark = pytest.mark.usefixtures("process_sandbox", "close_pools_after_module")


def _assert_oracle_solves(report):
    assert report.lost == [] and report.infra_failed == 0
    assert [(e.task_id, e.info.get("score_reason")) for e in report.episodes if not e.success] == []


def _assert_questions_unchanged(kwargs, split, absent=None):
    """A training augmentation (``kwargs``) leaves ``split``'s questions (text and files)
    as they are without it, and its ``absent`` field out of that env's fingerprint."""
    plain, augmented = (gym.make(ENV_ID, **{**kw, "split": split}).unwrapped for kw in ({}, kwargs))
    try:
        plain.reset(seed=5)
        augmented.reset(seed=5)
        assert augmented.task.question.text == plain.task.question.text
        assert augmented.task.question.files == plain.task.question.files
        assert absent is None or absent not in augmented.fingerprint.fields
    finally:
        plain.close()
        augmented.close()


def _matches_and_replay(env, pattern):
    """``pattern``'s groups in the questions of seeds 0-11 (where it matches), after
    checking that the last question's task id draws that question again."""
    import re

    found, info = [], {}
    for seed in range(12):
        _, info = env.reset(seed=seed)
        match = re.search(pattern, env.task.question.text)
        if match:
            found.append(match.groups())
    text = env.task.question.text
    env.reset(options={"task_id": info["task_id"]})
    assert env.task.question.text == text
    return found


def _assert_refused_out_of_range_or_without_invent_names(name):
    """An ``invent_*`` option that needs ``invent_names`` is refused without it, above 1
    and as a bool, each a ``ConfigError`` naming the key at fault."""
    for bad, match in (({name: 0.5}, "invent_names"),
                       ({"invent_names": 1.0, name: 1.5}, name),
                       ({"invent_names": 1.0, name: True}, name)):
        with pytest.raises(ConfigError, match=match):
            DataAnalysisV2Env(**bad)


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_oracle_solves_each_split_through_process_sandbox(split):
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7,
                          env_kwargs={"split": split})
    _assert_oracle_solves(report)
    assert {e.task_id.split("-")[1] for e in report.episodes} == {split}


def test_new_task_honours_the_split_and_task_ids_replay():
    env = gym.make(ENV_ID, split="test").unwrapped
    try:
        _, info = env.reset(seed=3)
        task_id = info["task_id"]
        assert task_id.startswith("da2-test-")
        files = set(env.task.question.files)
        text = env.task.question.text
        env.reset(options={"task_id": task_id})
        assert env.task.question.text == text and set(env.task.question.files) == files
    finally:
        env.close()
    train_env = gym.make(ENV_ID, split="train").unwrapped
    try:
        with pytest.raises(ConfigError):  # a test task cannot be replayed in a train env
            train_env.reset(options={"task_id": task_id})
    finally:
        train_env.close()


def test_fingerprint_shows_the_splits_held_out_parts():
    test_env, val_env = DataAnalysisV2Env(split="test"), DataAnalysisV2Env(split="validation")
    fields = test_env.fingerprint.fields
    assert fields["task_source"] == "tasks.data_analysis/v2"
    assert fields["split"]["held_out_tables"] == list(HELD_TABLES["test"])
    assert fields["split"]["held_out_templates"] == list(HELD_TEMPLATES["test"])
    assert str(test_env.fingerprint) != str(val_env.fingerprint)


def test_constructor_validates():
    with pytest.raises(ConfigError):
        DataAnalysisV2Env(template="no_such_template")
    with pytest.raises(ConfigError):  # held out for validation, so not a test template
        DataAnalysisV2Env(split="test", template=HELD_TEMPLATES["validation"][0])
    with pytest.raises(ConfigError):  # a stocks-only train template has no test question
        DataAnalysisV2Env(split="test", template="t3_yearly_change")


def test_v1_stays_registered_beside_v2():
    assert {"agentgym/DataAnalysis-v1", ENV_ID} <= set(gym.registry)


@pytest.mark.docker
@pytest.mark.parametrize("split", ["validation", "test"])
def test_oracle_through_docker_sandboxes(split, monkeypatch):
    """The sandbox image's pandas/numpy differ from the host's: the oracle must still win
    under v2's half-a-unit tolerance."""
    monkeypatch.delenv("AGENTGYM_SANDBOX", raising=False)
    report = run_episodes(ENV_ID, oracle_policy, episodes=40, concurrency=8, seed=11,
                          env_kwargs={"split": split, "backend": "docker"})
    _assert_oracle_solves(report)


def test_invent_names_renames_train_questions_only_and_the_oracle_still_solves_them():
    """``invent_names`` is a training augmentation: train questions name made-up files and
    columns (so a policy must copy names, not recall them); validation and test questions
    are the measurement and never change."""
    from tasks.data_analysis.tables import TABLES

    env = gym.make(ENV_ID, split="train", invent_names=1.0).unwrapped
    try:
        _, info = env.reset(seed=5)
        files = list(env.task.question.files)
        assert files and all(f.rsplit(".", 1)[0] not in TABLES for f in files)
        assert all(f in env.task.question.text for f in files)
        task_id = info["task_id"]
        env.reset(options={"task_id": task_id})  # replays to the same made-up names
        assert list(env.task.question.files) == files
    finally:
        env.close()
    for split in ("validation", "test"):
        _assert_questions_unchanged({"invent_names": 1.0}, split)
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7,
                          env_kwargs={"split": "train", "invent_names": 1.0})
    _assert_oracle_solves(report)
    with pytest.raises(ConfigError, match="invent_names"):
        DataAnalysisV2Env(invent_names=2.0)


def test_train_part_draws_train_questions_from_its_own_tables_only_and_is_in_the_fingerprint():
    """``train_part`` splits the train *tables* (SFT on part 0, RL on part 1: RL's tables are
    new to the policy, as the test split's are). Validation and test stay whole."""
    from agentgym import fingerprint_diff
    from tasks.data_analysis.splits import train_part_tables

    seen = []
    for k in (0, 1):
        env = gym.make(ENV_ID, split="train", tier=1, train_part=[k, 2]).unwrapped
        try:
            files = set()
            for seed in range(10):
                env.reset(seed=seed)
                files |= {f.removesuffix(".csv") for f in env.task.question.files}
            assert files <= set(train_part_tables(k, 2))
            seen.append(files)
        finally:
            env.close()
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    whole, part = DataAnalysisV2Env(tier=1), DataAnalysisV2Env(tier=1, train_part=[1, 2])
    assert fingerprint_diff(whole, part) == {"train_part": (None, [1, 2]),
                                             "train_part_tables": (None, list(train_part_tables(1, 2)))}
    for split in ("validation", "test"):
        _assert_questions_unchanged({"train_part": [1, 2]}, split, absent="train_part")
    report = run_episodes(ENV_ID, oracle_policy, episodes=8, concurrency=2, seed=7,
                          env_kwargs={"split": "train", "train_part": [1, 2], "invent_names": 1.0})
    _assert_oracle_solves(report)
    for bad in ([2, 2], [0], "0/2", [True, 2]):
        with pytest.raises(ConfigError, match="train_part"):
            DataAnalysisV2Env(train_part=bad)


def test_invent_spelled_spells_train_names_with_the_pieces_and_is_in_the_fingerprint():
    """``invent_spelled`` spells made-up train names with ``name_pieces`` (a tokenizer's
    letter tokens), so every piece a held-out name holds occurs in some training name; the
    oracle still solves them, a task id replays to the same names, the pieces are in the
    fingerprint (train and eval envs must not mix spellings unnoticed), and test
    questions never change."""
    import re

    pieces = ["ps", "qu", "x"]
    kw = {"split": "train", "invent_names": 1.0, "invent_spelled": 1.0, "name_pieces": pieces}
    env = gym.make(ENV_ID, **kw).unwrapped
    syllables = gym.make(ENV_ID, split="train", invent_names=1.0).unwrapped
    try:
        _, info = env.reset(seed=5)
        stems = [f.rsplit(".", 1)[0] for f in env.task.question.files]
        assert stems and all(re.fullmatch(r"(?:(?:ps|qu|x)+|[^a-z]+)+", s.lower()) for s in stems), stems
        env.reset(options={"task_id": info["task_id"]})
        assert [f.rsplit(".", 1)[0] for f in env.task.question.files] == stems
        fields, plain = env.fingerprint.fields, syllables.fingerprint.fields
        assert fields["invent_spelled"] == 1.0 and fields["name_pieces"].startswith("3:")
        assert "name_pieces" not in plain and env.fingerprint.digest != syllables.fingerprint.digest
    finally:
        env.close()
        syllables.close()
    _assert_questions_unchanged(kw, "test", absent="name_pieces")
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7, env_kwargs=kw)
    _assert_oracle_solves(report)
    for bad, match in (({"invent_spelled": 0.5}, "invent_names"),
                       ({"invent_names": 1.0, "invent_spelled": 0.5}, "name pieces"),
                       ({"invent_names": 1.0, "invent_spelled": 0.5, "name_pieces": ["Qu"]}, "name pieces"),
                       ({"invent_names": 1.0, "invent_spelled": True, "name_pieces": pieces}, "invent_spelled")):
        with pytest.raises(ConfigError, match=match):
            DataAnalysisV2Env(**bad)


def test_invent_related_names_train_files_after_their_own_columns_and_is_in_the_fingerprint():
    """``invent_related`` builds made-up train stems from one of the question's own columns
    (``statecrime.csv`` holds ``state``), so a policy must tell a file from a column that
    starts it, as on held-out tables; the oracle still solves them, a task id replays,
    the fingerprint says so, and test questions never change."""
    import re

    kw = {"split": "train", "invent_names": 1.0, "invent_related": 1.0}
    env = gym.make(ENV_ID, **kw).unwrapped
    plain = gym.make(ENV_ID, split="train", invent_names=1.0).unwrapped
    try:
        related = 0
        for seed in range(8):
            _, info = env.reset(seed=seed)
            q = env.task.question
            columns = {re.sub(r"[^a-z0-9]+", "_", c.lower()).strip("_") for f in q.file_info for c in f.columns}
            related += any(w and w in f.rsplit(".", 1)[0] for f in q.files for w in columns)
            assert all(f in q.text for f in q.files)
        assert related == 8
        stems = list(env.task.question.files)
        env.reset(options={"task_id": info["task_id"]})
        assert list(env.task.question.files) == stems
        assert env.fingerprint.fields["invent_related"] == 1.0 and "invent_related" not in plain.fingerprint.fields
    finally:
        env.close()
        plain.close()
    _assert_questions_unchanged(kw, "test", absent="invent_related")
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7, env_kwargs=kw)
    _assert_oracle_solves(report)
    _assert_refused_out_of_range_or_without_invent_names("invent_related")


def test_invent_values_makes_up_train_levels_and_is_in_the_fingerprint():
    """``invent_values`` makes up an invented train table's levels and entity names and the
    level its question quotes, so a policy must copy a level, as on held-out tables (the
    tiny model wrote ``== 1957``, a train table's year, for ``'cultivar_1'``); the oracle
    still solves them, a task id replays, the fingerprint says so, test questions never
    change, and it needs ``invent_names``."""
    from tasks.data_analysis.tables import TABLES, load_table

    kw = {"split": "train", "tier": 1, "template": "v2_count_level", "invent_names": 1.0, "invent_values": 1.0}
    env = gym.make(ENV_ID, **kw).unwrapped
    plain = gym.make(ENV_ID, split="train", tier=1, invent_names=1.0).unwrapped
    real = {v for spec in TABLES.values() for c in (*spec.category, spec.entity) if c
            for v in load_table(spec.name)[c] if isinstance(v, str)}
    try:
        quoted = [level for (level,) in _matches_and_replay(env, r"equal to '([^']*)'\?")]
        assert len(quoted) >= 4 and not set(quoted) & real, quoted
        assert env.fingerprint.fields["invent_values"] == 1.0 and "invent_values" not in plain.fingerprint.fields
    finally:
        env.close()
        plain.close()
    for split in ("validation", "test"):
        _assert_questions_unchanged({"invent_names": 1.0, "invent_values": 1.0}, split, absent="invent_values")
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7,
                          env_kwargs={"split": "train", "tier": 1, "invent_names": 1.0, "invent_values": 1.0})
    _assert_oracle_solves(report)
    _assert_refused_out_of_range_or_without_invent_names("invent_values")


def test_invent_column_levels_names_train_levels_after_their_column_and_is_in_the_fingerprint():
    """``invent_column_levels`` names an invented train table's category levels after
    their made-up column (``<column>_1``, as wine's ``cultivar_1``), so a policy must tell
    the level from the column the question quotes before it (the tiny model wrote
    ``value = 'cultivar'``); the oracle still solves them, a task id replays, the
    fingerprint says so, validation and test never change, and it needs ``invent_values``."""
    import re

    kw = {"split": "train", "tier": 1, "template": "v2_count_level", "invent_names": 1.0, "invent_values": 1.0,
          "invent_column_levels": 1.0}
    env = gym.make(ENV_ID, **kw).unwrapped
    plain = gym.make(ENV_ID, split="train", tier=1, invent_names=1.0, invent_values=1.0).unwrapped
    try:
        pairs = _matches_and_replay(env, r"have '([^']*)' equal to '([^']*)'\?")
        named = [(c, v) for c, v in pairs if re.fullmatch(re.escape(c) + r"_\d+", v)]
        assert len(named) >= 4, pairs
        assert env.fingerprint.fields["invent_column_levels"] == 1.0
        assert "invent_column_levels" not in plain.fingerprint.fields
    finally:
        env.close()
        plain.close()
    for split in ("validation", "test"):
        _assert_questions_unchanged({"invent_names": 1.0, "invent_values": 1.0, "invent_column_levels": 1.0}, split,
                                    absent="invent_column_levels")
    report = run_episodes(ENV_ID, oracle_policy, episodes=12, concurrency=3, seed=7,
                          env_kwargs={"split": "train", "tier": 1, "invent_names": 1.0, "invent_values": 1.0,
                                      "invent_column_levels": 1.0})
    _assert_oracle_solves(report)
    for bad, match in (({"invent_names": 1.0, "invent_column_levels": 0.5}, "invent_values"),
                       ({"invent_names": 1.0, "invent_values": 1.0, "invent_column_levels": 1.5}, "invent_column_levels"),
                       ({"invent_names": 1.0, "invent_values": 1.0, "invent_column_levels": True}, "invent_column_levels")):
        with pytest.raises(ConfigError, match=match):
            DataAnalysisV2Env(**bad)


@pytest.mark.parametrize("max_turns", [1, 2])
def test_an_unanswered_episode_still_says_which_template_and_tier_it_was(max_turns):
    """Per-template success rates are computed from the episode-end info: a truncated
    episode that lacked the template was left out of its template's rate (the rate was
    over answered episodes only)."""
    env = gym.make(ENV_ID, split="test", template="v2_mean", max_turns=max_turns).unwrapped
    try:
        env.reset(seed=5)
        step = None
        for _ in range(max_turns):
            step = env.step('<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>')
        _, reward, terminated, truncated, info = step
        assert truncated and not terminated and reward == 0.0
        assert (info["template"], info["tier"], info["category"]) == ("v2_mean", env.task.question.tier, "basic")
    finally:
        env.close()


@pytest.mark.parametrize("split", ["train", "test"])
def test_name_hints_reach_v2_on_every_split_with_the_episodes_own_files(split):
    """v2 passes ``name_hints`` to v1's family: the hint lists this episode's files
    (a made-up train name included), on train and test alike, so train and eval match."""
    env = gym.make(ENV_ID, split=split, tier=1, name_hints=True, invent_names=1.0 if split == "train" else 0.0)
    try:
        first, _ = env.reset(seed=5)
        listing = first.split("Files in your working directory:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        call = '<tool_call>{"name": "python", "arguments": {"code": "open(\'nile\').read()"}}</tool_call>'
        obs, *_ = env.step(call)
        assert "FileNotFoundError" in obs and "Files in your working directory:]\n" + listing in obs
        assert env.unwrapped.fingerprint.fields["name_hints"] is True
    finally:
        env.close()
