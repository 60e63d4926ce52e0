"""A cell's output is cut once, where it is produced (in the sandbox), never again by
the executor: the agent sees one marker per stream with the true size."""

from __future__ import annotations

import pytest

from agentgym.envs.data_analysis import PYTHON_OUTPUT_CHARS, cell_reply
from agentgym.executor import ToolExecutor
from agentgym.parsing import ParsedCall
from agentgym.tools import Tool
from sandboxes import ProcessSandbox, SandboxConfig

FLOOD = """
import sys
print("o" * 1_000_000)
print("e" * 1_000_000, file=sys.stderr)
raise ValueError("x" * 1_000_000)
"""

FLOOD_OK = """
import sys
print("o" * 1_000_000)
print("e" * 1_000_000, file=sys.stderr)
"v" * 1_000_000
"""


@pytest.mark.parametrize("code, status", [(FLOOD, "agent_error"), (FLOOD_OK, "ok")])
async def test_the_sandbox_cut_is_the_only_cut(code, status):
    sandbox = await ProcessSandbox(SandboxConfig()).start()
    try:
        async def python(code: str):
            return cell_reply(await sandbox.run(code, timeout=20.0))

        tool = Tool("python", "run", {"type": "object", "properties": {"code": {"type": "string"}}},
                    python, max_output_chars=PYTHON_OUTPUT_CHARS, timeout_s=60.0)
        (result,) = await ToolExecutor([tool]).execute([ParsedCall("python", {"code": code}, "ok")])
    finally:
        await sandbox.close()
    assert result.status == status, result.output[:300]
    assert not result.truncated, "the executor cut a cell's output a second time"
    assert "characters]" not in result.output  # the executor's marker
    assert "bytes truncated (of 1,000,001)" in result.output  # stdout, with its true size
    # one marker per cut field (stdout, stderr, and the error or the value), none nested
    assert result.output.count("bytes truncated") == 3
