"""The planner's choice, from a given memory model (no compiling): monotone, valid, within budget."""

from __future__ import annotations

import pytest

from rlfit.config.schema import resolve
from rlfit.algos.ppo.sizes import check_batch_divisibility
from rlfit.errors import UserError
from rlfit.hardware.probe import Accelerator, cpu_info, gpu_info
from rlfit.hardware.xla_memory import read_xla_memory_settings
from rlfit.algos.ppo.sizes import BatchSizes
from rlfit.hardware.cpu_envs import cpu_max_num_envs
from rlfit.planning.budget import CROSS_BACKEND_MARGIN, SAME_BACKEND_MARGIN, stated_budget
from rlfit.planning.memory_model import MemoryModel, MemoryPoint, fit_coefficients
from rlfit.planning.device_plan import check_precision
from rlfit.planning.fit import memory_plan_from_model

GIB = 1 << 30
SETTINGS = read_xla_memory_settings({})
CPU = cpu_info("cpu", "test", SETTINGS, [])
TOY = "tests.toy_env:make"


def device(name: str, capability: str):
    return gpu_info(Accelerator("gpu", name, 1, 16 * GIB, 16 * GIB, capability), "NVML", "gpu", "test", SETTINGS, [])


def point(num_envs: int, total: int, transitions: int = 0) -> MemoryPoint:
    return MemoryPoint(BatchSizes(num_envs, num_envs, 2, 4), 1000, 1000, 1000, total - 1000, 0, transitions)


def model(intercept: float = 50e6, per_env: float = 2e6, backend: str = "cpu") -> MemoryModel:
    """A line like CartpoleBalance's default config on the CPU (about 2 MB per environment)."""
    points = (point(256, int(intercept + 256 * per_env)), point(2048, int(intercept + 2048 * per_env)))
    return MemoryModel(intercept, per_env, 0.0, points, backend)


@pytest.fixture(scope="module")
def config():
    return resolve(TOY, "smoke", overrides=["ppo.num_envs=2048", "ppo.batch_size=1024", "ppo.num_minibatches=32",
                                            "ppo.unroll_length=30"])


def plan_at(config, budget_bytes: int, target: str = "gpu", line: MemoryModel | None = None):
    budget = stated_budget(int(budget_bytes / 0.75), target, CPU)  # both targets plan with 75% of the memory
    return memory_plan_from_model(config, line or model(), budget)


def test_more_memory_never_chooses_fewer_environments(config):
    chosen = []
    for gib in (0.5, 1, 2, 4, 6, 8, 12, 16, 24, 40, 80, 141):
        planned = plan_at(config, int(gib * GIB))
        chosen.append(planned.chosen.sizes.num_envs if planned.chosen else 0)
    assert chosen == sorted(chosen)
    assert chosen[0] < chosen[-1]


def test_choice_is_the_largest_valid_candidate_within_budget(config):
    planned = plan_at(config, 12 * GIB)
    chosen = planned.chosen
    assert chosen.fits and chosen.predicted_bytes <= planned.budget.budget_bytes
    check_batch_divisibility(chosen.sizes.num_envs, chosen.sizes.batch_size, chosen.sizes.num_minibatches)
    # independent reference: the line with the margin, solved for num_envs, rounded down to a power of two
    limit = (planned.budget.budget_bytes / CROSS_BACKEND_MARGIN - 50e6) / 2e6
    assert chosen.sizes.num_envs == 2 ** int(limit).bit_length() // 2
    larger = [c for c in planned.candidates if c.sizes.num_envs > chosen.sizes.num_envs]
    assert larger and not any(c.fits for c in larger)


def test_cross_backend_plans_widen_the_margin_and_say_so(config):
    gpu_plan = plan_at(config, 12 * GIB, "gpu")  # predicted on cpu for a gpu
    cpu_plan = plan_at(config, 12 * GIB, "cpu")
    assert gpu_plan.margin == CROSS_BACKEND_MARGIN > SAME_BACKEND_MARGIN == cpu_plan.margin
    assert any("predicted on the cpu backend for a gpu run" in r for r in gpu_plan.reasons)
    same = memory_plan_from_model(config, model(backend="gpu"), stated_budget(16 * GIB, "gpu", CPU))
    assert same.margin == SAME_BACKEND_MARGIN


@pytest.mark.parametrize("cores, cap", [(1, 256), (2, 512), (3, 512), (4, 1024), (8, 2048), (32, 8192), (96, 8192)])
def test_cpu_runs_are_capped_by_cores(config, cores, cap):
    assert cpu_max_num_envs(cores) == cap
    budget = stated_budget(100 * GIB, "cpu", CPU)
    planned = memory_plan_from_model(config, model(), budget, cpu_cores=cores)
    assert planned.chosen.sizes.num_envs == cap
    assert any(f"capped at {cap} environments on a CPU" in r for r in planned.reasons)
    assert planned.chosen.sizes.num_envs < max(c.sizes.num_envs for c in planned.candidates)  # more would fit


def test_nothing_fits_is_reported(config):
    planned = plan_at(config, 10 * 2**20)
    assert planned.chosen is None
    message = planned.nothing_fits
    assert message.startswith("no configuration fits the budget of 10.0 MiB: even num_envs=16 ")
    assert "larger --device-memory" in message and "\n" not in message


def test_plan_json_shape(config):
    out = plan_at(config, 6 * GIB).to_dict()
    assert {"device", "budget_bytes", "candidates", "chosen", "reasons"} <= set(out)
    assert {"num_envs", "batch_size", "num_minibatches", "unroll_length", "predicted_bytes", "fits"} <= set(out["chosen"])
    assert out["budget_bytes"] == stated_budget(8 * GIB, "gpu", CPU).budget_bytes


