"""VecEnv: time limits vs terminal states, auto-reset of only finished envs with fresh keys, statistics, repeats."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.envs.vec_env import VecEnv
from tests.toy_env import make as make_toy


@flax.struct.dataclass
class ScriptedState:
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    metrics: dict
    info: dict


class Scripted:
    """obs = [steps since reset, a number drawn from the reset key]; reward = that step count (1, 2, 3, ...);
    terminal when action[0] > 0.5 or after `terminal_at` env steps."""

    action_size = 2
    observation_size = 2

    def __init__(self, terminal_at: int = 1000):
        self.terminal_at = terminal_at

    def reset(self, key):
        obs = jnp.stack([jnp.zeros(()), jax.random.uniform(key)])
        return ScriptedState(obs, jnp.zeros(()), jnp.zeros(()), {}, {})

    def step(self, state, action):
        count = state.obs[0] + 1
        done = jnp.logical_or(action[0] > 0.5, count >= self.terminal_at).astype(jnp.float32)
        return state.replace(obs=state.obs.at[0].set(count), reward=count, done=done)


def actions(terminate):
    """[N, 2] actions; env i terminates at this step where terminate[i]."""
    terminate = jnp.asarray(terminate, jnp.float32)
    return jnp.stack([terminate, jnp.zeros_like(terminate)], axis=-1)


def run(vec, state, terminate_rows):
    step = jax.jit(vec.step)
    outputs = []
    for row in terminate_rows:
        state, out = step(state, actions(row))
        outputs.append(jax.device_get(out))
    return state, outputs


def test_time_limit_is_a_truncation_not_a_terminal_state():
    vec = VecEnv(Scripted(), num_envs=2, episode_length=3)
    state = vec.reset(jax.random.PRNGKey(0))
    state, outs = run(vec, state, [[0, 0], [0, 1], [0, 0]])
    np.testing.assert_array_equal([o.truncation for o in outs], [[0, 0], [0, 0], [1, 0]])
    np.testing.assert_array_equal([o.termination for o in outs], [[0, 0], [0, 1], [0, 0]])
    # env 0 timed out at step 3: its next_obs is the final observation (count 3), before the reset
    assert outs[2].next_obs[0, 0] == 3
    assert float(state.inner.obs[0, 0]) == 0 and int(state.step_count[0]) == 0
    # env 1 terminated at step 2 and then ran one step of a new episode
    assert outs[1].next_obs[1, 0] == 2
    assert float(state.inner.obs[1, 0]) == 1 and int(state.step_count[1]) == 1


def test_terminal_state_at_the_time_limit_is_a_termination():
    vec = VecEnv(Scripted(), num_envs=1, episode_length=2)
    _, outs = run(vec, vec.reset(jax.random.PRNGKey(0)), [[0], [1]])
    assert outs[1].termination[0] == 1 and outs[1].truncation[0] == 0


def test_only_finished_envs_reset_and_each_gets_a_fresh_key():
    num_envs = 4
    vec = VecEnv(Scripted(), num_envs=num_envs, episode_length=100)
    state = vec.reset(jax.random.PRNGKey(3))
    first_draws = np.asarray(state.inner.obs[:, 1])
    assert len(set(first_draws.tolist())) == num_envs, "each env starts from its own key"
    # envs 0 and 2 terminate at step 2; 1 and 3 keep running
    state, outs = run(vec, state, [[0, 0, 0, 0], [1, 0, 1, 0]])
    obs = np.asarray(state.inner.obs)
    np.testing.assert_array_equal(obs[:, 0], [0, 2, 0, 2])
    np.testing.assert_array_equal(np.asarray(state.step_count), [0, 2, 0, 2])
    np.testing.assert_array_equal(obs[[1, 3], 1], first_draws[[1, 3]])  # untouched
    new_draws = obs[[0, 2], 1]
    assert new_draws[0] != new_draws[1], "two envs resetting together must not share a key"
    assert not set(new_draws.tolist()) & set(first_draws.tolist()), "a reset must not repeat an earlier episode"
    # the same env resetting again gets yet another key
    state, _ = run(vec, state, [[1, 0, 0, 0]])
    assert float(state.inner.obs[0, 1]) not in set(new_draws.tolist()) | set(first_draws.tolist())


def test_episode_return_and_length_statistics():
    vec = VecEnv(Scripted(), num_envs=2, episode_length=4)
    state = vec.reset(jax.random.PRNGKey(0))
    # env 0: truncated after 4 steps, return 1+2+3+4 = 10; env 1: terminated at step 3 (1+2+3 = 6),
    # then a new episode: 1 at step 4, 2 at step 5 where it terminates again (return 3, length 2)
    state, outs = run(vec, state, [[0, 0], [0, 0], [0, 1], [0, 0], [0, 1]])
    returns = np.array([o.finished_return for o in outs])
    lengths = np.array([o.finished_length for o in outs])
    np.testing.assert_array_equal(returns, [[0, 0], [0, 0], [0, 6], [10, 0], [0, 3]])
    np.testing.assert_array_equal(lengths, [[0, 0], [0, 0], [0, 3], [4, 0], [0, 2]])
    np.testing.assert_array_equal([o.reward for o in outs], [[1, 1], [2, 2], [3, 3], [4, 1], [1, 2]])
    np.testing.assert_array_equal(np.asarray(state.episode_return), [1, 0])


def test_action_repeat_sums_rewards_and_stops_at_a_terminal_state():
    vec = VecEnv(Scripted(terminal_at=5), num_envs=2, episode_length=100, action_repeat=2)
    state = vec.reset(jax.random.PRNGKey(0))
    # step 1: env steps 1 and 2 -> reward 1 + 2; env 1 terminates on its first repeat -> reward 1 only
    state, outs = run(vec, state, [[0, 1]])
    np.testing.assert_array_equal(outs[0].reward, [3, 1])
    np.testing.assert_array_equal(outs[0].termination, [0, 1])
    np.testing.assert_array_equal(outs[0].next_obs[0, 0], 2)
    # env 0: steps 3+4, then step 5 is terminal (terminal_at=5) after its first repeat: 5 only
    state, outs = run(vec, state, [[0, 0], [0, 0]])
    assert outs[0].reward[0] == 3 + 4
    assert outs[1].reward[0] == 5 and outs[1].termination[0] == 1
    assert outs[1].finished_return[0] == 1 + 2 + 3 + 4 + 5
    assert outs[1].finished_length[0] == 3  # policy steps, not env steps


def test_time_limit_counts_policy_steps_with_action_repeat():
    vec = VecEnv(Scripted(), num_envs=1, episode_length=3, action_repeat=2)
    _, outs = run(vec, vec.reset(jax.random.PRNGKey(0)), [[0]] * 3)
    assert [float(o.truncation[0]) for o in outs] == [0, 0, 1]
    assert outs[2].next_obs[0, 0] == 6


def test_toy_env_truncation_and_termination():
    toy = make_toy()
    vec = VecEnv(toy, num_envs=8, episode_length=5)
    state = vec.reset(jax.random.PRNGKey(0))
    step = jax.jit(vec.step)
    zero = jnp.zeros((8, 1))
    for _ in range(4):
        state, out = step(state, zero)
        assert not np.any(out.truncation) and not np.any(out.termination)
    state, out = step(state, zero)
    np.testing.assert_array_equal(out.truncation, 1.0)
    np.testing.assert_array_equal(out.termination, 0.0)
    np.testing.assert_allclose(out.finished_length, 5.0)
    # pushing right always leaves [-2, 2] within 15 steps: a terminal state, never a truncation
    vec = VecEnv(toy, num_envs=8, episode_length=100)
    state = vec.reset(jax.random.PRNGKey(1))
    step = jax.jit(vec.step)
    terminated = np.zeros(8)
    for _ in range(16):
        state, out = step(state, jnp.ones((8, 1)))
        assert not np.any(out.truncation)
        terminated += np.asarray(out.termination)
    np.testing.assert_array_equal(terminated, 1.0)


def test_step_keeps_state_shapes_and_dtypes_under_jit():
    vec = VecEnv(make_toy(), num_envs=3, episode_length=2)
    state = vec.reset(jax.random.PRNGKey(0))
    new, _ = jax.jit(vec.step)(state, jnp.zeros((3, 1)))
    new, _ = jax.jit(vec.step)(new, jnp.zeros((3, 1)))  # the second step resets everything
    for before, after in zip(jax.tree.leaves(state), jax.tree.leaves(new)):
        assert before.shape == after.shape and before.dtype == after.dtype


@pytest.mark.parametrize("seed", [0, 1])
def test_reset_is_a_pure_function_of_the_key(seed):
    vec = VecEnv(Scripted(), num_envs=3, episode_length=10)
    a, b = vec.reset(jax.random.PRNGKey(seed)), vec.reset(jax.random.PRNGKey(seed))
    np.testing.assert_array_equal(a.inner.obs, b.inner.obs)
    np.testing.assert_array_equal(a.reset_key, b.reset_key)
