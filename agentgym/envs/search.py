"""Search-v1/v2 and SearchR1-v1/v2: answer single- and multi-hop questions by searching a corpus.

Search-v2 (``SearchEnvV2``) is the same env over the v2 data (``tasks.search.v2``: borders
in their own documents, hop counts that count documents, three wordings per template,
persons found through their Wikipedia descriptions) scored by the v2 scorer
(``tasks.search.scoring_v2``: aliases, Unicode folding, year and number forms).

The default data is a bundled corpus (Wikipedia vital-article summaries plus country and
city fact passages) with generated questions; see ``tasks.search``. Retrieval is BM25,
either in-process (a tantivy index cached on disk) or through a shared retriever service
(``retriever_url=``, the format Search-R1's retrieval server speaks). Both backends give
the agent the same results, so the backend is not part of the fingerprint; the corpus
and question versions are. A service is asked for its corpus version (``GET /health``) when
the env is made: a different corpus is a ``ConfigError``, and a service that cannot say
(a plain Search-R1 server, or one not up yet) puts ``retriever_corpus: "unverified"`` into
the fingerprint, so such an env never matches a verified one by accident.

Two prompt styles share the tasks:

* ``parser="hermes"`` (Search-v1): tools ``search(query, k)``, ``open(doc_id, page)``,
  ``answer(answer)``.
* ``parser="tags"`` (SearchR1-v1): ``<search>query</search>`` returns Search-R1-style
  ``Doc i(Title: ...) text`` passages inside ``<information>``; ``<answer>x</answer>``.

The reward is exact match of the single final answer: on the bundled questions
``tasks.search.grade_answer`` (with its guards); on a QA file of your own (``qa_path``,
e.g. FlashRAG's NQ or HotpotQA) Search-R1's EM over ``golden_answers``
(``tasks.search.search_r1_metrics``), so rewards compare with published numbers, with
cover-EM beside it in ``info``. F1, retrieval recall of the supporting documents and the
number of searches go to ``info`` as diagnostics.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.env import Split, ToolEnv
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily, family_from_kwargs
from agentgym.resources import shared_resources
from agentgym.envs.validation import check_train_part
from agentgym.errors import AgentError, ConfigError
from agentgym.retrieval import INDEX_FORMAT, LocalRetriever, RetrievedDocument, Retriever
from agentgym.retrieval.index import ProgressCallback
from agentgym.tools import Tool
from tasks.search import (
    DEFAULT_MAX_ANSWER_CHARS,
    Corpus,
    Grade,
    Question,
    SearchDataset,
    grade_answer,
    load_custom_dataset,
    load_default_dataset,
)
from tasks.search.search_r1_metrics import qa_scores

__all__ = ["SearchEnv", "SearchEnvV2", "SearchTask"]

_HERMES_SYSTEM = (
    "You answer questions using a search engine over a collection of Wikipedia summaries and "
    "country and city fact sheets. Call search to find documents, open to read a document in "
    "full, and answer exactly once with the final answer: a short span such as a name, a place "
    "or a year, naming a single entity."
)
_TAGS_SYSTEM = "You are a helpful assistant that answers questions with the help of a search engine."
_TAGS_PROMPT = (
    "Answer the question below. Reason inside <think> and </think> every time you receive new "
    "information. When you are missing knowledge, query the search engine by writing "
    "<search> your query </search>; the top results come back between <information> and "
    "</information>. You may search as many times as you need. Once you know the answer, write "
    "only the answer inside <answer> and </answer>, without explanation, for example "
    "<answer> Paris </answer>.\nQuestion: {question}\n"
)


@dataclass(frozen=True)
class SearchTask:
    """One episode's question; ``question`` holds the hidden solution (answers, hops)."""

    task_id: str
    question: Question


_lock = threading.Lock()
_TOOL_TIMEOUT_S = 30.0  # covers the retriever client's own retries (checked in __init__)


