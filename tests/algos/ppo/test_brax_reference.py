"""rlfit's PPO against Brax 0.14.2's own outputs on the same inputs (fixtures/brax_ppo.npz, written by
benchmarks/brax_reference.py in the Brax venv; fixtures/brax_ppo.json records the versions and the command).

The same transitions (terminations, time-limit truncations and ordinary steps mixed, 16 sequences of 8 steps) and
the same parameters (Brax's `hidden_i` layers are rlfit's `dense_i`) go through rlfit's own path: `loss_batch`
(observation normalization off, as in the fixture), `ppo_loss`, and `make_epochs` from Brax's `key_sgd`.

Tolerance: float32, rtol 1e-5 / atol 1e-6 everywhere: loss terms, targets, gradients and the parameters after the
16 Adam updates (they agreed to 1.2e-7 when written, jax 0.10.2 against Brax's jax 0.9.2).
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.common.normalizer import init_stats
from rlfit.algos.ppo.networks import AgentParams, make_agent
from rlfit.algos.ppo.config import PPOConfig
from rlfit.algos.ppo.gae import brax_targets
from rlfit.algos.ppo.step import TrainState, loss_batch, make_epochs, make_optimizer
from rlfit.algos.ppo.losses import ppo_loss
from rlfit.algos.ppo.schedule import learning_rate
from rlfit.algos.ppo.rollout import Transition
from rlfit.algos.ppo.sizes import BatchSizes

FIXTURE = Path(__file__).parent / "fixtures" / "brax_ppo.npz"
SETTINGS = json.loads(FIXTURE.with_suffix(".json").read_text())["settings"]
CASES = sorted(SETTINGS["cases"])
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def reference():
    with np.load(FIXTURE) as arrays:
        return dict(arrays)


def tree(arrays: dict, prefix: str) -> dict:
    """Brax's flat 'prefix/params/hidden_i/kernel' arrays as rlfit's {'params': {'dense_i': {'kernel': ..}}}."""
    out: dict = {}
    for name, value in arrays.items():
        if name.startswith(prefix + "/"):
            collection, layer, leaf = name[len(prefix) + 1:].split("/")
            out.setdefault(collection, {}).setdefault(layer.replace("hidden_", "dense_"), {})[leaf] = jnp.asarray(value)
    return out


def config_for(case: str) -> PPOConfig:
    settings = SETTINGS["cases"][case]
    return PPOConfig(
        num_envs=SETTINGS["sequences"], batch_size=SETTINGS["sequences"] // settings["num_minibatches"],
        num_minibatches=settings["num_minibatches"], unroll_length=SETTINGS["unroll_length"],
        num_updates_per_batch=settings["num_updates_per_batch"], learning_rate=settings["learning_rate"],
        entropy_cost=settings["entropy_cost"], discounting=settings["discounting"], gae_lambda=settings["gae_lambda"],
        clipping_epsilon=settings["clipping_epsilon"], reward_scaling=settings["reward_scaling"],
        max_grad_norm=settings["max_grad_norm"] or 0.0, normalize_observations=False,
        normalize_advantage=settings["normalize_advantage"],
        learning_rate_schedule=settings.get("learning_rate_schedule", "none").lower(),
        desired_kl=settings.get("desired_kl", 0.01),
        learning_rate_schedule_min_lr=settings.get("learning_rate_schedule_min_lr", 1e-5),
        learning_rate_schedule_max_lr=settings.get("learning_rate_schedule_max_lr", 1e-2))


def setup(reference: dict, case: str):
    """(agent, params, config, rlfit's epochs batch) for one case, built as a training iteration builds them."""
    agent = make_agent(jnp.zeros(SETTINGS["obs_size"]), SETTINGS["action_size"],
                       PPOConfig(policy_hidden=tuple(SETTINGS["policy_hidden"]),
                                 value_hidden=tuple(SETTINGS["value_hidden"]), activation=SETTINGS["activation"]))
    params = AgentParams(tree(reference, "params/policy"), tree(reference, "params/value"))
    ppo = config_for(case)

    def time_major(name):  # Brax stores [S, T, ...]; rlfit collects [T, S, ...]
        return jnp.swapaxes(jnp.asarray(reference[f"data/{name}"]), 0, 1)

    steps, sequences = SETTINGS["unroll_length"], SETTINGS["sequences"]
    data = Transition(obs=time_major("obs"), raw_action=time_major("raw_action"), log_prob=time_major("log_prob"),
                      reward=time_major("reward"), termination=time_major("termination"),
                      truncation=time_major("truncation"), next_obs=time_major("next_obs"),
                      latent_noise=jnp.zeros((steps, sequences, 0)), finished_return=jnp.zeros((steps, sequences)),
                      finished_length=jnp.zeros((steps, sequences)), logits=time_major("logits"))
    state = TrainState(params, make_optimizer(ppo).init(params), init_stats(jnp.zeros(SETTINGS["obs_size"])), None,
                       jnp.zeros(2, jnp.uint32))
    _, batch = loss_batch(agent, ppo, state, data)
    return agent, params, ppo, batch


def assert_trees_close(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


def test_the_adaptive_kl_case_moves_the_step_size_both_ways_and_to_its_floor(reference):
    """The schedule's branches all happen in Brax's updates: up by 1.5 (KL under half the target), down by 1.5
    (KL over twice it), and held at the minimum."""
    rates = reference["adaptive_kl/updates/learning_rate"].ravel()
    start = SETTINGS["cases"]["adaptive_kl"]["learning_rate"]
    assert rates[0] == pytest.approx(start * 1.5) and rates.min() == pytest.approx(1e-5) and rates[-1] < start / 10


def test_the_fixture_mixes_terminations_truncations_and_ordinary_steps(reference):
    termination, truncation = reference["data/termination"], reference["data/truncation"]
    assert termination.sum() >= 5 and truncation.sum() >= 5
    assert not np.any(termination * truncation)
    assert json.loads(FIXTURE.with_suffix(".json").read_text())["versions"]["brax"] == "0.14.2"


@pytest.mark.parametrize("case", CASES)
def test_brax_targets_match_brax_compute_gae(reference, case):
    agent, params, ppo, _ = setup(reference, case)
    obs = jnp.swapaxes(jnp.asarray(reference["data/obs"]), 0, 1)
    values = agent.value(params.value, obs)
    bootstrap = agent.value(params.value, jnp.asarray(reference["data/next_obs"])[:, -1])
    advantages, vs = brax_targets(ppo.reward_scaling * reference["data/reward"].T, values, bootstrap,
                                  reference["data/termination"].T, reference["data/truncation"].T,
                                  ppo.discounting, ppo.gae_lambda)
    np.testing.assert_allclose(advantages, reference[f"{case}/targets/advantages"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(vs, reference[f"{case}/targets/vs"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("case", CASES)
def test_loss_terms_and_gradients_match_brax_compute_ppo_loss(reference, case):
    agent, params, ppo, batch = setup(reference, case)

    def loss(p):
        return ppo_loss(p, batch, agent, ppo.clipping_epsilon, ppo.entropy_cost, ppo.normalize_advantage,
                        jnp.asarray(reference["keys/loss"]), 0.0, ppo.discounting, ppo.gae_lambda)

    (total, terms), grads = jax.value_and_grad(loss, has_aux=True)(params)
    for ours, theirs in (("total", "total"), ("policy", "policy"), ("value", "value"), ("entropy", "entropy")):
        np.testing.assert_allclose(getattr(terms, ours), reference[f"{case}/loss/{theirs}"], rtol=RTOL, atol=ATOL,
                                   err_msg=ours)
    np.testing.assert_allclose(total, reference[f"{case}/loss/total"], rtol=RTOL, atol=ATOL)
    # the collecting policy's logits are these parameters' own: only Brax's 1e-5 in the log of the scale ratio
    np.testing.assert_allclose(terms.kl_mean, reference[f"{case}/loss/kl_mean"], rtol=RTOL, atol=1e-8)
    assert_trees_close(grads, AgentParams(tree(reference, f"{case}/grads/policy"),
                                          tree(reference, f"{case}/grads/value")))


@pytest.mark.parametrize("case", CASES)
def test_epochs_of_minibatch_updates_match_brax_training_step(reference, case):
    agent, params, ppo, batch = setup(reference, case)
    sizes = BatchSizes(ppo.num_envs, ppo.batch_size, ppo.num_minibatches, ppo.unroll_length)
    optimizer = make_optimizer(ppo)
    epochs = jax.jit(make_epochs(agent, optimizer, ppo, sizes))
    (updated, opt_state, _), (terms, _, applied) = epochs((params, optimizer.init(params), None), batch,
                                                          jnp.asarray(reference["keys/sgd"]))
    assert applied.shape == (ppo.num_updates_per_batch, ppo.num_minibatches)
    # each update's KL from the collecting policy, before its step (Brax's `kl_mean`), and the step size after
    np.testing.assert_allclose(terms.kl_mean, reference[f"{case}/updates/kl_mean"], rtol=1e-4, atol=ATOL)
    np.testing.assert_allclose(learning_rate(opt_state, ppo), reference[f"{case}/updates/learning_rate"][-1, -1],
                               rtol=RTOL)
    assert_trees_close(updated, AgentParams(tree(reference, f"{case}/updated/policy"),
                                            tree(reference, f"{case}/updated/value")))
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(updated), jax.tree.leaves(params)))
    assert moved > 100 * ATOL  # the updates are far larger than the tolerance
