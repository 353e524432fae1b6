"""PPO with discrete actions end to end on the toy env's discrete twin (tests/toy_env.py:PointChoice): it learns,
its policy file, load_policy and ONNX export act with the most likely index, and it resumes exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import TOY_TRAIN_OVERRIDES, cli_in_process

DISCRETE_TOY = "tests.toy_env:make_discrete"
EPISODE_ENV_STEPS = 100  # env.episode_length in TOY_TRAIN_OVERRIDES
STANDING_STILL = EPISODE_ENV_STEPS * (1 - 2 / 3)
"""Return of always choosing 'stay': reward 1 - |p - t| per env step with E|p - t| = 2/3."""


@pytest.fixture(scope="module")
def discrete_run(tmp_path_factory):
    import rlfit

    run_dir = tmp_path_factory.mktemp("discrete") / "run"
    return rlfit.train(DISCRETE_TOY, "smoke", overrides=[*TOY_TRAIN_OVERRIDES, "run.seed=0"], run_dir=run_dir,
                       quiet=True)


def test_ppo_learns_with_a_categorical_policy(discrete_run):
    final = discrete_run.summary["final_eval_reward"]
    assert final >= STANDING_STILL + 30, f"final eval reward {final:.1f}; standing still earns {STANDING_STILL:.1f}"


def numpy_policy_logits(policy_dir, obs: np.ndarray) -> np.ndarray:
    """The saved MLP evaluated by hand in numpy (normalize, dense + swish, dense): an independent reference."""
    weights = np.load(policy_dir / "weights.npz")
    count = float(weights["normalizer/count"])
    std = np.clip(np.sqrt(weights["normalizer/sum_sq_dev"] / max(count, 1.0)), 1e-6, 1e6)
    x = (obs - weights["normalizer/mean"]) / std if count > 0 else obs
    layers = sorted({name.split("/")[2] for name in weights.files if name.startswith("params/params/dense_")},
                    key=lambda name: int(name.split("_")[1]))
    for index, layer in enumerate(layers):
        x = x @ weights[f"params/params/{layer}/kernel"] + weights[f"params/params/{layer}/bias"]
        if index < len(layers) - 1:
            x = x / (1.0 + np.exp(-x))  # swish
    return x


def test_policy_file_and_load_policy_act_with_the_most_likely_index(discrete_run):
    import rlfit

    policy_dir = discrete_run.run_dir.path / "policy"
    description = json.loads((policy_dir / "policy.json").read_text())
    assert description["action_space"] == {"kind": "discrete", "size": 3}
    assert description["network"]["layer_sizes"][-1] == 3
    policy = rlfit.load_policy(discrete_run.run_dir.path)
    assert policy.action_space.discrete and policy.action_size == 3
    obs = np.random.default_rng(0).uniform(-1, 1, (256, 2)).astype(np.float32)
    actions = np.asarray(policy(obs))
    assert actions.dtype == np.int32 and actions.shape == (256,)
    logits = numpy_policy_logits(policy_dir, obs.astype(np.float64))
    top_two = np.sort(logits, axis=-1)[:, -2:]
    decided = top_two[:, 1] - top_two[:, 0] > 1e-4
    assert decided.mean() > 0.9
    np.testing.assert_array_equal(actions[decided], np.argmax(logits, axis=-1)[decided])
    # the learned policy moves toward the target: right (2) when the target is well right of the point
    right = obs[:, 1] - obs[:, 0] > 0.5
    assert np.mean(actions[right] == 2) > 0.8


def test_onnx_export_of_a_discrete_policy_gives_the_index_and_the_logits(discrete_run, tmp_path):
    pytest.importorskip("onnxruntime")
    import onnxruntime

    import rlfit
    from rlfit.deploy.export.onnx import export_onnx

    result = export_onnx(discrete_run.run_dir.path, tmp_path / "policy.onnx")
    assert result.discrete and result.action_size == 3 and result.max_abs_diff == 0.0
    session = onnxruntime.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(1).uniform(-1, 1, (64, 2)).astype(np.float32)
    action, logits = session.run(["action", "logits"], {"obs": obs})
    assert action.dtype == np.int64 and action.shape == (64,) and logits.shape == (64, 3)
    np.testing.assert_allclose(logits, numpy_policy_logits(discrete_run.run_dir.path / "policy", obs.astype(np.float64)),
                               atol=1e-4)
    decided = np.ptp(np.sort(logits, axis=-1)[:, -2:], axis=-1) > 1e-4
    np.testing.assert_array_equal(action[decided], np.asarray(rlfit.load_policy(discrete_run.run_dir.path)(obs))[decided])


def test_a_discrete_gridworld_run_resumes_bit_identically(tmp_path, capfd):
    """Categorical PPO on the gridworld (its layouts, positions and step counters are environment state in the
    checkpoint): train 3 iterations and resume to 6 equals a straight 6, bit for bit; episodes of 32 steps run across
    the resume (48 steps per environment before it). The sizes of `gridworld_run` below (256 env steps an
    iteration): one compile for both tests."""
    toy = ["gridworld:Obstacles-8x8", "--preset", "smoke", *[a for o in GRIDWORLD_OVERRIDES for a in ("--set", o)],
           "--set", "run.save_interval=3", "--quiet"]
    half, full = tmp_path / "half", tmp_path / "full"
    assert cli_in_process(capfd, "train", *toy, "--timesteps", "768", "--run-dir", str(half), cwd=tmp_path).returncode == 0
    resumed = cli_in_process(capfd, "resume", str(half), "--timesteps", "1536", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert cli_in_process(capfd, "train", *toy, "--timesteps", "1536", "--run-dir", str(full), cwd=tmp_path).returncode == 0
    summaries = [json.loads((run / "summary.json").read_text()) for run in (half, full)]
    assert summaries[0]["params_digest"] == summaries[1]["params_digest"]
    assert summaries[0]["env_steps"] == summaries[1]["env_steps"] == 1536
    assert summaries[0]["iterations"] == 6


def test_sac_refuses_a_discrete_environment_in_one_line(tmp_path, capfd):
    result = cli_in_process(capfd, "train", DISCRETE_TOY, "--algo", "sac", "--preset", "smoke",
                            "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "3 discrete actions" in lines[0] and "algo: ppo" in lines[0], result.stderr
    assert not (tmp_path / "run").exists()


GRIDWORLD_OVERRIDES = ("env.episode_length=32", "ppo.num_envs=16", "ppo.batch_size=16", "ppo.num_minibatches=2",
                       "ppo.unroll_length=8", "ppo.policy_hidden=[16]", "ppo.value_hidden=[16]",
                       "run.num_timesteps=1024", "run.num_eval_envs=8")


@pytest.fixture(scope="module")
def gridworld_run(tmp_path_factory):
    import rlfit

    run_dir = tmp_path_factory.mktemp("gridworld") / "run"
    return rlfit.train("gridworld:Obstacles-8x8", "smoke", overrides=list(GRIDWORLD_OVERRIDES), run_dir=run_dir,
                       quiet=True)


def test_a_gridworld_policy_trained_on_8x8_evaluates_unchanged_on_16x16(gridworld_run):
    """The egocentric view has the same size on any grid: the saved 8x8 policy runs on 16x16 as the study's
    suites run it (rlfit.study.suites), without reshaping anything."""
    import rlfit
    from rlfit.config.schema import resolve
    from rlfit.envs.gridworld import load
    from rlfit.study.manifest import Suite
    from rlfit.study.suites import evaluate_suite

    run_dir = gridworld_run.run_dir.path
    policy = rlfit.load_policy(run_dir)
    assert policy.input_shape == (load("Obstacles-16x16").observation_size,) == (75,)
    config = resolve("gridworld:Obstacles-8x8", "smoke", overrides=list(GRIDWORLD_OVERRIDES))
    shifted = evaluate_suite(run_dir, config, Suite("larger-grid", {"env.overrides": {"size": 16}}, 8), 0)
    own = evaluate_suite(run_dir, config, Suite("same", {}, 8), 1)
    for outcome in (shifted, own):
        assert outcome["episodes"] == 8 and 1 <= outcome["episode_length"] <= 32
        # every step costs 0.01 and the goal pays 1: a return lies in [-0.32, 0.99]
        assert -0.32 - 1e-6 <= outcome["episode_reward"] <= 0.99 + 1e-6


def test_play_refuses_a_gridworld_in_one_line(gridworld_run, tmp_path, capfd):
    """`rlfit play` draws MuJoCo scenes; a gridworld run is refused with exit 2 and nothing written (the CLI's main
    in this process)."""
    played = cli_in_process(capfd, "play", str(gridworld_run.run_dir.path), "--out", str(tmp_path / "p.mp4"),
                            cwd=tmp_path)
    assert played.returncode == 2
    assert len(played.stderr.strip().splitlines()) == 1 and "MuJoCo" in played.stderr, played.stderr
    assert not (tmp_path / "p.mp4").exists()


def random_policy_return(name: str, episode_length: int, episodes: int = 256) -> float:
    """Mean return of uniformly random actions, episodes run by rlfit's batched environment."""
    import jax

    from rlfit.config.schema import EnvConfig
    from rlfit.envs import VecEnv, load_env

    env = VecEnv(load_env(EnvConfig(name=name)), episodes, episode_length)

    def step(carry, key):
        state, alive, total = carry
        state, out = env.step(state, jax.random.randint(key, (episodes,), 0, 4))
        total = total + out.reward * alive
        return (state, alive * (1 - jax.numpy.maximum(out.termination, out.truncation)), total), None

    start = (env.reset(jax.random.PRNGKey(0)), jax.numpy.ones(episodes), jax.numpy.zeros(episodes))
    (_, _, total), _ = jax.lax.scan(step, start, jax.random.split(jax.random.PRNGKey(1), episode_length))
    return float(total.mean())


def test_ppo_learns_a_small_gridworld(tmp_path):
    """Categorical PPO on an empty 5x5 gridworld (the 5x5 window sees most of it): the final deterministic
    policy earns far more than random moves (a loose bar; returns lie in [-0.2, 0.99])."""
    import rlfit

    overrides = ["env.episode_length=20", "ppo.num_envs=64", "ppo.batch_size=64", "ppo.num_minibatches=4",
                 "ppo.unroll_length=8", "ppo.num_updates_per_batch=4", "ppo.learning_rate=3e-3",
                 "ppo.discounting=0.9", "ppo.reward_scaling=1", "ppo.policy_hidden=[32]",
                 "ppo.value_hidden=[32]", "run.num_timesteps=40000", "run.eval_every=0", "run.num_eval_envs=128"]
    result = rlfit.train("gridworld:Empty-5x5", "smoke", overrides=overrides, run_dir=tmp_path / "run", quiet=True)
    final, random = result.summary["final_eval_reward"], random_policy_return("gridworld:Empty-5x5", 20)
    assert final >= 0.8, f"final eval reward {final:.2f}; the goal is a few steps away (0.99 - 0.01 per step)"
    assert final >= random + 0.3, (final, random)
