"""Task source of DataAnalysis-v1: real tables, question templates, variants, grading.

Nothing here imports ``agentgym`` or ``sandboxes``; the environment
(:mod:`agentgym.envs.data_analysis`) puts these pieces behind tools.

- :data:`TABLES` / :func:`load_table`: the bundled tables (see ``manifest.json``).
- :data:`TEMPLATES`: question templates by tier, each with wording, a typed
  :class:`AnswerSchema` and reference pandas code (one source for truth and oracle).
- :func:`generate_question`: one unambiguous :class:`Question` per generator state,
  on a fresh :class:`TableVariant` of its tables.
- :func:`score_answer` / :func:`score_answer_json`: strict scoring by code.
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
from tasks.data_analysis.grading import Score, score_answer, score_answer_json
from tasks.data_analysis.schema import AnswerSchema, Field
from tasks.data_analysis.tables import TABLES, TableSpec, load_table
from tasks.data_analysis.templates import Template
from tasks.data_analysis.tiers import TEMPLATES, template_by_id, templates_for_tier
from tasks.data_analysis.variants import TableVariant, VariantConfig, make_variant

__all__ = [
    "TABLES",
    "TEMPLATES",
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
    "load_table",
    "make_variant",
    "score_answer",
    "score_answer_json",
    "template_by_id",
    "templates_for_tier",
]
