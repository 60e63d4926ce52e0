"""A Gymnasium space for arbitrary Unicode text of bounded length.

``gymnasium.spaces.Text`` only admits a fixed character set, but agents read and write any
Unicode (code, other languages, emoji), so the env's spaces accept any ``str`` up to a
length limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

__all__ = ["UnicodeText"]

# Printable samples across scripts, plus whitespace, for ``sample()``.
_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,;:!?{}[]\"'<>/=+-*"
    "äöüßéèçñ日本語中文한국어Ελληνικάкириллица🙂"
)


class UnicodeText(Space[str]):
    """Any ``str`` with ``min_length <= len <= max_length`` characters."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | np.random.Generator | None = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"Expected 0 <= min_length <= max_length, actual values: {min_length}, {max_length}")
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=n)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (other.min_length, other.max_length) == (self.min_length, self.max_length)
