"""The replay ring buffer against a plain-Python list of transitions: episode ends, ring wrap, dtypes, sampling."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.offpolicy.replay import (StepBatch, bytes_per_transition, init_replay, insert, num_valid, replay_rows,
                                    sample)

N, A, L = 3, 2, 4  # environments, action size, time limit in policy steps
CAPACITY = 7 * N  # 7 rows: inserting 20 steps wraps the ring twice
NUM_STEPS = 20


def make_obs(code: int) -> dict[str, np.ndarray]:
    """A dict observation identified by `code`: a uint8 frame and a float32 vector."""
    return {"pixels": np.full((2, 2), code % 251, np.uint8), "state": np.array([code, -code, 0.5], np.float32)}


def simulate(num_steps: int, seed: int = 0) -> tuple[list[StepBatch], dict[tuple[int, int], tuple]]:
    """Step batches as `VecEnv` would give them, and the reference {(t, e): (obs, action, reward, discount, next_obs)}.

    An environment truncates when its step count reaches L and terminates at random; a reset observation is new.
    After a terminal state the expected next observation is the next episode's first (the documented stand-in).
    """
    rng = np.random.default_rng(seed)
    codes = iter(range(1, 10**6))
    current = [make_obs(next(codes)) for _ in range(N)]
    count = [0] * N
    steps, reference = [], {}
    for t in range(num_steps):
        action = rng.uniform(-1, 1, (N, A)).astype(np.float32)
        reward = rng.normal(size=N).astype(np.float32)
        terminal = rng.uniform(size=N) < 0.15
        reached = [make_obs(next(codes)) for _ in range(N)]
        truncation = np.zeros(N, np.float32)
        for e in range(N):
            count[e] += 1
            truncation[e] = float(count[e] >= L and not terminal[e])
        discount = 1.0 - terminal.astype(np.float32)
        steps.append(StepBatch(stack(current), action, reward, discount, truncation, stack(reached)))
        following = [make_obs(next(codes)) if (terminal[e] or truncation[e]) else reached[e] for e in range(N)]
        for e in range(N):
            next_obs = following[e] if terminal[e] else reached[e]
            reference[(t, e)] = (current[e], action[e], reward[e], discount[e], next_obs)
            if terminal[e] or truncation[e]:
                count[e] = 0
        current = following
    return steps, reference


def stack(observations: list[dict]) -> dict[str, np.ndarray]:
    return {key: np.stack([o[key] for o in observations]) for key in observations[0]}


def fill(num_steps: int):
    steps, reference = simulate(num_steps)
    state = init_replay(jax.tree.map(lambda x: x[0], steps[0]), CAPACITY, N, L)
    jit_insert = jax.jit(insert)
    for step in steps:
        state = jit_insert(state, step)
    return state, reference


@functools.partial(jax.jit, static_argnums=2)
def draw(state, key, batch_size):
    return sample(state, key, batch_size)


def identify(obs_state: np.ndarray) -> int:
    return int(round(obs_state[0]))


@pytest.mark.parametrize("num_steps", [3, 7, NUM_STEPS])
def test_every_sampled_transition_matches_the_reference(num_steps):
    state, reference = fill(num_steps)
    rows = CAPACITY // N
    oldest = max(0, num_steps - rows)
    valid = {(t, e) for t in range(oldest, num_steps - 1) for e in range(N)}  # the newest step is not sampled
    assert int(num_valid(state)) == len(valid)
    by_code = {identify(ref[0]["state"]): key for key, ref in reference.items()}
    batch = jax.device_get(draw(state, jax.random.PRNGKey(0), 3000))
    seen = set()
    for i in range(3000):
        key = by_code[identify(batch.obs["state"][i])]
        assert key in valid, f"sampled transition {key} is not in the buffer's valid range"
        seen.add(key)
        obs, action, reward, discount, next_obs = reference[key]
        for name in ("pixels", "state"):
            np.testing.assert_array_equal(batch.obs[name][i], obs[name])
            np.testing.assert_array_equal(batch.next_obs[name][i], next_obs[name], err_msg=f"{key} next_obs {name}")
        np.testing.assert_array_equal(batch.action[i], action)
        assert batch.reward[i] == reward and batch.discount[i] == discount
    assert seen == valid, "some valid transitions were never sampled"


def test_the_sequence_covers_time_limits_terminals_and_the_wrap():
    steps, reference = simulate(NUM_STEPS)
    truncations = sum(float(s.truncation.sum()) for s in steps)
    terminals = sum(float((1 - s.discount).sum()) for s in steps)
    assert truncations >= 6 and terminals >= 4 and NUM_STEPS > 2 * (CAPACITY // N)
    # at a time limit the stored next observation is the pre-reset one, not the next episode's first
    t, e = next((t, e) for t in range(NUM_STEPS - 1) for e in range(N) if steps[t].truncation[e] > 0)
    assert identify(reference[(t, e)][4]["state"]) != identify(steps[t + 1].obs["state"][e])


def test_dtypes_and_shapes_are_kept():
    state, _ = fill(NUM_STEPS)
    rows, slots = replay_rows(CAPACITY, N, L)
    assert state.obs["pixels"].dtype == jnp.uint8 and state.final_obs["pixels"].dtype == jnp.uint8
    assert state.obs["pixels"].shape == (rows, N, 2, 2) and state.final_obs["state"].shape == (slots, N, 3)
    assert state.obs["state"].dtype == jnp.float32 and state.action.dtype == jnp.float32
    batch = draw(state, jax.random.PRNGKey(1), 5)
    assert batch.obs["pixels"].dtype == jnp.uint8 and batch.next_obs["pixels"].dtype == jnp.uint8
    assert batch.obs["pixels"].shape == (5, 2, 2) and batch.action.shape == (5, A) and batch.reward.shape == (5,)


def test_size_and_insert_position_wrap():
    steps, _ = simulate(10)
    state = init_replay(jax.tree.map(lambda x: x[0], steps[0]), CAPACITY, N, L)
    for t, step in enumerate(steps):
        state = insert(state, step)
        assert int(state.size) == min(t + 1, 7) and int(state.insert_position) == (t + 1) % 7


def test_bytes_per_transition_matches_the_arrays():
    state, _ = fill(2)
    example = StepBatch(make_obs(0), np.zeros(A, np.float32), 0.0, 0.0, 0.0, make_obs(0))
    bookkeeping = {id(state.final_position), id(state.insert_position), id(state.size)}
    stored = sum(leaf.nbytes for leaf in jax.tree.leaves(state) if id(leaf) not in bookkeeping)
    expected = bytes_per_transition(example, CAPACITY, N, L)
    assert stored / CAPACITY == pytest.approx(expected, rel=1e-12)
    rows, slots = replay_rows(CAPACITY, N, L)
    assert expected == pytest.approx((4 + 12) * (1 + slots / rows) + 4 * A + 12)


def test_sample_is_vmappable_and_capacity_errors_are_clear():
    state, _ = fill(5)
    batches = jax.vmap(lambda k: sample(state, k, 4))(jax.random.split(jax.random.PRNGKey(0), 3))
    assert batches.obs["state"].shape == (3, 4, 3)
    with pytest.raises(ValueError, match="max_replay_size"):
        replay_rows(N, N, L)
