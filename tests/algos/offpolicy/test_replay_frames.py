"""Frame stacks in the replay buffer: one uint8 frame stored per row, stacks rebuilt at sampling time equal the
stacks the environments showed, across resets, time limits, terminals and the ring's wrap."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.offpolicy.replay import (StepBatch, bytes_per_transition, init_replay, insert, num_valid, replay_rows,
                                    sample)

N, A, L, T = 3, 2, 5, 3  # environments, action size, time limit, frames per stack
H, W, C = 2, 2, 1
CAPACITY = 8 * N
NUM_STEPS = 23  # wraps the 8-row ring twice


class FrameStackEnvs:
    """N environments whose observation is {"pixels": [T, H, W, C] uint8 stack, "state": [1] float32 code}.

    Each frame is a fresh code; a reset fills the stack with its first frame, a step drops the oldest frame.
    """

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.next_code = 1
        self.stacks = [self.reset_stack() for _ in range(N)]
        self.count = [0] * N

    def frame(self) -> np.ndarray:
        code, self.next_code = self.next_code, self.next_code + 1
        return np.full((H, W, C), code % 256, np.uint8), code

    def reset_stack(self) -> list[tuple[np.ndarray, int]]:
        return [self.frame()] * T

    @staticmethod
    def obs(stack) -> dict[str, np.ndarray]:
        return {"pixels": np.stack([f for f, _ in stack]), "state": np.array([stack[-1][1]], np.float32)}


def simulate(num_steps: int, seed: int = 0):
    """Step batches as `VecEnv` and the SAC step give them, and the reference {(t, e): (obs, next_obs, discount)}."""
    rng = np.random.default_rng(seed)
    envs = FrameStackEnvs(rng)
    steps, reference = [], {}
    for t in range(num_steps):
        current = [FrameStackEnvs.obs(s) for s in envs.stacks]
        episode_step = np.array(envs.count, np.int32)
        terminal = rng.uniform(size=N) < 0.15
        reached, truncation, following = [], np.zeros(N, np.float32), []
        for e in range(N):
            envs.stacks[e] = envs.stacks[e][1:] + [envs.frame()]
            envs.count[e] += 1
            reached.append(FrameStackEnvs.obs(envs.stacks[e]))
            truncation[e] = float(envs.count[e] >= L and not terminal[e])
            if terminal[e] or truncation[e]:
                envs.stacks[e], envs.count[e] = envs.reset_stack(), 0
            following.append(FrameStackEnvs.obs(envs.stacks[e]))
        discount = 1.0 - terminal.astype(np.float32)
        steps.append(StepBatch(stack(current), rng.uniform(-1, 1, (N, A)).astype(np.float32),
                               rng.normal(size=N).astype(np.float32), discount, truncation, stack(reached),
                               episode_step))
        for e in range(N):
            reference[(t, e)] = (current[e], following[e] if terminal[e] else reached[e], discount[e])
    return steps, reference


def stack(observations: list[dict]) -> dict[str, np.ndarray]:
    return {key: np.stack([o[key] for o in observations]) for key in observations[0]}


def fill(num_steps: int):
    steps, reference = simulate(num_steps)
    state = init_replay(jax.tree.map(lambda x: x[0], steps[0]), CAPACITY, N, L, stacked_keys=("pixels",))
    jit_insert = jax.jit(insert)
    for step in steps:
        state = jit_insert(state, step)
    return state, reference, steps


@functools.partial(jax.jit, static_argnums=2)
def draw(state, key, batch_size):
    return sample(state, key, batch_size)


@pytest.mark.parametrize("num_steps", [4, 8, NUM_STEPS])
def test_rebuilt_stacks_equal_the_stacks_the_environments_showed(num_steps):
    state, reference, steps = fill(num_steps)
    rows = CAPACITY // N
    oldest = max(0, num_steps - rows)
    # the newest row has no successor yet; the oldest T - 1 rows lack their earlier frames
    valid = {(t, e) for t in range(oldest + T - 1, num_steps - 1) for e in range(N)}
    assert int(num_valid(state)) == len(valid)
    by_code = {int(ref[0]["state"][0]): key for key, ref in reference.items()}
    batch = jax.device_get(draw(state, jax.random.PRNGKey(0), 3000))
    assert batch.obs["pixels"].shape == (3000, T, H, W, C) and batch.obs["pixels"].dtype == np.uint8
    seen = set()
    for i in range(3000):
        key = by_code[int(batch.obs["state"][i][0])]
        assert key in valid, f"sampled transition {key} is outside the buffer's valid range"
        seen.add(key)
        obs, next_obs, discount = reference[key]
        np.testing.assert_array_equal(batch.obs["pixels"][i], obs["pixels"], err_msg=f"{key} obs")
        if discount > 0:  # after a terminal state the next observation is multiplied by 0 (documented stand-in)
            np.testing.assert_array_equal(batch.next_obs["pixels"][i], next_obs["pixels"], err_msg=f"{key} next")
            np.testing.assert_array_equal(batch.next_obs["state"][i], next_obs["state"])
    assert seen == valid, "some valid transitions were never sampled"


def test_the_sequence_covers_resets_inside_stacks_time_limits_and_terminals():
    steps, reference = simulate(NUM_STEPS)
    young = [(t, e) for t in range(NUM_STEPS) for e in range(N) if 0 < steps[t].episode_step[e] < T - 1]
    assert young, "no stack reaches back past its episode's start"
    assert sum(float(s.truncation.sum()) for s in steps) >= 3 and sum(float((1 - s.discount).sum()) for s in steps) >= 3


def test_a_row_stores_one_frame_and_the_bytes_match_the_formula():
    state, _, steps = fill(2)
    rows, slots = replay_rows(CAPACITY, N, L)
    assert state.obs["pixels"].shape == (rows, N, H, W, C)
    assert state.final_obs["pixels"].shape == (slots, N, T, H, W, C)
    example = jax.tree.map(lambda x: x[0], steps[0])
    bookkeeping = {id(state.final_position), id(state.insert_position), id(state.size)}
    stored = sum(leaf.nbytes for leaf in jax.tree.leaves(state) if id(leaf) not in bookkeeping)
    expected = bytes_per_transition(example, CAPACITY, N, L, stacked_keys=("pixels",))
    assert stored / CAPACITY == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(H * W * C + 4 + (T * H * W * C + 4) * slots / rows + 4 * A + 16)


def test_a_step_without_episode_step_is_refused():
    state, _, steps = fill(1)
    with pytest.raises(ValueError, match="episode_step"):
        insert(state, steps[0]._replace(episode_step=None))


def test_a_frame_stack_of_a_plain_array_observation_is_refused():
    example = StepBatch(jnp.zeros((T, H, W, C), jnp.uint8), jnp.zeros(A), 0.0, 0.0, 0.0, None)
    with pytest.raises(ValueError, match="dict observation"):
        init_replay(example, CAPACITY, N, L, stacked_keys=("pixels",))
