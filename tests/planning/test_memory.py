"""Memory prediction from XLA's compile-time analysis, on the toy environment (compiles: a few seconds each)."""

from __future__ import annotations

import json

import jax
import pytest

from rlfit.algos.ppo.candidates import scale_sizes
from rlfit.config.schema import resolve
from rlfit.algos.ppo.sizes import check_batch_divisibility
from rlfit.errors import UserError
from rlfit.hardware import probe
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.run.build import Trainer
from rlfit.run.sizing import PROBE_COMPILER_OPTIONS, analyze_compiled, fit_memory_model, plan_for

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


def training_analysis(config, num_envs: int):
    """Independent reference: XLA's analysis of the step at `num_envs` compiled as training compiles it (the
    Trainer's own compile, its own options), not by the planner's code."""
    sizes = scale_sizes(config_sizes(config), num_envs)
    trainer = Trainer.build(config, make_plan(config, sizes, devices=1))
    return analyze_compiled(config, sizes, trainer.compile_iteration())


@pytest.mark.parametrize("num_envs", [512, 4096])
def test_the_line_predicts_xla_at_held_out_sizes(config, model, num_envs):
    """The line through the small probes extrapolates to sizes the planner chooses, within 2% (the planner adds a
    15% margin; issue 3's target for prediction against measured memory is 10%)."""
    measured = training_analysis(config, num_envs)
    assert model.estimate(num_envs) == pytest.approx(measured.total_bytes, rel=0.02)


def test_a_probe_compiled_cheaply_is_analysed_as_training_compiles_it(config, model):
    """The probes' cheaper LLVM settings leave XLA's buffer assignment as it is: the same bytes, field by field."""
    probe = model.points[0]
    reference = training_analysis(config, probe.sizes.num_envs)
    assert probe == reference


class CompileLog:
    """Every ahead-of-time compile (`jax.stages.Lowered.compile`) of this process while installed: the largest
    leading axis of its arguments (num_envs for the training state) and its compiler options."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[int, dict]] = []
        original = jax.stages.Lowered.compile

        def compile_and_log(lowered, *args, **kwargs):
            shapes = [leaf.shape for leaf in jax.tree.leaves(lowered.in_avals)]
            self.calls.append((max((s[0] for s in shapes if s), default=0), dict(kwargs.get("compiler_options") or {})))
            return original(lowered, *args, **kwargs)

        monkeypatch.setattr(jax.stages.Lowered, "compile", compile_and_log)

    def leading_axes(self) -> list[int]:
        return [axis for axis, _ in self.calls]


def test_the_planner_compiles_two_cheap_probes_that_are_never_chosen(config, monkeypatch):
    """Two compiles, with the cheap options on a CPU, at sizes that are not candidates (so training never
    compiles them again)."""
    from rlfit.algos.ppo.candidates import candidate_sizes

    log = CompileLog(monkeypatch)
    fit_memory_model(config)
    assert len(log.calls) == 2
    candidates = {c.num_envs for c in candidate_sizes(config_sizes(config))}
    assert all(axis not in candidates for axis in log.leading_axes())
    assert all(PROBE_COMPILER_OPTIONS.items() <= options.items() for _, options in log.calls)


def test_training_after_auto_compiles_the_chosen_size_once(config, monkeypatch, tmp_path):
    """`train --num-envs auto`: the planner's probes, then training's step and evaluation; the chosen size is
    compiled once (by training, with its own options) and no size twice."""
    import rlfit

    log = CompileLog(monkeypatch)
    run = tmp_path / "run"
    rlfit.train(TOY, "smoke", overrides=["run.num_timesteps=1", "run.num_eval_envs=4"], run_dir=run,
                num_envs_auto=True, device_memory="4MiB")
    chosen = json.loads((run / "plan.json").read_text())["sizes"]["num_envs"]
    probes = [axis for axis, options in log.calls if PROBE_COMPILER_OPTIONS.items() <= options.items()]
    steps = [axis for axis, options in log.calls if not PROBE_COMPILER_OPTIONS.items() <= options.items()]
    assert len(probes) == 2 and chosen not in probes
    assert steps.count(chosen) == 1  # training's step; the evaluation's 4 environments are the other compile
    summary = json.loads((run / "summary.json").read_text())
    assert [p["name"] for p in summary["programs"]] == ["training step", "evaluation", "starting state"]


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
