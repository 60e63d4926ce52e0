"""``agentgym dataset-report ENV``: what an env's questions are made of, split by split.

The env is made as ``agentgym run`` would make it (same id, same kwargs), so the report
describes exactly the questions that run would draw from. It ends with the shortcut audit
(``tasks.search.shortcut``) of the test split (or the split ``-k split=`` names): per
template, how often one BM25 query with the whole question finds the answer's document
and how often a one-query reader answers right. Only envs whose family holds
a question dataset (Search, SearchR1) have one; any other id is a user error.
"""

from __future__ import annotations

import json
from typing import Any

from agentgym.commands.console import cli_console

__all__ = ["dataset_report_command"]


def _dataset_of(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The env's question dataset and its family (``family.hops``: ``None`` is every hop count)."""
    import gymnasium as gym

    from agentgym.errors import ConfigError

    env = gym.make(env_id, **env_kwargs)
    try:
        family = getattr(env.unwrapped, "family", None)
        dataset = getattr(family, "dataset", None)
        if dataset is None or not hasattr(dataset, "splits"):
            raise ConfigError(f"Expected an env with a question dataset (e.g. agentgym/Search-v1), actual value: "
                              f"{env_id!r} has none")
        return dataset, family
    finally:
        env.close()


def _table(title: str, rows: dict[str, dict[Any, int]], sizes: dict[str, int]) -> Any:
    from rich.table import Table

    splits = list(rows)
    table = Table(title=title)
    table.add_column("")
    for split in splits:
        table.add_column(split, justify="right")
    for key in sorted({k for r in rows.values() for k in r}, key=str):
        table.add_row(str(key), *(f"{rows[s].get(key, 0)} ({100 * rows[s].get(key, 0) / max(sizes[s], 1):.1f}%)"
                                  for s in splits))
    return table


def _shortcuts(dataset: Any, family: Any, questions: list[Any]) -> dict[str, Any]:
    """The shortcut audit of ``questions``: one BM25 query with the whole question, top 5,
    graded by the family's own scorer."""
    from agentgym.retrieval import LocalRetriever
    from tasks.search.shortcut import TOP_K, by_hops, shortcut_audit

    index = LocalRetriever.for_corpus(dataset.corpus).index

    def search(query: str, k: int) -> list[tuple[str, str]]:
        return [(hit.doc_id, dataset.corpus[hit.position].contents) for hit in index.search(query, k)]

    rows = shortcut_audit(questions, search, lambda answer, q: family.grade(answer, q).reward)
    return {"k": TOP_K, "templates": [r.to_json() for r in rows], "hops": by_hops(rows)}


def _shortcut_table(audit: dict[str, Any], split: str) -> Any:
    from rich.table import Table

    table = Table(title=f"shortcut audit ({split} split): one BM25 query with the whole question, top {audit['k']}")
    for column in ("template", "hops", "questions", "distinct answers", "final doc in top 5", "one-query reader"):
        table.add_column(column, justify="left" if column == "template" else "right")
    for row in audit["templates"]:
        table.add_row(row["template"], str(row["hops"]), str(row["questions"]), str(row["distinct_answers"]),
                      f"{100 * row['final_doc_in_top_k']:.1f}%", f"{100 * row['reader_solved']:.1f}%")
    for hops, row in audit["hops"].items():
        table.add_row(f"[bold]all {hops}-hop[/]", str(hops), str(row["questions"]), "",
                      f"{100 * row['final_doc_in_top_k']:.1f}%", f"{100 * row['reader_solved']:.1f}%")
    return table


def _wording_of(builder: str) -> dict[str, Any]:
    """How to read the templates of a bundled dataset: v2's wordings for v2's builder, else v1's."""
    from tasks.search.v2 import BUILDER_VERSION_V2, TEMPLATES_V2, match_template_v2

    if builder != BUILDER_VERSION_V2:
        return {}
    return {"match": match_template_v2, "choices": {name: t.choices for name, t in TEMPLATES_V2.items()}}


def dataset_report_command(env_id: str, env_kwargs: dict[str, Any], json_out: bool = False) -> int:
    from tasks.search.report import dataset_report

    dataset, family = _dataset_of(env_id, env_kwargs)
    hops = getattr(family, "hops", None)
    splits = {s: [q for q in qs if hops is None or q.num_hops == hops] for s, qs in dataset.splits.items()}
    # the quality audit is the whole dataset's gate
    report = dataset_report(splits, dataset.audit, **_wording_of(dataset.builder))
    audit_split = str(env_kwargs.get("split", "test"))
    report = {"env_id": env_id, "questions_version": dataset.version, "builder": dataset.builder, **report,
              "shortcut_split": audit_split, "shortcuts": _shortcuts(dataset, family, splits.get(audit_split, []))}
    if json_out:
        print(json.dumps(report, indent=1, ensure_ascii=False, default=str))
        return 0
    console = cli_console()
    console.print(f"[bold]{env_id}[/] questions {dataset.version} (builder {dataset.builder or 'your data'}): "
                  + ", ".join(f"{s} {n}" for s, n in report["sizes"].items()))
    console.print(_table("templates per split", report["templates"], report["sizes"]))
    console.print(_table("hop counts per split", report["hops"], report["sizes"]))
    console.print("distinct answers per hop count: " + "; ".join(
        f"{s} " + ", ".join(f"{h} hops {n}" for h, n in hops.items())
        for s, hops in report["distinct_answers"].items()))
    gaps = report["max_gap_pp"]
    console.print(f"largest gap between splits: template {gaps['template']} pp, hops {gaps['hops']} pp; "
                  f"answer overlap with train: {report['answer_overlap_with_train']}")
    console.print(f"questions failing their template's grammar: {len(report['broken_wording'])}")
    for template, row in report["two_way_choices"].items():
        console.print(f"two-way choice {template} (chance {100 * row['chance']:.0f}%): share "
                      + ", ".join(f"{s} {100 * v:.1f}%" for s, v in row["share"].items()))
    audit = report["audit"]
    if audit is not None:
        console.print(f"quality gate kept {sum(audit['kept'].values())}, rejected:")
        for reason, n in audit["rejected_by_reason"].items():
            console.print(f"  {n:6d}  {reason}  e.g. {audit['examples'].get(reason, [''])[0]}", markup=False)
    console.print(_shortcut_table(report["shortcuts"], audit_split))
    return 0
