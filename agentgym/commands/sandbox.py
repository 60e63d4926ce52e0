"""``agentgym build-image`` and ``agentgym reap``: thin CLI shells over :mod:`sandboxes`."""

from __future__ import annotations

from rich.table import Table

from agentgym.commands.console import cli_console
from sandboxes import EngineUnreachableError, ImageBuildError

__all__ = ["build_image_command", "reap_command"]


def build_image_command(force: bool = False) -> int:
    """Build the sandbox image unless the recipe's tag exists (or ``force``); print its
    tag, id and library versions. Returns the process exit code."""
    from sandboxes.image import build_image, image_tag

    console = cli_console()
    console.print(f"sandbox image [bold]{image_tag()}[/] ({'forced rebuild' if force else 'build if missing'})")
    try:
        with console.status("building rootfs with mmdebstrap and importing it (a few minutes)..."):
            info = build_image(force=force)
    except (ImageBuildError, EngineUnreachableError) as e:
        console.print(f"[red]error:[/] {e}")
        return 1
    table = Table(show_header=False, box=None)
    table.add_row("tag", info.tag)
    table.add_row("image id", info.image_id)
    table.add_row("recipe hash", info.recipe_hash)
    for name, version in sorted(info.versions.items()):
        table.add_row(name, str(version))
    table.add_row("status", "built" if info.built else "already present (unchanged recipe)")
    console.print(table)
    return 0


def reap_command() -> int:
    """Remove sandbox containers whose owning process is dead. Returns the exit code."""
    from sandboxes import reap_orphans

    console = cli_console()
    try:
        removed = reap_orphans()
    except EngineUnreachableError as e:
        console.print(f"[red]error:[/] {e}")
        return 1
    if removed:
        console.print(f"removed {len(removed)} orphaned sandbox container(s):")
        for cid in removed:
            console.print(f"  {cid[:12]}")
    else:
        console.print("no orphaned sandbox containers")
    return 0
