"""``agentgym serve-env`` and ``agentgym serve-mcp``: agentgym over other frameworks' protocols."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["serve_env_command", "serve_mcp_command"]


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
