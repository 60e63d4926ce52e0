"""Search-v1's data knobs and facts: hops=, per-split histograms in the fingerprint, dataset-report."""

import json

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import agentgym  # noqa: F401 - registers the envs
from agentgym import fingerprint_diff
from agentgym.cli import app
from agentgym.envs import check_env_id
from agentgym.errors import ConfigError


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
def test_hops_draws_only_questions_that_need_that_many_documents(hops):
    env = gym.make("agentgym/Search-v1", split="validation", hops=hops)
    drawn = set()
    for seed in range(20):
        env.reset(seed=seed)
        question = env.unwrapped.task.question
        assert question.num_hops == hops and len(set(question.supporting_doc_ids)) == hops
        drawn.add(question.template)
    assert len(drawn) >= 2  # several templates share a hop count
    env.close()


def test_hops_is_checked_and_named_by_the_fingerprint():
    with pytest.raises(ConfigError, match="hops"):
        gym.make("agentgym/Search-v1", hops=7)
    with pytest.raises(ConfigError, match="hops"):
        gym.make("agentgym/Search-v1", hops="3")
    a, b = gym.make("agentgym/Search-v1"), gym.make("agentgym/Search-v1", hops=3)
    assert fingerprint_diff(a, b) == {"hops": (None, 3)}
    fields = a.unwrapped.fingerprint.fields
    assert fields["dataset_builder"] == "search-data-4"
    assert set(fields["questions"]) == {"train", "validation", "test"}
    assert sum(fields["questions"]["test"]["hops"].values()) == len(a.unwrapped.family.dataset.questions("test"))
    a.close()
    b.close()


def test_train_part_splits_training_questions_into_disjoint_parts():
    """SFT on part 0 and RL on part 1 never share a training question; held-out splits
    are whole; the part is in the fingerprint; a malformed part is a config error."""
    families = [gym.make("agentgym/Search-v2", hops=1, train_part=[k, 2]).unwrapped.family for k in (0, 1)]
    whole = gym.make("agentgym/Search-v2", hops=1).unwrapped.family
    parts = [{q.id for q in f._questions_of("train")} for f in families]
    assert parts[0] and parts[1] and not parts[0] & parts[1]
    assert parts[0] | parts[1] == {q.id for q in whole._questions_of("train")}
    assert [q.id for q in families[0]._questions_of("test")] == [q.id for q in whole._questions_of("test")]
    env = gym.make("agentgym/Search-v2", hops=1, train_part=[1, 2])
    for seed in range(40):
        env.reset(seed=seed)
        assert env.unwrapped.task.question.id in parts[1]
    assert fingerprint_diff(gym.make("agentgym/Search-v2", hops=1), env) == {"train_part": (None, [1, 2])}
    for bad in ([2, 2], [0], [0, 1], [True, 2], "0,2"):
        with pytest.raises(ConfigError, match="train_part"):
            gym.make("agentgym/Search-v2", train_part=bad)


def test_fingerprint_diff_names_the_histogram_cells_of_another_dataset(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "What is the capital of France?", "golden_answers": ["Paris"],
                              "template": "capital_of_country", "hops": [{"doc_id": "country-FR", "answer": "Paris"}]})
                  + "\n")
    a, b = gym.make("agentgym/Search-v1"), gym.make("agentgym/Search-v1", qa_path=str(qa))
    diff = fingerprint_diff(a, b)
    assert diff["questions.test.hops.1"][1] == 1 and diff["questions.test.hops.4"][1] is None
    assert diff["questions.train.templates.capital_of_country"][1] == 1
    a.close()
    b.close()


def test_dataset_report_prints_histograms_gaps_and_the_audit():
    result = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["max_gap_pp"]["template"] <= 3 and report["max_gap_pp"]["hops"] <= 3
    assert set(report["hops"]["test"]) == {"1", "2", "3", "4"}
    assert report["answer_overlap_with_train"] == {"validation": 0.0, "test": 0.0}
    assert report["broken_wording"] == []
    assert report["audit"]["rejected_by_reason"]["compound nationality (no single home country)"] > 0
    text = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v1"])
    assert "templates per split" in text.output and "home_countries_more_populous" in text.output


def test_dataset_report_with_hops_describes_the_questions_that_env_draws():
    result = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v1", "-k", "hops=3", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {split: set(hops) for split, hops in report["hops"].items()} == \
        {"train": {"3"}, "validation": {"3"}, "test": {"3"}}
    env = gym.make("agentgym/Search-v1", hops=3, split="test")
    assert report["sizes"]["test"] == sum(q.num_hops == 3 for q in env.unwrapped.dataset.questions("test"))
    env.close()


def test_dataset_report_of_an_env_without_questions_is_a_user_error():
    result = CliRunner().invoke(app, ["dataset-report", "agentgym/Calculator-v0"])
    assert result.exit_code == 2 and "question dataset" in result.output


@pytest.mark.parametrize("old, new", [("agentgym/Search-v0", "agentgym/Search-v2"),
                                      ("agentgym/SearchR1-v0", "agentgym/SearchR1-v2")])
def test_a_retired_id_is_refused_and_names_its_successor(old, new):
    """The v0 questions cannot be made any more: no alias quietly makes a newer version under the old
    name; both Gymnasium and the CLI name the newest."""
    with pytest.raises(gym.error.DeprecatedEnv, match=new):
        gym.make(old)
    with pytest.raises(ConfigError, match=f"retired.*{new}"):
        check_env_id(old)
    result = CliRunner().invoke(app, ["run", old, "--episodes", "1"])
    assert result.exit_code == 2 and new in result.output
    env = gym.make(new)
    assert env.unwrapped.env_id == new and env.unwrapped.fingerprint.fields["env"] == new
    assert env.unwrapped.fingerprint.fields["dataset_builder"] == "search-data-v2-1"
    env.close()


def test_dataset_report_prints_the_shortcut_audit_which_finds_v1s_shortcuts():
    """One query solves v1's shared-neighbour capitals (the answer's profile names both countries)
    and not its city bridges (the country profile does not name the city)."""
    result = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v1", "--json"])
    assert result.exit_code == 0, result.output
    shortcuts = json.loads(result.output)["shortcuts"]
    rows = {r["template"]: r for r in shortcuts["templates"]}
    assert shortcuts["k"] == 5 and json.loads(result.output)["shortcut_split"] == "test"
    assert rows["shared_neighbour_capital"]["final_doc_in_top_k"] > 0.9
    assert rows["shared_neighbour_capital"]["reader_solved"] > 0.9
    assert rows["city_country_capital"]["final_doc_in_top_k"] < 0.1
    assert rows["city_country_capital"]["reader_solved"] < 0.1
    assert shortcuts["hops"]["3"]["final_doc_in_top_k"] > 0.9
    text = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v1"]).output
    assert "shortcut audit (test split)" in text and "one-query reader" in text
