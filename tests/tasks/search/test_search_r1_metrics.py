"""Search-R1's EM, cover-EM and F1 on fixtures in the FlashRAG formats.

Expected values are worked out by hand from the semantics of Search-R1's
``verl/utils/reward_score/qa_em.py`` (``normalize_answer``, ``em_check``, ``subem_check``)
and FlashRAG's ``flashrag/evaluator/metrics.py`` (``F1_Score``); the rows pick the cases
where those semantics differ from a friendlier scorer: no accent folding, ASCII
punctuation only, character-level cover, yes/no only matching themselves in F1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.search.flashrag import (
    FLASHRAG_DATASETS,
    FlashRAGFormatError,
    golden_answers_by_id,
    read_flashrag_jsonl,
)
from tasks.search.grading import normalize_answer
from tasks.search.search_r1_metrics import mean_scores, normalize_r1, qa_scores

FIXTURES = Path(__file__).parent / "fixtures" / "flashrag"
TWO_THIRDS = 2 / 3

# (data set, id, prediction, EM, cover-EM, F1)
CASES = [
    ("nq", "test_0", "George Orwell", 1, 1, 1.0),
    ("nq", "test_0", "george orwell.", 1, 1, 1.0),
    ("nq", "test_0", "Orwell", 0, 0, TWO_THIRDS),
    ("nq", "test_0", "It was George Orwell", 0, 1, TWO_THIRDS),
    ("nq", "test_1", "July 20, 1969", 0, 1, 1.0),  # F1 is the best gold's: "20 July 1969"
    ("nq", "test_1", "19690", 0, 1, 0.0),  # cover is by characters
    ("nq", "test_1", "1,969", 1, 1, 1.0),  # the comma is punctuation
    ("nq", "test_2", "Canberra, Australia", 0, 1, TWO_THIRDS),
    ("nq", "test_2", "Sydney", 0, 0, 0.0),
    ("nq", "test_3", "Beatles", 1, 1, 1.0),
    ("nq", "test_3", "the beatles!", 1, 1, 1.0),
    ("hotpotqa", "5a7b0a1c5542990b8f503a11", "No", 1, 1, 1.0),
    ("hotpotqa", "5a7b0a1c5542990b8f503a11", "no, it does not", 0, 1, 0.0),  # yes/no match only themselves
    ("hotpotqa", "5a7b0a1c5542990b8f503a11", "Nope", 0, 1, 0.0),
    ("hotpotqa", "5a7b0a1c5542990b8f503a11", "yes", 0, 0, 0.0),
    ("hotpotqa", "5a7b0a1c5542990b8f503a12", "The city of Paris", 0, 1, 0.5),
    ("hotpotqa", "5a7b0a1c5542990b8f503a13", "Yes.", 1, 1, 1.0),
    ("hotpotqa", "5a7b0a1c5542990b8f503a13", "yes and no", 0, 1, 0.0),
    ("2wikimultihopqa", "a1b2c3d40bdd11eba7f7acde48001122", "anna example", 1, 1, 1.0),
    ("2wikimultihopqa", "a1b2c3d40bdd11eba7f7acde48001122", "Anna", 0, 0, TWO_THIRDS),
    ("2wikimultihopqa", "a1b2c3d40bdd11eba7f7acde48001123", "Early Film (1931)", 0, 1, 0.8),
    ("musique", "2hop__100_200", "€", 1, 1, 1.0),  # not ASCII punctuation: kept
    ("musique", "2hop__100_200", "Euro", 1, 1, 1.0),
    ("musique", "2hop__100_200", "the euro currency", 0, 1, TWO_THIRDS),
    ("musique", "2hop__100_200", "Europe", 0, 1, 0.0),
    ("musique", "3hop1__300_400_500", "Jobs", 0, 0, TWO_THIRDS),
    ("musique", "3hop1__300_400_500", "Steven P. Jobs", 0, 0, TWO_THIRDS),
    ("bamboogle", "test_0", "George H. W. Bush", 1, 1, 1.0),
    ("bamboogle", "test_0", "George H.W. Bush", 0, 0, 4 / 7),  # "hw" is not "h w"
    ("bamboogle", "test_0", "George Bush", 0, 0, TWO_THIRDS),
    ("bamboogle", "test_1", "212°F", 0, 1, 0.0),  # "°" is no ASCII punctuation: one token
    ("bamboogle", "test_1", "212 °F", 1, 1, 1.0),
    ("bamboogle", "test_1", "212 degrees", 0, 1, TWO_THIRDS),
    ("bamboogle", "test_2", "Bronte", 0, 0, 0.0),  # no accent folding
    ("bamboogle", "test_2", "BRONTË", 1, 1, 1.0),
]


@pytest.fixture(scope="module")
def golds():
    return {name: golden_answers_by_id(read_flashrag_jsonl(FIXTURES / f"{name}.jsonl")) for name in FLASHRAG_DATASETS}


@pytest.mark.parametrize(("dataset", "qid", "prediction", "em", "cover", "f1"), CASES)
def test_metrics_follow_search_r1(golds, dataset, qid, prediction, em, cover, f1):
    scores = qa_scores(prediction, golds[dataset][qid])
    assert (scores.em, scores.cover_em) == (em, cover)
    assert scores.f1 == pytest.approx(f1)


def test_normalisation_is_search_r1s_not_v1s():
    assert normalize_r1("A. J. Cronin") == "j cronin"  # punctuation goes first, then the article "a"
    assert normalize_r1("The.") == ""
    assert normalize_r1("Pa’anga") == "pa’anga" != normalize_answer("Pa’anga")  # curly quote kept
    assert normalize_r1("  An  Apple ") == "apple"
    assert qa_scores("Paris", "Paris").em == 1.0  # a single gold string, as em_check allows


def test_every_fixture_loads_with_its_metadata(golds):
    for name in FLASHRAG_DATASETS:
        examples = read_flashrag_jsonl(FIXTURES / f"{name}.jsonl")
        assert examples and all(e.question and e.golden_answers for e in examples)
    hotpot = read_flashrag_jsonl(FIXTURES / "hotpotqa.jsonl")
    assert hotpot[0].metadata["type"] == "comparison" and hotpot[0].golden_answers == ("no",)
    assert golds["musique"]["2hop__100_200"] == ("euro", "EUR", "€")


def test_mean_scores_over_a_file(golds):
    nq = golds["nq"]
    predictions = {"test_0": "George Orwell", "test_1": "July 20, 1969", "test_2": "Sydney"}  # test_3 unanswered
    means = mean_scores(predictions, nq)
    assert means["n"] == 4 and means["em"] == 0.25 and means["cover_em"] == 0.5
    assert means["f1"] == pytest.approx(0.5)
    with pytest.raises(KeyError, match="unknown ids"):
        mean_scores({"nope": "x"}, nq)


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "question": "q?", "golden_answers": []}', "golden_answers"),
    ('{"id": "a", "question": "q?", "golden_answers": [""]}', "golden_answers"),
    ('{"id": 5, "question": "q?", "golden_answers": ["x"]}', '"id"'),
    ('{"id": "a", "question": "q?", "golden_answers": ["x"], "metadata": []}', "metadata"),
    ('["not", "an", "object"]', "FlashRAG QA format"),
])
def test_malformed_rows_name_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "question": "q?", "golden_answers": ["x"]}\n' + line + "\n")
    with pytest.raises(FlashRAGFormatError, match=message) as raised:
        read_flashrag_jsonl(path)
    assert "bad.jsonl:2" in str(raised.value)


def test_repeated_ids_are_refused(tmp_path):
    path = tmp_path / "dup.jsonl"
    row = json.dumps({"id": "a", "question": "q?", "golden_answers": ["x"]})
    path.write_text(row + "\n" + row + "\n")
    with pytest.raises(FlashRAGFormatError, match="already used on line 1"):
        read_flashrag_jsonl(path)
