"""DataAnalysis-v2: DataAnalysis-v1's tools and sandbox over v2's task source.

What changes from v1 is the tasks, all in :mod:`tasks.data_analysis` (``*_v2`` modules):
72 templates in seven categories (joins, filter-group-rank chains, time series, questions
that name no column, statistics, ...), real splits (tables and templates held out for
validation and test, :mod:`tasks.data_analysis.splits`), per-question precision with a
tolerance of half a unit of the last decimal asked for (:mod:`tasks.data_analysis.grading_v2`),
and variants that keep 50-90% of the rows. The tools, the sandbox lease, the prompts and
the oracle are v1's (:class:`~agentgym.envs.data_analysis.DataAnalysisFamily`).

The split is the env's (``split="test"``); the fingerprint names the split's held-out
tables and templates and every table and template it may draw from, so a train and an
eval env on different splits differ in the fingerprint, visibly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.env import Split, ToolEnv
from agentgym.envs.data_analysis import DataAnalysisFamily, DataAnalysisTask
from agentgym.envs.validation import check_train_part
from agentgym.errors import ConfigError
from agentgym.family import family_from_kwargs
from sandboxes.protocol import BackendName as Backend
from tasks.data_analysis.generator import GeneratorConfig, Question
from tasks.data_analysis.generator_v2 import V2_GENERATOR, generate_question_v2, reachable_templates
from tasks.data_analysis.grading_v2 import score_answer_v2
from tasks.data_analysis.names import check_pieces
from tasks.data_analysis.splits import split_summary, train_part_tables
from tasks.data_analysis.templates_v2 import CATEGORY, TEMPLATES_V2, template_v2_by_id
from tasks.data_analysis.templates import templates_digest

__all__ = ["DataAnalysisV2Env", "DataAnalysisV2Family", "DataAnalysisV2Task"]

def _digest(pieces: tuple[str, ...]) -> str:
    """The name pieces in a fingerprint: their count and a digest of them in order (the
    order decides which piece a draw picks)."""
    return f"{len(pieces)}:{hashlib.sha256(json.dumps(pieces).encode()).hexdigest()[:16]}"


_TASK_ID = re.compile(r"^da2-(train|validation|test)-(all|t[1-4]|[a-z0-9_]+)-(\d+)$")


@dataclass
class DataAnalysisV2Task(DataAnalysisTask):
    """One episode's task. ``task_id`` (``da2-<split>-<scope>-<seed>``) regenerates it."""

    split: str = "train"


