"""Typed answer schemas: what a question's answer looks like and its JSON schema.

A scalar answer is submitted as ``{"value": ...}``; a several-field answer as an object
with exactly the named fields. The JSON schema goes to the ``answer`` tool so that a
wrongly typed call is rejected (``invalid_args``) before scoring; the scorer re-checks
every type itself, because a tool's schema is advice to the agent, not a guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["AnswerKind", "AnswerSchema", "Field"]

AnswerKind = Literal["int", "float", "str", "list", "fields"]


@dataclass(frozen=True)
class Field:
    """One named field of a ``fields`` answer (a scalar kind)."""

    name: str
    kind: Literal["int", "float", "str"]
    decimals: int | None = None


@dataclass(frozen=True)
class AnswerSchema:
    kind: AnswerKind
    decimals: int | None = None
    """For ``float``: the number of decimals the wording asks for (sets the tolerance)."""
    fields: tuple[Field, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind == "float" and self.decimals is None:
            raise ValueError("Expected decimals for a float answer, actual value: None")
        if self.kind == "fields" and not self.fields:
            raise ValueError("Expected at least one field for a 'fields' answer")
        for f in self.fields:
            if f.kind == "float" and f.decimals is None:
                raise ValueError(f"Expected decimals for float field {f.name!r}")

    def keys(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields) if self.kind == "fields" else ("value",)

    def json_schema(self) -> dict[str, Any]:
        """Parameters of the ``answer`` tool for this question."""
        if self.kind == "fields":
            props = {f.name: _scalar_schema(f.kind, f.decimals) for f in self.fields}
        else:
            props = {"value": _scalar_schema(self.kind, self.decimals)}
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }

    def describe(self) -> str:
        """Wording that tells the agent the answer's form (part of the question)."""
        if self.kind == "fields":
            parts = [f"{f.name!r} ({_kind_words(f.kind, f.decimals)})" for f in self.fields]
            return "Answer with the fields " + ", ".join(parts) + "."
        return f"Answer with 'value' ({_kind_words(self.kind, self.decimals)})."


def _scalar_schema(kind: str, decimals: int | None) -> dict[str, Any]:
    if kind == "int":
        return {"type": "integer"}
    if kind == "float":
        return {"type": "number", "description": f"rounded to {decimals} decimals"}
    if kind == "str":
        return {"type": "string"}
    return {"type": "array", "items": {"type": "string"}}


def _kind_words(kind: str, decimals: int | None) -> str:
    return {
        "int": "an integer",
        "float": f"a number rounded to {decimals} decimal places",
        "str": "a string, exactly as it appears in the data",
        "list": "a list of strings exactly as they appear in the data, in any order",
    }[kind]
