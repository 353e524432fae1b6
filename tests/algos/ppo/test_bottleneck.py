"""The variational information bottleneck: its KL against numerical integration, the folded deterministic MLP,
the exact PPO ratio with the stored noise, and that beta lowers the rate a run learns."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from rlfit.algos.ppo.losses import LossBatch, ppo_loss
from rlfit.algos.ppo.config import PPOConfig
from rlfit.envs.action_space import DISCRETE, ActionSpace
from rlfit.algos.ppo.networks import make_agent
from rlfit.networks import MLP
from rlfit.networks.bottleneck import BITS_PER_NAT, fold, gaussian_kl

SPACE = ActionSpace(DISCRETE, 4)
NETWORK = PPOConfig(policy_hidden=(16, 16), value_hidden=(8,), bottleneck=6, bottleneck_beta=0.1)


@pytest.mark.parametrize(("mu", "sigma"), [([0.0, 0.0], [1.0, 1.0]), ([0.5, -1.2], [0.3, 2.0]), ([2.0], [0.05])])
def test_gaussian_kl_matches_numerical_integration(mu, sigma):
    """KL(N(mu, sigma^2) || N(0, 1)) = integral q log(q / p), per dimension by quadrature, summed."""
    reference = 0.0
    for m, s in zip(mu, sigma):
        q, p = stats.norm(m, s), stats.norm(0.0, 1.0)
        value, _ = integrate.quad(lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), m - 12 * s, m + 12 * s,
                                  limit=200)
        reference += value
    got = float(gaussian_kl(jnp.asarray(mu, jnp.float32), jnp.asarray(sigma, jnp.float32)))
    assert got == pytest.approx(reference, rel=1e-4, abs=1e-6)


def test_the_deterministic_policy_folds_into_a_plain_mlp():
    obs = jax.random.normal(jax.random.PRNGKey(1), (32, 5))
    agent = make_agent(obs[0], SPACE, NETWORK)
    params = agent.init(jax.random.PRNGKey(0)).policy
    plain = MLP((16, 16, SPACE.logits_size), NETWORK.activation)
    folded = plain.apply(fold(params, len(NETWORK.policy_hidden)), obs)
    np.testing.assert_allclose(np.asarray(folded), np.asarray(agent.policy_logits(params, obs)), rtol=1e-5, atol=1e-5)
    assert agent.deployable is not None and agent.latent_size == 6
    rate = np.asarray(agent.policy_rate(params, obs))
    _, rate_nats = agent.policy_sample(params, obs, jnp.zeros((32, 6)))
    np.testing.assert_allclose(rate, np.asarray(rate_nats) * BITS_PER_NAT, rtol=1e-6)
    assert rate.shape == (32,) and np.all(rate > 0)


def test_ppo_ratio_is_exact_with_the_stored_noise_and_the_rate_joins_the_loss():
    T, B, Z = 3, 8, NETWORK.bottleneck
    obs = jax.random.normal(jax.random.PRNGKey(2), (T, B, 5))
    agent = make_agent(obs[0, 0], SPACE, NETWORK)
    params = agent.init(jax.random.PRNGKey(3))
    noise = jax.random.normal(jax.random.PRNGKey(4), (T, B, Z))
    logits, rate = agent.policy_sample(params.policy, obs, noise)
    actions = jax.random.categorical(jax.random.PRNGKey(5), logits).astype(jnp.int32)
    old_log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), actions[..., None], axis=-1)[..., 0]
    batch = LossBatch(obs, actions, old_log_prob, jnp.ones((T, B)), jnp.zeros((T, B)), noise)
    key = jax.random.PRNGKey(0)
    total, terms = ppo_loss(params, batch, agent, 0.2, 0.0, False, key, bottleneck_beta=0.1)
    assert float(terms.approx_kl) == pytest.approx(0.0, abs=1e-6) and float(terms.clip_fraction) == 0.0
    assert float(terms.bottleneck) == pytest.approx(0.1 * float(jnp.mean(rate)), rel=1e-5)
    assert float(terms.rate_bits) == pytest.approx(float(jnp.mean(rate)) * BITS_PER_NAT, rel=1e-5)
    plain_total, _ = ppo_loss(params, batch, agent, 0.2, 0.0, False, key, bottleneck_beta=0.0)
    assert float(total) == pytest.approx(float(plain_total) + 0.1 * float(jnp.mean(rate)), rel=1e-5)
    other = batch._replace(latent_noise=jax.random.normal(jax.random.PRNGKey(6), (T, B, Z)))
    _, shifted = ppo_loss(params, other, agent, 0.2, 0.0, False, key, bottleneck_beta=0.1)
    assert float(shifted.approx_kl) > 1e-4  # other noise, other policy: the stored noise is what makes it exact


def test_a_larger_beta_learns_a_shorter_description(tmp_path):
    import rlfit
    from tests.conftest import TOY_TRAIN_OVERRIDES

    rates = {}
    for beta in (0.0, 1.0):
        overrides = [*TOY_TRAIN_OVERRIDES, "run.num_timesteps=40000", "ppo.bottleneck=8",
                     f"ppo.bottleneck_beta={beta}"]
        result = rlfit.train("tests.toy_env:make_discrete", "smoke", overrides=overrides, quiet=True,
                             run_dir=tmp_path / f"beta{beta}")
        rates[beta] = result.summary["final_description_length_bits"]
        evals = [json.loads(line) for line in (tmp_path / f"beta{beta}" / "metrics.jsonl").read_text().splitlines()]
        assert all("eval/description_length_bits" in row for row in evals if row["kind"] == "eval")
        description = json.loads((tmp_path / f"beta{beta}" / "policy" / "policy.json").read_text())
        assert description["network"]["kind"] == "mlp"  # folded: load_policy and export read it unchanged
    assert rates[1.0] < 0.5 * rates[0.0], rates
