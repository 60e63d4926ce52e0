import json

import pytest

from tasks.search import Corpus, CorpusFormatError, Document


def test_document_uses_the_search_r1_contents_shape():
    doc = Document("d1", "Albert Camus", "French philosopher.")
    assert doc.to_json() == {"id": "d1", "contents": '"Albert Camus"\nFrench philosopher.'}
    assert Document.from_contents("d1", doc.contents) == doc


def test_jsonl_round_trip_and_version(tmp_path):
    corpus = Corpus([Document("a", "A", "alpha"), Document("b", "B", "beta")])
    path = tmp_path / "corpus.jsonl"
    corpus.write_jsonl(path)
    again = Corpus.read_jsonl(path)
    assert list(again) == list(corpus) and again.version == corpus.version
    changed = Corpus([Document("a", "A", "alpha"), Document("b", "B", "beta!")])
    assert changed.version != corpus.version
    assert again.get("b").text == "beta" and again.get("zzz") is None and "a" in again


def test_title_text_rows_are_accepted(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": 7, "title": "T", "text": "body"}) + "\n\n")
    assert Corpus.read_jsonl(path).get("7").contents == '"T"\nbody'


def test_bad_rows_name_the_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"oops": 1}\n')
    with pytest.raises(CorpusFormatError, match=r"c.jsonl:2: expected"):
        Corpus.read_jsonl(path)
    with pytest.raises(CorpusFormatError, match="unique"):
        Corpus([Document("a", "A", "x"), Document("a", "B", "y")])


def test_bundled_corpus_size_and_shape(kb):
    corpus = kb.corpus
    assert 11_000 <= len(corpus) <= 13_000
    ids = [d.id for d in corpus]
    assert any(i.startswith("wiki-") for i in ids) and any(i.startswith("country-") for i in ids)
    assert any(i.startswith("city-") for i in ids)
    france = corpus.get("country-FR")
    assert "The capital of France is Paris." in france.text
    assert "The currency of France is the Euro (EUR)." in france.text
    assert "Germany" in france.text and "demonym" in france.text
