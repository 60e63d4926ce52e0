"""``agentgym serve-env``, ``package-env`` and ``serve-mcp``: agentgym over other frameworks' protocols."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["package_env_command", "serve_env_command", "serve_mcp_command"]


def serve_env_command(env_id: str, env_kwargs: dict[str, Any], host: str, port: int, max_sessions: int) -> int:
    """Serve ``env_id`` over OpenEnv's protocol until interrupted; the exit code."""
    from agentgym.interop.extras import require
    from agentgym.interop.openenv_server import openenv_app

    app = openenv_app(env_id, env_kwargs, max_sessions=max_sessions)
    uvicorn = require("uvicorn", "openenv")
    sys.stderr.write(f"serving {env_id} over OpenEnv on http://{host}:{port} (WebSocket /ws, "
                     f"at most {max_sessions} sessions)\n")
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", ws_max_size=1 << 26)).run()
    finally:
        _close_shared_resources()
    return 0


def package_env_command(env_id: str, env_kwargs: dict[str, Any], out: str | None, build: bool, tag: str | None,
                        wheels: bool) -> int:
    """Write ``env_id``'s OpenEnv package (and build its image, with ``build``); the exit code.

    With ``build``, a directory already holding this env's package (same id and kwargs,
    with its wheelhouse) is built as it is rather than written again."""
    from rich.markup import escape
    from rich.table import Table

    from agentgym.commands.console import cli_console
    from agentgym.errors import ConfigError
    from agentgym.interop.openenv_package import (
        PackageBuildError,
        build_openenv_image,
        default_tag,
        package_name,
        read_openenv_package,
        write_openenv_package,
    )
    from sandboxes import EngineUnreachableError, ImageBuildError

    console = cli_console()
    target = Path(out or package_name(env_id))
    existing = None
    if build and (target / "openenv.yaml").is_file():
        existing = read_openenv_package(target)
        if (existing.env_id, existing.env_kwargs) != (env_id, env_kwargs):
            raise ConfigError(f"Expected {target} to hold {env_id} {env_kwargs} to build it again, actual value: "
                              f"{existing.env_id} {existing.env_kwargs} (choose another --out)")
    image_id = None
    with console.status(f"packaging {env_id}") as status:
        def say(message: str) -> None:
            status.update(escape(message))

        try:
            package = existing or write_openenv_package(env_id, target, env_kwargs, wheels=wheels or build,
                                                        progress=say)
            if build:
                image_id = build_openenv_image(package, tag, progress=say)
        except (PackageBuildError, ImageBuildError, EngineUnreachableError) as e:
            console.print(f"[red]error:[/] {escape(str(e))}")
            return 1
    table = Table(show_header=False, box=None)
    table.add_row("package", escape(str(package.path)) + ("  (built as it was)" if existing else ""))
    table.add_row("env", escape(f"{env_id} {env_kwargs or ''}".strip()))
    table.add_row("fingerprint", package.fingerprint)
    if image_id:
        table.add_row("image", escape(f"{tag or default_tag(env_id)} ({image_id[:19]})"))
        table.add_row("play it", escape(f"GenericEnvClient.from_docker_image({(tag or default_tag(env_id))!r})"))
    else:
        table.add_row("build it", escape(f"agentgym package-env {env_id} --out {target} --build (see its README.md)"))
    console.print(table)
    return 0


def serve_mcp_command(tools: list[str], transport: str, host: str, port: int, search_kwargs: dict[str, Any]) -> int:
    """Serve agentgym's tools as an MCP server until interrupted (or stdin closes); the exit code."""
    from agentgym.interop.mcp_server import check_transport, serve_mcp

    check_transport(transport)
    if transport != "stdio":
        sys.stderr.write(f"serving MCP tools {','.join(tools)} on http://{host}:{port}/mcp\n")
    serve_mcp(tools, transport=transport, host=host, port=port, search_kwargs=search_kwargs)  # closes its own pools
    return 0


def _close_shared_resources() -> None:
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    run_sync(shared_resources().aclose())
