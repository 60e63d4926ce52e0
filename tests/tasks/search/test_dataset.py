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
