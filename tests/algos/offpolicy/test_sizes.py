"""SAC's out-of-memory back-off: the replay buffer first when the starting state ran out, the environments
first when an iteration did; each falls back to the other, and stops where neither can shrink."""

from __future__ import annotations

from rlfit.algos.offpolicy.sizes import ReplaySizes, smaller_sizes


def test_init_halves_the_buffer_then_the_environments():
    sizes = ReplaySizes(num_envs=8, batch_size=16, max_replay_size=64, policy_steps_per_iteration=4)
    assert smaller_sizes(sizes, "init") == sizes._replace(max_replay_size=32)
    floor = sizes._replace(max_replay_size=16)  # half of it would hold fewer than 2 policy steps of 8 envs
    assert smaller_sizes(floor, "init") == floor._replace(num_envs=4)


def test_step_halves_the_environments_then_the_buffer():
    sizes = ReplaySizes(num_envs=2, batch_size=4, max_replay_size=64, policy_steps_per_iteration=4)
    assert smaller_sizes(sizes, "step") == sizes._replace(num_envs=1)
    one = sizes._replace(num_envs=1)
    assert smaller_sizes(one, "step") == one._replace(max_replay_size=32)


def test_nothing_left_to_shrink():
    assert smaller_sizes(ReplaySizes(1, 8, 8, 4), "step") is None
    assert smaller_sizes(ReplaySizes(1, 8, 8, 4), "init") is None