def test_fit_is_least_squares():
    points = (point(100, 1_000), point(200, 2_100), point(300, 2_900))
    intercept, slope, per_transition = fit_coefficients(points)
    assert slope == pytest.approx(9.5) and intercept == pytest.approx(2000 - 9.5 * 200) and per_transition == 0
    with pytest.raises(ValueError):
        fit_coefficients((point(100, 1), point(100, 2)))


def test_fit_separates_stored_transitions_from_environments():
    """Three points of 1000 + 10 per env + 3 per transition give those coefficients back exactly."""
    exact = [(16, 1000), (32, 1000), (16, 3000)]
    points = tuple(point(n, 1000 + 10 * n + 3 * t, t) for n, t in exact)
    assert fit_coefficients(points) == pytest.approx((1000, 10, 3))


@pytest.mark.parametrize("name, capability", [("Tesla T4", "7.5"), ("Tesla V100-SXM2-16GB", "7.0"),
                                              ("Quadro RTX 8000", "7.5")])
def test_bf16_is_refused_without_bf16_hardware(name, capability):
    with pytest.raises(UserError) as caught:
        check_precision("bf16", device(name, capability))
    assert "run.precision=fp32" in str(caught.value) and capability in str(caught.value)
    check_precision("fp32", device(name, capability))


def test_bf16_is_accepted_where_supported():
    check_precision("bf16", device("NVIDIA A100-SXM4-40GB", "8.0"))
    check_precision("bf16", device("NVIDIA GeForce RTX 4070", "8.9"))
    check_precision("bf16", CPU)


def test_several_gpus_are_planned_per_device_and_multiplied(config):
    budget = stated_budget(int(12 * GIB / 0.75), "gpu", CPU)
    one = memory_plan_from_model(config, model(), budget)
    four = memory_plan_from_model(config, model(), budget, devices=4)
    # each device holds num_envs / 4 environments beside its own copy of the parameters (the intercept)
    assert four.chosen.sizes.num_envs == 4 * one.chosen.sizes.num_envs
    per_device = 50e6 + four.chosen.sizes.num_envs / 4 * 2e6
    assert four.chosen.estimate_bytes == pytest.approx(per_device, rel=1e-9)
    assert four.to_dict()["devices"] == 4 and any("split over 4 devices" in r for r in four.reasons)
    check_batch_divisibility(four.chosen.sizes.num_envs, four.chosen.sizes.batch_size,
                             four.chosen.sizes.num_minibatches)


def test_cpu_devices_share_one_budget_and_totals_that_do_not_split_never_fit(config):
    budget = stated_budget(int(1 * GIB / 0.75), "cpu", CPU)
    one = memory_plan_from_model(config, model(), budget, cpu_cores=64)
    two = memory_plan_from_model(config, model(), budget, cpu_cores=64, devices=2)
    assert two.chosen.predicted_bytes <= budget.budget_bytes // 2
    assert two.chosen.sizes.num_envs <= 2 * one.chosen.sizes.num_envs
    three = memory_plan_from_model(config, model(), stated_budget(int(80 * GIB / 0.75), "gpu", CPU), devices=3)
    assert all(not c.fits for c in three.candidates if c.sizes.num_envs % 3)


@pytest.mark.parametrize("intercept, per_env", [(50e6, 2e6), (0.0, 2e6), (4.4e6, 644650.6), (3e9, 1.0)])
def test_a_model_measured_once_bounds_every_line_through_its_point(intercept, per_env):
    """Measured at 512 environments only, the model's estimate is never below any line of non-negative intercept
    and slope through that point (the reference: the line itself), and equals it at the point."""
    measured = point(512, int(intercept + 512 * per_env))
    once = MemoryModel.from_one_point(measured, "cpu", first_is_unlimited_choice=True)
    assert once.measured_once and once.estimate(512) == measured.total_bytes
    for num_envs in (1, 8, 192, 511, 513, 1024, 4096, 65536):
        assert once.estimate(num_envs) >= intercept + num_envs * per_env - 1
    assert once.estimate(1024) == 2 * measured.total_bytes and once.estimate(16) == measured.total_bytes


def test_a_model_measured_once_bounds_a_buffer_by_its_transitions():
    """With stored transitions (SAC) the bound takes the larger of the two ratios to the measured point."""
    measured = point(8, 2_000_000, transitions=100_000)
    once = MemoryModel.from_one_point(measured, "cpu", first_is_unlimited_choice=True)
    assert once.estimate(8, 50_000) == 2_000_000
    assert once.estimate(8, 300_000) == 6_000_000 and once.estimate(32, 200_000) == 8_000_000


def test_a_plan_from_a_model_measured_once_says_so_and_chooses_the_cap(config):
    """On a CPU with room the cap's size, measured alone, is chosen; the reasons say the figures are bounds."""
    cap = cpu_max_num_envs(2)
    measured = point(cap, 400 * 2**20)
    once = MemoryModel.from_one_point(measured, "cpu", first_is_unlimited_choice=True)
    budget = stated_budget(16 * GIB, "cpu", CPU)
    planned = memory_plan_from_model(config, once, budget, cpu_cores=2)
    assert planned.chosen.sizes.num_envs == cap
    assert planned.chosen.estimate_bytes == measured.total_bytes
    assert any(r.startswith("memory measured at one size") for r in planned.reasons)
    assert any(r.startswith("the config's sizes are predicted at most") for r in planned.reasons)
