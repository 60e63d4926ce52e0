"""The ``agentgym`` command line. Heavy imports happen inside each verb, so
``agentgym envs`` starts fast and ``agentgym train`` is the only verb that needs torch.

Other installed packages add verbs through the ``agentgym.commands`` entry-point group
(``baselines`` adds ``train`` and ``plot`` that way), so this package never imports them:
see :class:`PluginGroup`.

A user's mistake (an unknown env id or kwarg, a count out of range, a bad data file) is
one line on stderr and exit code 2, checked before anything runs: never a traceback, and
never an episode that fails later and is reported as an infrastructure failure.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, Optional

import typer
from typer.core import TyperCommand, TyperGroup

PLUGIN_GROUP = "agentgym.commands"
"""Entry-point group of CLI verbs from other packages. Each entry point names a
``typer.Typer`` with one command; the entry point's name is the verb."""

USAGE_ERROR = 2


def _plugins() -> dict[str, Any]:
    """Installed entry points of :data:`PLUGIN_GROUP` by verb (the first of a name wins)."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _as_command(name: str, plugin: object) -> TyperCommand:
    """The command of the one-command ``typer.Typer`` a plugin's entry point names."""
    command = typer.main.get_command(plugin) if isinstance(plugin, typer.Typer) else None
    if not isinstance(command, TyperCommand):
        raise TypeError(f"Expected entry point {name!r} of {PLUGIN_GROUP!r} to name a typer.Typer with "
                        f"one command, actual value: {type(plugin).__name__}")
    command.name = name
    return command


def _broken(name: str, error: Exception) -> TyperCommand:
    """A stand-in verb that says why the plugin behind ``name`` could not be loaded."""
    stand_in = typer.Typer()

    @stand_in.command(name, help=f"(unavailable: {error})")
    def explain() -> None:
        typer.echo(f"error: the {name!r} command could not be loaded ({type(error).__name__}: {error}); "
                   "reinstall the package that provides it (e.g. pip install -e '.[train]').", err=True)
        raise typer.Exit(USAGE_ERROR)

    return typer.main.get_command(stand_in)


class PluginGroup(TyperGroup):
    """The built-in verbs plus those of the :data:`PLUGIN_GROUP` entry points.

    A plugin is imported only when its verb runs (or the top-level help lists it), so
    ``agentgym envs`` pays nothing for plugins; built-in verbs win over plugins of the
    same name.
    """

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        builtin = super().list_commands(ctx)
        return builtin + sorted(set(_plugins()) - set(builtin))

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        command = super().get_command(ctx, cmd_name)
        ep = None if command is not None else _plugins().get(cmd_name)
        if ep is None:
            return command
        try:
            return _as_command(cmd_name, ep.load())
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the other verbs
            return _broken(cmd_name, e)