def _default_dataset(version: int, data_seed: int, progress: ProgressCallback | None = None) -> SearchDataset:
    """The bundled data of the family's version (v1's or v2's corpus and questions)."""
    if version >= 2:
        from tasks.search.v2 import load_default_dataset_v2

        return load_default_dataset_v2(seed=data_seed, progress=progress)
    return load_default_dataset(seed=data_seed, progress=progress)


@functools.lru_cache(maxsize=8)
def _load_dataset(version: int, data_seed: int, corpus_path: str | None, qa_path: str | None) -> SearchDataset:
    if qa_path is None:
        if corpus_path is not None:
            raise ConfigError("Expected qa_path together with corpus_path (questions for your corpus), "
                              f"actual value: corpus_path={corpus_path!r}, qa_path=None")
        return _default_dataset(version, data_seed)
    corpus = _default_dataset(version, data_seed).corpus if corpus_path is None else Corpus.read_jsonl(corpus_path)
    return load_custom_dataset(qa_path, corpus)


@functools.lru_cache(maxsize=8)
def _local_retriever(corpus: Corpus) -> LocalRetriever:
    return LocalRetriever.for_corpus(corpus)


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class SearchFamily(TaskFamily):
    """Multi-hop question answering with search tools (Search-v1, and SearchR1-v1 in the
    tag style).

    Args:
        style: ``"tool_calls"`` (``search``, ``open``, ``answer`` as JSON tool calls) or
            ``"tags"`` (Search-R1's ``<search>`` and ``<answer>``; the ``tags`` parser).
        split: the split the env draws from by default (checked to have questions).
        retriever_url: use a retriever service (``agentgym serve-retriever``) instead of
            the in-process index; a service that is down is an infrastructure failure.
        corpus_path: your corpus jsonl (``id``, ``contents``); needs ``qa_path``.
        qa_path: your QA jsonl (``question``, ``golden_answers``); over the bundled corpus
            when no ``corpus_path`` is given. Rows with a ``split`` field serve that split.
        data_seed: seed of the bundled question generator.
        topk: results per search by default (the agent may ask for 1..``max_topk``).
        snippet_chars: characters of each result's text shown by ``search``.
        page_chars: characters per page of ``open`` (and per passage in the tag style).
        max_answer_chars: longer answers score 0.
        retriever_timeout_s, retriever_retries, retriever_max_concurrency: client limits
            of the retriever service.
        hops: only questions that need this many documents (1 to 4 in the bundled data): the
            difficulty knob; ``None`` draws from every hop count.
        train_part: ``[k, n]`` keeps the k-th of n fixed parts of the *train* split (by a
            hash of the question id; other splits are whole): two envs with parts 0 and 1
            draw disjoint training questions, e.g. SFT demonstrations and RL tasks, so RL
            is rewarded on questions imitation never showed.
        progress: called with (stage, fraction) while data or index are built the first time.
    """

    name = "Search"
    bundled_scorer = "grade_answer"  # the fingerprint's scorer for the bundled questions
    version = 1  # v1: the search-data-4 questions (quality gate, 1-4 hops, splits drawn alike)

    def __init__(
        self,
        *,
        style: str = "tool_calls",
        split: str = "train",
        retriever_url: str | None = None,
        corpus_path: str | os.PathLike[str] | None = None,
        qa_path: str | os.PathLike[str] | None = None,
        data_seed: int = 0,
        topk: int = 3,
        max_topk: int = 10,
        snippet_chars: int = 240,
        page_chars: int = 2000,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        retriever_timeout_s: float = 5.0,
        retriever_retries: int = 2,
        retriever_max_concurrency: int = 64,
        hops: int | None = None,
        train_part: Sequence[int] | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int) or hops < 1):
            raise ConfigError(f"Expected hops to be a positive int (documents a question needs) or None (any), "
                              f"actual value: {hops!r}")
        self.hops = hops
        self.train_part: tuple[int, int] | None = check_train_part(train_part)
        if style not in ("tool_calls", "tags"):
            raise ConfigError(f"Expected style 'tool_calls' or 'tags', actual value: {style!r}")
        if not 1 <= topk <= max_topk <= 100:
            raise ConfigError(f"Expected 1 <= topk <= max_topk <= 100, actual values: {topk}, {max_topk}")
        if snippet_chars < 40 or page_chars < 200:
            raise ConfigError(f"Expected snippet_chars >= 40 and page_chars >= 200, actual values: "
                              f"{snippet_chars}, {page_chars}")
        if retriever_timeout_s * (retriever_retries + 1) + 1.0 > _TOOL_TIMEOUT_S:
            raise ConfigError(
                f"Expected retriever_timeout_s * (retriever_retries + 1) under {_TOOL_TIMEOUT_S - 1:g} s (the search "
                f"tool's deadline), actual value: {retriever_timeout_s} * {retriever_retries + 1}"
            )
        self.style = style
        if style == "tags":
            self.name = "SearchR1"
        self.topk, self.max_topk = topk, max_topk
        self.snippet_chars, self.page_chars = snippet_chars, page_chars
        self.max_answer_chars = max_answer_chars
        self.retriever_url = retriever_url
        with _lock:
            if progress is not None and qa_path is None and corpus_path is None:
                _default_dataset(self.version, data_seed, progress)
            self.dataset = _load_dataset(self.version, data_seed, _path(corpus_path), _path(qa_path))
        self.scorer = self.bundled_scorer if qa_path is None else "search_r1_em"  # your file: Search-R1's metric
        # Every check that can refuse the config runs before a shared client is taken:
        # a family that raises here is never closed, so it must hold nothing.
        self._by_hops: dict[str, tuple[Question, ...]] = {}
        self._by_part: dict[str, tuple[Question, ...]] = {}
        self._questions_of(split)  # an empty split is a config error now, not at the first reset
        self._retriever_corpus = (None if retriever_url is None else
                                  _check_remote_corpus(retriever_url, self.dataset.corpus.version, retriever_timeout_s))
        with _lock:
            if retriever_url is None:
                local = _local_retriever(self.dataset.corpus) if progress is None else \
                    LocalRetriever.for_corpus(self.dataset.corpus, progress=progress)
                self.retriever: Retriever = local
            else:
                self.retriever = shared_resources().retriever(
                    retriever_url, timeout_s=retriever_timeout_s, max_retries=retriever_retries,
                    max_concurrency=retriever_max_concurrency)
        self._seen: set[str] = set()
        self._opened: set[str] = set()
        self._searches = 0

    def _questions_of(self, split: str) -> list[Question]:
        questions = self.dataset.questions(split)
        if split == "train" and self.train_part is not None:
            k, n = self.train_part
            questions = self._by_part.setdefault(split, tuple(q for q in questions if zlib.crc32(q.id.encode()) % n == k))
        if self.hops is not None:
            questions = self._by_hops.setdefault(split, tuple(q for q in questions if q.num_hops == self.hops))
            if not questions:
                have = sorted({q.num_hops for q in self.dataset.questions(split)})
                raise ConfigError(f"Expected questions with hops={self.hops} in split {split!r}, actual hop counts: "
                                  f"{have}")
        if not questions:
            raise ConfigError(f"Expected questions in split {split!r}, actual value: none (check qa_path's "
                              "'split' fields)")
        return questions

    @property
    def seen_documents(self) -> frozenset[str]:
        """Doc ids the episode's searches and opens have shown (for retrieval recall)."""
        return frozenset(self._seen)

    # ------------------------------------------------------------------ the family
    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> SearchTask:
        questions = self._questions_of(split)
        if "task_id" in options:
            question = next((q for q in questions if q.id == str(options["task_id"])), None)
            if question is None:
                raise ConfigError(f"Expected a task_id of split {split!r}, actual value: {options['task_id']!r}")
        else:
            question = questions[int(rng.integers(len(questions)))]
        return SearchTask(question.id, question)

    async def open_episode(self, task: SearchTask) -> None:
        self._seen, self._opened, self._searches = set(), set(), 0

    async def aclose(self) -> None:
        if self.retriever_url is not None and self.retriever is not None:
            retriever, self.retriever = self.retriever, None
            await shared_resources().release_retriever(retriever)

    def tools(self, task: SearchTask | None) -> dict[str, Tool]:
        if self.style == "tags":
            return {"search": self.tag_search_tool(), ANSWER_TOOL: self.answer_tool()}
        return {"search": self.search_tool(), "open": self.open_tool(), ANSWER_TOOL: self.answer_tool()}

    def system_prompt(self) -> str:
        return _TAGS_SYSTEM if self.style == "tags" else _HERMES_SYSTEM

    def prompt(self, task: SearchTask) -> str:
        if self.style == "tags":
            return _TAGS_PROMPT.format(question=task.question.question)
        return f"Question: {task.question.question}"

    def grade(self, answer: str, question: Question) -> Grade:
        """The bundled questions' scorer (Search-v1's: exact match after normalisation, the
        spraying and length guards); ``score`` reports it, and Search-R1's EM on a qa_path file."""
        return grade_answer(answer, question.golden_answers, max_answer_chars=self.max_answer_chars)

    def score(self, task: SearchTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        q = task.question
        text = str(answer.get("answer", ""))
        grade = self.grade(text, q)
        reward, metrics = grade.reward, {"exact_match": float(grade.exact_match), "f1": grade.f1,
                                         "answer_guard": grade.guard}
        if self.scorer == "search_r1_em":  # no guards: EM over whole answers cannot be sprayed
            r1 = qa_scores(text, q.golden_answers)
            reward, metrics = r1.em, {"exact_match": r1.em, "f1": r1.f1, "cover_em": r1.cover_em, "answer_guard": None}
        support = set(q.supporting_doc_ids)
        recall = len(support & self._seen) / len(support) if support else None  # unknown support
        return reward, {
            **metrics,
            "retrieval_recall": recall,
            "searches": self._searches,
            "docs_opened": len(self._opened),
            **self.task_facts(task),
        }

    def task_facts(self, task: SearchTask) -> dict[str, Any]:
        return {"num_hops": task.question.num_hops, "template": task.question.template}

    def fingerprint_fields(self) -> dict[str, Any]:
        remote = {} if self._retriever_corpus is None else {"retriever_corpus": self._retriever_corpus}
        return {
            **remote,
            "corpus_version": self.dataset.corpus.version,
            "scorer": self.scorer,
            "questions_version": self.dataset.version,
            "dataset_builder": self.dataset.builder,
            "hops": self.hops,
            **({} if self.train_part is None else {"train_part": list(self.train_part)}),
            "questions": self.dataset.histograms(),
            "retrieval": INDEX_FORMAT,
            "topk": self.topk,
            "max_topk": self.max_topk,
            "snippet_chars": self.snippet_chars,
            "page_chars": self.page_chars,
            "max_answer_chars": self.max_answer_chars,
        }

    # ------------------------------------------------------------------ tools
    async def _retrieve(self, query: str, k: int) -> list[RetrievedDocument]:
        if not query.strip():
            raise AgentError("the query is empty; search for a few keywords, e.g. a name and what you need.")
        self._searches += 1
        results = (await self.retriever.search([query], k))[0]
        self._seen.update(d.doc_id for d in results)
        return results

    def search_tool(self) -> Tool:
        async def search(query: str, k: int = self.topk) -> str:
            results = await self._retrieve(query, k)
            if not results:
                return f"No documents match {query!r}. Try other keywords."
            lines = [f"Results for {query!r}:"]
            for i, doc in enumerate(results, 1):
                lines.append(f"{i}. [{doc.doc_id}] {doc.title}\n   {_snippet(doc.text, self.snippet_chars)}")
            lines.append("Use open with a doc_id to read a document in full.")
            return "\n".join(lines)

        schema = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "keywords to search for"},
                "k": {"type": "integer", "minimum": 1, "maximum": self.max_topk,
                      "description": f"number of results (default {self.topk})"},
            },
            "required": ["query"],
            "additionalProperties": False,
        }
        return Tool("search", "Search the document collection. Returns numbered results with doc ids, "
                    "titles and snippets.", schema, search, max_output_chars=4000, timeout_s=self._tool_timeout(),
                    max_retries=1)

    def open_tool(self) -> Tool:
        async def open_document(doc_id: str, page: int = 1) -> str:
            doc = await self._fetch(doc_id)
            text = doc.text
            pages = max(1, math.ceil(len(text) / self.page_chars))
            if page > pages:
                raise AgentError(f"{doc_id} has {pages} page(s); ask for page 1 to {pages}.")
            self._opened.add(doc.doc_id)
            self._seen.add(doc.doc_id)
            body = text[(page - 1) * self.page_chars: page * self.page_chars]
            more = f"\n[page {page} of {pages}; open with page={page + 1} for more]" if page < pages else ""
            return f"[{doc.doc_id}] {doc.title} (page {page} of {pages})\n{body}{more}"

        schema = {
            "type": "object",
            "properties": {
                "doc_id": {"type": "string", "description": "a doc id from the search results"},
                "page": {"type": "integer", "minimum": 1, "description": "page number (default 1)"},
            },
            "required": ["doc_id"],
            "additionalProperties": False,
        }
        return Tool("open", f"Read a document by its doc id, {self.page_chars} characters per page.",
                    schema, open_document, max_output_chars=self.page_chars + 400,
                    timeout_s=self._tool_timeout(), max_retries=1)

    def tag_search_tool(self) -> Tool:
        async def search(query: str) -> str:
            results = await self._retrieve(query, self.topk)
            if not results:
                return "No results."
            return "\n".join(
                f"Doc {i}(Title: {doc.title}) {_snippet(doc.text, self.page_chars)}" for i, doc in enumerate(results, 1)
            )

        schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
                  "additionalProperties": False}
        return Tool("search", "Search the document collection; returns the top passages.", schema, search,
                    max_output_chars=self.topk * (self.page_chars + 100), timeout_s=self._tool_timeout(),
                    max_retries=1)

    def answer_tool(self) -> Tool:
        async def answer(answer: str | int | float) -> str:
            if not str(answer).strip():
                raise AgentError("the answer is empty; give a short answer such as a name, a place or a year.")
            return "Answer recorded."

        schema = {"type": "object", "properties": {"answer": {"type": ["string", "number"],
                                                              "description": "the final answer, one entity"}},
                  "required": ["answer"], "additionalProperties": False}
        return Tool(ANSWER_TOOL, "Give the final answer (a short span, one entity). Ends the episode.",
                    schema, answer, max_output_chars=200, timeout_s=2.0)

    def _tool_timeout(self) -> float:
        """One deadline for both backends: the timeout is in the fingerprint, the backend is not."""
        return _TOOL_TIMEOUT_S

    async def _fetch(self, doc_id: str) -> RetrievedDocument:
        docs = await self.retriever.get_documents([doc_id])
        if docs is None:  # a foreign Search-R1 server without /documents: use the local corpus
            local = self.dataset.corpus.get(doc_id)
            docs = [None if local is None else RetrievedDocument(local.id, local.contents)]
        if docs[0] is None:
            raise AgentError(f"there is no document with id {doc_id!r}; use a doc id shown in search results.")
        return docs[0]

    # ----------------------------------------------------------------- oracle
    def oracle_action(self, task: SearchTask, episode: EpisodeView) -> str:
        """Per supporting document: search its title and open it; then answer.

        Stateless in the episode: the turn count says which hop comes next.
        """
        q: Question = task.question
        docs = list(q.supporting_doc_ids)
        tags = episode.parser == "tags"
        if episode.turn < len(docs):
            doc = self.dataset.corpus.get(docs[episode.turn])
            query = doc.title if doc is not None else q.question
            if tags:
                return f"<search>{query}</search>"
            calls = [{"name": "search", "arguments": {"query": query}},
                     {"name": "open", "arguments": {"doc_id": docs[episode.turn]}}]
            return "".join(f"<tool_call>{json.dumps(c, ensure_ascii=False)}</tool_call>" for c in calls)
        if not docs and episode.turn == 0:
            if tags:
                return f"<search>{q.question}</search>"
            return f"<tool_call>{json.dumps({'name': 'search', 'arguments': {'query': q.question}})}</tool_call>"
        if tags:
            return f"<answer>{q.answer}</answer>"
        return f"<tool_call>{json.dumps({'name': ANSWER_TOOL, 'arguments': {'answer': q.answer}}, ensure_ascii=False)}</tool_call>"


