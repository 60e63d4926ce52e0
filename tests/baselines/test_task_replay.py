"""Task replay (baselines.task_replay): which seeds a step gets, what enters and leaves the
buffer, and that its state replays exactly from a checkpoint."""

import pytest

from baselines.task_replay import TaskReplay, informative_groups


def test_a_group_is_informative_only_when_its_kept_rewards_differ():
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 0.5]
    groups = [0, 0, 1, 1, 2, 4]  # group 3 lost every episode (infra-failed), group 4 kept one
    assert informative_groups(rewards, groups, 5) == [True, False, None, None, None]  # None: unknown


def test_without_replay_the_fresh_seeds_are_the_steps_seeds():
    replay = TaskReplay(4, 0.0, 4, seed=0)
    replay.observe(0, [1, 2, 3, 4], [True] * 4)
    assert not replay.enabled and replay.seeds(1, [9, 8, 7, 6]) == [9, 8, 7, 6] and replay.replayed(1) == 0


def test_replays_fill_the_first_positions_from_informative_tasks_only():
    replay = TaskReplay(4, 0.5, 4, seed=0)
    assert replay.seeds(0, [10, 11, 12, 13]) == [10, 11, 12, 13]  # an empty buffer replays nothing
    replay.observe(0, [10, 11, 12, 13], [True, False, True, False])
    seeds = replay.seeds(1, [20, 21, 22, 23])
    assert sorted(seeds[:2]) == [10, 12] and seeds[2:] == [22, 23] and replay.replayed(1) == 2
    assert replay.seeds(1, [99, 98, 97, 96]) == seeds  # asked again (once per admitted group): the same list
    replay.observe(1, seeds, [seeds[0] == 10, seeds[1] == 10, False, True])  # 12 gave no signal this time
    assert sorted(replay.state_dict()["buffer"]) == [[10, 1], [23, 0]]


def test_a_task_retires_after_its_last_replay_and_does_not_come_back():
    replay = TaskReplay(2, 0.5, 2, seed=3)
    replay.observe(0, [5, 6], [True, False])
    for step in (1, 2):
        seeds = replay.seeds(step, [100 + step, 200 + step])
        assert seeds[0] == 5
        replay.observe(step, seeds, [True, False])
    assert len(replay) == 0 and replay.seeds(3, [7, 8]) == [7, 8]  # two uses spent: retired though informative


def test_the_buffer_keeps_the_newest_tasks():
    replay = TaskReplay(2, 0.5, 4, seed=0)  # capacity 8
    for step in range(6):
        replay.observe(step, [2 * step, 2 * step + 1], [True, True])
    assert [s for s, _ in replay.state_dict()["buffer"]] == list(range(4, 12))


def test_state_dict_restores_the_same_draws():
    a = TaskReplay(4, 0.75, 3, seed=1)
    a.observe(0, [1, 2, 3, 4], [True, True, True, False])
    a.seeds(1, [11, 12, 13, 14])  # drawn ahead (asynchronous admission), not trained yet
    b = TaskReplay(4, 0.75, 3, seed=1)
    b.load_state_dict(a.state_dict())
    assert b.seeds(1, [0, 0, 0, 0]) == a.seeds(1, [11, 12, 13, 14])
    assert b.seeds(2, [21, 22, 23, 24]) == a.seeds(2, [21, 22, 23, 24])
    assert b.state_dict() == a.state_dict()


@pytest.mark.parametrize("frac, uses", [(-0.1, 1), (1.5, 1), (0.5, 0)])
def test_bad_settings_are_refused(frac, uses):
    with pytest.raises(ValueError, match="Expected"):
        TaskReplay(4, frac, uses, seed=0)


def test_without_replay_no_state_grows():
    replay = TaskReplay(4, 0.0, 4, seed=0)
    for step in range(50):
        replay.seeds(step, [step, step + 1, step + 2, step + 3])
    assert replay.state_dict() == {"buffer": [], "retired": [], "drawn": {}}


def test_replay_with_a_stale_rollout_is_refused():
    from baselines.config import load_config
    from baselines.errors import ConfigError

    with pytest.raises(ConfigError, match="max_staleness = 0 with rollout.replay_frac"):
        load_config(None, ["rollout.replay_frac=0.5", "rollout.max_staleness=1"])


def test_a_group_lost_to_infrastructure_leaves_the_buffer_as_it_was():
    replay = TaskReplay(2, 0.5, 4, seed=0)
    replay.observe(0, [5, 6], [True, None])
    replay.observe(1, [5, 7], [None, None])
    assert replay.state_dict()["buffer"] == [[5, 0]]
