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
from rlfit.run.trainer import Trainer
from rlfit.planning import device_plan, measure
from rlfit.planning.budget import num_envs_cap
from rlfit.planning.measure import unlimited_choice
from rlfit.run.probes import PROBE_COMPILER_OPTIONS, StepProbes, analyze_compiled

TOY = "tests.toy_env:make"
pytestmark = pytest.mark.slow


def memory_plan(config, device_memory=None, target_backend=None, fit_lines=False):
    """The planner's MemoryPlan, the step measured by rlfit's own measurer (a fresh one: the environment loaded)."""
    return device_plan.memory_plan(config, StepProbes(), device_plan.PlanRequest(device_memory, target_backend,
                                                                                 fit_lines=fit_lines))


def fit_memory_model(config, target_backend=None):
    return measure.fit_memory_model(config, StepProbes(), target_backend)


def plan_for(config, **request):
    return device_plan.plan_for(config, StepProbes(), **request)


ESTIMATES: dict[tuple[str, str], object] = {}


def estimate_at(config, target_backend):
    """The estimate from the lowered step at the sizes the planner estimates for `target_backend` (no compile); once
    per config and target in this module."""
    key = (repr(config), target_backend)
    if key not in ESTIMATES:
        ESTIMATES[key] = StepProbes().estimate(config, unlimited_choice(config, num_envs_cap(target_backend)))
    return ESTIMATES[key]


@pytest.fixture(scope="module", autouse=True)
def lowered_once():
    """The step at each (config, sizes) traced and lowered once in this module (`rlfit.run.probes.lower_iteration`,
    which every estimate and probe goes through, remembered; the same lowered program compiles anew each time it is
    compiled, so what the tests log of compiles is unchanged): lowering, not compiling, is most of the planner's
    time on the toy environment, and the tests here plan the same sizes again and again."""
    from rlfit.run import probes

    original, lowered = probes.lower_iteration, {}

    def lower_once(config, sizes, env=None):
        key = (repr(config), sizes)
        if key not in lowered:
            lowered[key] = original(config, sizes, env)
        return lowered[key]

    patch = pytest.MonkeyPatch()
    patch.setattr(probes, "lower_iteration", lower_once)
    yield
    patch.undo()


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


ANALYSES: dict[tuple[str, object], object] = {}
"""`training_analysis`'s results in this module, by (config, sizes): the cap's is the reference of several checks."""


def training_analysis(config, num_envs: int | None = None, sizes=None):
    """Independent reference: XLA's analysis of the step at `sizes` (or PPO's sizes scaled to `num_envs`) compiled
    as training compiles it (the Trainer's own compile, its own options), not by the planner's code; once per
    config and sizes in this module."""
    sizes = sizes if sizes is not None else scale_sizes(config_sizes(config), num_envs)
    key = (repr(config), sizes)
    if key not in ANALYSES:
        trainer = Trainer.build(config, make_plan(config, sizes, devices=1))
        ANALYSES[key] = analyze_compiled(config, sizes, trainer.compile_iteration())
    return ANALYSES[key]


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


def cap_and_partner() -> tuple[int, int]:
    """Independent reference for the CPU probes: the largest power of two within this CPU's cap, and 3/8 of it."""
    from rlfit.hardware.cpu_envs import cpu_max_num_envs
    from rlfit.hardware.probe import usable_cores

    cap = cpu_max_num_envs(usable_cores())
    return cap, cap * 3 // 8


def test_rlfit_plan_on_a_cpu_with_room_compiles_nothing(config, monkeypatch):
    """On a CPU target with room: the cap's candidate (what training runs when memory does not limit) is estimated
    from its lowered step, the estimate with the margin fits, so it is the choice and nothing compiles; the estimate
    with the margin is not below XLA's analysis of that size compiled as training compiles it (the reference)."""
    from rlfit.planning.budget import SAME_BACKEND_MARGIN

    from rlfit.algos.ppo.candidates import candidate_sizes

    log = CompileLog(monkeypatch)
    planned = memory_plan(config)
    cap = cap_and_partner()[0]
    assert log.calls == [] and planned.chosen.sizes.num_envs == cap
    assert planned.model.source == "lowered" and planned.model.measured_once
    assert [p.sizes.num_envs for p in planned.model.points] == [cap]
    assert cap in {c.num_envs for c in candidate_sizes(config_sizes(config))}
    assert planned.model.points[0].total_bytes * SAME_BACKEND_MARGIN >= training_analysis(config, cap).total_bytes
    assert any(reason.startswith("memory estimated at one size without compiling") for reason in planned.reasons)


