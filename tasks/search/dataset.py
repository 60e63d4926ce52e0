"""Load the Search-v0 data: the bundled corpus and questions (cached), or your own files.

The default dataset is built from installed packages in a few seconds and cached under
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
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.search.corpus import Corpus
from tasks.search.knowledge import build_knowledge_base
from tasks.search.questions import Question, generate_questions
from tasks.search.sources import source_versions
from tasks.search.splits import SPLITS, Split, split_questions

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
BUILDER_VERSION = "search-data-3"
CACHE_ENV_VAR = "AGENTGYM_CACHE_DIR"

ProgressCallback = Callable[[str, float], None]
"""Called with (stage, fraction done in [0, 1]); the only way library code reports progress."""


class QAFormatError(ValueError):
    """A QA file is not in the ``{"question", "golden_answers"}`` jsonl format."""


@dataclass(frozen=True)
class SearchDataset:
    corpus: Corpus
    splits: dict[str, tuple[Question, ...]]
    version: str

    def questions(self, split: str) -> tuple[Question, ...]:
        if split not in self.splits:
            raise KeyError(f"Expected split in {sorted(self.splits)}, actual value: {split!r}")
        return self.splits[split]


def cache_root() -> Path:
    """``$AGENTGYM_CACHE_DIR`` if set, else ``~/.cache/agentgym``."""
    override = os.environ.get(CACHE_ENV_VAR)
    return Path(override) if override else Path.home() / ".cache" / "agentgym"


def _default_key(seed: int) -> str:
    payload = json.dumps({"builder": BUILDER_VERSION, "sources": source_versions(), "seed": seed}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _questions_version(corpus_version: str, rows: Sequence[str]) -> str:
    digest = hashlib.sha256(corpus_version.encode())
    for row in rows:
        digest.update(row.encode("utf-8"))
    return digest.hexdigest()[:16]


def write_qa_jsonl(path: str | os.PathLike[str], splits: dict[str, Sequence[Question]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for split, questions in splits.items():
            for q in questions:
                f.write(json.dumps(q.to_json(split), ensure_ascii=False) + "\n")


def _question_from_row(row: dict, lineno: int) -> Question:
    golds = row["golden_answers"]
    golds = [golds] if isinstance(golds, str) else list(golds)
    if not golds:
        raise ValueError("golden_answers is empty")
    hops = row.get("hops")
    if hops is None:  # bring-your-own rows may name supporting documents without hops
        hops = [{"doc_id": d, "answer": ""} for d in row.get("supporting_doc_ids", ())]
    return Question.from_json(
        {
            "id": row.get("id", f"qa-{lineno}"),
            "question": row["question"],
            "golden_answers": golds,
            "hops": hops,
            "template": row.get("template", ""),
        }
    )


def read_qa_jsonl(path: str | os.PathLike[str]) -> dict[str, list[Question]]:
    """Read QA rows, grouped by their ``split`` field (rows without one go to "all")."""
    out: dict[str, list[Question]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                question = _question_from_row(row, lineno)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise QAFormatError(
                    f'{Path(path)}:{lineno}: expected a JSON object with "question" and a non-empty '
                    f'"golden_answers" list (Search-R1/FlashRAG QA format), actual line: {line[:120]!r}'
                ) from e
            out.setdefault(str(row.get("split", "all")), []).append(question)
    return out


def _build(seed: int, progress: ProgressCallback | None) -> tuple[Corpus, dict[Split, list[Question]]]:
    if progress:
        progress("search data: reading corpus sources", 0.0)
    kb = build_knowledge_base()
    if progress:
        progress("search data: generating questions", 0.5)
    splits = split_questions(generate_questions(kb, seed=seed), seed=seed)
    if progress:
        progress("search data: done", 1.0)
    return kb.corpus, splits


def _write_cache(directory: Path, corpus: Corpus, splits: dict[Split, list[Question]]) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        corpus.write_jsonl(tmp / "corpus.jsonl")
        write_qa_jsonl(tmp / "questions.jsonl", splits)
        manifest = {"builder": BUILDER_VERSION, "corpus_version": corpus.version, "num_docs": len(corpus)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        os.rename(tmp, directory)  # atomic; loses the race harmlessly to a concurrent builder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (directory / "manifest.json").exists():
            raise


def _dataset(corpus: Corpus, splits: dict[str, list[Question]]) -> SearchDataset:
    rows = [json.dumps(q.to_json(s), sort_keys=True) for s, qs in splits.items() for q in qs]
    return SearchDataset(
        corpus=corpus,
        splits={s: tuple(qs) for s, qs in splits.items()},
        version=_questions_version(corpus.version, rows),
    )


def load_default_dataset(
    seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, progress: ProgressCallback | None = None
) -> SearchDataset:
    """The bundled corpus and its train/validation/test questions, built once and cached."""
    directory = Path(cache_dir) if cache_dir else cache_root() / "search" / _default_key(seed)
    if not (directory / "manifest.json").exists():
        corpus, splits = _build(seed, progress)
        _write_cache(directory, corpus, splits)
        return _dataset(corpus, dict(splits))
    corpus = Corpus.read_jsonl(directory / "corpus.jsonl")
    splits = read_qa_jsonl(directory / "questions.jsonl")
    return _dataset(corpus, {s: splits.get(s, []) for s in SPLITS})


def load_custom_dataset(qa_path: str | os.PathLike[str], corpus: Corpus) -> SearchDataset:
    """Your QA jsonl over ``corpus`` (yours via ``Corpus.read_jsonl``, or the bundled one).

    QA rows with a ``split`` field serve that split; rows without one serve every split.
    """
    by_split = read_qa_jsonl(qa_path)
    shared = by_split.pop("all", [])
    splits = {s: by_split.get(s, []) + shared for s in SPLITS}
    return _dataset(corpus, splits)
