"""Suite evaluations of a saved policy: the most likely action or the stochastic policy, success rate, normalized
return and the description length of the states a suite visits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.errors import UserError
from rlfit.study.episodes import Episodes
from rlfit.study.manifest import Suite
from rlfit.study.suites import summarize_episodes

OVERRIDES = ["env.episode_length=24", "ppo.num_envs=16", "ppo.batch_size=16", "ppo.num_minibatches=2",
             "ppo.unroll_length=8", "ppo.policy_hidden=[16]", "ppo.value_hidden=[16]",
             "run.num_timesteps=1024", "run.num_eval_envs=8", "ppo.bottleneck=4", "ppo.bottleneck_beta=0.01",
             "env.overrides={distractors: 2, distractor_density: 0.2}"]


@pytest.fixture(scope="module")
def bottleneck_run(tmp_path_factory):
    import rlfit
    from rlfit.config.schema import resolve

    run_dir = tmp_path_factory.mktemp("bottleneck") / "run"
    rlfit.train("gridworld:Obstacles-8x8", "smoke", overrides=OVERRIDES, run_dir=run_dir, quiet=True)
    return run_dir, resolve("gridworld:Obstacles-8x8", "smoke", overrides=OVERRIDES)


def observations(count: int) -> np.ndarray:
    """[count, 100] observations of the run's gridworld (5 x 5 cells x 4 channels)."""
    from rlfit.envs.gridworld import load

    env = load("Obstacles-8x8", {"distractors": 2, "distractor_density": 0.2})
    return np.asarray(jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), count)).obs)


def test_the_saved_latent_params_act_like_the_folded_policy_file_and_give_the_rate_by_hand(bottleneck_run):
    """latent.npz beside the policy: its most likely action is the deployed (folded) policy's, and its rate is
    KL(N(mu, sigma^2) || N(0, I)) computed here in numpy from the same params, in bits."""
    import rlfit
    from rlfit.deploy.policy_file import read_policy_files
    from rlfit.study.suite_policies import MOST_LIKELY_POLICY, read_latent, suite_actor

    run_dir, config = bottleneck_run
    latent = read_latent(run_dir)
    assert latent is not None and set(latent["params"]) == {"trunk", "mu", "raw_sigma", "out"}
    files = read_policy_files(run_dir)
    actor = suite_actor(files, config, MOST_LIKELY_POLICY, latent)
    obs = observations(64)
    np.testing.assert_array_equal(actor.act(actor.arrays, obs, jax.random.PRNGKey(1)), rlfit.load_policy(run_dir)(obs))
    p = latent["params"]
    std = np.sqrt(np.maximum(files.sum_sq_dev / max(files.count, 1.0), 0.0))
    x = (obs - files.mean) / np.maximum(std, 1e-6)
    h = x @ p["trunk"]["dense_0"]["kernel"] + p["trunk"]["dense_0"]["bias"]
    h = h * (1.0 / (1.0 + np.exp(-h)))  # swish, the smoke preset's activation, after the trunk's last layer
    mu = h @ p["mu"]["kernel"] + p["mu"]["bias"]
    sigma = np.log1p(np.exp(h @ p["raw_sigma"]["kernel"] + p["raw_sigma"]["bias"])) + 1e-4
    nats = 0.5 * np.sum(mu**2 + sigma**2 - 1.0 - 2.0 * np.log(sigma), axis=-1)
    np.testing.assert_allclose(actor.rate(actor.arrays, obs), nats / np.log(2.0), rtol=2e-3, atol=1e-3)


def test_the_stochastic_policy_samples_and_the_most_likely_one_does_not(bottleneck_run):
    from rlfit.deploy.policy_file import read_policy_files
    from rlfit.study.suite_policies import MOST_LIKELY_POLICY, STOCHASTIC_POLICY, read_latent, suite_actor

    run_dir, config = bottleneck_run
    files, latent, obs = read_policy_files(run_dir), read_latent(run_dir), observations(256)
    keys = jax.random.split(jax.random.PRNGKey(2), 2)
    sampled = suite_actor(files, config, STOCHASTIC_POLICY, latent)
    mode = suite_actor(files, config, MOST_LIKELY_POLICY, latent)
    assert not np.array_equal(sampled.act(sampled.arrays, obs, keys[0]), sampled.act(sampled.arrays, obs, keys[1]))
    np.testing.assert_array_equal(mode.act(mode.arrays, obs, keys[0]), mode.act(mode.arrays, obs, keys[1]))


def test_a_suite_records_success_normalized_return_and_description_length_consistently(bottleneck_run):
    """Each episode's return is goal_reward x reached - step_cost x steps (0.01 per step, goal 1), so the mean
    return follows from the success rate and the mean length; the description length per episode is the per-step
    one times the mean episode length (both are sums over the same visited states)."""
    from rlfit.study.suites import evaluate_suite

    run_dir, config = bottleneck_run
    for index, policy in enumerate(("most-likely", "stochastic")):
        suite = Suite("dense-tiles", {"env.overrides": {"distractor_density": 0.6}}, 64, policy)
        result = evaluate_suite(run_dir, config, suite, index)
        assert result["episodes"] == 64 and result["policy"].startswith({"most-likely": "most likely",
                                                                          "stochastic": "stochastic"}[policy])
        expected = result["success_rate"] * 1.0 - 0.01 * result["episode_length"]
        assert result["episode_reward"] == pytest.approx(expected, abs=1e-5)
        assert result["description_length_bits_per_episode"] == pytest.approx(
            result["description_length_bits"] * result["episode_length"], rel=1e-5)
        assert -1e-6 <= result["normalized_reward"] <= 1.0 + 1e-6 and result["reference_return"] > 0


def test_summaries_score_an_optimal_episode_1_and_a_failing_one_0():
    episodes = Episodes(returns=jnp.array([0.9, -0.64, 0.5]), lengths=jnp.array([10.0, 64.0, 20.0]),
                        success=jnp.array([1.0, 0.0, 1.0]), optimal=jnp.array([0.9, 0.8, 0.9]),
                        failing=jnp.array([-0.64, -0.64, -0.64]), rate_bits=None)
    summary = summarize_episodes(jax.device_get(episodes))
    normalized = np.array([1.0, 0.0, (0.5 + 0.64) / (0.9 + 0.64)])
    assert summary["normalized_reward"] == pytest.approx(normalized.mean())
    assert summary["normalized_reward_std"] == pytest.approx(normalized.std())
    assert summary["success_rate"] == pytest.approx(2 / 3) and "description_length_bits" not in summary


def test_a_policy_without_a_distribution_cannot_be_evaluated_stochastically():
    from types import SimpleNamespace

    from rlfit.study.suite_policies import STOCHASTIC_POLICY, suite_actor

    files = SimpleNamespace(description={"network": {"kind": "mlp", "head": "q_argmax", "layer_sizes": [4],
                                                     "activation": "relu"},
                                         "action_space": {"kind": "discrete", "size": 4}, "precision": "fp32"})
    with pytest.raises(UserError, match="has no distribution to sample; use policy: most-likely"):
        suite_actor(files, None, STOCHASTIC_POLICY, None)