app = typer.Typer(cls=PluginGroup, add_completion=False, no_args_is_help=True,
                  help="Gymnasium environments for tool-using LLM agents.")


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the user asked for something wrong (imported only on failure)."""
    import gymnasium

    from agentgym.errors import ConfigError, InvalidOptionError
    from agentgym.multi_agent.errors import UnknownTeamEnvError
    from tasks.search import CorpusFormatError, QAFormatError

    return (ConfigError, InvalidOptionError, UnknownTeamEnvError, CorpusFormatError, QAFormatError,
            FileNotFoundError, IsADirectoryError, NotADirectoryError, gymnasium.error.Error)


def _run(command: Callable[[], int]) -> NoReturn:
    """Run a verb and exit with its code; a user error is one line on stderr and exit 2."""
    try:
        code = command()
    except Exception as e:
        if not isinstance(e, _user_errors()):
            raise
        typer.echo(f"error: {' '.join(str(e).split())}", err=True)
        raise typer.Exit(USAGE_ERROR) from None
    raise typer.Exit(code)


def _parse_kwargs(pairs: list[str]) -> dict[str, object]:
    """``key=value`` pairs; values are read as JSON when they parse, else as strings."""
    from agentgym.errors import ConfigError

    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"Expected --kwarg key=value (e.g. -k difficulty=2), actual value: {pair!r}")
        try:
            out[key] = json.loads(value)
        except (ValueError, RecursionError):  # not JSON: the plain string
            out[key] = value
    return out


def _check_env(env_id: str, pairs: list[str] | None = None, *, multi_agent: bool = True) -> dict[str, Any]:
    """The env kwargs of ``pairs``, once the id and kwargs are known to be valid."""
    import agentgym  # noqa: F401 - registers the envs
    from agentgym.envs import check_env_id, check_env_kwargs

    check_env_id(env_id, multi_agent=multi_agent)
    kwargs = _parse_kwargs(pairs or [])
    check_env_kwargs(env_id, kwargs)
    return kwargs


@app.command()
def envs(json_out: Annotated[bool, typer.Option("--json", help="print the list as JSON")] = False) -> None:
    """List the registered environments and their tools (whole ids when piped)."""
    from agentgym.commands.run import envs_command

    _run(lambda: envs_command(json_out))


@app.command()
def run(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Calculator-v0")],
    policy: Annotated[str, typer.Option(help="oracle, random, no_tool, one_search or no_code")] = "oracle",
    episodes: int = 100,
    concurrency: int = 16,
    seed: int = 0,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ray: Annotated[Optional[str], typer.Option(
        "--ray", help="run on a Ray fleet: auto (RAY_ADDRESS, the last `ray start`, else local), local, or an address "
                      "(pip install 'agentgym\\[ray]')")] = None,
    workers: Annotated[int, typer.Option(help="Ray env workers (with --ray); --concurrency is shared among them")] = 2,
    out: Annotated[Optional[str], typer.Option(help="write one JSONL record per episode here (as agentgym eval)")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run file --out without replaying its episodes")] = False,
) -> None:
    """Run episodes with a policy and print success, episodes/s and tool telemetry."""
    from agentgym.commands.run import run_command

    _run(lambda: run_command(env_id, policy, episodes, concurrency, seed, _check_env(env_id, kwarg), json_out,
                             ray_address=ray, workers=workers, out=out, resume=resume))


class _EvalGroup(TyperGroup):
    """``agentgym eval ENV ...`` runs an evaluation; ``agentgym eval compare|summary ...``
    are its sub-verbs. An env id is never a sub-verb's name, so the first argument decides."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(cls=_EvalGroup, add_completion=False, no_args_is_help=True,
                       help="Evaluate a model (served, or a local checkpoint) or a policy on an env: "
                            "`agentgym eval ENV --model M`; `agentgym eval compare A.jsonl B.jsonl`.")
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
def eval_run(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Calculator-v0")],
    model: Annotated[str, typer.Option(help="served model name (with --base-url), a transformers checkpoint "
                                            "PATH, or vllm:PATH")],
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")] = None,
    tool_mode: Annotated[str, typer.Option(help="native: tools= and tool_calls; text: the env parses plain text")] = "native",
    api_key_env: Annotated[str, typer.Option(help="environment variable holding the API key")] = "OPENAI_API_KEY",
    episodes: Annotated[int, typer.Option(help="tasks to evaluate")] = 100,
    samples: Annotated[int, typer.Option(help="samples per task (pass@k, mean@k)")] = 1,
    concurrency: int = 16,
    seed: int = 0,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_tokens: Annotated[int, typer.Option(help="tokens per model turn")] = 1024,
    timeout: Annotated[float, typer.Option(help="seconds per model request")] = 120.0,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
    out: Annotated[Optional[str], typer.Option(help="run file (JSONL); default runs/eval/<env>-<model>-<time>.jsonl")] = None,
    resume: Annotated[bool, typer.Option(help="continue --out without replaying its finished episodes")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Evaluate a model on an env: one JSONL record per episode, a summary, infra failures apart."""
    from agentgym.commands.eval import eval_command

    settings = {"base_url": base_url, "tool_mode": tool_mode, "api_key_env": api_key_env, "temperature": temperature,
                "top_p": top_p, "max_tokens": max_tokens, "timeout_s": timeout}
    _run(lambda: eval_command(env_id, model, settings, episodes=episodes, samples=samples, concurrency=concurrency,
                              seed=seed, env_kwargs=_check_env(env_id, kwarg), out=out, resume=resume,
                              json_out=json_out))


@eval_app.command("compare")
def eval_compare(
    run_a: Annotated[str, typer.Argument(help="run file A (JSONL)")],
    run_b: Annotated[str, typer.Argument(help="run file B (JSONL)")],
    json_out: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Compare two runs of the same env task by task (refused when their fingerprints differ)."""
    from agentgym.commands.eval import compare_command

    _run(lambda: compare_command(run_a, run_b, json_out))


@eval_app.command("summary")
def eval_summary(
    run_file: Annotated[str, typer.Argument(help="run file (JSONL)")],
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Rebuild a run's summary from its records."""
    from agentgym.commands.eval import summary_command

    _run(lambda: summary_command(run_file, json_out))


@app.command()
def play(
    env_id: str,
    seed: Optional[int] = None,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k")] = None,
) -> None:
    """Act as the agent yourself: type actions, see observations. End input with an empty line."""
    from agentgym.commands.run import play_command

    _run(lambda: play_command(env_id, seed, _check_env(env_id, kwarg, multi_agent=False)))


@app.command("build-image")
def build_image(force: Annotated[bool, typer.Option(help="rebuild even if the recipe is unchanged")] = False) -> None:
    """Build the sandbox image locally (mmdebstrap rootfs -> docker import)."""
    from agentgym.commands.sandbox import build_image_command

    _run(lambda: build_image_command(force=force))


@app.command()
def reap() -> None:
    """Remove sandbox containers whose owner process is gone."""
    from agentgym.commands.sandbox import reap_command

    _run(reap_command)


@app.command("serve-retriever")
def serve_retriever(
    host: str = "127.0.0.1",
    port: int = 8000,
    corpus: Annotated[Optional[str], typer.Option(help="corpus jsonl (default: bundled)")] = None,
    read_timeout: Annotated[float, typer.Option(help="seconds a client has to send one request")] = 10.0,
    max_in_flight_mib: Annotated[int, typer.Option(help="MiB of requests and replies held at once (429 beyond)")] = 128,
    max_connections: Annotated[int, typer.Option(help="open connections at once (429 beyond)")] = 512,
) -> None:
    """Serve the search index over HTTP (Search-R1 compatible POST /retrieve), in bounded memory."""
    from agentgym.commands.retriever import serve_retriever_command
    from agentgym.retrieval import ServiceLimits

    _run(lambda: serve_retriever_command(host=host, port=port, corpus=corpus, limits=ServiceLimits(
        read_timeout_s=read_timeout, max_bytes_in_flight=max_in_flight_mib << 20, max_connections=max_connections)))


@app.command("serve-env")
def serve_env(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Search-v1")],
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: Annotated[int, typer.Option(help="concurrent sessions (one env each)")] = 64,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
) -> None:
    """Serve an env over OpenEnv's protocol (needs agentgym[openenv])."""
    from agentgym.commands.interop import serve_env_command

    _run(lambda: serve_env_command(env_id, _check_env(env_id, kwarg, multi_agent=False), host, port, max_sessions))


@app.command("package-env")
def package_env(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Search-v1")],
    out: Annotated[Optional[str], typer.Option(help="directory to write (empty or absent); default: the package name")] = None,
    build: Annotated[bool, typer.Option(help="also build the image on the local Docker engine")] = False,
    tag: Annotated[Optional[str], typer.Option(help="image tag (default: openenv-<name>:latest)")] = None,
    wheels: Annotated[bool, typer.Option(help="build and lock the wheelhouse the image installs from")] = True,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
) -> None:
    """Package an env as an OpenEnv environment (openenv.yaml, server/, uv.lock, Dockerfile); --build makes its image locally."""
    from agentgym.commands.interop import package_env_command

    _run(lambda: package_env_command(env_id, _check_env(env_id, kwarg, multi_agent=False), out, build, tag, wheels))


@app.command("serve-mcp")
def serve_mcp(
    tools: Annotated[str, typer.Option(help="comma-separated: python, search")] = "python,search",
    transport: Annotated[str, typer.Option(help="stdio or streamable-http")] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="Search-v1 kwarg for the search tool")] = None,
) -> None:
    """Serve the sandboxed Python (one sandbox per MCP session) and search as MCP tools (needs agentgym[mcp])."""
    from agentgym.commands.interop import serve_mcp_command

    _run(lambda: serve_mcp_command([t.strip() for t in tools.split(",") if t.strip()], transport, host, port,
                                   _check_env("agentgym/Search-v1", kwarg, multi_agent=False)))


@app.command()
def stress(
    env_id: str,
    episodes: int = 200,
    concurrency: int = 32,
    faults: Annotated[str, typer.Option(help="fault rates, e.g. kill=0.05,stall=0.02")] = "",
    adversarial: Annotated[float, typer.Option(help="fraction of adversarial turns")] = 0.3,
    seed: int = 0,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run episodes under load, adversarial actions and injected faults; fail on broken guarantees."""
    from agentgym.commands.readiness import stress_command

    def checked() -> int:
        _check_env(env_id)
        return stress_command(env_id, episodes, concurrency, faults, adversarial, seed, json_out)

    _run(checked)


@app.command("audit-reward")
def audit_reward(env_id: str, tasks: int = 20, seed: int = 0,
                 judge_url: Annotated[Optional[str], typer.Option(help="judged envs: also attack this "
                                                                  "OpenAI-compatible judge (…/v1)")] = None,
                 judge_model: Annotated[Optional[str], typer.Option(help="the judge server's model")] = None) -> None:
    """Run the reward-hacking kit against an env's scorer (a judged env: the judge kit); fail on any leak."""
    from agentgym.commands.readiness import audit_reward_command

    def checked() -> int:
        _check_env(env_id)
        return audit_reward_command(env_id, tasks, seed, judge_url, judge_model)

    _run(checked)


@app.command("dataset-report")
def dataset_report(
    env_id: Annotated[str, typer.Argument(help="e.g. agentgym/Search-v1")],
    kwarg: Annotated[Optional[list[str]], typer.Option("--kwarg", "-k", help="env kwarg key=value (repeatable)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Per-split template and hop histograms of an env's questions, their gaps, and the quality audit."""
    from agentgym.commands.dataset import dataset_report_command

    _run(lambda: dataset_report_command(env_id, _check_env(env_id, kwarg, multi_agent=False), json_out))


@app.command()
def bench(extra: Annotated[Optional[list[str]], typer.Argument(help="extra pytest args")] = None) -> None:
    """Run the benchmark suite (pytest-benchmark) and save JSON under benchmarks/results."""
    from agentgym.commands.readiness import bench_command

    raise typer.Exit(bench_command(extra or []))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
