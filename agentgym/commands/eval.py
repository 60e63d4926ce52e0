"""``agentgym eval``: a model (or a scripted policy) on an env, saved, resumable, comparable.

``agentgym run --policy`` goes through the same functions here (:func:`execute_run`), so
a policy's run and a model's print the same summary and write the same records.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from agentgym.commands.console import cli_console

__all__ = ["eval_command", "compare_command", "summary_command", "execute_run", "Progress", "default_out"]


class Progress:
    """A rich progress bar on a terminal; off one (a pipe, a log file, CI) a plain line at
    every tenth of the run and at the end, which a log can be grepped for."""

    def __init__(self, label: str, total: int, done: int = 0, *, stream: Any = None) -> None:
        self.label, self.total = label, total
        self.stream = stream if stream is not None else sys.stderr
        self.n = self.ok = self.infra = 0
        self.start = time.perf_counter()
        self._next_line = 0.1
        self._bar: Any = None
        self._done = done
        if self.stream.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("success {task.fields[success]} · infra-failed "
                                                "{task.fields[infra]}"), TimeElapsedColumn(),
                                     console=cli_console(stderr=True), transient=False)
            self._task = self._bar.add_task(label, total=total, completed=done, success="n/a", infra=0)

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            self._bar.__enter__()
        elif self._done:
            self._line(f"resuming: {self._done} episodes already in the run file")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def _line(self, text: str) -> None:
        self.stream.write(f"[{self.label}] {text}\n")
        self.stream.flush()

    def __call__(self, record: dict[str, Any]) -> None:
        self.n += 1
        self.infra += int(bool(record.get("infra_failed")))
        self.ok += int(bool(record.get("success")) and not record.get("infra_failed"))
        scored = self.n - self.infra
        rate = f"{self.ok / scored:.1%}" if scored else "n/a"  # (none scored is not 0%)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, success=rate, infra=self.infra)
            return
        done = self._done + self.n
        if done >= self.total or done / self.total >= self._next_line:
            while done / self.total >= self._next_line:
                self._next_line += 0.1
            self._line(f"{done}/{self.total} episodes, success {rate}, infra-failed {self.infra}, "
                       f"{self.n / max(1e-9, time.perf_counter() - self.start):.2f} episodes/s")


def default_out(env_id: str, agent: dict[str, Any]) -> Path:
    """``runs/eval/<env>-<model or policy>-<UTC time>.jsonl``."""
    who = str(agent.get("model") or agent.get("name") or "agent").replace("/", "_").replace(":", "_")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / "eval" / f"{env_id.replace('/', '_')}-{who}-{stamp}.jsonl"


def execute_run(plan: Any, agent: Any, *, out: str | Path | None, resume: bool,
                label: str) -> tuple[Any, dict[str, Any]]:
    """Run ``plan`` with ``agent`` under a progress display; save the summary beside the
    records (``RUN.summary.json``) and return the result and the summary."""
    from agentgym.evaluation.records import read_run
    from agentgym.evaluation.run import close_agent, run_eval
    from agentgym.evaluation.summary import summarize

    done = 0
    if resume and out is not None and Path(out).exists():
        done = sum(1 for r in read_run(out, keep_infra_failed=False).records)
    try:
        with Progress(label, plan.episodes, done) as progress:
            result = run_eval(plan, agent, out=out, resume=resume, on_record=progress)
    finally:
        close_agent(agent)
    summary = summarize(result.header, result.records, elapsed_s=result.elapsed_s, played=result.played,
                        played_tokens=result.tokens_played, lost=len(result.lost))
    if result.sandbox:
        summary.update(result.sandbox)
    client = getattr(agent, "client", None)
    if client is not None:  # what the model server put the run through (not in any record)
        summary["model_server"] = {"retries": client.retries, "rate_limited": client.gate.limited,
                                   "rate_limit_held_s": round(client.gate.held_s, 3)}
    if out is not None:
        summary["records"] = str(out)
        Path(str(out) + ".summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return result, summary


def print_summary(summary: dict[str, Any], console: Any) -> None:
    """The summary for a person: the headline, then slices, samples and tool usage."""
    lo, hi = summary["ci95"]
    through = summary.get("throughput", {})
    rate = "[red]none (no episode scored)[/]" if summary["success"] is None else f"[bold]{summary['success']:.1%}[/]"
    console.print(f"[bold]{summary['scored']}[/] scored episodes, success {rate} "
                  f"(95% CI {lo:.1%}–{hi:.1%}), infra-failed {summary['infra_failed']} (reported apart), "
                  f"lost {summary['lost']}, fingerprint {summary['fingerprint']}")
    server = summary.get("model_server")
    if server and (server["retries"] or server["rate_limited"]):
        console.print(f"model server: {server['retries']} retries, rate limited {server['rate_limited']} times "
                      f"(the run waited {server['rate_limit_held_s']:.1f} s)")
    if through:
        console.print(f"[dim]{through['episodes_per_s']:.2f} episodes/s, {through['tokens_per_s']:.0f} tokens/s "
                      f"({through['played']} played in {through['elapsed_s']:.1f} s)[/]")
    samples = summary["samples"]
    if samples["k"] > 1:
        shown = ", ".join(f"{k} {v:.1%}" for k, v in samples.items() if "@" in k)
        console.print(f"samples per task: {samples['k']} — {shown}")
    for key, groups in summary["slices"].items():
        console.print(f"by {key}: " + ", ".join(f"{v} {g['success']:.0%} (n={g['n']})" for v, g in groups.items()))
    if summary["tools"]:
        console.print("tool usage: " + ", ".join(f"{name} {t['usage_frac']:.0%} of episodes ({t['calls']} calls)"
                                                 for name, t in summary["tools"].items()))
    if summary.get("records"):
        console.print(f"[dim]records: {summary['records']} · summary: {summary['records']}.summary.json[/]")


def _make_agent(model: str, settings: dict[str, Any]) -> Any:
    """The agent behind ``--model``: an OpenAI-compatible server with ``--base-url``, else a
    local checkpoint (``PATH`` or ``vllm:PATH``) from the ``agentgym.eval_models`` plugin."""
    from agentgym.errors import ConfigError
    from agentgym.evaluation import ChatAgent, ChatClient, ChatSettings

    if settings.get("base_url"):
        fields = {k: v for k, v in settings.items() if v is not None}
        return ChatAgent(ChatClient(ChatSettings(model=model, **fields)))
    from agentgym.evaluation.local import load_local_agent

    if model.startswith(("http://", "https://")):
        raise ConfigError(f"Expected --base-url URL --model NAME for a served model, actual: --model {model}")
    return load_local_agent(model, settings)


def eval_command(env_id: str, model: str, settings: dict[str, Any], *, episodes: int, samples: int,
                 concurrency: int, seed: int, env_kwargs: dict[str, Any], out: str | None, resume: bool,
                 json_out: bool) -> int:
    """``agentgym eval ENV --model M``; returns the exit code (1 when episodes were lost)."""
    import agentgym  # noqa: F401 - registers the envs
    from agentgym.commands.run import close_shared_resources
    from agentgym.errors import ConfigError
    from agentgym.evaluation.run import EvalPlan

    plan = EvalPlan(env_id, episodes, samples, concurrency, seed, env_kwargs)
    if resume and out is None:
        raise ConfigError("Expected --out RUN.jsonl with --resume (the run file to continue), actual: no --out")
    agent = _make_agent(model, settings)
    path = Path(out) if out is not None else default_out(env_id, agent.describe())
    try:
        result, summary = execute_run(plan, agent, out=path, resume=resume, label=f"{env_id} ({model})")
    finally:
        close_shared_resources()
    console = cli_console(stderr=json_out)
    if json_out:
        print(json.dumps({**summary, "telemetry": result.telemetry.metrics()}, indent=2))
    else:
        console.print(result.telemetry.table(title=f"Tool telemetry — {env_id}"))
        print_summary(summary, console)
    for index, tb in result.lost[:3]:
        console.print(f"[red]lost episode {index}[/]:\n{tb}")
    return exit_code(summary, result)


def exit_code(summary: dict[str, Any], result: Any) -> int:
    """1 when episodes were lost (a bug: a traceback above), 3 when episodes ran and none
    was scored (the infrastructure failed them all, as ``agentgym train``'s outage stop),
    else 0."""
    if result.lost:
        return 1
    if summary["scored"] == 0 and summary["infra_failed"] > 0:
        cli_console(stderr=True).print(f"[red]no episode was scored: the infrastructure failed all "
                                       f"{summary['infra_failed']} (causes in the records' info)[/]")
        return 3
    return 0


def compare_command(path_a: str, path_b: str, json_out: bool) -> int:
    """``agentgym eval compare a.jsonl b.jsonl``: paired differences, or a refusal (exit 2)."""
    from agentgym.evaluation.compare import compare_runs

    report = compare_runs(path_a, path_b)
    if json_out:
        print(json.dumps(report, indent=2))
        return 0
    from rich.table import Table

    table = Table(title=f"{report['env']} · a = {_who(report['a']['agent'])}, b = {_who(report['b']['agent'])}")
    for col in ("slice", "paired n", "a", "b", "b − a", "a only", "b only", "McNemar p"):
        table.add_column(col)
    rows: list[tuple[str, dict[str, Any]]] = [("all", report["overall"])]
    rows += [(f"{key}={value}", stats) for key, groups in report["slices"].items() for value, stats in groups.items()]
    for name, s in rows:
        if not s["n"]:
            table.add_row(name, "0", "n/a", "n/a", "n/a", "0", "0", "n/a")
            continue
        table.add_row(name, str(s["n"]), f"{s['a']:.1%}", f"{s['b']:.1%}", f"{s['diff']:+.1%}", str(s["a_only"]),
                      str(s["b_only"]), f"{s['p_value']:.3g}")
    cli_console().print(table)
    return 0


def _who(agent: dict[str, Any]) -> str:
    return str(agent.get("model") or agent.get("name") or agent.get("kind"))


def summary_command(path: str, json_out: bool) -> int:
    """``agentgym eval summary RUN.jsonl``: the summary rebuilt from the records alone."""
    from agentgym.evaluation.records import read_run
    from agentgym.evaluation.summary import summarize

    run = read_run(path)
    summary = summarize(run.header, run.records)
    if json_out:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary, cli_console())
    return 0
