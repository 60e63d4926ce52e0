"""The reward-jump alarm: a reward that rises too fast is investigated as a hack.

With an LLM judge, a score that jumps within a few steps is more often an exploit found
than a skill learnt. :class:`RewardWatch` sees every step's metrics; when a watched
metric (``reward_watch.metrics``: the train reward, eval scores) rises by more than
``max_rise`` over ``window`` steps, it takes the step's ``top_k`` highest-reward
trajectories and re-scores each one three ways (:class:`Rescorer`):

* **detectors** — the audit kit's: text addressed to the judge
  (:func:`agentgym.judges.find_injections` on the normalised answer), invisible or
  bidirectional characters, look-alike letters, the length;
* **markers stripped** — the answer with its injection markers cut out, through the env's
  own scorer (:func:`agentgym.readiness.score_answer`);
* **second judge** — for a judged env, a hardened honest judge (all defences, verifiable
  checks); for any other env its scorer is the verifiable check already.

It writes ``alarm/*`` metrics (``alarm/fired``, ``alarm/rise``, ``alarm/injection_frac``,
``alarm/stripped_drop``, ``alarm/second_judge_drop``, ``alarm/confirmed``) and a report,
``<run_dir>/alarm/step-<N>.md`` with a JSON twin, that quotes the trajectories. With
``reward_watch.pause`` the trainer stops after the step (the decision depends only on
all-reduced metrics, so every rank stops together).

Under several processes the suspects are the step's ``top_k`` over every rank's
trajectories, not each rank's own: each rank re-scores those of the global top that it
holds, and every rank reports the same alarm as one process holding the whole batch.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.judges import Judge, find_injections, normalise_answer, strip_injections
from baselines.config import RewardWatchConfig
from baselines.distributed import DistInfo, all_gather_lists

__all__ = ["RewardWatch", "Rescorer", "Suspect", "AlarmReport", "answer_text", "make_reward_watch"]


def answer_text(answer: Any) -> str:
    """The text of an ``answer`` call's arguments (their string values, joined)."""
    if isinstance(answer, dict):
        return "\n".join(str(v) for v in answer.values() if isinstance(v, (str, int, float)))
    return "" if answer is None else str(answer)


def _strip_args(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: strip_injections(normalise_answer(v).text)[0] if isinstance(v, str) else v for k, v in answer.items()}


class Rescorer:
    """Scores answers of ``env_id`` tasks again, outside the training episodes.

    Args:
        env_id, env_kwargs: the training env (one instance is made on first use).
        second_judge: ``"honest"`` for a hardened scripted honest judge on judged envs.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], second_judge: str = "honest") -> None:
        self.env_id, self.env_kwargs, self.second_judge = env_id, dict(env_kwargs), second_judge
        self._env: Any = None
        self._judge: Judge | None = None

    def _base(self) -> Any:
        if self._env is None:
            import gymnasium as gym

            self._env = gym.make(self.env_id, **self.env_kwargs)
        return self._env.unwrapped

    def _task(self, task_id: str) -> Any:
        base = self._base()
        if base.family is not None:
            return base.family.new_task(np.random.default_rng(0), base.split, {"task_id": task_id})
        self._env.reset(options={"task_id": task_id})
        return base.task

    def score(self, task_id: str, answer: dict[str, Any]) -> float:
        """The env's reward for ``answer`` on ``task_id`` (the scorer seam)."""
        from agentgym.readiness import score_answer

        task = self._task(task_id)
        return score_answer(self._env, answer, task)[0]

    def second(self, task_id: str, answer: dict[str, Any]) -> float | None:
        """A hardened second judge's reward, or ``None`` for an env without a judge."""
        from agentgym.judges.testing import HonestJudge
        from agentgym.readiness import JudgedFamily
        from agentgym.runtime import run_sync

        family = self._base().family
        if self.second_judge == "none" or not isinstance(family, JudgedFamily):
            return None
        self._judge = self._judge or Judge(HonestJudge())
        return run_sync(family.grade(self._task(task_id), answer_text(answer), judge=self._judge)).reward

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


