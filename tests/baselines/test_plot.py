"""``agentgym plot``: every panel with data gets a PNG; pattern keys expand per tool."""

from __future__ import annotations

import json

from baselines.plot import plot_run


def test_plot_draws_sampled_eval_and_one_usage_curve_per_tool(tmp_path, monkeypatch):
    rows = [{"step": 0, "eval/success_rate": 0.3, "eval/sampled_success_rate": 0.2}]
    rows += [{"step": s, "reward/success_rate": 0.1 * s, "policy/entropy": 0.5 / s,
              "tool/search/usage_frac": 1.0, "tool/open/usage_frac": 0.1 * s, "tool/open/calls": 3.0} for s in range(1, 5)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = {p.name for p in plot_run(tmp_path)}
    assert {"success.png", "entropy.png", "tool_usage.png", "curves.png"} <= written
    assert "throughput.png" not in written  # no data, no panel

    import matplotlib.pyplot as plt
    captured = {}
    real_savefig = plt.Figure.savefig

    def spy(fig, path, *args, **kwargs):  # the labels of each single-panel figure
        captured[str(path).rsplit("/", 1)[-1]] = sorted(line.get_label() for line in fig.axes[0].get_lines())
        return real_savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    plot_run(tmp_path)
    assert captured["tool_usage.png"] == ["tool/open/usage_frac", "tool/search/usage_frac"]
    assert "eval/sampled_success_rate" in captured["success.png"]
