"""rlfit's SAC losses against Brax 0.14.2's `sac/losses.py` on the same inputs (fixtures/brax_sac.npz, written by
benchmarks/brax_reference.py in the Brax venv; fixtures/brax_sac.json records the versions and the command).

The same 32 transitions (terminations mixed with ordinary steps) and parameters (Brax's policy `hidden_i` are
rlfit's `dense_i`; its twin Q `MLP_i/hidden_j` are rlfit's `critic_i/dense_j`) and the same PRNG keys.
Tolerance: float32, rtol 1e-5 / atol 1e-6.

Two differences are rlfit's by design (docs/algorithms/sac.md) and checked as such: the temperature's loss is
-log_alpha * (log pi + target) where Brax's is alpha * (-log pi - target), so rlfit's loss is Brax's times
log_alpha / alpha and its gradient Brax's divided by alpha; and a time-limit step bootstraps in rlfit where Brax
masks it, so the fixture has no truncated transitions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.losses import actor_loss, alpha_loss, critic_loss
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.offpolicy.replay import Batch

FIXTURE = Path(__file__).parent / "fixtures" / "brax_sac.npz"
SETTINGS = json.loads(FIXTURE.with_suffix(".json").read_text())["settings"]
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def reference():
    with np.load(FIXTURE) as arrays:
        return dict(arrays)


def tree(arrays: dict, prefix: str) -> dict:
    """Brax's flat arrays under `prefix` as rlfit's nested parameters (MLP_i -> critic_i, hidden_j -> dense_j)."""
    out: dict = {}
    for name, value in arrays.items():
        if name.startswith(prefix + "/"):
            node = out
            *path, leaf = name[len(prefix) + 1:].split("/")
            for part in path:
                node = node.setdefault(part.replace("MLP_", "critic_").replace("hidden_", "dense_"), {})
            node[leaf] = jnp.asarray(value)
    return out


@pytest.fixture(scope="module")
def inputs(reference):
    config = SACConfig(policy_hidden=tuple(SETTINGS["hidden"]), q_hidden=tuple(SETTINGS["hidden"]),
                       activation=SETTINGS["activation"])
    networks = make_sac_networks(jnp.zeros(SETTINGS["obs_size"]), SETTINGS["action_size"], config)
    batch = Batch(*(jnp.asarray(reference[f"data/{name}"]) for name in ("obs", "action", "reward", "discount",
                                                                         "next_obs")))
    return networks, batch


def assert_trees_close(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


def test_the_fixture_has_terminations_and_ordinary_steps(reference):
    discount = reference["data/discount"]
    assert 0 < discount.sum() < discount.size
    assert json.loads(FIXTURE.with_suffix(".json").read_text())["versions"]["brax"] == "0.14.2"


def test_critic_loss_and_gradients_match_brax(reference, inputs):
    networks, batch = inputs
    alpha = jnp.exp(jnp.asarray(reference["params/log_alpha"]))

    def loss(q_params):
        return critic_loss(q_params, tree(reference, "params/policy"), tree(reference, "params/target_q"), alpha,
                           networks, batch, SETTINGS["reward_scaling"], SETTINGS["discounting"],
                           jnp.asarray(reference["keys/critic"]))[0]

    value, grads = jax.value_and_grad(loss)(tree(reference, "params/q"))
    np.testing.assert_allclose(value, reference["critic/loss"], rtol=RTOL, atol=ATOL)
    assert_trees_close(grads, tree(reference, "critic/grads"))


def test_actor_loss_and_gradients_match_brax(reference, inputs):
    networks, batch = inputs
    alpha = jnp.exp(jnp.asarray(reference["params/log_alpha"]))
    encoded = networks.encode(tree(reference, "params/q"), batch.obs)

    def loss(policy_params):
        return actor_loss(policy_params, tree(reference, "params/q"), alpha, networks, encoded,
                          jnp.asarray(reference["keys/actor"]))

    value, grads = jax.value_and_grad(loss)(tree(reference, "params/policy"))
    np.testing.assert_allclose(value, reference["actor/loss"], rtol=RTOL, atol=ATOL)
    assert_trees_close(grads, tree(reference, "actor/grads"))


def test_alpha_loss_is_brax_up_to_its_documented_log_alpha_parameterization(reference, inputs):
    networks, batch = inputs
    log_alpha = jnp.asarray(reference["params/log_alpha"])
    alpha = math.exp(float(log_alpha))
    encoded = networks.encode(tree(reference, "params/q"), batch.obs)

    def loss(value):
        return alpha_loss(value, tree(reference, "params/policy"), networks, encoded, SETTINGS["target_entropy"],
                          jnp.asarray(reference["keys/alpha"]))

    (value, _), grad = jax.value_and_grad(loss, has_aux=True)(log_alpha)
    np.testing.assert_allclose(value, reference["alpha/loss"] * float(log_alpha) / alpha, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(grad, reference["alpha/grad"] / alpha, rtol=RTOL, atol=ATOL)