class SearchEnv(ToolEnv):
    """Multi-hop question answering with search tools: ``ToolEnv(SearchFamily(...))``.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"`` (disjoint by question and answer).
        max_turns: steps before truncation.
        **kwargs: ``SearchFamily``'s (retriever_url, corpus_path, qa_path, data_seed, topk,
            ...) and ``ToolEnv``'s (parser, budgets, ...). The family's style follows the
            parser: ``parser="tags"`` is SearchR1-v1.
    """

    family_class = SearchFamily

    def __init__(self, *, split: Split = "train", max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(split=split, max_turns=max_turns, **kwargs)
        self.family: SearchFamily

    def make_family(self, family_kwargs: dict[str, Any], *, parser: Any, split: str) -> SearchFamily:
        style = "tags" if getattr(parser, "name", parser) == "tags" else "tool_calls"
        if family_kwargs.get("style", style) != style:
            raise ConfigError(f"Expected style {style!r} with parser {getattr(parser, 'name', parser)!r} (the style "
                              f"follows the parser), actual value: {family_kwargs['style']!r}")
        kwargs = {**family_kwargs, "style": style, "split": split}
        return family_from_kwargs(self.family_class, kwargs, owner=type(self).__name__)  # type: ignore[return-value]

    @property
    def dataset(self) -> SearchDataset:
        """The corpus and questions (the family's)."""
        return self.family.dataset

    @property
    def retriever(self) -> Retriever:
        return self.family.retriever


class SearchFamilyV2(SearchFamily):
    """Search-v2: the v2 corpus and questions (``tasks.search.v2``), graded by the v2 scorer.

    Takes ``SearchFamily``'s arguments; ``hops`` counts documents a question needs (1 to 4),
    as the shortcut audit of ``agentgym dataset-report agentgym/Search-v2`` measures.
    """

    version = 2  # v2: search-data-v2 questions over the v2 corpus, the v2 scorer

    @property
    def bundled_scorer(self) -> str:  # type: ignore[override]
        """The scorer and the rules it grades by (its version and the alias tables'): a
        change in what it accepts changes the fingerprint."""
        from tasks.search.aliases import ALIAS_TABLES_VERSION
        from tasks.search.scoring_v2 import SCORER_VERSION

        return f"grade_answer_v2@{SCORER_VERSION}/aliases@{ALIAS_TABLES_VERSION}"

    def grade(self, answer: str, question: Question) -> Grade:
        """The v2 scorer, told what the template asks for (a capital, a year, a person ...)."""
        from tasks.search.scoring_v2 import grade_answer_v2
        from tasks.search.v2 import answer_kind

        return grade_answer_v2(answer, question.golden_answers, kind=answer_kind(question.template),
                               max_answer_chars=self.max_answer_chars)


class SearchEnvV2(SearchEnv):
    """Search-v2 (and SearchR1-v2 with ``parser="tags"``): ``ToolEnv(SearchFamilyV2(...))``."""

    family_class = SearchFamilyV2


def _path(p: str | os.PathLike[str] | None) -> str | None:
    return None if p is None else os.fspath(p)


def _check_remote_corpus(url: str, expected_version: str, timeout_s: float) -> str | None:
    """``None`` when the service serves ``expected_version``; ``"unverified"`` when it cannot tell.

    Raises ``ConfigError`` when it serves another corpus: the questions' supporting documents
    would not be there, and train and eval would silently see different data.
    """
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=min(timeout_s, 5.0)) as response:
            health = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return "unverified"
    served = health.get("corpus_version") if isinstance(health, dict) else None
    if served is None:
        return "unverified"
    if served != expected_version:
        raise ConfigError(
            f"Expected the retriever at {url} to serve corpus version {expected_version}, actual value: {served}. "
            "Start it with the same corpus (agentgym serve-retriever --corpus ...) or pass the matching corpus_path."
        )
    return None
