"""The C51 projection against a plain-Python loop of Bellemare et al.'s Algorithm 1."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.fasttd3.distributional import atoms, cross_entropy, expected_value, project


def reference_projection(probs, reward, bootstrap, support):
    """One row: mass p_j of atom z_j moves to r + bootstrap * z_j (clipped), split between the neighbours."""
    v_min, v_max, k = support[0], support[-1], len(support)
    spacing = (v_max - v_min) / (k - 1)
    out = [0.0] * k
    for p, z in zip(probs, support):
        shifted = min(max(reward + bootstrap * z, v_min), v_max)
        b = (shifted - v_min) / spacing
        low, up = math.floor(b), math.ceil(b)
        if low == up:
            out[low] += p
        else:
            out[low] += p * (up - b)
            out[up] += p * (b - low)
    return out


@pytest.mark.parametrize("num_atoms", [11, 51])
def test_projection_matches_the_loop_with_terminals_and_clipping(num_atoms):
    support = atoms(-10.0, 10.0, num_atoms)
    key_p, key_r = jax.random.split(jax.random.PRNGKey(0))
    batch = 64
    probs = jax.nn.softmax(jax.random.normal(key_p, (batch, num_atoms)) * 2.0)
    reward = jax.random.uniform(key_r, (batch,), minval=-4.0, maxval=4.0)
    # terminal rows (0), ordinary gamma^n, and a few whose shifted atoms leave [v_min, v_max] (clipped)
    bootstrap = jnp.tile(jnp.array([0.0, 0.97 ** 3, 0.5, 1.0]), batch // 4)
    got = np.asarray(project(probs, reward, bootstrap, support))
    s = np.asarray(support, np.float64).tolist()
    for i in range(batch):
        want = reference_projection(np.asarray(probs[i], np.float64).tolist(), float(reward[i]), float(bootstrap[i]), s)
        np.testing.assert_allclose(got[i], want, atol=2e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)  # mass is kept


def test_a_terminal_reward_on_an_atom_puts_all_mass_there_and_the_mean_is_the_target():
    support = atoms(-10.0, 10.0, 11)  # spacing 2
    probs = jax.nn.softmax(jnp.arange(11.0))[None, :]
    on_atom = project(probs, jnp.array([4.0]), jnp.array([0.0]), support)
    np.testing.assert_allclose(on_atom[0], np.eye(11)[7], atol=1e-6)
    # inside the range, projection keeps the mean: E = r + bootstrap * E[Z]
    narrow = jax.nn.softmax(-jnp.square(support) / 4.0)[None, :]
    projected = project(narrow, jnp.array([1.3]), jnp.array([0.9]), support)
    want = 1.3 + 0.9 * float(expected_value(narrow, support)[0])
    assert float(expected_value(projected, support)[0]) == pytest.approx(want, abs=1e-5)


def test_cross_entropy_is_the_plain_sum():
    logits = jnp.array([[0.5, -1.0, 2.0]])
    target = jnp.array([[0.2, 0.3, 0.5]])
    log_probs = np.log(np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum())
    assert float(cross_entropy(target, logits)[0]) == pytest.approx(-float(np.dot([0.2, 0.3, 0.5], log_probs)), rel=1e-6)
