"""Running observation statistics against numpy over all the data seen."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.common.normalizer import init_stats, normalize, std, update_stats


def test_batches_merge_to_the_statistics_of_all_data():
    rng = np.random.default_rng(0)
    # batches with leading axes [T, B] of different sizes and a shifted, scaled distribution
    batches = [rng.normal(loc=[3.0, -1.0, 0.0], scale=[0.5, 4.0, 1e-3], size=(t, b, 3)) for t, b in
               [(1, 1), (4, 7), (10, 3), (2, 50)]]
    stats = init_stats(jnp.zeros(3))
    for batch in batches:
        stats = update_stats(stats, jnp.asarray(batch, jnp.float32))
    everything = np.concatenate([b.reshape(-1, 3) for b in batches])
    assert float(stats.count) == everything.shape[0]
    np.testing.assert_allclose(stats.mean, everything.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(std(stats)) ** 2, everything.var(axis=0), rtol=1e-4)


def test_dict_observations_are_tracked_leaf_by_leaf():
    rng = np.random.default_rng(1)
    example = {"state": jnp.zeros(2), "privileged_state": jnp.zeros((2, 3))}
    stats = init_stats(example)
    seen = {"state": [], "privileged_state": []}
    for n in (5, 1, 12):
        batch = {"state": rng.normal(2.0, 3.0, size=(n, 2)), "privileged_state": rng.uniform(-5, 1, size=(n, 2, 3))}
        stats = update_stats(stats, jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), batch))
        for name in seen:
            seen[name].append(batch[name])
    for name in seen:
        data = np.concatenate(seen[name])
        np.testing.assert_allclose(stats.mean[name], data.mean(axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(std(stats)[name]), data.std(axis=0), rtol=1e-4)
    assert float(stats.count) == 18


def test_normalize_gives_zero_mean_unit_std_of_the_seen_data():
    rng = np.random.default_rng(2)
    data = rng.normal(loc=[10.0, -3.0], scale=[2.0, 0.1], size=(64, 2))
    stats = update_stats(init_stats(jnp.zeros(2)), jnp.asarray(data, jnp.float32))
    out = np.asarray(normalize(stats, jnp.asarray(data, jnp.float32)))
    np.testing.assert_allclose(out, (data - data.mean(0)) / data.std(0), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(axis=0), 1.0, rtol=1e-4)


def test_identity_before_any_data():
    stats = init_stats({"a": jnp.zeros(3), "b": jnp.zeros(())})
    obs = {"a": jnp.array([1.5, -2.0, 7.0]), "b": jnp.array(4.0)}
    out = normalize(stats, obs)
    np.testing.assert_array_equal(out["a"], obs["a"])
    np.testing.assert_array_equal(out["b"], obs["b"])


def test_constant_feature_stays_finite():
    data = jnp.stack([jnp.full(8, 2.0), jnp.arange(8.0)], axis=-1)
    stats = update_stats(init_stats(jnp.zeros(2)), data)
    out = np.asarray(normalize(stats, data))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[:, 0], 0.0)


def test_update_inside_jit_keeps_shapes_and_dtypes():
    stats = init_stats(jnp.zeros(4))
    new = jax.jit(update_stats)(stats, jnp.ones((3, 5, 4), jnp.float32))
    for before, after in zip(jax.tree.leaves(stats), jax.tree.leaves(new)):
        assert before.shape == after.shape and before.dtype == after.dtype
    assert float(new.count) == pytest.approx(15)
