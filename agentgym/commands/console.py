"""The rich console every CLI verb prints through.

On a terminal, rich fits tables to the window and cuts long cells with an ellipsis, which
is what a person reading wants. Into a pipe or a file, a cut id (``agentgym/Calcula…``)
cannot be grepped or scripted, and rich would assume 80 columns; so there the width is
unbounded and every table prints whole, one row per line.
"""

from __future__ import annotations

import sys

from rich.console import Console

__all__ = ["cli_console", "PIPE_WIDTH"]

PIPE_WIDTH = 1 << 20
"""Columns assumed when the output is not a terminal: wide enough that nothing is cut."""


def cli_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that cuts nothing unless it writes to a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)
