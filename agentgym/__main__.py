"""``python -m agentgym``: the ``agentgym`` command, for launchers that take a module
(``torchrun --nproc-per-node 8 -m agentgym train --config X.yaml``)."""

from agentgym.cli import app

if __name__ == "__main__":
    app()
