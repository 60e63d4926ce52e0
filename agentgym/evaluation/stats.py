"""The statistics an evaluation reports: a success rate's confidence interval, pass@k
and mean@k over repeated samples of a task, and a paired test between two runs.

Why these: an eval of a few hundred episodes has a success-rate error of several points,
so a bare rate invites reading noise as progress. The Wilson score interval stays inside
[0, 1] and keeps its coverage at small n and rates near 0 or 1, where the normal
approximation does not (Wilson, 1927; Brown, Cai & DasGupta, 2001). Two runs over the
same tasks are compared pairwise (McNemar's exact test on discordant tasks), which is far
more sensitive than comparing two independent intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["wilson_interval", "pass_at_k", "mcnemar_exact"]


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of ``successes / n`` (95% by default); ``(0, 1)`` at n = 0.

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of a task, ``c`` of them correct:
    the chance that at least one of ``k`` samples drawn without replacement is correct,
    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2)
    (0.25, 1.0, 0.0)
    """
    if not 0 < k <= n:
        raise ValueError(f"Expected 0 < k <= n, actual values: k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float | int]:
    """McNemar's exact test on paired outcomes (task ``i`` solved in run a, in run b).

    Only discordant pairs carry information: ``a_only`` tasks solved by a alone and
    ``b_only`` by b alone. Under "no difference" each discordant pair is a fair coin, so
    the two-sided p-value is the binomial tail of ``min(a_only, b_only)`` doubled.

    >>> mcnemar_exact([True] * 10 + [False] * 5, [False] * 10 + [False] * 5)["p_value"] < 0.01
    True
    """
    if len(a) != len(b):
        raise ValueError(f"Expected paired outcomes of equal length, actual lengths: {len(a)}, {len(b)}")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    m = a_only + b_only
    if m == 0:
        return {"a_only": 0, "b_only": 0, "p_value": 1.0}
    tail = sum(math.comb(m, i) for i in range(min(a_only, b_only) + 1)) / 2 ** m
    return {"a_only": a_only, "b_only": b_only, "p_value": min(1.0, 2 * tail)}
