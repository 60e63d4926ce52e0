"""The training-loop example of docs/teams.md, run with a scripted stand-in for the shared model."""

from agentgym import multi_agent


def test_shared_policy_loop_from_the_readme():
    env = multi_agent.make("SearchTeam-v1", num_searchers=2)

    def shared_policy(role: str, chat: list[dict]) -> str:  # stands in for one LLM for every role
        assert chat[0]["role"] == "system" and chat[0]["content"].startswith(f"[role: {role}]")
        return env.oracle_actions()[chat[0]["agent"]]

    returns = []
    for episode in range(5):
        obs, infos = env.reset(seed=episode)
        chats = {a: [{**infos[a]["messages"][0], "agent": a,  # "agent" is only for the stand-in
                      "content": f"[role: {infos[a]['role']}]\n" + infos[a]["messages"][0]["content"]},
                     *infos[a]["messages"][1:]] for a in env.agents}
        while env.agents:
            actions = {a: shared_policy(infos[a]["role"], chats[a]) for a in env.agents if infos[a]["active"]}
            for a, text in actions.items():
                chats[a].append({"role": "assistant", "content": text})
            obs, rewards, terms, truncs, infos = env.step(actions)
            for a, info in infos.items():
                chats[a].extend(info["messages"])
        if not infos["planner"]["infra_failed"]:  # never learn from infrastructure failures
            returns.append(rewards)
    assert len(returns) == 5 and all(set(r.values()) == {1.0} for r in returns)
    # every delegated report reached the planner's chat in order, after its delegate result
    planner_chat = [m["content"] for m in chats["planner"]]
    assert any(c.startswith("[from searcher_0] Report") for c in planner_chat)
