"""The ``agentgym eval`` commands of README.md and docs/eval.md run as written, against the
scripted chat server standing in for ``vllm serve`` (only the URL, the episode count and
the run-file directory change)."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest
from typer.testing import CliRunner

from agentgym.cli import app

from agentgym.evaluation.fake_server import ChatServer

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _commands(page: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / page).read_text("utf-8"), re.S)
    return [line for block in blocks for line in block.splitlines() if line.startswith("agentgym eval ")]


def test_the_pages_show_served_model_commands():
    assert any("--base-url" in c for c in _commands("README.md"))
    assert any("--resume" in c for c in _commands("docs/eval.md"))


@pytest.mark.parametrize("page", ["README.md", "docs/eval.md"])
def test_documented_eval_commands_run(page, tmp_path):
    server = ChatServer().start()
    try:
        runner = CliRunner()
        for name in ("a", "b"):  # what `agentgym eval compare runs/eval/a.jsonl runs/eval/b.jsonl` reads
            made = runner.invoke(app, ["run", "agentgym/Calculator-v0", "--episodes", "3", "--out",
                                       str(tmp_path / f"{name}.jsonl")])
            assert made.exit_code == 0, made.output
        for n, command in enumerate(_commands(page)):
            if "--base-url" not in command and "compare" not in command:
                continue  # a local checkpoint: tests/baselines/test_eval_models.py
            text = (command.replace("http://127.0.0.1:8000/v1", server.url).replace("runs/eval/", f"{tmp_path}/"))
            text = re.sub(r"--episodes \d+", "--episodes 3", text)
            args = shlex.split(text)[1:]
            if "compare" not in args and "--out" not in args:
                args += ["--out", str(tmp_path / f"auto-{n}.jsonl")]
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (command, result.output)
    finally:
        server.stop()
