"""ppo_loss on a hand-computed case (numpy, float64) and TanhGaussian against the density of tanh(Gaussian)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.envs.action_space import CONTINUOUS, DISCRETE, ActionSpace
from rlfit.algos.ppo.networks import Agent, AgentParams
from rlfit.networks import Categorical, TanhGaussian
from rlfit.algos.ppo.losses import LossBatch, ppo_loss

MIN_STD = 1e-3  # Brax's NormalTanhDistribution: std = softplus(raw_scale) + 0.001
EPS = 0.2
T, B, A = 3, 4, 2

# A stub agent whose "network" returns its parameters: the policy logits and values are known exactly.
STUB = Agent(policy_logits=lambda params, obs: params, value=lambda params, obs: params, init=None,
             action_space=ActionSpace(CONTINUOUS, A))


def np_softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def np_log_prob(mean, std, raw):
    """log density of y = tanh(u), u ~ N(mean, std^2), at y = tanh(raw), summed over the last axis."""
    gauss = -0.5 * ((raw - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    return np.sum(gauss - np.log(1.0 - np.tanh(raw) ** 2), axis=-1)


def make_case(seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=0.7, size=(T, B, 2 * A))
    raw = rng.normal(size=(T, B, A))
    mean, std = logits[..., :A], np_softplus(logits[..., A:]) + MIN_STD
    new_log_prob = np_log_prob(mean, std, raw)
    # old log-probs so that the ratios spread over [0.6, 1.4]: some inside the clip range, some outside on both sides
    ratios = np.linspace(0.6, 1.4, T * B).reshape(T, B)
    old_log_prob = new_log_prob - np.log(ratios)
    advantages = rng.normal(size=(T, B))
    advantages[0] = [1.0, -1.0, 2.0, -0.5]  # both signs among the low ratios
    advantages[-1] = [1.0, -1.0, 2.0, -0.5]  # and among the high ones
    values = rng.normal(size=(T, B))
    returns = rng.normal(size=(T, B))
    batch = LossBatch(obs=jnp.zeros((T, B, 1)), raw_action=jnp.asarray(raw, jnp.float32),
                      old_log_prob=jnp.asarray(old_log_prob, jnp.float32),
                      advantages=jnp.asarray(advantages, jnp.float32), returns=jnp.asarray(returns, jnp.float32))
    params = AgentParams(policy=jnp.asarray(logits, jnp.float32), value=jnp.asarray(values, jnp.float32))
    return params, batch, dict(mean=mean, std=std, raw=raw, ratios=ratios, advantages=advantages, values=values,
                               returns=returns)


def hand_loss(case, entropy_cost, normalize, noise):
    adv = case["advantages"]
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = case["ratios"]
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - EPS, 1 + EPS) * adv)
    policy = -surrogate.mean()
    value = 0.25 * np.mean((case["returns"] - case["values"]) ** 2)
    # entropy of tanh(u): Gaussian entropy + E[log(1 - tanh(u)^2)], one reparameterized sample u = mean + std * noise
    u = case["mean"] + case["std"] * noise
    entropy = np.sum(0.5 + 0.5 * np.log(2 * np.pi) + np.log(case["std"]) + np.log(1 - np.tanh(u) ** 2), axis=-1)
    entropy_term = -entropy_cost * entropy.mean()
    kl = np.mean((ratio - 1) - np.log(ratio))
    clip_fraction = np.mean(np.abs(ratio - 1) > EPS)
    return policy + value + entropy_term, policy, value, entropy_term, kl, clip_fraction


@pytest.mark.parametrize("normalize", [True, False])
def test_ppo_loss_matches_hand_computation(normalize):
    params, batch, case = make_case()
    key = jax.random.PRNGKey(7)
    noise = np.asarray(jax.random.normal(key, (T, B, A)), np.float64)  # the one sample the entropy term uses
    total, terms = ppo_loss(params, batch, STUB, EPS, 0.05, normalize, key)
    expected = hand_loss(case, 0.05, normalize, noise)
    got = (total, terms.policy, terms.value, terms.entropy, terms.approx_kl, terms.clip_fraction)
    for name, value, reference in zip(("total", "policy", "value", "entropy", "approx_kl", "clip_fraction"),
                                      got, expected):
        assert float(value) == pytest.approx(reference, rel=2e-4, abs=2e-5), name
    assert float(terms.total) == pytest.approx(float(total))
    assert 0 < float(terms.clip_fraction) < 1


def test_normalizing_advantages_changes_the_policy_term_only():
    params, batch, case = make_case(seed=3)
    _, on = ppo_loss(params, batch, STUB, EPS, 0.0, True, jax.random.PRNGKey(0))
    _, off = ppo_loss(params, batch, STUB, EPS, 0.0, False, jax.random.PRNGKey(0))
    assert float(on.value) == pytest.approx(float(off.value))
    assert float(on.policy) != pytest.approx(float(off.policy), rel=1e-3)


def test_clipped_samples_give_no_policy_gradient():
    """Where the clipped branch of min(...) is active, the sample's logits get zero gradient; elsewhere not."""
    params, batch, case = make_case()
    grads = jax.grad(lambda p: ppo_loss(p, batch, STUB, EPS, 0.0, False, jax.random.PRNGKey(0))[0])(params)
    ratio, adv = case["ratios"], case["advantages"]
    clipped = ((ratio > 1 + EPS) & (adv > 0)) | ((ratio < 1 - EPS) & (adv < 0))
    assert clipped.any() and (~clipped).any()
    per_sample = np.abs(np.asarray(grads.policy)).sum(axis=-1)
    np.testing.assert_array_equal(per_sample[clipped], 0.0)
    assert np.all(per_sample[~clipped] > 0)
    # value gradient of 0.25 * mean((R - V)^2) is -0.5 * (R - V) / n
    expected_value_grad = -0.5 * (case["returns"] - case["values"]) / (T * B)
    np.testing.assert_allclose(grads.value, expected_value_grad, rtol=1e-4, atol=1e-6)


