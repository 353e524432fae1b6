"""Two whole PPO training iterations of rlfit against Brax 0.14.2's own `ppo.train` on the same toy environment,
from the same initial parameters and keys (fixtures/brax_ppo_iteration.npz, written by
benchmarks/brax_iteration_reference.py in the Brax venv; the .json beside it records the versions and command).

Each iteration goes through rlfit's `make_iteration_from_keys` (the body of `make_train_iteration`, its keys
given): the rollout on `VecEnv` with time limits, terminations and auto-reset (benchmarks/brax_toy_env.py), the
observation statistics, the epochs of minibatch updates. Observation normalization is on; the `fixed` schedule
updates the statistics before the updates and `adaptive_kl` after them, as Brax does. What rlfit does not share
with Brax is the key stream: `make_train_iteration` splits its own keys, so the test hands each iteration the keys
Brax's rollout and updates drew.

Tolerance: float32, rtol 1e-5 / atol 1e-6 everywhere. When written (rlfit on jax 0.10.2, the fixture from Brax's
jax 0.9.2) the parameters after each iteration agreed to 7.5e-8, the statistics' std to 1.2e-7, the rollout to
1.2e-6 (log-probabilities near -3); Brax's own two compilations of these steps (`ppo.train` and its parts, the
fixture's `composed_vs_train`) to 2.4e-7.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.brax_toy_env import OBS_SIZE, ToyEnv
from rlfit.algos.common.normalizer import init_stats, std
from rlfit.algos.ppo.config import PPOConfig
from rlfit.algos.ppo.networks import AgentParams, make_agent
from rlfit.algos.ppo.rollout import collect_with_keys
from rlfit.algos.ppo.schedule import learning_rate
from rlfit.algos.ppo.sizes import BatchSizes
from rlfit.algos.ppo.step import TrainState, make_iteration_from_keys, make_optimizer
from rlfit.envs.vec_env import VecEnv

FIXTURE = Path(__file__).parent / "fixtures" / "brax_ppo_iteration.npz"
RECORD = json.loads(FIXTURE.with_suffix(".json").read_text())
SETTINGS = RECORD["settings"]
CASES = sorted(SETTINGS["cases"])
ITERATIONS = (1, 2)
RTOL, ATOL = 1e-5, 1e-6

with np.load(FIXTURE) as _arrays:
    REFERENCE = dict(_arrays)


def tree(prefix: str) -> dict:
    """Brax's flat 'prefix/params/hidden_i/kernel' arrays as rlfit's {'params': {'dense_i': {'kernel': ..}}}."""
    out: dict = {}
    for name, value in REFERENCE.items():
        if name.startswith(prefix + "/"):
            collection, layer, leaf = name[len(prefix) + 1:].split("/")
            out.setdefault(collection, {}).setdefault(layer.replace("hidden_", "dense_"), {})[leaf] = jnp.asarray(value)
    return out


def brax_params(prefix: str) -> AgentParams:
    return AgentParams(tree(f"{prefix}/policy"), tree(f"{prefix}/value"))


def config_for(case: str) -> PPOConfig:
    settings = SETTINGS["cases"][case]
    return PPOConfig(
        num_envs=SETTINGS["num_envs"], batch_size=SETTINGS["batch_size"], num_minibatches=settings["num_minibatches"],
        unroll_length=SETTINGS["unroll_length"], num_updates_per_batch=settings["num_updates_per_batch"],
        learning_rate=settings["learning_rate"], entropy_cost=settings["entropy_cost"],
        discounting=settings["discounting"], gae_lambda=settings["gae_lambda"],
        clipping_epsilon=settings["clipping_epsilon"], reward_scaling=settings["reward_scaling"],
        max_grad_norm=settings["max_grad_norm"] or 0.0, normalize_observations=SETTINGS["normalize_observations"],
        normalize_advantage=settings["normalize_advantage"],
        learning_rate_schedule=settings.get("learning_rate_schedule", "none").lower(),
        desired_kl=settings.get("desired_kl", 0.01),
        learning_rate_schedule_min_lr=settings.get("learning_rate_schedule_min_lr", 1e-5),
        learning_rate_schedule_max_lr=settings.get("learning_rate_schedule_max_lr", 1e-2),
        policy_hidden=tuple(SETTINGS["policy_hidden"]), value_hidden=tuple(SETTINGS["value_hidden"]),
        activation=SETTINGS["activation"])


@functools.cache
def run(case: str) -> tuple:
    """rlfit's iterations from Brax's initial parameters and keys: [(state before, rollout, state after, metrics)]."""
    ppo = config_for(case)
    env = VecEnv(ToyEnv(), SETTINGS["num_envs"], SETTINGS["episode_length"])
    agent = make_agent(jnp.zeros(OBS_SIZE), SETTINGS["action_size"], ppo)
    optimizer = make_optimizer(ppo)
    sizes = BatchSizes(ppo.num_envs, ppo.batch_size, ppo.num_minibatches, ppo.unroll_length)
    iterate = jax.jit(make_iteration_from_keys(env, agent, optimizer, ppo, sizes))
    rollout = jax.jit(lambda state, keys: collect_with_keys(env, agent, state.params.policy, state.normalizer,
                                                            state.env_state, keys, keep_logits=True)[1])
    params = brax_params("params")
    state = TrainState(params, optimizer.init(params), init_stats(jnp.zeros(OBS_SIZE)),
                       env.reset(jax.random.PRNGKey(0)), jnp.zeros(2, jnp.uint32))
    steps = []
    for i in ITERATIONS:
        keys = jnp.asarray(REFERENCE[f"{case}/{i}/keys/collect"])
        after, metrics = iterate(state, keys, jnp.asarray(REFERENCE[f"{case}/{i}/keys/sgd"]))
        steps.append((state, rollout(state, keys), after, metrics))
        state = after
    return tuple(steps)


def brax_rollout(case: str, i: int, name: str) -> np.ndarray:
    """Brax's [S, T, ...] rollout array as rlfit's [T, S, ...]."""
    return np.swapaxes(REFERENCE[f"{case}/{i}/rollout/{name}"], 0, 1)


def assert_trees_close(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("i", ITERATIONS)
def test_the_fixture_mixes_terminations_truncations_and_ordinary_steps(case, i):
    truncation = brax_rollout(case, i, "truncation")
    termination = (1.0 - brax_rollout(case, i, "discount")) * (1.0 - truncation)
    assert truncation.sum() >= 3 and termination.sum() >= 3 and (1 - termination - truncation).sum() >= 40
    assert RECORD["versions"]["brax"] == "0.14.2"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("i", ITERATIONS)
def test_the_rollout_matches_brax_generate_unroll(case, i):
    """Same observations, actions, log-probabilities, logits, rewards and end flags; the next observation where
    no episode ended (Brax's is the reset one where it ended, rlfit's the final one)."""
    data = run(case)[i - 1][1]
    ended = brax_rollout(case, i, "discount") == 0.0
    truncation = brax_rollout(case, i, "truncation")
    for ours, theirs in ((data.obs, brax_rollout(case, i, "obs")), (data.raw_action, brax_rollout(case, i, "raw_action")),
                         (data.log_prob, brax_rollout(case, i, "log_prob")), (data.logits, brax_rollout(case, i, "logits")),
                         (data.reward, brax_rollout(case, i, "reward")), (data.truncation, truncation),
                         (data.termination, ended * (1.0 - truncation))):
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(data.next_obs)[~ended], brax_rollout(case, i, "next_obs")[~ended],
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("i", ITERATIONS)
def test_observation_statistics_match_brax_running_statistics(case, i):
    stats = run(case)[i - 1][2].normalizer
    prefix = f"{case}/{i}/normalizer"
    assert float(stats.count) == REFERENCE[f"{prefix}/count"] == i * SETTINGS["batch_size"] * \
        SETTINGS["cases"][case]["num_minibatches"] * SETTINGS["unroll_length"]
    np.testing.assert_allclose(np.asarray(stats.mean), REFERENCE[f"{prefix}/mean"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(std(stats)), REFERENCE[f"{prefix}/std"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(stats.sum_sq_dev), REFERENCE[f"{prefix}/summed_variance"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("i", ITERATIONS)
def test_parameters_after_each_iteration_match_brax_ppo_train(case, i):
    before, _, after, metrics = run(case)[i - 1]
    assert_trees_close(after.params, brax_params(f"{case}/{i}/updated"))
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(after.params),
                                                               jax.tree.leaves(before.params)))
    assert moved > 100 * ATOL  # the updates are far larger than the tolerance
    rates = REFERENCE[f"{case}/{i}/updates/learning_rate"]
    np.testing.assert_allclose(learning_rate(after.opt_state, config_for(case)), rates[-1, -1], rtol=RTOL)
    if case == "adaptive_kl":
        np.testing.assert_allclose(metrics.learning_rate, rates[-1, -1], rtol=RTOL)


@pytest.mark.parametrize("case", CASES)
def test_the_fixture_tells_the_two_orders_apart(case):
    """Updating the statistics at the other point (before the updates with adaptive_kl, after them without) moves
    the parameters after the first iteration far beyond the tolerance: the comparison above pins the order."""
    ours = run(case)[0][2].params
    other = brax_params(f"{case}/other_order")
    gap = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(other)))
    assert gap > 100 * ATOL


def test_the_adaptive_kl_case_moves_the_step_size_both_ways():
    rates = np.concatenate([REFERENCE[f"adaptive_kl/{i}/updates/learning_rate"].ravel() for i in ITERATIONS])
    steps = np.diff(np.concatenate([[SETTINGS["cases"]["adaptive_kl"]["learning_rate"]], rates]))
    assert (steps > 0).any() and (steps < 0).any()
