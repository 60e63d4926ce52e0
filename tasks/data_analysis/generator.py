"""Draw one unambiguous question with its variant files and ground truth.

:func:`generate_question` is a pure function of the generator's state and its
arguments: the same seed gives the same template, tables, variants, wording and truth.
Drafts that the ambiguity filter rejects are redrawn (the reasons are kept on the
question for audits); if no draft survives ``max_attempts`` a
:class:`~tasks.data_analysis.errors.GenerationError` says which checks failed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import pathlib
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from tasks.data_analysis.ambiguity import Verdict, check_question
from tasks.data_analysis.errors import GenerationError, ReferenceCodeError
from tasks.data_analysis.reference import ORACLE_EPILOGUE, run_reference
from tasks.data_analysis.schema import AnswerSchema
from tasks.data_analysis.tables import TABLES
from tasks.data_analysis.templates import Draw, RenderedQuestion, Template
from tasks.data_analysis.tiers import TEMPLATES, _text, template_by_id, templates_for_tier
from tasks.data_analysis.variants import TableVariant, VariantConfig, make_variant

__all__ = ["FileInfo", "Question", "GeneratorConfig", "generate_question", "question_from_draft", "render_draft",
           "render_drawn"]


@dataclass(frozen=True)
class FileInfo:
    name: str
    columns: tuple[str, ...]
    rows: int

    def describe(self) -> str:
        return f"{self.name} ({self.rows} rows): " + ", ".join(self.columns)


@dataclass(frozen=True)
class Question:
    """Everything about one episode's task. Only ``files`` may leave the host."""

    task_id: str
    tier: int
    template_id: str
    text: str
    schema: AnswerSchema
    truth: Any = field(repr=False)
    files: dict[str, bytes] = field(repr=False)
    file_info: tuple[FileInfo, ...]
    reference_code: str = field(repr=False)
    """The reference code with sandbox paths (files in the working directory)."""
    rejected: tuple[str, ...] = ()
    """Why earlier drafts for this seed were dropped (for audits of the filter)."""

    def oracle_code(self) -> str:
        """What the oracle sends to the ``python`` tool: the reference code + a print."""
        return self.reference_code + ORACLE_EPILOGUE


@dataclass(frozen=True)
class GeneratorConfig:
    max_attempts: int = 60
    variant: VariantConfig = VariantConfig()

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"Expected max_attempts >= 1, actual value: {self.max_attempts}")


def _file_info(v: TableVariant) -> FileInfo:
    header = pd.read_csv(io.BytesIO(v.data), nrows=0)
    return FileInfo(v.file, tuple(str(c) for c in header.columns), v.rows)


def render_draft(
    template: Template, rng: np.random.Generator, config: VariantConfig
) -> tuple[RenderedQuestion, tuple[TableVariant, ...]] | None:
    """Draw parameters and variants for one draft of ``template`` (None if not drawable)."""
    draw = template.draw(rng)
    if draw is None:
        return None
    return render_drawn(template, draw, rng, config)


def render_drawn(
    template: Template, draw: Draw, rng: np.random.Generator, config: VariantConfig
) -> tuple[RenderedQuestion, tuple[TableVariant, ...]]:
    """Fresh variants of ``draw``'s tables and the question bound to their column names."""
    if template.missing_rates is not None:
        config = dataclasses.replace(config, missing_rates=template.missing_rates)
    variants = tuple(
        make_variant(TABLES[name], rng, allow_rename=template.allow_rename,
                     allow_missing=template.allow_missing, allow_values=len(draw.tables) == 1, config=config)
        for name in draw.tables
    )
    unique: list[TableVariant] = []
    for v in variants:
        while v.file in {u.file for u in unique}:  # two stems made from one shared column: "year.csv" twice
            v = dataclasses.replace(v, stem=v.file.removesuffix(".csv") + "2")
        unique.append(v)
    variants = tuple(unique)
    names = {k: variants[i].col(col) for k, (i, col) in draw.columns.items()}
    rq = RenderedQuestion(template, names, _variant_values(draw, variants), tuple(v.file for v in variants))
    return rq, variants