def test_entropy_bonus_lowers_the_loss():
    params, batch, _ = make_case()
    without, _ = ppo_loss(params, batch, STUB, EPS, 0.0, True, jax.random.PRNGKey(1))
    with_bonus, terms = ppo_loss(params, batch, STUB, EPS, 0.1, True, jax.random.PRNGKey(1))
    assert float(with_bonus) == pytest.approx(float(without) + float(terms.entropy), rel=1e-5)


def test_log_prob_matches_numpy_reference():
    rng = np.random.default_rng(1)
    mean = rng.normal(size=(5, 3))
    std = rng.uniform(0.1, 2.0, size=(5, 3))
    raw = rng.normal(scale=2.0, size=(5, 3))
    raw[0] = [6.0, -6.0, 0.0]  # saturated tanh: the stable log-det must not blow up
    dist = TanhGaussian(jnp.asarray(mean, jnp.float32), jnp.asarray(std, jnp.float32))
    got = np.asarray(dist.log_prob(jnp.asarray(raw, jnp.float32)))
    assert got.shape == (5,)
    np.testing.assert_allclose(got, np_log_prob(mean, std, raw), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(("mean", "std"), [(0.0, 0.5), (1.5, 0.3), (-0.7, 1.2)])
def test_log_prob_is_a_density_on_the_squashed_interval(mean, std):
    """exp(log_prob) integrates to 1 over y in (-1, 1) when evaluated at raw = atanh(y)."""
    y = np.linspace(-1 + 1e-6, 1 - 1e-6, 400_001)
    raw = np.arctanh(y)
    dist = TanhGaussian(jnp.full((y.size, 1), mean, jnp.float32), jnp.full((y.size, 1), std, jnp.float32))
    density = np.exp(np.asarray(dist.log_prob(jnp.asarray(raw[:, None], jnp.float32)), np.float64))
    assert np.trapezoid(density, y) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize(("mean", "std"), [(0.0, 0.5), (1.5, 0.3), (0.3, 2.0)])
def test_entropy_estimates_the_entropy_of_the_squashed_distribution(mean, std):
    """Averaged over many one-sample estimates, entropy() matches -integral p(y) log p(y) dy (numerical)."""
    u = np.linspace(mean - 10 * std, mean + 10 * std, 200_001)
    p_u = np.exp(-0.5 * ((u - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi))
    log_p_y = np.log(p_u) - np.log(1 - np.tanh(u) ** 2 + 1e-300)  # density of y = tanh(u) at y
    exact = -np.trapezoid(p_u * log_p_y, u)
    n = 40_000
    dist = TanhGaussian(jnp.full((n, 1), mean, jnp.float32), jnp.full((n, 1), std, jnp.float32))
    estimate = float(jnp.mean(dist.entropy(jax.random.PRNGKey(0))))
    assert estimate == pytest.approx(exact, abs=0.03)
    assert exact < np.log(2.0)  # never above the uniform distribution on (-1, 1)


def test_from_logits_and_mode():
    logits = jnp.array([[0.5, -2.0, 0.0, 30.0]])
    dist = TanhGaussian.from_logits(logits)
    np.testing.assert_allclose(dist.mean, [[0.5, -2.0]])
    np.testing.assert_allclose(dist.std, [[np.log(2.0) + MIN_STD, 30.0 + MIN_STD]], rtol=1e-6)
    np.testing.assert_allclose(dist.mode(), np.tanh([[0.5, -2.0]]), rtol=1e-6)


# ------------------------------------------------------------------------------------------- discrete actions


def test_categorical_log_prob_entropy_and_mode_match_hand_computed_values():
    """Logits log([1, 2, 3, 4]) are probabilities [0.1, 0.2, 0.3, 0.4] (softmax is shift invariant: +5 too)."""
    probabilities = np.array([0.1, 0.2, 0.3, 0.4])
    logits = jnp.asarray(np.stack([np.log(probabilities * 10), np.log(probabilities[::-1]) + 5.0]), jnp.float32)
    dist = Categorical.from_logits(logits)
    actions = jnp.array([2, 2], jnp.int32)
    np.testing.assert_allclose(np.asarray(dist.log_prob(actions)), np.log([0.3, 0.2]), rtol=1e-6)
    hand_entropy = -np.sum(probabilities * np.log(probabilities))  # 1.2798542258...
    np.testing.assert_allclose(np.asarray(dist.entropy()), [hand_entropy, hand_entropy], rtol=1e-6)
    assert float(dist.entropy()[0]) == pytest.approx(1.2798542258, rel=1e-6)
    assert np.asarray(dist.mode()).tolist() == [3, 0]
    assert dist.mode().dtype == jnp.int32 and dist.env_action(actions) is actions


def test_categorical_samples_follow_its_probabilities():
    probabilities = np.array([0.1, 0.2, 0.3, 0.4])
    dist = Categorical.from_logits(jnp.broadcast_to(jnp.log(jnp.asarray(probabilities, jnp.float32)), (40_000, 4)))
    samples = np.asarray(dist.sample_raw(jax.random.PRNGKey(0)))
    assert samples.dtype == np.int32 and samples.shape == (40_000,)
    frequencies = np.bincount(samples, minlength=4) / samples.size
    np.testing.assert_allclose(frequencies, probabilities, atol=0.01)  # 4 binomial std errors are ~0.01


def test_ppo_loss_with_discrete_actions_matches_hand_computation():
    """The clipped surrogate on categorical log-probabilities and its exact entropy, against numpy."""
    rng = np.random.default_rng(4)
    K = 5
    logits = rng.normal(size=(T, B, K))
    actions = rng.integers(0, K, size=(T, B))
    log_p = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    new_log_prob = np.take_along_axis(log_p, actions[..., None], axis=-1)[..., 0]
    ratios = np.linspace(0.6, 1.4, T * B).reshape(T, B)
    advantages, values, returns = rng.normal(size=(3, T, B))
    batch = LossBatch(obs=jnp.zeros((T, B, 1)), raw_action=jnp.asarray(actions, jnp.int32),
                      old_log_prob=jnp.asarray(new_log_prob - np.log(ratios), jnp.float32),
                      advantages=jnp.asarray(advantages, jnp.float32), returns=jnp.asarray(returns, jnp.float32))
    params = AgentParams(jnp.asarray(logits, jnp.float32), jnp.asarray(values, jnp.float32))
    stub = STUB._replace(action_space=ActionSpace(DISCRETE, K))
    total, terms = ppo_loss(params, batch, stub, EPS, 0.05, False, jax.random.PRNGKey(0))
    policy = -np.mean(np.minimum(ratios * advantages, np.clip(ratios, 1 - EPS, 1 + EPS) * advantages))
    entropy = -0.05 * np.mean(-np.sum(np.exp(log_p) * log_p, axis=-1))
    value = 0.25 * np.mean((returns - values) ** 2)
    assert float(terms.policy) == pytest.approx(policy, rel=1e-4, abs=1e-6)
    assert float(terms.entropy) == pytest.approx(entropy, rel=1e-5)
    assert float(total) == pytest.approx(policy + value + entropy, rel=1e-4, abs=1e-6)


def test_kl_from_matches_scipy_for_categoricals_and_the_closed_form_for_gaussians():
    """`kl_from(old)` is KL(old || new): scipy's relative entropy for categoricals; for the tanh-Gaussian, the
    Gaussians' closed form over raw actions, up to Brax's 1e-5 inside the log of the scale ratio."""
    from scipy.stats import entropy

    rng = np.random.default_rng(3)
    old_logits, new_logits = rng.normal(size=(2, 6, 5))
    got = Categorical.from_logits(jnp.asarray(new_logits)).kl_from(Categorical.from_logits(jnp.asarray(old_logits)))

    def probs(logits):
        return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)

    np.testing.assert_allclose(got, entropy(probs(old_logits), probs(new_logits), axis=-1), rtol=1e-5, atol=1e-6)

    old, new = rng.normal(size=(2, 6, 4))  # each [rows, 2 * 2 action dims]
    got = TanhGaussian.from_logits(jnp.asarray(new)).kl_from(TanhGaussian.from_logits(jnp.asarray(old)))
    want = []
    for o, n in zip(old, new):
        total = 0.0
        for d in range(2):
            mu0, s0 = o[d], np_softplus(o[2 + d]) + 1e-3
            mu1, s1 = n[d], np_softplus(n[2 + d]) + 1e-3
            total += np.log(s1 / s0) + (s0**2 + (mu0 - mu1) ** 2) / (2 * s1**2) - 0.5
        want.append(total)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    same = TanhGaussian.from_logits(jnp.asarray(old))
    np.testing.assert_allclose(same.kl_from(same), 2 * np.log1p(1e-5), rtol=1e-2)  # Brax's constant, 2 dims
