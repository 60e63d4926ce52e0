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
    path.write_text(json.dumps({"id": "7", "title": "T", "text": "body"}) + "\n\n")
    assert Corpus.read_jsonl(path).get("7").contents == '"T"\nbody'


def test_bad_rows_name_the_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"oops": 1}\n')
    with pytest.raises(CorpusFormatError, match=r"c.jsonl:2: expected"):
        Corpus.read_jsonl(path)
    with pytest.raises(CorpusFormatError, match="unique"):
        Corpus([Document("a", "A", "x"), Document("a", "B", "y")])


def test_a_file_that_is_not_utf8_names_the_line_and_byte(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "contents": "x"}\n{"id": "b", "contents": "caf\xe9"}\n')
    with pytest.raises(CorpusFormatError, match=r"c\.jsonl:2: byte 0xe9 at column 29 is not UTF-8; save the file as UTF-8"):
        Corpus.read_jsonl(path)


@pytest.mark.parametrize("row, fragment", [
    ({"id": 5, "contents": "x"}, 'expected "id" to be a non-empty string, actual value: 5 (int)'),
    ({"id": "a", "contents": ["x", "y"]}, 'expected "contents" to be a non-empty string, actual value: ["x", "y"] (list)'),
    ({"id": None, "contents": "x"}, 'expected "id" to be a non-empty string, actual value: null (NoneType)'),
    ({"id": "a", "contents": "  "}, 'expected "contents" to be a non-empty string'),
    ({"id": "a", "title": "T", "text": 3}, 'expected "text" to be a string, actual value: 3 (int)'),
    ({"id": "a", "body": "x"}, 'expected a JSON object with "id" and "contents"'),
    (["a", "x"], 'expected a JSON object with "id" and "contents"'),
])
def test_wrong_types_are_rejected_not_coerced(tmp_path, row, fragment):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "ok", "contents": "fine"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(CorpusFormatError) as e:
        Corpus.read_jsonl(path)
    assert str(e.value).startswith(f"{path}:2: ") and fragment in str(e.value)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_corpus_is_rejected(tmp_path, text):
    path = tmp_path / "c.jsonl"
    path.write_text(text)
    with pytest.raises(CorpusFormatError, match="c.jsonl: no documents"):
        Corpus.read_jsonl(path)


def test_repeated_ids_name_both_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "contents": "x"}\n{"id": "b", "contents": "y"}\n{"id": "a", "contents": "z"}\n')
    with pytest.raises(CorpusFormatError, match=r"c\.jsonl:3: document id 'a' is already used on line 1"):
        Corpus.read_jsonl(path)


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
