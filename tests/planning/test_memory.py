"""Memory prediction from XLA's compile-time analysis, on the toy environment (compiles: a few seconds each)."""

from __future__ import annotations


import pytest

from rlfit.algos.ppo.candidates import scale_sizes
from rlfit.config.schema import resolve
from rlfit.algos.ppo.sizes import check_batch_divisibility
from rlfit.errors import UserError
from rlfit.hardware import probe
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import config_sizes
from rlfit.run.sizing import plan_for
from rlfit.run.sizing import analyze_iteration, fit_memory_model

TOY = "tests.toy_env:make"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config():
    configure_jax("fp32")  # the compile cache lets plan_for below reuse these compiles
    return resolve(TOY, "smoke")


@pytest.fixture(scope="module")
def model(config):
    return fit_memory_model(config)


def test_points_add_up_as_xla_reports(model):
    for p in model.points:
        assert p.total_bytes == p.argument_bytes + p.output_bytes - p.alias_bytes + p.temp_bytes + p.code_bytes
        assert p.alias_bytes > 0  # the state is donated: outputs reuse the argument buffers
    assert model.bytes_per_env > 0 and model.backend == "cpu"


def test_the_line_predicts_xla_at_another_size(config, model):
    """Independent reference: XLA's own analysis of a size the line was not fitted on."""
    measured = analyze_iteration(config, scale_sizes(config_sizes(config), 512))
    assert model.estimate(512) == pytest.approx(measured.total_bytes, rel=0.01)


def test_plan_for_auto_chooses_a_valid_configuration_within_the_budget(config, model):
    planned_config, plan = plan_for(config, device_memory="4MiB", auto_num_envs=True)
    assert planned_config == config  # small enough to bind on the toy env
    sizes = plan.sizes
    check_batch_divisibility(sizes.num_envs, sizes.batch_size, sizes.num_minibatches)
    budget, margin = plan.extra["budget_bytes"], plan.extra["margin"]
    assert budget == int(4 * 2**20 * 0.75)  # a CPU run plans with 75% of the stated memory
    assert plan.predicted_bytes <= budget
    assert model.estimate(2 * sizes.num_envs) * margin > budget  # twice the environments would not fit
    assert 16 <= sizes.num_envs < 1024
    assert plan.reasons[0].startswith("num_envs auto")
    assert plan.env_steps_per_iteration == sizes.steps_per_iteration * config.env.action_repeat


def test_plan_for_without_auto_keeps_the_config(config):
    _, plan = plan_for(config)
    assert plan.sizes == config_sizes(config) and plan.predicted_bytes is None


def test_plan_for_refuses_bf16_on_a_t4(config, monkeypatch):
    t4 = probe.gpu_info(probe.Accelerator("gpu", "Tesla T4", 1, 16 * 2**30, 15 * 2**30, "7.5"), "JAX", "gpu", "test",
                        probe.read_xla_memory_settings({}), [])
    monkeypatch.setattr(probe, "probe_device", lambda: t4)
    with pytest.raises(UserError, match="run.precision=fp32"):
        plan_for(config.replace(run={"precision": "bf16"}))