def test_a_step_that_cannot_be_estimated_is_compiled_instead(config, monkeypatch):
    """Where the lowered step holds a value of no static size (`UnboundedProgram`, simulated), the planner compiles
    the cap's size as it would without the estimate: the same choice, from XLA's analysis, the lowered step reused."""
    from rlfit.hardware.program_memory import UnboundedProgram
    from rlfit.run import probes

    def unbounded(lowered):
        raise UnboundedProgram("no static size for a value of type tensor<?xf32>")

    monkeypatch.setattr(probes, "lowered_bound", unbounded)
    log = CompileLog(monkeypatch)
    lowerings = []
    original = probes.lower_iteration
    monkeypatch.setattr(probes, "lower_iteration", lambda *a, **k: lowerings.append(a[1]) or original(*a, **k))
    planned = memory_plan(config)
    cap = cap_and_partner()[0]
    assert log.leading_axes() == [cap] and planned.chosen.sizes.num_envs == cap
    assert planned.model.source == "xla" and planned.model.measured_once
    assert [sizes.num_envs for sizes in lowerings] == [cap]  # lowered once, for the estimate, and compiled from there


@pytest.mark.parametrize("algo, within", [("ppo", 0.10), ("sac", 0.20)])
def test_the_estimate_lies_near_xla_within_the_planners_allowances(algo, within):
    """For each algorithm's step at the size the planner estimates (toy env, this CPU's cap), against XLA's
    analysis of it compiled as training compiles it: PPO's estimate within 10% (issue 65's target, met on
    Playground's steps, benchmarks/trace_bound.py); SAC's toy step (110 KB, 66 KB of it the replay buffer, an
    argument) within 20% (+15.6% when written; not investigated); both with the planner's margin not below XLA's
    figure and under ESTIMATE_OVER_XLA_AT_MOST times it (the factor by which it decides whether compiling that size
    alone may pay)."""
    from rlfit.planning.budget import SAME_BACKEND_MARGIN
    from rlfit.planning.measure import ESTIMATE_OVER_XLA_AT_MOST

    algo_config = resolve(TOY, "smoke", overrides=[f"algo={algo}"])
    sizes = unlimited_choice(algo_config, num_envs_cap("cpu"))
    xla = training_analysis(algo_config, sizes=sizes).total_bytes  # PPO's: the cap's, analysed above
    estimate = estimate_at(algo_config, "cpu")
    assert estimate.sizes == sizes
    assert abs(estimate.total_bytes / xla - 1) <= within
    assert xla <= estimate.total_bytes * SAME_BACKEND_MARGIN and estimate.total_bytes <= ESTIMATE_OVER_XLA_AT_MOST * xla


def between_estimate_and_xla(config) -> int:
    """Bytes of a CPU whose budget fits the cap's size by XLA's analysis (with the planner's margin) but not by the
    estimate from the lowered step: the midpoint, as `--device-memory` states it (a CPU budget is 3/4 of it). The
    toy step's estimate lies above XLA's figure (by 7%: `test_the_estimate_lies_near_xla_within_the_planners_allowances`)."""
    from rlfit.planning.budget import SAME_BACKEND_MARGIN

    cap = cap_and_partner()[0]
    xla = training_analysis(config, cap).total_bytes
    estimate = estimate_at(config, "cpu").total_bytes
    assert estimate > 1.02 * xla  # room between them
    return int((xla + estimate) / 2 * SAME_BACKEND_MARGIN / 0.75)


def test_where_the_estimate_does_not_fit_the_caps_size_compiles_alone(config, monkeypatch):
    """A CPU between the two: the estimate does not fit, so the cap's size compiles alone with the cheap options
    (`rlfit plan` runs nothing); XLA's analysis of it fits, so it is the choice and no other size compiles."""
    device_memory = between_estimate_and_xla(config)
    cap = cap_and_partner()[0]
    reference = training_analysis(config, cap)
    log = CompileLog(monkeypatch)
    planned = memory_plan(config, device_memory, "cpu")
    assert log.leading_axes() == [cap] and planned.chosen.sizes.num_envs == cap
    assert planned.model.source == "xla" and planned.model.measured_once
    assert planned.model.points[0] == reference
    assert all(PROBE_COMPILER_OPTIONS.items() <= options.items() for _, options in log.calls)


