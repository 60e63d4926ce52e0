import json
import time

import pytest

from tasks.search import Corpus, Document, QAFormatError, load_custom_dataset, load_default_dataset, read_qa_jsonl
from tasks.search.dataset import cache_root


def test_cache_dir_override_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGYM_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
    stages = []
    first = load_default_dataset(progress=lambda stage, frac: stages.append((stage, frac)))
    manifests = list(tmp_path.glob("search/*/manifest.json"))
    assert len(manifests) == 1 and stages and stages[-1][1] == 1.0
    assert json.loads(manifests[0].read_text())["corpus_version"] == first.corpus.version
    start = time.perf_counter()
    second = load_default_dataset(progress=lambda *a: pytest.fail("a cached load must not rebuild"))
    assert time.perf_counter() - start < 5
    assert second.corpus.version == first.corpus.version and second.version == first.version
    assert {s: [q.id for q in v] for s, v in second.splits.items()} == {s: [q.id for q in v] for s, v in first.splits.items()}


def test_bring_your_own_qa(tmp_path):
    corpus = Corpus([Document("d1", "Zorblat", "Zorblat is the capital of Quux.")])
    qa = tmp_path / "qa.jsonl"
    rows = [{"question": "What is the capital of Quux?", "golden_answers": ["Zorblat"], "supporting_doc_ids": ["d1"]},
            {"id": "t1", "question": "Capital of Quux?", "golden_answers": "Zorblat", "split": "test"}]
    qa.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load_custom_dataset(qa, corpus)
    assert [q.question for q in data.questions("train")] == ["What is the capital of Quux?"]
    assert [q.id for q in data.questions("test")] == ["t1", "qa-1"]
    assert data.questions("train")[0].supporting_doc_ids == ("d1",)


def test_bad_qa_rows_say_what_is_expected(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "golden_answers": []}\n')
    with pytest.raises(QAFormatError, match="golden_answers"):
        read_qa_jsonl(qa)


def write_rows(path, *rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


GOOD = {"id": "g", "question": "Capital of Quux?", "golden_answers": ["Zorblat"]}


def test_a_qa_file_that_is_not_utf8_names_the_line(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_bytes(json.dumps(GOOD).encode() + b'\n{"question": "Qu\xe9?", "golden_answers": ["x"]}\n')
    with pytest.raises(QAFormatError, match=r"qa\.jsonl:2: byte 0xe9 at column 17 is not UTF-8"):
        read_qa_jsonl(qa)


@pytest.mark.parametrize("row, fragment", [
    ({"question": None, "golden_answers": ["x"]}, 'expected "question" to be a non-empty string, actual value: null'),
    ({"question": "q", "golden_answers": {"a": 1}}, 'expected "golden_answers" to be a non-empty string or a '
                                                    'non-empty list of them, actual value: {"a": 1} (dict)'),
    ({"question": "q", "golden_answers": [1]}, 'expected "golden_answers"'),
    ({"question": "q", "golden_answers": [""]}, 'expected "golden_answers"'),
    ({"question": "q", "golden_answers": []}, 'expected "golden_answers"'),
    ({"id": 5, "question": "q", "golden_answers": ["x"]}, 'expected "id" to be a non-empty string, actual value: 5'),
    ({"question": "q", "golden_answers": ["x"], "supporting_doc_ids": "d1"}, 'expected "supporting_doc_ids"'),
    ({"question": "q", "golden_answers": ["x"], "hops": [{"doc_id": 1, "answer": "x"}]}, 'every "hops" item'),
    ({"question": "q", "golden_answers": ["x"], "split": "dev"}, "expected \"split\" to be one of ['train', "),
    ({"question": "q", "golden_answers": ["x"], "template": 3}, 'expected "template" to be a string'),
    ("[1, 2]", 'expected a JSON object with "question" and "golden_answers"'),
])
def test_wrong_qa_types_are_rejected_not_coerced(tmp_path, row, fragment):
    qa = write_rows(tmp_path / "qa.jsonl", GOOD, row)
    with pytest.raises(QAFormatError) as e:
        read_qa_jsonl(qa)
    assert str(e.value).startswith(f"{qa}:2: ") and fragment in str(e.value)


NO_ID = {"question": "Third?", "golden_answers": ["z"]}  # gets the id qa-<line>


@pytest.mark.parametrize("second, third, repeated", [
    (NO_ID, {"id": "g", "question": "Again?", "golden_answers": ["y"]}, "g"),
    ({"id": "qa-3", "question": "Clash?", "golden_answers": ["y"]}, NO_ID, "qa-3"),
])
def test_repeated_question_ids_are_rejected(tmp_path, second, third, repeated):
    qa = write_rows(tmp_path / "qa.jsonl", GOOD, second, third)
    with pytest.raises(QAFormatError, match=rf"qa\.jsonl:3: question id '{repeated}' is already used on line"):
        read_qa_jsonl(qa)


def test_unknown_supporting_documents_are_rejected(tmp_path):
    corpus = Corpus([Document("d1", "Zorblat", "Zorblat is the capital of Quux.")])
    qa = write_rows(tmp_path / "qa.jsonl", {**GOOD, "supporting_doc_ids": ["d1"]},
                    {"id": "h", "question": "q", "golden_answers": ["x"], "supporting_doc_ids": ["d1", "d9"]})
    with pytest.raises(QAFormatError, match=r"qa\.jsonl:2: supporting document 'd9' is not in the corpus \(1 documents"):
        load_custom_dataset(qa, corpus)
    assert read_qa_jsonl(qa)["all"][1].supporting_doc_ids == ("d1", "d9")  # without a corpus: not checked


def test_an_empty_qa_file_is_rejected(tmp_path):
    qa = write_rows(tmp_path / "qa.jsonl", "", "  ")
    with pytest.raises(QAFormatError, match="qa.jsonl: no questions"):
        read_qa_jsonl(qa)
