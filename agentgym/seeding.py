"""Seeds derived from several keys: one function, so every part of the project that
seeds a draw per (run, task, sample, turn) or per (step, rank) derives it the same way."""

from __future__ import annotations

import numpy as np

__all__ = ["derived_seed"]


def derived_seed(*keys: int) -> int:
    """A 32-bit seed derived from ``keys`` (a run's seed, a task, a sample, a turn):
    distinct keys give unrelated seeds, which consecutive integers are not for every
    generator (``seed + turn`` gives episode i's second turn episode i + 1's first seed).
    Keys are taken modulo 2**64, so a negative key is accepted too.

    >>> derived_seed(7, 0) != derived_seed(7, 1)
    True
    >>> derived_seed(7, 0) == derived_seed(7, 0)
    True
    """
    return int(np.random.SeedSequence([int(k) & (2**64 - 1) for k in keys]).generate_state(1)[0])