def _variant_values(draw: Draw, variants: tuple[TableVariant, ...]) -> dict[str, Any]:
    """``draw``'s values with each data value (a category level or entity name the
    question quotes, such as ``v`` or stocks' ``sym``) replaced by the variant's made-up
    one, and its ``k_text`` rendering with it, when the variant's values were made up
    (``VariantConfig.value_probability``; single-table draws only). Every text value is
    looked up: a draw's other strings (``'max'``, ``'largest'``) are no table's values."""
    values = dict(draw.values)
    made_up = variants[0].values if len(variants) == 1 else {}
    for key, value in draw.values.items():
        if isinstance(value, str) and value in made_up:
            values[key] = made_up[value]
            if f"{key}_text" in values:
                values[f"{key}_text"] = _text(values[key])
    return values


def _task_id(template: Template, text: str, variants: tuple[TableVariant, ...]) -> str:
    h = hashlib.sha256(text.encode())
    for v in variants:
        h.update(v.data)
    return f"da-{template.id}-{h.hexdigest()[:12]}"


def _attempt(template: Template, rng: np.random.Generator, config: GeneratorConfig
             ) -> tuple[Question | None, str]:
    draft = render_draft(template, rng, config.variant)
    if draft is None:
        return None, "no drawable parameters"
    return question_from_draft(*draft, rng)


def question_from_draft(
    rq: RenderedQuestion,
    variants: tuple[TableVariant, ...],
    rng: np.random.Generator,
    check: Callable[..., Verdict] = check_question,
) -> tuple[Question | None, str]:
    """Compute a rendered draft's truth on its variant files and keep it if ``check``
    passes; (None, why) otherwise."""
    template = rq.template
    with tempfile.TemporaryDirectory(prefix="agentgym-da-") as tmp:
        data_dir = pathlib.Path(tmp)
        for v in variants:
            (data_dir / v.file).write_bytes(v.data)
        try:
            truth = run_reference(rq.code(str(data_dir)))
        except ReferenceCodeError as e:
            return None, f"reference failed: {e}"
        verdict: Verdict = check(rq, truth, data_dir, variants, rng)
    if not verdict.ok:
        return None, verdict.reason
    text = rq.text()
    return Question(
        task_id=_task_id(template, text, variants),
        tier=template.tier,
        template_id=template.id,
        text=text,
        schema=template.schema,
        truth=truth,
        files={v.file: v.data for v in variants},
        file_info=tuple(_file_info(v) for v in variants),
        reference_code=rq.code(""),
    ), "ok"


def generate_question(
    rng: np.random.Generator,
    *,
    tier: int | None = None,
    template_id: str | None = None,
    config: GeneratorConfig = GeneratorConfig(),
) -> Question:
    """Draw a question: a template (uniform within the tier, tier uniform if None),
    its parameters, fresh table variants, and a truth that passes the filter."""
    if template_id is not None:
        pool: tuple[Template, ...] = (template_by_id(template_id),)
    elif tier is not None:
        pool = templates_for_tier(tier)
        if not pool:
            raise ValueError(f"Expected a tier in 1..4, actual value: {tier!r}")
    else:
        pool = TEMPLATES
    reasons: list[str] = []
    for _ in range(config.max_attempts):
        tiers = sorted({t.tier for t in pool})
        chosen_tier = tiers[int(rng.integers(len(tiers)))]
        candidates = [t for t in pool if t.tier == chosen_tier]
        template = candidates[int(rng.integers(len(candidates)))]
        question, reason = _attempt(template, rng, config)
        if question is not None:
            return _with_rejections(question, reasons)
        reasons.append(f"{template.id}: {reason}")
    summary = Counter(r.split(":")[0] + ": " + r.split(":", 2)[1].strip()[:60] for r in reasons)
    raise GenerationError(
        f"No unambiguous question after {config.max_attempts} drafts "
        f"(tier={tier}, template={template_id}); rejections: {dict(summary)}"
    )


def _with_rejections(q: Question, reasons: list[str]) -> Question:
    return Question(q.task_id, q.tier, q.template_id, q.text, q.schema, q.truth, q.files,
                    q.file_info, q.reference_code, tuple(reasons))
