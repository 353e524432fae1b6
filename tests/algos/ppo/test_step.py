"""The compiled training iteration: fixed shapes and dtypes (compiled once), learning moves parameters, seeds."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

SIZES = ["ppo.num_envs=8", "ppo.batch_size=4", "ppo.num_minibatches=4", "ppo.unroll_length=5",
         "ppo.num_updates_per_batch=2", "env.episode_length=20", "ppo.policy_hidden=[16]",
         "ppo.value_hidden=[16]", "run.num_eval_envs=4"]


@pytest.fixture(scope="module")
def trainer(toy_env_name):
    config = resolve(toy_env_name, "smoke", None, SIZES + ["ppo.max_grad_norm=1.0"])
    return Trainer.build(config, make_plan(config))


@pytest.fixture(scope="module")
def iteration(trainer):
    return jax.jit(trainer.train_iteration_fn(), donate_argnums=0)


def avals(tree):
    return [(leaf.shape, leaf.dtype, jax.typeof(leaf).weak_type) for leaf in jax.tree.leaves(tree)]


def copy_tree(tree):
    return jax.tree.map(lambda x: np.array(x), tree)


def test_state_keeps_every_leaf_shape_and_dtype(trainer, iteration):
    state = trainer.init_state()
    before = avals(state)
    for _ in range(3):
        state, metrics = iteration(state)
        assert avals(state) == before
    assert iteration._cache_size() == 1, "the iteration recompiled"
    assert bool(metrics.all_finite)


def test_parameters_optimizer_and_statistics_change(trainer, iteration):
    state = trainer.init_state()
    params0, opt0, stats0, key0 = copy_tree(state.params), copy_tree(state.opt_state), copy_tree(state.normalizer), \
        np.array(state.key)
    state, metrics = iteration(state)
    for before, after in zip(jax.tree.leaves(params0), jax.tree.leaves(state.params)):
        assert not np.allclose(before, after), "a parameter array did not change"
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(opt0), jax.tree.leaves(state.opt_state)))
    assert not np.array_equal(key0, state.key)
    # the statistics saw every collected observation: batch_size * num_minibatches sequences of unroll_length steps
    assert float(state.normalizer.count) == float(stats0.count) + 4 * 4 * 5
    for name in ("total", "policy", "value", "entropy"):
        assert np.isfinite(float(getattr(metrics.loss, name)))
    assert float(metrics.grad_norm) > 0


def test_same_seed_same_result_different_seed_diverges(trainer, iteration):
    def one_iteration(seed):
        state = trainer.learner.init(seed)
        state, metrics = iteration(state)
        return copy_tree(state.params), float(metrics.loss.total)

    params_a, loss_a = one_iteration(0)
    params_b, loss_b = one_iteration(0)
    params_c, loss_c = one_iteration(1)
    for a, b in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_b)):
        np.testing.assert_array_equal(a, b)
    assert loss_a == loss_b
    assert all(not np.allclose(a, c) for a, c in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_c)))
    assert loss_a != loss_c


def test_episode_statistics_count_finished_episodes(trainer, iteration):
    """20-step episodes, 8 envs, 10 policy steps per env per iteration: two iterations truncate every env once."""
    state = trainer.init_state()
    finished = 0.0
    for _ in range(2):
        state, metrics = iteration(state)
        finished += float(metrics.episodes_finished)
        if float(metrics.episodes_finished):
            assert float(metrics.episode_length_sum) / float(metrics.episodes_finished) <= 20
    assert finished >= 8


class DictObsToy:
    """The toy env with Playground-style dict observations: the policy sees `state`, the value `privileged_state`."""

    action_size = 1
    observation_size = {"state": (2,), "privileged_state": (3,)}

    def __init__(self):
        from tests.toy_env import make

        self.inner = make()

    def _wrap(self, state):
        obs = state.obs
        return state.replace(obs={"state": obs, "privileged_state": jax.numpy.append(obs, obs[0] - obs[1])})

    def reset(self, key):
        return self._wrap(self.inner.reset(key))

    def step(self, state, action):
        return self._wrap(self.inner.step(state.replace(obs=state.obs["state"]), action))


def test_dict_observations_feed_policy_and_value_their_own_entries(toy_env_name):
    config = resolve(toy_env_name, "smoke", None, SIZES)
    trainer = Trainer.build(config, make_plan(config), env=DictObsToy())
    state = trainer.init_state()
    assert state.params.policy["params"]["dense_0"]["kernel"].shape[0] == 2
    assert state.params.value["params"]["dense_0"]["kernel"].shape[0] == 3
    before = avals(state)
    iteration = jax.jit(trainer.train_iteration_fn(), donate_argnums=0)
    state, metrics = iteration(state)
    assert bool(metrics.all_finite)
    assert avals(state) == before
    assert float(state.normalizer.count) == 4 * 4 * 5
    assert state.normalizer.mean["privileged_state"].shape == (3,)


def test_bf16_compute_keeps_fp32_state(toy_env_name):
    """run.precision=bf16 computes the networks in bf16; parameters, optimizer and statistics stay fp32."""
    config = resolve(toy_env_name, "smoke", None, SIZES + ["run.precision=bf16"])
    trainer = Trainer.build(config, make_plan(config))
    state = trainer.init_state()
    before = avals(state)
    iteration = jax.jit(trainer.train_iteration_fn(), donate_argnums=0)
    state, metrics = iteration(state)
    state, metrics = iteration(state)
    assert avals(state) == before and iteration._cache_size() == 1
    assert bool(metrics.all_finite)
    assert {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state, state.normalizer))} <= {
        np.dtype("float32"), np.dtype("int32")}


def test_gae_once_trains_its_own_way_from_the_same_state(toy_env_name, trainer, iteration):
    """`ppo.advantages: gae_once` compiles, keeps the state's shapes and moves the parameters, elsewhere than the
    default (Brax's estimator) from the same state."""
    config = resolve(toy_env_name, "smoke", None, SIZES + ["ppo.max_grad_norm=1.0", "ppo.advantages=gae_once"])
    other = Trainer.build(config, make_plan(config))
    start = other.init_state()
    before = avals(start)
    params0 = copy_tree(start.params)
    gae_once, _ = jax.jit(other.train_iteration_fn())(start)
    brax, _ = iteration(trainer.init_state())
    assert avals(gae_once) == before
    for initial, ours, theirs in zip(jax.tree.leaves(params0), jax.tree.leaves(gae_once.params),
                                     jax.tree.leaves(brax.params)):
        assert not np.allclose(initial, ours)
        assert not np.allclose(ours, theirs)


def test_adaptive_kl_carries_its_step_size_in_the_state_in_powers_of_one_and_a_half(toy_env_name):
    """`ppo.learning_rate_schedule: adaptive_kl` (behind the gradient clip): the state keeps its shapes from one
    iteration to the next, each iteration's step size is the last one times 1.5^k with |k| at most the iteration's
    updates (2 epochs x 4 minibatches), and the rows log it with the mean KL (Brax's values: the fixtures of
    test_brax_reference.py)."""
    from rlfit.algos.ppo.algorithm import metrics_row
    from rlfit.algos.ppo.schedule import learning_rate

    config = resolve(toy_env_name, "smoke", None, SIZES + ["ppo.max_grad_norm=1.0", "ppo.learning_rate=1e-3",
                                                          "ppo.learning_rate_schedule=adaptive_kl",
                                                          "ppo.desired_kl=0.001",
                                                          "ppo.learning_rate_schedule_min_lr=1e-9"])  # no floor met
    adaptive = Trainer.build(config, make_plan(config))
    state = adaptive.init_state()
    before = avals(state)
    step = jax.jit(adaptive.train_iteration_fn())
    rate, moved = 1e-3, False
    for _ in range(3):
        state, metrics = step(state)
        assert avals(state) == before
        assert float(learning_rate(state.opt_state, config.ppo)) == float(metrics.learning_rate)
        exponent = np.log(float(metrics.learning_rate) / rate) / np.log(1.5)
        assert abs(exponent - round(exponent)) < 1e-3 and abs(round(exponent)) <= 8, exponent
        moved |= round(exponent) != 0
        rate = float(metrics.learning_rate)
        row = metrics_row(jax.device_get(metrics))
        assert row["learning_rate"] == pytest.approx(rate) and row["loss/kl_mean"] > 0
    assert moved


def test_an_adaptive_kl_run_resumes_bit_identical_to_a_straight_run(capfd, tmp_path):
    """The schedule's step size is part of the checkpointed optimizer state: a run stopped after 3 iterations and
    resumed to 5 ends with the parameters of a run trained 5 iterations straight."""
    import json

    from tests.conftest import TOY_ENV, cli_in_process

    schedule = ["--set", "ppo.learning_rate_schedule=adaptive_kl"]
    first = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", "--set", "run.num_timesteps=192", *schedule,
                           "--run-dir", "split", "--quiet", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    resumed = cli_in_process(capfd, "resume", "split", "--timesteps", "320", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    straight = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", "--set", "run.num_timesteps=320",
                              *schedule, "--run-dir", "straight", "--quiet", cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("split", "straight")]
    assert summaries[0]["iterations"] == summaries[1]["iterations"] == 5
    assert summaries[0]["params_digest"] == summaries[1]["params_digest"]
    rates = [json.loads(line).get("learning_rate") for line in (tmp_path / "split" / "metrics.jsonl").open()]
    assert len({rate for rate in rates if rate is not None}) > 1  # the step size moved, so the resume carried it


def test_linear_schedule_falls_to_zero_over_the_runs_updates(toy_env_name):
    """`ppo.learning_rate_schedule: linear`: after iteration k of 3 (2 epochs x 4 minibatches = 8 updates each) the
    state holds the step its last update took, 1e-3 x (1 - (8k - 1) / 24), as the plain formula gives it."""
    from rlfit.algos.ppo.algorithm import metrics_row

    config = resolve(toy_env_name, "smoke", None, SIZES + ["ppo.learning_rate=1e-3", "run.num_timesteps=240",
                                                          "ppo.learning_rate_schedule=linear"])
    plan = make_plan(config)
    assert plan.num_iterations == 3
    linear = Trainer.build(config, plan)
    state = linear.init_state()
    before = avals(state)
    step = jax.jit(linear.train_iteration_fn())
    for k in (1, 2, 3):
        state, metrics = step(state)
        assert avals(state) == before
        expected = 1e-3 * (1 - (8 * k - 1) / 24)
        assert float(metrics.learning_rate) == pytest.approx(expected, rel=1e-5)
        assert metrics_row(jax.device_get(metrics))["learning_rate"] == pytest.approx(expected, rel=1e-5)


def test_a_resumed_linear_schedule_continues_its_count_toward_the_new_total(capfd, tmp_path):
    """A run of 3 smoke iterations (2 updates each) resumed to 5: its count carries on, and the line is redrawn to
    the new total, so iteration 4's last update (number 7 of 10) takes 1e-3 x (1 - 7 / 10)."""
    import json

    from tests.conftest import TOY_ENV, cli_in_process

    schedule = ["--set", "ppo.learning_rate_schedule=linear", "--set", "ppo.learning_rate=1e-3"]
    first = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", "--set", "run.num_timesteps=192", *schedule,
                           "--run-dir", "split", "--quiet", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    resumed = cli_in_process(capfd, "resume", "split", "--timesteps", "320", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(line) for line in (tmp_path / "split" / "metrics.jsonl").open()]
    rates = {row["iteration"]: row["learning_rate"] for row in rows if "learning_rate" in row}
    assert rates[3] == pytest.approx(1e-3 * (1 - 5 / 6), rel=1e-5)
    assert rates[4] == pytest.approx(1e-3 * (1 - 7 / 10), rel=1e-5)
    assert rates[5] == pytest.approx(1e-3 * (1 - 9 / 10), rel=1e-5)
