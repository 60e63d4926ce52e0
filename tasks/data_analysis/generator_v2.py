"""Draw one DataAnalysis-v2 question of a split: v1's pipeline with v2's rules.

:func:`generate_question_v2` is a pure function of the generator's state and its
arguments, like v1's. What v2 changes:

- the template comes from the split's pool and its tables must put the question in that
  split (:func:`tasks.data_analysis.splits.split_of`); a draw that does not is redrawn;
- a float answer's precision is the draw's ``dp`` (2-4 decimals, fewer for large values)
  and the scorer accepts half a unit of it (:mod:`tasks.data_analysis.grading_v2`);
- variants keep 50-90% of the rows (v1: 80-95%), so more answers change between episodes;
- the ambiguity filter scores alternatives with the v2 scorer, drops truths within 1e-4
  of a unit of the last decimal from a rounding half-way point, and tests stability under
  1e-12 relative noise (enough to find exact ties; v1's 1e-9 would move large answers by
  more than the stricter tolerance).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter

import numpy as np

from tasks.data_analysis.ambiguity import check_question
from tasks.data_analysis.errors import GenerationError
from tasks.data_analysis.generator import GeneratorConfig, Question, question_from_draft, render_drawn
from tasks.data_analysis.grading_v2 import score_answer_v2
from tasks.data_analysis.schema import AnswerSchema
from tasks.data_analysis.splits import Split, split_of, templates_of
from tasks.data_analysis.templates import Draw, Template
from tasks.data_analysis.templates_v2 import template_v2_by_id
from tasks.data_analysis.variants import VariantConfig

__all__ = ["V2_GENERATOR", "generate_question_v2", "draw_in_split", "bind_precision", "check_question_v2",
           "reachable_templates"]

V2_GENERATOR = GeneratorConfig(max_attempts=60, variant=VariantConfig(min_fraction=0.5, max_fraction=0.9))

_DRAWS_PER_ATTEMPT = 40
"""Parameter draws (cheap: no pandas on variants) tried per attempt to land in the split."""

check_question_v2 = functools.partial(check_question, score=score_answer_v2, noise=1e-12, boundary=1e-4)


def draw_in_split(template: Template, split: Split, rng: np.random.Generator,
                  tables: frozenset[str] | None = None) -> Draw | None:
    """A draw of ``template`` whose tables put the question in ``split`` and, when
    ``tables`` is given, use none but those (None if none found)."""
    for _ in range(_DRAWS_PER_ATTEMPT):
        draw = template.draw(rng)
        if (draw is not None and split_of(template.id, draw.tables) == split
                and (tables is None or set(draw.tables) <= tables)):
            return draw
    return None


def bind_precision(template: Template, draw: Draw) -> Template:
    """The template with the answer precision the draw chose (``dp``), if it chose one."""
    dp = draw.values.get("dp")
    if dp is None or template.schema.kind != "float":
        return template
    return dataclasses.replace(template, schema=AnswerSchema("float", decimals=int(dp)))


@functools.lru_cache(maxsize=None)
def reachable_templates(split: Split, tables: frozenset[str] | None = None) -> tuple[Template, ...]:
    """The split's templates that can draw a question of the split (a train template tied
    to train tables, such as the stocks-only yearly change, has none in validation or test),
    over ``tables`` only when given. A fixed-seed probe of up to 120 draws per template;
    cached per process."""
    rng = np.random.default_rng(0)
    return tuple(t for t in templates_of(split)
                 if any(draw_in_split(t, split, rng, tables) is not None for _ in range(3)))


def _pool(split: Split, tier: int | None, template_id: str | None,
          tables: frozenset[str] | None = None) -> tuple[Template, ...]:
    allowed = reachable_templates(split, tables)
    if template_id is not None:
        template = template_v2_by_id(template_id)
        if template not in allowed:
            raise ValueError(f"Expected a template of split {split!r}, actual value: {template_id!r} "
                             "(held out for another split, or it cannot draw a question of this split"
                             f"{' from these tables' if tables is not None else ''})")
        return (template,)
    pool = tuple(t for t in allowed if tier is None or t.tier == tier)
    if not pool:
        raise ValueError(f"Expected a tier in 1..4, actual value: {tier!r}")
    return pool


def generate_question_v2(
    rng: np.random.Generator,
    *,
    split: Split = "train",
    tier: int | None = None,
    template_id: str | None = None,
    config: GeneratorConfig = V2_GENERATOR,
    tables: frozenset[str] | None = None,
) -> Question:
    """Draw a question of ``split``: a template of the split's pool (uniform, or of one tier
    or one id), parameters and tables that keep it in the split (and within ``tables``,
    when given: a part of the train tables), fresh variants, and a truth that passes the
    v2 filter."""
    pool = _pool(split, tier, template_id, tables)
    reasons: list[str] = []
    for _ in range(config.max_attempts):
        template = pool[int(rng.integers(len(pool)))]
        draw = draw_in_split(template, split, rng, tables)
        if draw is None:
            reasons.append(f"{template.id}: no draw in split {split}")
            continue
        rq, variants = render_drawn(bind_precision(template, draw), draw, rng, config.variant)
        question, reason = question_from_draft(rq, variants, rng, check=check_question_v2)
        if question is not None:
            return dataclasses.replace(question, rejected=tuple(reasons))
        reasons.append(f"{template.id}: {reason}")
    summary = Counter(r.split(":")[0] + ": " + r.split(":", 2)[1].strip()[:60] for r in reasons)
    raise GenerationError(f"No unambiguous question after {config.max_attempts} drafts (split={split}, "
                          f"tier={tier}, template={template_id}); rejections: {dict(summary)}")