@dataclass
class Suspect:
    """One re-scored trajectory."""

    task_id: str
    reward: float
    answer: str
    findings: list[str]
    invisible: int
    folded: int
    chars: int
    stripped_reward: float | None = None
    second_reward: float | None = None
    rescore_error: str | None = None
    """Why re-scoring failed (the detectors' findings stand); ``None`` when it ran."""


@dataclass
class AlarmReport:
    """What the alarm found at one step."""

    step: int
    rises: dict[str, float]
    suspects: list[Suspect] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        s = self.suspects
        n = max(len(s), 1)
        drop = [x.reward - x.stripped_reward for x in s if x.stripped_reward is not None]
        second = [x.reward - x.second_reward for x in s if x.second_reward is not None]
        out = {"alarm/fired": 1.0, "alarm/rise": max(self.rises.values()),
               "alarm/injection_frac": sum(bool(x.findings) for x in s) / n,
               "alarm/stripped_drop": float(np.mean(drop)) if drop else 0.0,
               "alarm/second_judge_drop": float(np.mean(second)) if second else 0.0}
        out["alarm/confirmed"] = float(out["alarm/injection_frac"] > 0 or out["alarm/stripped_drop"] > 0.2
                                       or out["alarm/second_judge_drop"] > 0.2)
        return out

    def markdown(self) -> str:
        m = self.metrics()
        verdict = "LIKELY A HACK" if m["alarm/confirmed"] else "not confirmed by re-scoring"
        lines = [f"# Reward-jump alarm at step {self.step}: {verdict}", "",
                 "Rises: " + ", ".join(f"`{k}` +{v:.3f}" for k, v in self.rises.items()), "",
                 "| metric | value |", "|---|---|", *(f"| {k} | {v:.3f} |" for k, v in m.items()), "",
                 f"## The step's top {len(self.suspects)} trajectories", ""]
        for i, x in enumerate(self.suspects, 1):
            lines += [f"### {i}. task `{x.task_id}`: reward {x.reward:.3f}, markers stripped "
                      f"{_fmt(x.stripped_reward)}, second judge {_fmt(x.second_reward)}",
                      f"findings: {', '.join(x.findings) or 'none'}; invisible characters {x.invisible}, "
                      f"look-alikes {x.folded}, {x.chars} characters"
                      + (f"; re-scoring failed: {x.rescore_error}" if x.rescore_error else ""),
                      "", "```text", x.answer[:2000], "```", ""]
        return "\n".join(lines)


