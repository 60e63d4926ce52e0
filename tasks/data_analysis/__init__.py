"""Task sources of DataAnalysis-v1 and -v2: real tables, question templates, variants, grading.

Nothing here imports ``agentgym`` or ``sandboxes``; the environment
(:mod:`agentgym.envs.data_analysis`) puts these pieces behind tools.

- :data:`TABLES` / :func:`load_table`: the bundled tables (see ``manifest.json``).
- :data:`TEMPLATES`: question templates by tier, each with wording, a typed
  :class:`AnswerSchema` and reference pandas code (one source for truth and oracle).
- :func:`generate_question`: one unambiguous :class:`Question` per generator state,
  on a fresh :class:`TableVariant` of its tables.
- :func:`score_answer` / :func:`score_answer_json`: strict scoring by code.

DataAnalysis-v2 adds :data:`TEMPLATES_V2` (72 templates in seven categories), held-out
splits (:func:`split_of`, ``splits.py``), :func:`generate_question_v2` (a question of one
split) and :func:`score_answer_v2` (the tolerance is half a unit of the last decimal asked).
"""

from tasks.data_analysis.errors import (
    DataAnalysisError,
    GenerationError,
    LicenceNotAllowedError,
    ReferenceCodeError,
    TableChecksumError,
    UnknownTableError,
)
from tasks.data_analysis.generator import FileInfo, GeneratorConfig, Question, generate_question
from tasks.data_analysis.generator_v2 import generate_question_v2
from tasks.data_analysis.grading_v2 import score_answer_v2
from tasks.data_analysis.splits import HELD_TABLES, HELD_TEMPLATES, split_of
from tasks.data_analysis.templates_v2 import TEMPLATES_V2
from tasks.data_analysis.grading import Score, score_answer, score_answer_json
from tasks.data_analysis.schema import AnswerSchema, Field
from tasks.data_analysis.tables import TABLES, TableSpec, load_table
from tasks.data_analysis.templates import Template
from tasks.data_analysis.tiers import TEMPLATES, template_by_id, templates_for_tier
from tasks.data_analysis.variants import TableVariant, VariantConfig, make_variant

__all__ = [
    "HELD_TABLES",
    "HELD_TEMPLATES",
    "TABLES",
    "TEMPLATES",
    "TEMPLATES_V2",
    "AnswerSchema",
    "DataAnalysisError",
    "Field",
    "FileInfo",
    "GenerationError",
    "GeneratorConfig",
    "LicenceNotAllowedError",
    "Question",
    "ReferenceCodeError",
    "Score",
    "TableChecksumError",
    "TableSpec",
    "TableVariant",
    "Template",
    "UnknownTableError",
    "VariantConfig",
    "generate_question",
    "generate_question_v2",
    "load_table",
    "make_variant",
    "score_answer",
    "score_answer_json",
    "score_answer_v2",
    "split_of",
    "template_by_id",
    "templates_for_tier",
]