def test_fit_line_compiles_the_cap_and_a_size_never_chosen_and_chooses_the_same(config, monkeypatch):
    """`rlfit plan --fit-line` on a CPU: the cap's candidate and 3/8 of it (no candidate), both cheap; it chooses
    the sizes the estimate chose, and every figure from the estimate (above XLA's on the toy, bounds from it at
    the other sizes) is at least the line's."""
    from rlfit.algos.ppo.candidates import candidate_sizes

    estimated = memory_plan(config)
    log = CompileLog(monkeypatch)
    line = memory_plan(config, fit_lines=True)
    assert log.leading_axes() == list(cap_and_partner())
    assert [p.sizes.num_envs for p in line.model.points] == list(cap_and_partner())
    assert line.model.first_is_unlimited_choice and not line.model.measured_once and line.model.source == "xla"
    assert cap_and_partner()[1] not in {c.num_envs for c in candidate_sizes(config_sizes(config))}
    assert all(PROBE_COMPILER_OPTIONS.items() <= options.items() for _, options in log.calls)
    assert line.chosen.sizes == estimated.chosen.sizes
    figures = {c.sizes.num_envs: c.estimate_bytes for c in estimated.candidates}
    assert all(figures[c.sizes.num_envs] >= c.estimate_bytes for c in line.candidates)


def test_where_the_caps_size_does_not_fit_the_line_decides(config, monkeypatch):
    """A CPU with 4 MiB: neither the estimate nor the cap's size measured alone fits, so the partner compiles and the
    plan is the one `--fit-line` makes."""
    log = CompileLog(monkeypatch)
    planned = memory_plan(config, "4MiB", "cpu")
    assert log.leading_axes() == list(cap_and_partner())
    assert not planned.model.measured_once and planned.chosen.sizes.num_envs < cap_and_partner()[0]
    assert planned.chosen == memory_plan(config, "4MiB", "cpu", fit_lines=True).chosen


def test_on_an_accelerator_target_the_probes_are_never_chosen(config, monkeypatch):
    """Without a cap (an accelerator: memory alone decides) the probes are 384 and 3072, no candidate."""
    log = CompileLog(monkeypatch)
    model = fit_memory_model(config, target_backend="gpu")
    assert log.leading_axes() == [384, 3072] and not model.first_is_unlimited_choice


def test_on_an_accelerator_target_the_largest_size_compiles_alone_where_xla_may_fit(config, monkeypatch):
    """Planning for a GPU (no cap: the rules choose the largest candidate, 65,536, when memory does not limit) with a
    budget between XLA's analysis of that size and its estimate (both with the cross-backend margin): the estimate
    does not fit, but over ESTIMATE_OVER_XLA_AT_MOST it would, so that size compiles alone; XLA's analysis of it fits, so it is
    the choice and the probes 384 and 3072 never compile."""
    import os

    from rlfit.algos.ppo.candidates import MAX_NUM_ENVS
    from rlfit.hardware.xla_memory import read_xla_memory_settings
    from rlfit.planning.budget import CROSS_BACKEND_MARGIN

    xla = training_analysis(config, MAX_NUM_ENVS).total_bytes
    estimate = estimate_at(config, "gpu").total_bytes
    fraction = read_xla_memory_settings(os.environ).mem_fraction
    log = CompileLog(monkeypatch)
    planned = memory_plan(config, int((xla + estimate) / 2 * CROSS_BACKEND_MARGIN / fraction), "gpu")
    budget = planned.budget.budget_bytes
    assert xla * CROSS_BACKEND_MARGIN <= budget < estimate * CROSS_BACKEND_MARGIN  # the case this test is about
    assert log.leading_axes() == [MAX_NUM_ENVS] and planned.chosen.sizes.num_envs == MAX_NUM_ENVS
    assert planned.model.source == "xla" and planned.model.measured_once
    assert planned.model.points[0].total_bytes == xla


def test_on_an_accelerator_target_with_no_hope_for_the_largest_size_only_the_probes_compile(config, monkeypatch):
    """A 4 MiB GPU: the estimate at 65,536 environments is far over the budget even over ESTIMATE_OVER_XLA_AT_MOST, so
    that size is not compiled; the probes 384 and 3072 are, and their line decides."""
    log = CompileLog(monkeypatch)
    planned = memory_plan(config, "4MiB", "gpu")
    assert log.leading_axes() == [384, 3072] and not planned.model.measured_once
    assert [p.sizes.num_envs for p in planned.model.points] == [384, 3072]
    assert planned.chosen == memory_plan(config, "4MiB", "gpu", fit_lines=True).chosen


