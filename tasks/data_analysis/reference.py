"""Run a template's reference code on the host, exactly as the oracle runs it remotely.

The code is executed in a fresh namespace (it does its own imports) and must leave a
JSON-native ``result``. The value is passed through a JSON round trip so the host truth
and what the oracle prints in the sandbox have the same types.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tasks.data_analysis.errors import ReferenceCodeError
from tasks.data_analysis.schema import AnswerSchema

__all__ = ["run_reference", "ORACLE_EPILOGUE", "is_valid_answer", "answer_arguments"]

ORACLE_EPILOGUE = "\nimport json as _json\nprint(_json.dumps(result))\n"
"""Appended by the oracle to the reference code so the sandbox prints the result."""


def run_reference(code: str) -> Any:
    """Execute reference code; return its ``result`` after a JSON round trip.

    Raises :class:`ReferenceCodeError` if the code raises or leaves a value that is
    not JSON-native. NaN is allowed through (the ambiguity filter rejects it).
    """
    namespace: dict[str, Any] = {"__name__": "__reference__"}
    try:
        # No warnings.catch_warnings() here: it swaps process-global state and questions
        # are generated in worker threads. The reference code is kept warning-free instead.
        exec(compile(code, "<reference>", "exec"), namespace)  # noqa: S102 - our own code
    except Exception as e:
        raise ReferenceCodeError(f"reference code raised {type(e).__name__}: {e}") from e
    if "result" not in namespace:
        raise ReferenceCodeError("reference code did not set `result`")
    try:
        return json.loads(json.dumps(namespace["result"]))
    except (TypeError, ValueError) as e:
        raise ReferenceCodeError(
            f"reference result {namespace['result']!r} is not JSON-native: {e}"
        ) from e


def _valid_scalar(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "str":
        return isinstance(value, str) and value.strip() != ""
    if kind == "list":
        return (isinstance(value, list) and len(value) > 0
                and all(isinstance(v, str) and v.strip() for v in value))
    return False


def is_valid_answer(schema: AnswerSchema, value: Any) -> bool:
    """Whether a reference value is a proper answer (typed, finite, non-empty)."""
    if schema.kind != "fields":
        return _valid_scalar(schema.kind, value)
    if not isinstance(value, dict) or set(value) != set(schema.keys()):
        return False
    return all(_valid_scalar(f.kind, value[f.name]) for f in schema.fields)


def answer_arguments(schema: AnswerSchema, value: Any) -> dict[str, Any]:
    """The ``answer`` tool arguments that submit ``value``."""
    return dict(value) if schema.kind == "fields" else {"value": value}
