"""Stop a run whose infrastructure is down, instead of training on nothing for days.

Episodes that infrastructure failed are dropped from the batch, never fed to the learner
as a zero reward (DESIGN.md, practice 1). That is right for a flaky sandbox, but when the
engine stalls for good every episode is dropped: the run keeps stepping, learns nothing
and reports nothing wrong. :class:`OutageWatch` counts the steps in a row where
infrastructure failed more than ``rollout.outage_frac`` of the episodes (the step's
counts over every process, ``baselines.rollout_stats``, so every rank decides alike); at ``rollout.outage_steps`` the trainer saves a
checkpoint and stops, and the log names the failures' commonest causes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping


__all__ = ["OutageWatch"]

logger = logging.getLogger(__name__)


class OutageWatch:
    """Counts outage steps in a row; :meth:`observe` is True when the run should stop.

    Args:
        frac: a step is an outage step when more than this share of its episodes failed.
        steps: outage steps in a row that stop the run (0: never stop).
    """

    def __init__(self, frac: float, steps: int) -> None:
        self.frac, self.steps = frac, steps
        self.in_a_row = 0
        self.causes: Counter[str] = Counter()
        """This process's causes over the current run of outage steps."""

    def observe(self, metrics: Mapping[str, float], causes: Mapping[str, int]) -> bool:
        """Take one step's rollout counts and its dropped episodes' causes."""
        if self.steps == 0:
            return False
        dropped = float(metrics.get("rollout/dropped_infra_failed", 0.0))  # every process's (rollout_stats)
        total = dropped + float(metrics.get("rollout/episodes", 0.0))
        if not (total and dropped / total > self.frac):
            self.in_a_row, self.causes = 0, Counter()
            return False
        self.in_a_row += 1
        self.causes.update(causes)
        if self.in_a_row < self.steps:
            return False
        commonest = "; ".join(f"{n} x {cause}" for cause, n in self.causes.most_common(3)) or "not reported"
        logger.error(
            "infrastructure failed more than %.0f%% of the episodes in each of the last %d steps (%d of %d in the "
            "last): stopping after a checkpoint. Commonest causes: %s. Once it is back, rerun with resume=true.",
            100 * self.frac, self.in_a_row, dropped, total, commonest)
        return True
