"""Load the Search-v1 data: the bundled corpus and questions (cached), or your own files.

The default dataset is built from installed packages in about ten seconds and cached under
``$AGENTGYM_CACHE_DIR/search/<key>`` (default ``~/.cache/agentgym``), where the key
hashes the builder version, the data packages' versions and the seed; later loads only
read two jsonl files. Bring-your-own data uses the Search-R1/FlashRAG formats: a corpus
jsonl (``id``, ``contents``) and a QA jsonl (``question``, ``golden_answers``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks.search.corpus import Corpus
from tasks.search.generators import generate_audited
from tasks.search.jsonl import RowReader, jsonl_rows
from tasks.search.knowledge import KnowledgeBase, build_knowledge_base
from tasks.search.quality import AUDIT_LABELS_VERSION, QualityAudit
from tasks.search.questions import Hop, Question
from tasks.search.sources import source_versions
from tasks.search.splits import DEFAULT_FRACTIONS, SPLITS, Split, split_questions
from tasks.search.staging import reap_stale_staging, staging_dir

__all__ = [
    "BUILDER_VERSION",
    "ProgressCallback",
    "QAFormatError",
    "SearchDataset",
    "cache_root",
    "load_custom_dataset",
    "load_default_dataset",
    "read_qa_jsonl",
    "write_qa_jsonl",
]

# Bump when anything that changes the generated corpus or questions changes.
BUILDER_VERSION = "search-data-4"  # 4: quality gate, 2-4-hop compositions, matched splits
CACHE_ENV_VAR = "AGENTGYM_CACHE_DIR"

ProgressCallback = Callable[[str, float], None]
"""Called with (stage, fraction done in [0, 1]); the only way library code reports progress."""


class QAFormatError(ValueError):
    """A QA file is not in the ``{"question", "golden_answers"}`` jsonl format."""


@dataclass(frozen=True)
class SearchDataset:
    """A corpus and its questions per split.

    ``builder`` is the generator version of the bundled data (empty for your own data);
    ``audit`` is what the quality gate dropped while building it (``None`` for your own).
    """

    corpus: Corpus
    splits: dict[str, tuple[Question, ...]]
    version: str
    builder: str = ""
    audit: QualityAudit | None = field(default=None, compare=False)

    def questions(self, split: str) -> tuple[Question, ...]:
        if split not in self.splits:
            raise KeyError(f"Expected split in {sorted(self.splits)}, actual value: {split!r}")
        return self.splits[split]

    def histograms(self) -> dict[str, dict[str, dict[str, int]]]:
        """Per split, how many questions each template and each hop count has."""
        return {
            split: {
                "templates": dict(sorted(Counter(q.template for q in qs).items())),
                "hops": {str(h): n for h, n in sorted(Counter(q.num_hops for q in qs).items())},
            }
            for split, qs in self.splits.items()
        }


def cache_root() -> Path:
    """``$AGENTGYM_CACHE_DIR`` if set, else ``~/.cache/agentgym``."""
    override = os.environ.get(CACHE_ENV_VAR)
    return Path(override) if override else Path.home() / ".cache" / "agentgym"


def _default_key(seed: int) -> str:
    payload = json.dumps({"builder": BUILDER_VERSION, "sources": source_versions(), "seed": seed,
                          "audit_labels": AUDIT_LABELS_VERSION}, sort_keys=True)  # relabelled: same questions
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _questions_version(corpus_version: str, rows: Sequence[str]) -> str:
    digest = hashlib.sha256(corpus_version.encode())
    for row in rows:
        digest.update(row.encode("utf-8"))
    return digest.hexdigest()[:16]


def write_qa_jsonl(path: str | os.PathLike[str], splits: dict[str, Sequence[Question]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for split, questions in splits.items():
            f.writelines(json.dumps(q.to_json(split), ensure_ascii=False) + "\n" for q in questions)


_EXPECTED_QA = 'a JSON object with "question" and "golden_answers" (Search-R1/FlashRAG QA format)'
_SHARED = "all"  # the split of rows without a "split" field: they serve every split


def _hops(row: RowReader) -> tuple[Hop, ...]:
    """The hops, or (bring-your-own rows) one hop without an answer per supporting id."""
    supporting = row.optional_string_list("supporting_doc_ids")
    hops = row.optional_objects("hops")
    if hops is None:
        return tuple(Hop(doc_id, "") for doc_id in supporting or ())
    for i, hop in enumerate(hops):
        doc_id, answer = hop.get("doc_id"), hop.get("answer")
        if not isinstance(doc_id, str) or not doc_id.strip() or not isinstance(answer, str):
            raise row.fail(f'expected every "hops" item to be {{"doc_id": string, "answer": string}}, actual item '
                           f"{i}: {json.dumps(hop, ensure_ascii=False)[:80]}")
    return tuple(Hop(h["doc_id"], h["answer"]) for h in hops)


def _split(row: RowReader) -> str:
    split = row.optional_string("split")
    if split is None:
        return _SHARED
    if split not in SPLITS:
        raise row.fail(f'expected "split" to be one of {list(SPLITS)} (or absent: every split), '
                       f"actual value: {split!r}")
    return split


def _question_from_row(row: RowReader, lineno: int, corpus: Corpus | None) -> Question:
    question = Question(
        id=row.optional_string("id") or f"qa-{lineno}",
        question=row.string("question"),
        golden_answers=tuple(row.string_list("golden_answers", allow_single=True)),
        hops=_hops(row),
        template="" if row.row.get("template") is None else row.string("template", blank_ok=True),
    )
    if corpus is not None:
        for doc_id in [*question.supporting_doc_ids, *(row.optional_string_list("supporting_doc_ids") or ())]:
            if doc_id not in corpus:
                raise row.fail(f"supporting document {doc_id!r} is not in the corpus ({len(corpus)} documents, "
                               f"version {corpus.version}); fix the id or load the corpus that has it")
    return question


def read_qa_jsonl(path: str | os.PathLike[str], corpus: Corpus | None = None) -> dict[str, list[Question]]:
    """Read QA rows, grouped by their ``split`` field (rows without one go to "all").

    Types are checked strictly, ids must be unique (a row without one gets ``qa-<line>``)
    and, given ``corpus``, every supporting document must be in it. Any problem is a
    ``QAFormatError`` naming the file and line.
    """
    out: dict[str, list[Question]] = {}
    first_line: dict[str, int] = {}
    for lineno, raw in jsonl_rows(path, QAFormatError, _EXPECTED_QA):
        row = RowReader(raw, path, lineno, QAFormatError)
        question = _question_from_row(row, lineno, corpus)
        if question.id in first_line:
            raise row.fail(f"question id {question.id!r} is already used on line {first_line[question.id]}; "
                           "give every question its own id (episodes are keyed by it)")
        first_line[question.id] = lineno
        out.setdefault(_split(row), []).append(question)
    if not out:
        raise QAFormatError(f"{Path(path)}: no questions; expected one {_EXPECTED_QA} per line")
    return out


def _build(seed: int, progress: ProgressCallback | None, build_kb: Callable[[], KnowledgeBase] = build_knowledge_base,
           generate: Callable[..., tuple[list[Question], QualityAudit]] = generate_audited,
           fractions: dict[Split, float] = DEFAULT_FRACTIONS, label: str = "search data",
           ) -> tuple[Corpus, dict[Split, list[Question]], QualityAudit]:
    """Read the sources, generate and split the questions (v2 passes its own builders)."""
    if progress:
        progress(f"{label}: reading corpus sources", 0.0)
    kb = build_kb()
    if progress:
        progress(f"{label}: generating questions", 0.2)
    questions, audit = generate(kb, seed=seed)
    splits = split_questions(questions, seed=seed, fractions=fractions)
    if progress:
        progress(f"{label}: done", 1.0)
    return kb.corpus, splits, audit


def _write_cache(directory: Path, corpus: Corpus, splits: dict[Split, list[Question]], audit: QualityAudit,
                 builder: str = BUILDER_VERSION) -> None:
    tmp = staging_dir(directory)
    try:
        corpus.write_jsonl(tmp / "corpus.jsonl")
        write_qa_jsonl(tmp / "questions.jsonl", splits)
        (tmp / "audit.json").write_text(json.dumps(audit.to_json(), indent=1, ensure_ascii=False))
        manifest = {"builder": builder, "corpus_version": corpus.version, "num_docs": len(corpus)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        os.rename(tmp, directory)  # atomic; loses the race harmlessly to a concurrent builder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (directory / "manifest.json").exists():
            raise


def _dataset(corpus: Corpus, splits: dict[str, list[Question]], builder: str = "",
             audit: QualityAudit | None = None) -> SearchDataset:
    rows = [json.dumps(q.to_json(s), sort_keys=True) for s, qs in splits.items() for q in qs]
    return SearchDataset(
        corpus=corpus,
        splits={s: tuple(qs) for s, qs in splits.items()},
        version=_questions_version(corpus.version, rows),
        builder=builder,
        audit=audit,
    )


def load_default_dataset(
    seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, progress: ProgressCallback | None = None
) -> SearchDataset:
    """The bundled corpus and its train/validation/test questions, built once and cached."""
    directory = Path(cache_dir) if cache_dir else cache_root() / "search" / _default_key(seed)
    reap_stale_staging(directory.parent)
    if not (directory / "manifest.json").exists():
        corpus, splits, audit = _build(seed, progress)
        _write_cache(directory, corpus, splits, audit)
        return _dataset(corpus, dict(splits), BUILDER_VERSION, audit)
    return _read_cache(directory, BUILDER_VERSION)


def _read_cache(directory: Path, builder: str) -> SearchDataset:
    """A dataset ``_write_cache`` wrote (corpus, questions per split, the gate's audit)."""
    corpus = Corpus.read_jsonl(directory / "corpus.jsonl")
    splits = read_qa_jsonl(directory / "questions.jsonl", corpus)
    audit_path = directory / "audit.json"
    audit = QualityAudit.from_json(json.loads(audit_path.read_text())) if audit_path.exists() else None
    return _dataset(corpus, {s: splits.get(s, []) for s in SPLITS}, builder, audit)


def load_custom_dataset(qa_path: str | os.PathLike[str], corpus: Corpus) -> SearchDataset:
    """Your QA jsonl over ``corpus`` (yours via ``Corpus.read_jsonl``, or the bundled one).

    QA rows with a ``split`` field serve that split; rows without one serve every split.
    Every supporting document a row names must be in ``corpus``.
    """
    by_split = read_qa_jsonl(qa_path, corpus)
    shared = by_split.pop(_SHARED, [])
    splits = {s: by_split.get(s, []) + shared for s in SPLITS}
    return _dataset(corpus, splits)
