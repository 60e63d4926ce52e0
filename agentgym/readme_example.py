"""Load the "Write your own environment" example from the README, as the tests do.

The README's family is meant to be copied; running exactly that text keeps it honest.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

__all__ = ["load_readme_family"]

_BLOCK = re.compile(r"<!-- example-family:[^>]*-->\n```python\n(.*?)```", re.S)


def load_readme_family(readme: Path | None = None) -> types.ModuleType:
    """Execute the README's example family as a module (it registers its env id once)."""
    import gymnasium as gym

    path = readme or Path(__file__).resolve().parents[1] / "README.md"
    match = _BLOCK.search(path.read_text(encoding="utf-8"))
    if match is None:
        raise LookupError(f"no example-family block in {path}")
    import sys

    module = types.ModuleType("readme_unit_conversion")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    code = match.group(1)
    if "myorg/UnitConversion-v0" in gym.registry:  # a second load in one process
        code = code.replace('gym.register("myorg/UnitConversion-v0"', 'dict(id="myorg/UnitConversion-v0"')
    exec(compile(code, f"{path}:example-family", "exec"), module.__dict__)  # noqa: S102 - our own README
    return module