class DataAnalysisV2Family(DataAnalysisFamily):
    """v1's family (tools, sandbox, prompts, oracle) drawing v2's questions of one split.

    Args:
        tier: 1-4 to draw only that tier's templates; None draws all the split's.
        template: a v2 template id (e.g. ``"v2_longest_run"``); it must be one of the split's.
        split: the split whose questions ``new_task`` draws by default (the env passes its own).
        backend, python_timeout_s: as in v1.
        generator: the question generator's settings (v2's variants by default).
        invent_names: the chance that a *train* question's files and renamable columns get
            made-up names shaped like the real ones (``tasks.data_analysis.names``), so a
            policy trained on the train tables must copy names, as it must on held-out
            tables. A training augmentation: validation and test questions never change.
        invent_spelled: the chance that a made-up name is spelled with random
            ``name_pieces`` instead of syllables (``tasks.data_analysis.names.piece_speller``).
            Syllables never hold ``ps``, ``x`` or ``qu``; a held-out name does (``tips``),
            and a policy that never copied its tokenizer's piece for them garbles it.
        invent_related: the chance that a made-up train file stem is built from one of the
            question's own column names (``statecrime.csv`` holds ``state``; see
            ``tasks.data_analysis.variants.VariantConfig.relate_probability``), so a policy
            must tell a file from a column that starts it, as on held-out tables.
        invent_values: the chance that an invented train question's text values are made
            up too: its table's category levels and entity names, and the level the
            question quotes (``VariantConfig.value_probability``), so a policy must copy a
            level from the question and from what it printed, as on held-out tables,
            instead of recalling the train tables' few dozen. Single-table questions only.
        invent_column_levels: with ``invent_values``, the chance that each made-up
            category column's levels are named after the column, ``<column>_1``,
            ``<column>_2``, ... (``VariantConfig.level_prefix_probability``), as wine's
            ``cultivar_1`` is: otherwise no made-up level begins with its column's name,
            and a policy never has to tell the level from the column quoted before it.
        name_pieces: lowercase words to spell with: the policy tokenizer's letter tokens
            (the baselines' trainer passes them with ``env.name_pieces: tokenizer``).
        name_hints: after a cell fails on a missing file or column (``FileNotFoundError``,
            ``KeyError``), show the working directory's listing, as the prompt gives it,
            under the error (:func:`agentgym.envs.data_analysis.name_hint`). Every split
            alike; recorded in the fingerprint.
        train_part: ``[k, n]`` draws *train* questions from the k-th of n fixed parts of
            the train tables only (:func:`tasks.data_analysis.splits.train_part_tables`;
            validation and test are whole). SFT on part 0 and RL on part 1 puts RL on
            tables imitation never showed, as the test split's held-out tables are.
    """

    version = 2  # v2: the v2 task source (templates, splits, precision-tied tolerance)

    def __init__(
        self,
        tier: int | None = None,
        template: str | None = None,
        *,
        split: Split = "train",
        backend: Backend | None = None,
        python_timeout_s: float = 30.0,
        generator: GeneratorConfig | None = None,
        invent_names: float = 0.0,
        invent_spelled: float = 0.0,
        invent_related: float = 0.0,
        invent_values: float = 0.0,
        invent_column_levels: float = 0.0,
        name_pieces: Sequence[str] = (),
        name_hints: bool = False,
        train_part: Sequence[int] | None = None,
    ) -> None:
        for name, value in (("invent_names", invent_names), ("invent_spelled", invent_spelled),
                            ("invent_related", invent_related), ("invent_values", invent_values),
                            ("invent_column_levels", invent_column_levels)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ConfigError(f"Expected {name} in [0, 1], actual value: {value!r}")
        for name, value, what in (("invent_related", invent_related, "it relates the invented stems"),
                                  ("invent_values", invent_values, "it makes up the invented tables' values")):
            if value and not invent_names:
                raise ConfigError(f"Expected invent_names > 0 with {name} ({what}), "
                                  f"actual value: invent_names={invent_names!r}")
        if invent_column_levels and not invent_values:
            raise ConfigError("Expected invent_values > 0 with invent_column_levels (it names the made-up levels), "
                              f"actual value: invent_values={invent_values!r}")
        if invent_spelled:
            if not invent_names:
                raise ConfigError("Expected invent_names > 0 with invent_spelled (it spells the invented names), "
                                  f"actual value: invent_names={invent_names!r}")
            try:
                name_pieces = check_pieces(name_pieces)
            except ValueError as e:
                raise ConfigError(f"{e} (invent_spelled needs name_pieces)") from None
        if split not in self.splits:
            raise ConfigError(f"Expected split in {self.splits}, actual value: {split!r}")
        self.train_part = check_train_part(train_part)
        self.part_tables = None if self.train_part is None else frozenset(train_part_tables(*self.train_part))
        if template is not None:
            try:
                template_v2_by_id(template)
            except KeyError as e:
                raise ConfigError(str(e)) from None
            if template_v2_by_id(template) not in reachable_templates(split, self._tables_of(split)):
                raise ConfigError(f"Expected a template of split {split!r}, actual value: {template!r} "
                                  "(held out for another split, or tied to tables of another split"
                                  f"{' or of another train_part' if self._tables_of(split) else ''})")
        super().__init__(tier, None, backend=backend, python_timeout_s=python_timeout_s,
                         generator=generator or V2_GENERATOR, name_hints=name_hints)
        self.template = template
        self.split = split
        self.invent_names = float(invent_names)
        self.invent_spelled = float(invent_spelled)
        self.invent_related = float(invent_related)
        self.invent_values = float(invent_values)
        self.invent_column_levels = float(invent_column_levels)
        self.name_pieces = tuple(name_pieces) if invent_spelled else ()

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> DataAnalysisV2Task:
        if "task_id" in options:
            match = _TASK_ID.match(str(options["task_id"]))
            if match is None:
                raise ConfigError("Expected a task_id like 'da2-test-all-123' or 'da2-train-t2-7', actual value: "
                                  f"{options['task_id']!r}")
            if match.group(1) != split:  # replaying another split's task would mix the splits
                raise ConfigError(f"Expected a task_id of split {split!r}, actual value: {options['task_id']!r}")
            scope, seed = match.group(2), int(match.group(3))
        else:
            scope, seed = self._scope, int(rng.integers(0, 2**62))
        if split not in self.splits:
            raise ConfigError(f"Expected split in {self.splits}, actual value: {split!r}")
        return DataAnalysisV2Task(f"da2-{split}-{scope}-{seed}", scope, seed, split=split)

    def _question_v2(self, task: DataAnalysisV2Task) -> Question:
        rng = np.random.default_rng(task.seed)
        scope = task.scope
        tier = int(scope[1:]) if scope[0] == "t" and scope[1:].isdigit() else None
        template = None if scope == "all" or tier is not None else scope
        config = self.generator
        if task.split == "train" and self.invent_names > 0:
            config = replace(config, variant=replace(config.variant, invent_probability=self.invent_names,
                                                     spell_probability=self.invent_spelled,
                                                     spell_pieces=self.name_pieces,
                                                     relate_probability=self.invent_related,
                                                     value_probability=self.invent_values,
                                                     level_prefix_probability=self.invent_column_levels))
        return generate_question_v2(rng, split=task.split, tier=tier, template_id=template,  # type: ignore[arg-type]
                                    config=config, tables=self._tables_of(task.split))

    def _tables_of(self, split: str) -> frozenset[str] | None:
        """The tables ``split``'s questions may use beyond the split's rule: the train part's
        (``train_part``, train only; validation and test are whole)."""
        return self.part_tables if split == "train" else None

    async def open_episode(self, task: DataAnalysisTask) -> None:
        """Draw the v2 question (in a worker thread: pandas on the host), then v1's start."""
        if task.question is None and isinstance(task, DataAnalysisV2Task):
            task.question = await asyncio.to_thread(self._question_v2, task)
        await super().open_episode(task)

    def score(self, task: DataAnalysisTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        q = task.question
        score = score_answer_v2(q.schema, answer, q.truth)
        return score.reward, {**self.task_facts(task), **score.diagnostics()}

    def task_facts(self, task: DataAnalysisTask) -> dict[str, Any]:
        q = task.question
        if q is None:  # v2 draws the question when the episode opens
            return {}
        return {"tier": q.tier, "template": q.template_id, "category": CATEGORY.get(q.template_id)}

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = super().fingerprint_fields()
        fields.update({
            "task_source": "tasks.data_analysis/v2",
            "templates": templates_digest(TEMPLATES_V2),
            "generator": asdict(self.generator),
            "split": split_summary(self.split),  # type: ignore[arg-type]
            **({"invent_names": self.invent_names} if self.invent_names and self.split == "train" else {}),
            **({"invent_spelled": self.invent_spelled, "name_pieces": _digest(self.name_pieces)}
               if self.invent_spelled and self.invent_names and self.split == "train" else {}),
            **({"invent_related": self.invent_related}
               if self.invent_related and self.invent_names and self.split == "train" else {}),
            **({"invent_values": self.invent_values}
               if self.invent_values and self.invent_names and self.split == "train" else {}),
            **({"invent_column_levels": self.invent_column_levels}
               if self.invent_column_levels and self.invent_values and self.invent_names and self.split == "train"
               else {}),
            **({"train_part": list(self.train_part), "train_part_tables": sorted(self.part_tables or ())}
               if self.train_part is not None and self.split == "train" else {}),
        })
        return fields


class DataAnalysisV2Env(ToolEnv):
    """DataAnalysis-v2: ``ToolEnv(DataAnalysisV2Family(...))``, registered as
    ``agentgym/DataAnalysis-v2``.

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"`` (held-out tables and templates).
        max_turns: steps before truncation (the oracle needs two).
        **kwargs: ``DataAnalysisV2Family``'s (``tier``, ``template``, ``backend``,
            ``python_timeout_s``, ``generator``) and :class:`agentgym.ToolEnv`'s.
    """

    family_class = DataAnalysisV2Family

    def __init__(self, *, split: Split = "train", max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(split=split, max_turns=max_turns, **kwargs)
        self.family: DataAnalysisV2Family

    def make_family(self, family_kwargs: dict[str, Any], *, parser: Any, split: str) -> DataAnalysisV2Family:
        return family_from_kwargs(DataAnalysisV2Family, {**family_kwargs, "split": split},  # type: ignore[return-value]
                                  owner=type(self).__name__)
