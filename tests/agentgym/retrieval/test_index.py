import os
import signal
import subprocess
import sys

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


KILLED_BUILD = """
import sys, time
from agentgym.retrieval import BM25Index
from tasks.search import Corpus, Document

def stall(stage, fraction):
    print(stage, flush=True)
    time.sleep(60)  # killed here, in the middle of the build

corpus = Corpus([Document(f"d{i}", f"T{i}", f"text {i}") for i in range(50)])
BM25Index.open_or_build(corpus, sys.argv[1], progress=stall)
"""


def test_a_build_killed_with_sigkill_leaves_no_directory_after_the_next_start(tmp_path):
    builder = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert builder.stdout.readline().startswith("bm25 index")
    os.kill(builder.pid, signal.SIGKILL)
    builder.wait(10)
    assert [p.name for p in tmp_path.iterdir() if ".staging." in p.name]  # what SIGKILL leaves behind
    corpus = Corpus([Document(f"d{i}", f"T{i}", f"text {i}") for i in range(50)])
    index = BM25Index.open_or_build(corpus, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [index.path.name]
    assert index.search("text 7", 1)[0].doc_id == "d7"
