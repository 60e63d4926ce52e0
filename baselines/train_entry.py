"""``python -m baselines.train_entry --config X.yaml key=value ...`` (for ``torchrun``)."""

from __future__ import annotations

import argparse
import sys

from baselines.cli import train_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a policy with PPO-EWMA on an agentgym env.")
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. algo.lr=1e-5")
    args = parser.parse_args(argv)
    return train_command(args.config, args.overrides)


if __name__ == "__main__":
    sys.exit(main())
