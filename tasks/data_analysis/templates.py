"""Question templates: wording, typed answer schema and reference code in one place.

A template's ``code`` is a ``str.format`` pattern of pandas code that ends with a
JSON-native ``result``. The *same* rendered string is executed on the host to compute
the ground truth (:mod:`tasks.data_analysis.reference`) and sent by the oracle policy to
the sandbox, so there is one source of truth. Only the file paths differ between the two
(a temporary directory on the host, the working directory in the sandbox).

Choices that a reader could make differently are *knobs*: each has a canonical value
(the one the wording states) and alternatives. The ambiguity filter renders the code
with every alternative and drops the question when a valid alternative answer
disagrees with the canonical one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import numpy as np

from tasks.data_analysis.schema import AnswerSchema

__all__ = ["Tier", "Draw", "Template", "RenderedQuestion", "TIER_NAMES", "templates_digest"]

Tier = Literal[1, 2, 3, 4]

TIER_NAMES: dict[int, str] = {
    1: "one operation",
    2: "filter plus aggregate or group-by",
    3: "multi-step: derived columns, joins, time resampling",
    4: "closed-form statistics",
}


@dataclass(frozen=True)
class Draw:
    """What a template picked from the canonical tables, before any variant exists.

    ``columns`` maps a placeholder to ``(table index, original column name)`` so the
    variant's renamed column can be substituted; ``values`` are literal parameters
    (thresholds, category values) rendered with ``repr``.
    """

    tables: tuple[str, ...]
    columns: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    id: str
    tier: Tier
    wording: str
    """``str.format`` pattern; placeholders: columns and values by name, ``file``,
    ``file2`` for the tables, any literal value."""
    code: str
    """``str.format`` pattern of the reference code; ``path``/``path2`` are the CSV paths,
    columns and values are substituted with ``repr``, knobs verbatim."""
    schema: AnswerSchema
    draw: Callable[[np.random.Generator], Draw | None] = field(repr=False, compare=False)
    knobs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Knob name -> (canonical, *alternatives), each a code fragment."""
    allow_rename: bool = True
    allow_missing: bool = True
    missing_rates: tuple[float, ...] | None = None
    """Overrides the variant's missing-value rates (e.g. never 0 for a missing-count
    question, so the answer is rarely the trivial 0)."""

    def canonical_knobs(self) -> dict[str, str]:
        return {k: v[0] for k, v in self.knobs.items()}

    def knob_alternatives(self) -> list[dict[str, str]]:
        """Each alternative reading: one knob changed at a time from the canonical."""
        out = []
        for name, values in self.knobs.items():
            for alt in values[1:]:
                knobs = self.canonical_knobs()
                knobs[name] = alt
                out.append(knobs)
        return out


@dataclass(frozen=True)
class RenderedQuestion:
    """A template bound to concrete variant column names and values."""

    template: Template
    names: Mapping[str, str]
    """Placeholder -> the variant's column name."""
    values: Mapping[str, Any]
    files: tuple[str, ...]

    def text(self) -> str:
        subs: dict[str, Any] = {**self.values, **self.names}
        subs.update({"file": self.files[0], "file2": self.files[-1]})
        return self.template.wording.format(**subs) + " " + self.template.schema.describe()

    def code(self, data_dir: str = "", knobs: Mapping[str, str] | None = None) -> str:
        """The reference code with CSV paths under ``data_dir`` ('' = working directory)."""
        prefix = data_dir.rstrip("/") + "/" if data_dir else ""
        subs: dict[str, Any] = {k: repr(v) for k, v in self.values.items()}
        subs.update({k: repr(v) for k, v in self.names.items()})
        subs.update({"path": repr(prefix + self.files[0]), "path2": repr(prefix + self.files[-1])})
        subs.update(knobs if knobs is not None else self.template.canonical_knobs())
        return self.template.code.format(**subs)


def templates_digest(templates: tuple[Template, ...]) -> str:
    """A short digest over everything in ``templates`` that changes a question or its
    scoring (ids, tiers, wording, code, schema, knobs, variant settings): a fingerprint field."""
    h = hashlib.sha256()
    for t in templates:
        h.update(json.dumps([t.id, t.tier, t.wording, t.code, repr(t.schema), dict(t.knobs),
                             t.allow_rename, t.allow_missing, t.missing_rates]).encode())
    return h.hexdigest()[:16]