def test_training_after_auto_compiles_the_chosen_size_once(config, monkeypatch, tmp_path):
    """`train --num-envs auto` where memory limits (4 MiB): one cheap probe, the cap's probe compiled as training
    compiles (in vain here), then training's step at the chosen size and evaluation; no size compiled twice."""
    import rlfit

    log = CompileLog(monkeypatch)
    run = tmp_path / "run"
    rlfit.train(TOY, "smoke", overrides=["run.num_timesteps=1", "run.num_eval_envs=4"], run_dir=run,
                num_envs_auto=True, device_memory="4MiB")
    chosen = json.loads((run / "plan.json").read_text())["sizes"]["num_envs"]
    cap, partner = cap_and_partner()
    probes = [axis for axis, options in log.calls if PROBE_COMPILER_OPTIONS.items() <= options.items()]
    steps = [axis for axis, options in log.calls if not PROBE_COMPILER_OPTIONS.items() <= options.items()]
    assert probes == [partner] and chosen < cap
    assert steps.count(cap) == 1 and steps.count(chosen) == 1  # the evaluation's 4 environments: the other
    summary = json.loads((run / "summary.json").read_text())
    assert [p["name"] for p in summary["programs"]] == ["training step", "evaluation", "starting state"]


def auto_run(run_cli, tmp_path, monkeypatch, *extra: str) -> tuple[dict, list[tuple]]:
    """`train --num-envs auto` of the toy env in a fresh compile cache: (plan.json, each program's (name,
    from_cache, from_store) from summary.json)."""
    monkeypatch.setenv("RLFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # cached however fast it compiled
    done = run_cli("train", TOY, "--preset", "smoke", "--num-envs", "auto", "--set", "run.num_timesteps=1",
                   "--set", "run.num_eval_envs=4", "--run-dir", str(tmp_path / "run"), "--quiet", *extra)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return plan, [(p["name"], p["from_cache"], p["from_store"]) for p in summary["programs"]]


def test_auto_with_room_compiles_what_a_plain_train_compiles(tmp_path, run_cli, monkeypatch):
    """`train --num-envs auto` with the memory to run the CPU's cap: the planner estimates that size from its lowered
    step and compiles nothing, so in a fresh compile cache training compiles each of its programs itself, once (a
    user's factory, as the toy env is, is not in the program store: each program traced by training too)."""
    plan, programs = auto_run(run_cli, tmp_path, monkeypatch)
    assert plan["sizes"]["num_envs"] == cap_and_partner()[0]
    assert programs == [("training step", False, False), ("evaluation", False, False),
                        ("starting state", False, False)]
    model = plan["extra"]["memory_model"]
    assert model["source"] == "lowered" and model["first_is_unlimited_choice"] is True
    assert [p["num_envs"] for p in model["points"]] == [cap_and_partner()[0]]


def test_auto_where_only_xla_fits_reads_the_training_step_the_planner_compiled(config, tmp_path, run_cli,
                                                                              monkeypatch):
    """`train --num-envs auto` on a CPU where XLA's analysis of the cap's size fits but the estimate does not: the
    planner compiles that size as training compiles it, and its starting state beside it, so in a fresh compile
    cache training reads both from the cache, where only the planner can have put them; nothing else compiled."""
    plan, programs = auto_run(run_cli, tmp_path, monkeypatch, "--device-memory", str(between_estimate_and_xla(config)))
    assert plan["sizes"]["num_envs"] == cap_and_partner()[0]
    assert [(name, from_cache) for name, from_cache, _ in programs] == [
        ("training step", True), ("evaluation", False), ("starting state", True)]
    model = plan["extra"]["memory_model"]
    assert model["source"] == "xla" and model["first_is_unlimited_choice"] is True
    assert [p["num_envs"] for p in model["points"]] == [cap_and_partner()[0]]  # the planner compiled nothing else


def test_plan_for_auto_chooses_a_valid_configuration_within_the_budget(config, model):
    planned_config, plan, _ = plan_for(config, device_memory="4MiB", auto_num_envs=True)
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
    _, plan, env = plan_for(config)
    assert plan.sizes == config_sizes(config) and plan.predicted_bytes is None
    assert env is None  # nothing measured, nothing loaded: training loads the environment


def test_plan_for_refuses_bf16_on_a_t4(config, monkeypatch):
    t4 = probe.gpu_info(probe.Accelerator("gpu", "Tesla T4", 1, 16 * 2**30, 15 * 2**30, "7.5"), "JAX", "gpu", "test",
                        probe.read_xla_memory_settings({}), [])
    monkeypatch.setattr(probe, "probe_device", lambda: t4)
    with pytest.raises(UserError, match="run.precision=fp32"):
        plan_for(config.replace(run={"precision": "bf16"}))
