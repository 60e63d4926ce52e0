"""Reading the jsonl files users bring: every problem names its file and line.

Rows are checked strictly: a field of the wrong type is an error that says what was
expected, never a value coerced with ``str()`` (an id of ``5`` or an answer list
written as a dict is a mistake in the file, and coercing it hides that).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["RowReader", "jsonl_rows"]

def _shown(value: Any) -> str:
    return f"{json.dumps(value, ensure_ascii=False)[:80]} ({type(value).__name__})"


def jsonl_rows(path: str | os.PathLike[str], error: type[ValueError], expected: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of ``path``.

    Raises ``error`` with ``file:line`` for bytes that are not UTF-8, lines that are not
    JSON and JSON that is not an object (``expected`` says what a line should be).
    """
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{Path(path)}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise error(f"{where}: byte {raw[e.start]:#04x} at column {e.start + 1} is not UTF-8; save the file "
                            "as UTF-8 (for example: iconv -f latin1 -t utf-8 in > out)") from e
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise error(f"{where}: not JSON ({e}); expected {expected}, actual line: {line[:120]!r}") from e
            if not isinstance(row, dict):
                raise error(f"{where}: expected {expected}, actual value: {_shown(row)}")
            yield lineno, row


class RowReader:
    """Typed access to one row's fields; errors name the file, the line and the field."""

    def __init__(self, row: dict, path: str | os.PathLike[str], lineno: int, error: type[ValueError]) -> None:
        self.row, self.where, self.error = row, f"{Path(path)}:{lineno}", error

    def fail(self, message: str) -> ValueError:
        return self.error(f"{self.where}: {message}")

    def string(self, name: str, *, blank_ok: bool = False) -> str:
        """A string field, non-blank unless ``blank_ok``."""
        value = self.row.get(name)
        if not isinstance(value, str) or not (blank_ok or value.strip()):
            shape = "a string" if blank_ok else "a non-empty string"
            raise self.fail(f'expected "{name}" to be {shape}, actual value: {self._value(name)}')
        return value

    def optional_string(self, name: str) -> str | None:
        """A non-blank string field, or None when it is absent or null."""
        return None if self.row.get(name) is None else self.string(name)

    def string_list(self, name: str, *, allow_single: bool = False) -> list[str]:
        """A non-empty list of non-blank strings (or one such string, when ``allow_single``)."""
        value = self.row.get(name)
        if allow_single and isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            shape = "a non-empty string or a non-empty list of them" if allow_single else \
                "a non-empty list of non-empty strings"
            raise self.fail(f'expected "{name}" to be {shape}, actual value: {self._value(name)}')
        return value

    def optional_string_list(self, name: str) -> list[str] | None:
        return None if self.row.get(name) is None else self.string_list(name)

    def optional_objects(self, name: str) -> list[dict] | None:
        """A list of JSON objects, or None when the field is absent or null."""
        value = self.row.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f'expected "{name}" to be a list of objects, actual value: {self._value(name)}')
        return value

    def _value(self, name: str) -> str:
        return _shown(self.row[name]) if name in self.row else "missing"
