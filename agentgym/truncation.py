"""Head-and-tail truncation of tool output with a visible marker.

The agent must always be able to tell that output was cut (otherwise it reasons about a
table it has only half seen), so the marker says how many characters were removed and
how long the original was. Keeping the tail matters: errors and final results are
usually printed last.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Truncated", "truncate_head_tail"]


@dataclass(frozen=True, slots=True)
class Truncated:
    """The (possibly) shortened text and how much was removed."""

    text: str
    truncated: bool
    original_chars: int
    removed_chars: int


def _marker(removed: int, original: int) -> str:
    return f"\n…[truncated {removed} of {original} characters]…\n"


def truncate_head_tail(text: str, limit: int, head_fraction: float = 0.5) -> Truncated:
    """Keep at most ``limit`` characters of ``text``: a head, a marker, and a tail.

    The marker counts toward ``limit``, so the result never exceeds it (for
    ``limit >= 64``; smaller limits keep just the marker).

    >>> truncate_head_tail("abc", 10).text
    'abc'
    >>> r = truncate_head_tail("x" * 1000, 100)
    >>> r.truncated, len(r.text) <= 100, r.removed_chars + len(r.text) > 1000
    (True, True, True)
    """
    original = len(text)
    if original <= limit:
        return Truncated(text, False, original, 0)
    # The marker length depends on the numbers in it; size it with the worst case.
    budget = max(0, limit - len(_marker(original, original)))
    head = int(budget * head_fraction)
    tail = budget - head
    removed = original - head - tail
    body = text[:head] + _marker(removed, original) + (text[original - tail :] if tail else "")
    return Truncated(body, True, original, removed)
