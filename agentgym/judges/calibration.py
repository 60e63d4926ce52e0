"""Calibration items: answers whose verdicts are known, graded whenever a judge opens.

A judge model that cannot tell a right answer from a wrong one, that marks everything
met, or that cannot keep to the verdict format, must not score a single episode. So
:meth:`agentgym.judges.Judge.open` grades these items through the judge's own pipeline
and refuses the judge (:class:`~agentgym.judges.errors.JudgeRefused`) if any verdict is
off by more than the item's tolerance. The items are plain on purpose: they measure
whether the judge can grade at all; resisting attacks is the other defences' job.
Passing them is a floor, not a certificate: the audit kit is what shows a judge's
weaknesses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from agentgym.judges.rubric import Criterion, Rubric

__all__ = ["CalibrationItem", "CALIBRATION_ITEMS", "calibration_digest"]


@dataclass(frozen=True)
class CalibrationItem:
    """One graded example: the judge's score must be within ``tolerance`` of ``expected``."""

    name: str
    question: str
    rubric: Rubric
    answer: str
    expected: float
    tolerance: float = 0.25


_PLANET = Rubric((
    Criterion("names_planet", "Names the right body.", reference=("Jupiter",)),
    Criterion("gives_mass", "Gives how many times heavier than our world it is.", reference=("318",)),
), name="calibration-planet")
_PLANET_Q = "Which planet is the largest in the Solar System, and about how many Earth masses is it?"

_SALES = Rubric((
    Criterion("names_column", "Names the right column.", reference=("price",)),
    Criterion("gives_strength", "Gives the strength of the link as a number.", reference=("0.81",)),
    Criterion("gives_caveat", "Adds a caveat about cause.", reference=("causation|causal|confound",)),
), name="calibration-sales")
_SALES_Q = "Which column of sales.csv is most associated with revenue? Give the correlation and one caveat."

CALIBRATION_ITEMS: tuple[CalibrationItem, ...] = (
    CalibrationItem("planet_right", _PLANET_Q, _PLANET,
                    "Jupiter is the largest planet; its mass is about 318 times that of Earth.", 1.0),
    CalibrationItem("planet_wrong", _PLANET_Q, _PLANET, "Saturn is the biggest one, at roughly 95 times ours.", 0.0),
    CalibrationItem("planet_half", _PLANET_Q, _PLANET, "Jupiter is the largest, though I do not know by how much.",
                    0.5),
    CalibrationItem("sales_right", _SALES_Q, _SALES,
                    "Price is most associated with revenue (Pearson r = 0.81 over 120 rows). Correlation is not "
                    "causation: a confound such as season could drive both.", 1.0),
    CalibrationItem("sales_wrong", _SALES_Q, _SALES, "Quantity, I believe; r is about 0.2.", 0.0, 0.2),
    CalibrationItem("sales_partial", _SALES_Q, _SALES, "Price matters most here, r = 0.81.", 2 / 3, 0.2),
)


def calibration_digest(items: tuple[CalibrationItem, ...] = CALIBRATION_ITEMS) -> str:
    """A hash of the items (fingerprinted: other items, another bar for judges)."""
    blob = json.dumps([asdict(i) for i in items], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
