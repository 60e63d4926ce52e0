"""A template-memorising baseline: what a policy that learned answers, not analysis, scores.

:class:`TemplateMemoriser` is trained on train questions and answers without running any
code, from what it saw (generously: it is told each question's template id, which an
agent only infers from the wording):

1. the exact question text seen in train -> the answer it had there;
2. else the template seen in train -> that template's most frequent train answer;
3. else (a held-out template) the most frequent train answer of the same answer form.

On DataAnalysis-v2's test split it should score near zero: a test question uses a
held-out template or a held-out table, and variants change answers between episodes.

    python -m tasks.data_analysis.memorise --train 1000 --test 300

prints its test score by the rule that answered (the figure in docs/data-analysis.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from tasks.data_analysis.generator import Question
from tasks.data_analysis.generator_v2 import generate_question_v2
from tasks.data_analysis.grading_v2 import score_answer_v2
from tasks.data_analysis.reference import answer_arguments
from tasks.data_analysis.splits import Split

__all__ = ["TemplateMemoriser", "draw_questions", "evaluate_memoriser"]


def _form(q: Question) -> str:
    return json.dumps([q.schema.kind, list(q.schema.keys())])


def _most_common(answers: list[str]) -> Any:
    return json.loads(Counter(answers).most_common(1)[0][0])


@dataclass
class TemplateMemoriser:
    """Maps question wording, then template, then answer form to answers seen in train."""

    by_text: dict[str, Any] = field(default_factory=dict)
    by_template: dict[str, Any] = field(default_factory=dict)
    by_form: dict[str, Any] = field(default_factory=dict)

    def fit(self, questions: Iterable[Question]) -> "TemplateMemoriser":
        templates: dict[str, list[str]] = defaultdict(list)
        forms: dict[str, list[str]] = defaultdict(list)
        for q in questions:
            self.by_text[q.text] = q.truth
            templates[q.template_id].append(json.dumps(q.truth, sort_keys=True))
            forms[_form(q)].append(json.dumps(q.truth, sort_keys=True))
        self.by_template = {k: _most_common(v) for k, v in templates.items()}
        self.by_form = {k: _most_common(v) for k, v in forms.items()}
        return self

    def predict(self, q: Question) -> tuple[str, dict[str, Any] | None]:
        """(the rule that answered, the answer tool's arguments; None when it has nothing)."""
        for rule, table, key in (("text", self.by_text, q.text), ("template", self.by_template, q.template_id),
                                 ("form", self.by_form, _form(q))):
            if key in table:
                return rule, answer_arguments(q.schema, table[key])
        return "none", None


def draw_questions(split: Split, n: int, seed: int) -> list[Question]:
    """``n`` questions of ``split``, each from its own seed (as episodes draw them)."""
    seeds = np.random.default_rng(seed).integers(0, 2**62, size=n)
    return [generate_question_v2(np.random.default_rng(int(s)), split=split) for s in seeds]


def evaluate_memoriser(train: list[Question], test: list[Question]) -> dict[str, Any]:
    """Fit on ``train``, score on ``test``: overall and per rule that answered."""
    model = TemplateMemoriser().fit(train)
    per_rule: dict[str, list[float]] = defaultdict(list)
    for q in test:
        rule, args = model.predict(q)
        per_rule[rule].append(0.0 if args is None else score_answer_v2(q.schema, args, q.truth).reward)
    rewards = [r for rs in per_rule.values() for r in rs]
    return {"train": len(train), "test": len(test), "success": sum(rewards) / max(1, len(rewards)),
            "by_rule": {k: {"n": len(v), "success": sum(v) / len(v)} for k, v in sorted(per_rule.items())}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=1000, help="train questions to memorise")
    parser.add_argument("--test", type=int, default=300, help="questions of --split to score")
    parser.add_argument("--split", default="test", choices=("validation", "test", "train"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    train = draw_questions("train", args.train, args.seed)
    test = draw_questions(args.split, args.test, args.seed + 1)
    sys.stdout.write(json.dumps({"split": args.split, **evaluate_memoriser(train, test)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
