"""agentgym speaking other frameworks' protocols: MCP, OpenEnv, verifiers.

Each adapter is an optional extra (``pip install 'agentgym[mcp]'``, ``'agentgym[openenv]'``,
``'agentgym[verifiers]'``) imported only when used; without it, using the adapter raises
:class:`~agentgym.interop.extras.MissingExtraError` naming the extra.

- :class:`MCPToolbox` / :func:`with_mcp_tools`: an MCP server's tools inside a ``ToolEnv``.
- :func:`serve_mcp`: the sandboxed Python and the search tool as an MCP server
  (``agentgym serve-mcp``).
- :func:`openenv_app`: any registered env over OpenEnv's protocol (``agentgym serve-env``).
- :func:`write_openenv_package` / :func:`build_openenv_image`: any registered env as an
  OpenEnv environment directory and a locally built image (``agentgym package-env``).
- :func:`openenv_env`: any OpenEnv server as a Gymnasium text env under agentgym's
  status contract.
- :func:`as_verifiers_env`: any registered env as a verifiers environment (taskset id
  ``agentgym-verifiers``), rewarded by agentgym's scorer; infra failures fail the rollout.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "MCPToolOptions",
    "MCPToolbox",
    "MissingExtraError",
    "OpenEnvTextEnv",
    "as_verifiers_env",
    "build_mcp_server",
    "build_openenv_image",
    "openenv_app",
    "openenv_env",
    "serve_mcp",
    "with_mcp_tools",
    "write_openenv_package",
]

_WHERE = {
    "MissingExtraError": "agentgym.interop.extras",
    "MCPToolbox": "agentgym.interop.mcp_tools",
    "MCPToolOptions": "agentgym.interop.mcp_tools",
    "with_mcp_tools": "agentgym.interop.mcp_tools",
    "build_mcp_server": "agentgym.interop.mcp_server",
    "serve_mcp": "agentgym.interop.mcp_server",
    "openenv_app": "agentgym.interop.openenv_server",
    "openenv_env": "agentgym.interop.openenv_client",
    "OpenEnvTextEnv": "agentgym.interop.openenv_client",
    "as_verifiers_env": "agentgym.interop.verifiers_env",
    "write_openenv_package": "agentgym.interop.openenv_package",
    "build_openenv_image": "agentgym.interop.openenv_package",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'agentgym.interop' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