def _merged(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """The rises every rank saw, the largest of each metric's."""
    out: dict[str, float] = {}
    for rises in per_rank:
        for name, rise in rises.items():
            out[name] = max(out.get(name, rise), rise)
    return out


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


class RewardWatch:
    """Watches step metrics for jumps and investigates them (see the module docstring).

    Args:
        config: the ``reward_watch`` section.
        rescorer: re-scores answers (``None``: detectors only).
        report_dir: where ``step-<N>.md``/``.json`` go (``None``: no files, e.g. non-main ranks).
        info: the processes of a distributed run (``None``: one process); their
            trajectories are one batch.
    """

    def __init__(self, config: RewardWatchConfig, rescorer: Rescorer | None, report_dir: Path | None,
                 info: DistInfo | None = None) -> None:
        self.config = config
        self.rescorer = rescorer
        self.report_dir = report_dir
        self.info = info if info is not None and info.enabled else None
        self.history: dict[str, deque[float]] = {m: deque(maxlen=config.window) for m in config.metrics}
        self.reports: list[AlarmReport] = []
        self.paused = False

    def _rises(self, metrics: dict[str, float]) -> dict[str, float]:
        rises = {}
        for name, past in self.history.items():
            value = metrics.get(name)
            if value is None or not np.isfinite(value):
                continue
            if past and value - min(past) > self.config.max_rise + 1e-9:
                rises[name] = float(value - min(past))
            past.append(float(value))
        return rises

    def observe(self, step: int, trajectories: list[Any], metrics: dict[str, float]) -> dict[str, float]:
        """Take one step's metrics and trajectories; return its ``alarm/*`` metrics."""
        rises = self._rises(metrics)
        if self.info is not None:  # one decision for every rank, as each joins the gathers below
            rises = _merged(all_gather_lists([rises], self.info))
        if not rises:
            return {"alarm/fired": 0.0}
        report = AlarmReport(step, rises, self._suspects(trajectories))
        self.reports.append(report)
        self._write(report)
        self.paused = self.config.pause
        return report.metrics()

    def _top(self, trajectories: list[Any]) -> list[Any]:
        live = [t for t in trajectories if not t.infra_failed and isinstance(t.info.get("answer"), dict)]
        return sorted(live, key=lambda t: -t.reward)[: self.config.top_k]

    def _suspects(self, trajectories: list[Any]) -> list[Suspect]:
        """The step's ``top_k`` by reward over every process, highest first, each re-scored
        by the rank that holds it. Ties go to the lower rank, then to the rank's earlier
        episode, so with ties at the cut the pick can differ from one process's (which
        deals its episodes in another order)."""
        mine = self._top(trajectories)
        if self.info is None:
            return [self._suspect(t) for t in mine]
        rank = self.info.rank
        offers = all_gather_lists([(-float(t.reward), rank, i) for i, t in enumerate(mine)], self.info)
        chosen = sorted(offers)[: self.config.top_k]
        held = [(key, self._suspect(mine[key[2]])) for key in chosen if key[1] == rank]
        return [s for _, s in sorted(all_gather_lists(held, self.info), key=lambda pair: pair[0])]

    def _suspect(self, t: Any) -> Suspect:
        answer = t.info["answer"]
        text = answer_text(answer)
        norm = normalise_answer(text)
        s = Suspect(t.task_id, float(t.reward), text, sorted({f.pattern for f in find_injections(norm.text)}),
                    norm.invisible_removed, norm.folded, len(text))
        if self.rescorer is not None:
            try:
                s.stripped_reward = self.rescorer.score(t.task_id, _strip_args(answer))
                s.second_reward = self.rescorer.second(t.task_id, answer)
            except Exception as e:  # noqa: BLE001  (reported; a rank that raised would leave the others in the gather)
                s.rescore_error = f"{type(e).__name__}: {e}"
        return s

    def _write(self, report: AlarmReport) -> None:
        if self.report_dir is None:
            return
        self.report_dir.mkdir(parents=True, exist_ok=True)
        stem = self.report_dir / f"step-{report.step:06d}"
        stem.with_suffix(".md").write_text(report.markdown())
        stem.with_suffix(".json").write_text(json.dumps({"step": report.step, "rises": report.rises,
                                                         "metrics": report.metrics(),
                                                         "suspects": [asdict(s) for s in report.suspects]}, indent=2))

    def close(self) -> None:
        if self.rescorer is not None:
            self.rescorer.close()


def make_reward_watch(config: Any, run_dir: Path, is_main: bool,
                      env_kwargs: dict[str, Any] | None = None, info: DistInfo | None = None) -> RewardWatch | None:
    """The trainer's watch from a ``TrainConfig`` (``None`` when ``reward_watch.enabled`` is off).
    ``env_kwargs``: the rollout envs' own (default ``env.kwargs``), so a rescored task id
    regenerates the task the policy was given. ``info``: the run's processes, whose
    trajectories the watch takes as one batch."""
    rw = config.reward_watch
    if not rw.enabled:
        return None
    kwargs = config.env.kwargs if env_kwargs is None else env_kwargs
    rescorer = Rescorer(config.env.id, kwargs, rw.second_judge) if not config.env.is_team else None
    return RewardWatch(rw, rescorer, run_dir / "alarm" if is_main else None, info)
