"""Baselines on Search-v1, per hop count: what the tools are worth (the table in docs/environments.md).

Runs ``no_tool``, ``one_search`` and ``oracle`` over every question of a split (not a
sample), and measures, for ``one_search``, how often the top result of the question text
is not one of the question's supporting documents (it then answers from a wrong entity),
and, for every hop, how often the hop's natural query (the entity's name) ranks a
near-miss in the top 5: a document of the same kind (another city profile, country
profile or article), or another document whose title has the same name (the Wikipedia
article "Germany" beside the profile "Germany (country profile)").

    .venv/bin/python benchmarks/search_baselines.py --split test [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import gymnasium as gym

import agentgym  # noqa: F401 - registers the envs
from agentgym.policies import get_policy

POLICIES = ("no_tool", "one_search", "oracle")


def _kind(doc_id: str) -> str:
    return doc_id.split("-", 1)[0]


def run_policies(env, questions) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for name in POLICIES:
        policy = get_policy(name)
        rewards: dict[int, list[float]] = defaultdict(list)
        for q in questions:
            obs, info = env.reset(options={"task_id": q.id})
            reward = 0.0
            for _ in range(10):
                obs, reward, term, trunc, info = env.step(policy(env, obs, info))
                if term or trunc:
                    break
            rewards[q.num_hops].append(float(reward))
        out[name] = {h: sum(v) / len(v) for h, v in sorted(rewards.items())}
    return out


def retrieval_facts(retriever, corpus, questions) -> dict[str, dict[int, float]]:
    wrong: dict[int, list[bool]] = defaultdict(list)
    same_kind: dict[int, list[bool]] = defaultdict(list)
    near_miss: dict[int, list[bool]] = defaultdict(list)
    tops = retriever.search_sync([q.question for q in questions], 1) if hasattr(retriever, "search_sync") else None
    for i, q in enumerate(questions):
        top = tops[i] if tops is not None else _search(retriever, q.question, 1)
        wrong[q.num_hops].append(not top or top[0].doc_id not in q.supporting_doc_ids)
        for doc_id in q.supporting_doc_ids:
            title = corpus.get(doc_id).title.replace(" (city profile)", "").replace(" (country profile)", "")
            others = [h for h in _search(retriever, title, 5) if h.doc_id != doc_id]
            kind = [_kind(h.doc_id) == _kind(doc_id) for h in others]
            same_kind[q.num_hops].append(any(kind))
            near_miss[q.num_hops].append(any(kind) or any(title.casefold() in h.title.casefold() for h in others))
    def rate(d: dict[int, list[bool]]) -> dict[int, float]:
        return {h: sum(v) / len(v) for h, v in sorted(d.items())}

    return {"one_search_wrong_entity": rate(wrong), "hop_query_same_kind_in_top5": rate(same_kind),
            "hop_query_near_miss_in_top5": rate(near_miss)}


def _search(retriever, query: str, k: int):
    import asyncio

    return asyncio.run(retriever.search([query], k))[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = gym.make("agentgym/Search-v1", split=args.split)
    family = env.unwrapped.family
    questions = family.dataset.questions(args.split)
    report = {"split": args.split, "questions": len(questions), "success": run_policies(env, questions),
              **retrieval_facts(family.retriever, family.dataset.corpus, questions)}
    env.close()
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            print(key)
            for k, v in value.items():
                print(f"  {k}: " + ", ".join(f"{h} hops {x:.1%}" for h, x in v.items()) if isinstance(v, dict)
                      else f"  {k}: {v:.1%}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
