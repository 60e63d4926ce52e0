from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.retrieval import INDEX_FORMAT, BM25Index, LocalRetriever
from tasks.search import Corpus, Document


def test_bm25_ranks_the_matching_document_first(index):
    assert index.search("capital of Germany", 3)[0].doc_id == "de"
    assert index.search("Camus philosopher", 1)[0].doc_id == "camus"
    hits = index.search("Euro currency", 5)
    assert {h.doc_id for h in hits[:2]} == {"fr", "de"} and hits[0].score >= hits[-1].score


def test_stemming_and_accent_folding(index):
    assert index.search("philosophers", 1)[0].doc_id == "camus"
    assert index.search("LYON populations", 1)[0].doc_id == "lyon"


def test_empty_and_stopword_queries_return_nothing(index):
    assert index.search("", 3) == [] and index.search("the of a", 3) == []
    assert index.search("Paris", 0) == []


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_agent_text_is_a_valid_query(text):
    hits = _SHARED.search(text, 3)
    assert len(hits) <= 3


_SHARED = BM25Index.build(Corpus([Document("a", "A", "alpha beta"), Document("b", "B", "gamma AND OR NOT (x:y)")]))


def test_index_is_cached_by_corpus_version(tmp_path, corpus):
    first = BM25Index.open_or_build(corpus, tmp_path)
    assert first.path.name == f"{INDEX_FORMAT}-{corpus.version}"
    stamp = first.path.stat().st_mtime_ns
    again = BM25Index.open_or_build(corpus, tmp_path)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    assert again.search("Tokyo", 1)[0].doc_id == "jp"
    other = Corpus(list(corpus) + [Document("x", "X", "extra")])
    assert BM25Index.open_or_build(other, tmp_path).path != first.path
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_build_reports_progress(corpus):
    seen = []
    BM25Index.build(corpus, progress=lambda stage, frac: seen.append(frac))
    assert seen and seen[-1] == 1.0


async def test_local_retriever_returns_search_r1_documents(index):
    retriever = LocalRetriever(index)
    [[top, *_]] = await retriever.search(["capital of Japan"], 2)
    assert top.doc_id == "jp" and top.contents.startswith('"Japan (country profile)"\n') and top.score > 0
    assert top.title == "Japan (country profile)" and top.text.startswith("The capital")
    docs = await retriever.get_documents(["lyon", "missing"])
    assert docs[0].doc_id == "lyon" and docs[1] is None
