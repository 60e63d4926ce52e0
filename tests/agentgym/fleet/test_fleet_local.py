"""A fleet on a local Ray instance: the same report as the in-process runner, worker
deaths that lose and double nothing, and no process or container left behind."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from agentgym.errors import ConfigError
from agentgym.fleet import ENV_SLOTS, EnvFleet, FleetConfig
from agentgym.fleet.ray_support import wait_restarted
from agentgym.runner import run_episodes
from agentgym.policies import oracle_policy

SEARCH = "agentgym/Search-v1"


def test_fleet_reports_what_the_in_process_runner_reports(local_ray):
    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=4)) as fleet:
        remote = fleet.run_episodes(40, seed=7)
        assert len({w.pid for w in fleet.workers}) == 2  # two actor processes really ran
    local = run_episodes(SEARCH, oracle_policy, 40, concurrency=4, seed=7)
    assert [r.index for r in remote.episodes] == list(range(40))
    assert [r.task_id for r in remote.episodes] == [r.task_id for r in local.episodes]
    assert (remote.success_rate, remote.infra_failed, remote.lost) == (1.0, 0, [])
    assert remote.fingerprint == local.fingerprint
    fleet_metrics, local_metrics = remote.telemetry.metrics(), local.telemetry.metrics()
    assert sorted(fleet_metrics) == sorted(local_metrics)  # the same tool/<name>/<metric> names
    calls = {k: v for k, v in fleet_metrics.items() if k.endswith(("/calls", "_rate", "/usage_frac"))}
    assert calls == {k: local_metrics[k] for k in calls}
    assert remote.telemetry.episodes == 40


@pytest.mark.parametrize("reruns", [1, 0])
def test_sigkilled_worker_loses_and_doubles_no_episode(local_ray, wait_gone, reruns):
    episodes = 400
    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=8, reruns=reruns)) as fleet:
        victim = fleet.workers[0].pid
        seen: list[int] = []

        def kill_once(record):
            seen.append(record.index)
            if len(seen) == 40:  # mid-run: worker-0 holds episodes in flight
                os.kill(victim, signal.SIGKILL)

        report = fleet.run_episodes(episodes, on_episode=kill_once)
        drained = fleet.last_drain
        assert fleet.members[0].state == "up"  # probed back after Ray restarted it, not written off
        restarted = wait_restarted(fleet.members[0].handle, 60)
        assert restarted is not None and restarted.pid != victim  # Ray restarted the worker
    assert wait_gone({victim}, 5) == set()
    assert drained.worker_deaths >= 1
    assert sorted(seen) == list(range(episodes))  # every episode reported exactly once
    assert [r.index for r in report.episodes] == list(range(episodes))
    assert report.lost == []
    failed = [r for r in report.episodes if r.infra_failed]
    if reruns:
        assert drained.reruns >= 1 and failed == []
        assert report.success_rate == 1.0
    else:
        assert drained.reruns == 0 and len(failed) >= 1
        assert all("died mid-episode" in r.info["fleet_error"] for r in failed)
        assert all(r.success for r in report.episodes if not r.infra_failed)


@pytest.mark.parametrize("workers", [2, 1])
def test_a_worker_ray_cannot_restart_is_written_off_and_nothing_is_lost(local_ray, workers):
    episodes = 200
    with EnvFleet(SEARCH, {}, FleetConfig(workers=workers, slots=8, max_restarts=0, reruns=1)) as fleet:
        victim = fleet.workers[0].pid
        seen: list[int] = []

        def kill_once(record):
            seen.append(record.index)
            if len(seen) == 30:
                os.kill(victim, signal.SIGKILL)

        report = fleet.run_episodes(episodes, on_episode=kill_once)
        assert fleet.members[0].state == "dead"
    assert sorted(seen) == list(range(episodes)) and report.lost == []
    failed = [r for r in report.episodes if r.infra_failed]
    if workers == 2:  # the survivor plays the rest, re-runs included
        assert failed == [] and report.success_rate == 1.0
    else:  # nobody is left: every unplayed episode is reported, none vanishes
        assert failed and all(r.info["fleet_error"] for r in failed)
        assert len(failed) + sum(r.success for r in report.episodes) == episodes


def test_shutdown_ends_every_worker_process(local_ray, wait_gone):
    fleet = EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=1))
    pids = {w.pid for w in fleet.workers}
    fleet.shutdown()
    fleet.shutdown()  # idempotent
    assert wait_gone(pids, 30) == set()


def test_a_cluster_without_env_slots_is_refused_with_the_fix(local_ray):
    with pytest.raises(ConfigError, match=f"{ENV_SLOTS}.*ray start --resources"):
        EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=4, placement="env_slots"))


@pytest.mark.docker
def test_sigkilled_sandbox_worker_leaves_no_container(local_ray, docker_engine):
    from sandboxes.reaper import OWNER_LABEL
    from sandboxes.engine import connect

    env = "agentgym/DataAnalysis-v1"
    with EnvFleet(env, {}, FleetConfig(workers=2, slots=2, reruns=1)) as fleet:
        victim = fleet.workers[0].pid
        seen: list[int] = []

        def kill_once(record):
            seen.append(record.index)
            if len(seen) == 3:
                os.kill(victim, signal.SIGKILL)

        report = fleet.run_episodes(12, on_episode=kill_once)
        assert fleet.last_drain.worker_deaths >= 1
        assert fleet.last_drain.reruns >= 1  # an episode was cut off mid-way and played again
    assert sorted(seen) == list(range(12)) and report.lost == []
    assert report.infra_failed == 0 and report.success_rate == 1.0
    assert report.sandbox is not None and report.sandbox["sandbox_backend"] == "docker"
    prefix = f"{socket.gethostname()}:{victim}:"
    client = connect(docker_engine)
    try:
        deadline = time.monotonic() + 30
        while True:
            left = [c for c in client.api.containers(all=True, filters={"label": OWNER_LABEL})
                    if (c.get("Labels") or {}).get(OWNER_LABEL, "").startswith(prefix)]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        client.close()
    assert left == [], f"containers of the killed worker {victim} outlived it"


def test_search_workers_share_one_retriever_actor(local_ray, wait_gone):
    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=4, shared_retriever=True)) as fleet:
        retriever = fleet.retriever
        assert retriever is not None and fleet.env_kwargs["retriever_url"] == retriever.url
        report = fleet.run_episodes(30, seed=11)
        served = retriever.stats()
    local = run_episodes(SEARCH, oracle_policy, 30, concurrency=4, seed=11)
    assert (report.success_rate, report.infra_failed, report.lost) == (1.0, 0, [])
    assert [r.task_id for r in report.episodes] == [r.task_id for r in local.episodes]
    # every search (and open) of both workers went through the one service
    metrics = report.telemetry.metrics()
    assert served["queries"] == metrics["tool/search/calls"] > 0
    assert served["requests"] >= metrics["tool/search/calls"] + metrics["tool/open/calls"]


def test_shared_retriever_needs_a_search_env(local_ray):
    with pytest.raises(ConfigError, match="retriever_url"):
        EnvFleet("agentgym/Calculator-v0", {}, FleetConfig(workers=1, slots=1, shared_retriever=True))


def _local_twins(n: int):
    import gymnasium as gym

    from agentgym.vector import ToolVectorEnv

    return ToolVectorEnv([gym.make(SEARCH) for _ in range(n)], autoreset=False)


def _subset(vec, indices):
    from agentgym.vector import ToolVectorEnv

    return ToolVectorEnv([vec.envs[i] for i in indices], autoreset=False)


def test_vector_env_steps_like_tool_vector_env_and_isolates_a_dead_worker(local_ray, wait_gone):
    with EnvFleet(SEARCH, {}, FleetConfig(workers=2, slots=2)) as fleet:
        vec, twins = fleet.vector_env(), _local_twins(4)
        assert vec.num_envs == 4
        _, infos = vec.reset(seed=5)
        _, twin_infos = twins.reset(seed=5)
        assert [i["task_id"] for i in infos] == [i["task_id"] for i in twin_infos]
        live, rewards = [0, 1, 2, 3], {}
        while live:  # the local twins' oracle drives both: same tasks, same answers, same ends
            actions = [twins.envs[i].unwrapped.oracle_action() for i in live]
            _, remote_rewards, terms, truncs, step_infos = vec.view([vec.envs[i] for i in live]).step(actions)
            _, twin_rewards, twin_terms, _, _ = _subset(twins, live).step(actions)
            assert remote_rewards.tolist() == twin_rewards.tolist() and terms.tolist() == twin_terms.tolist()
            assert not any(i.get("infra_failed") for i in step_infos)
            rewards.update({i: r for i, r, t in zip(live, remote_rewards, terms | truncs) if t})
            live = [i for i, t in zip(live, terms | truncs) if not t]
        assert rewards == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}

        view = vec.view(vec.envs[1:3])  # worker-0's slot 1 and worker-1's slot 0
        _, infos = view.reset(seed=9)
        victim = fleet.workers[0].pid
        os.kill(victim, signal.SIGKILL)
        assert wait_gone({victim}, 10) == set()
        _, rewards, terms, truncs, step_infos = view.step(["<tool_call>{}</tool_call>"] * 2)
        assert truncs[0] and step_infos[0]["infra_failed"] and "worker-0 died" in step_infos[0]["fleet_error"]
        assert not step_infos[1].get("infra_failed")  # the other worker's env goes on
        _, infos = vec.reset(seed=9)  # Ray restarted worker-0: its envs reset on the new process
        assert not any(i.get("infra_failed") for i in infos)
        assert wait_restarted(fleet.members[0].handle, 60).pid != victim
    twins.close()
