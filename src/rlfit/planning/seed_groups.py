"""How many seeds of one configuration train in one compiled program (`rlfit.run.seed_group`) on this device.

    seeds_per_program(plan, num_seeds, requested, device) -> SeedGroupPlan(size, reason)
    group_fits(compiled_step, device) -> (fits, reason)      # the group program's own XLA memory analysis

- On a CPU, one seed per program: vmapping seeds was slower there both times it was measured on 2 cores
  (CartpoleBalance quick, 8 seeds x 512 environments: 0.90x, `benchmarks/seeds_vmap.py`; the mdl_vs_ood study's
  gridworld, 2 seeds x 256 environments: 19 s of training for the pair against 7 to 9 s per seed alone). XLA's
  CPU code for the batched program is no faster per environment, and the cores are busy either way.
- On a GPU, as many seeds as the device's memory holds: the solo plan's predicted bytes (XLA's analysis of the
  iteration, or the estimate read from the lowered iteration where that decided the plan) times the seeds, with
  the planner's safety margin. Before the group trains, its compiled program's own analysis is checked against
  the same budget (`group_fits`), and the group is halved if it does not fit.
- A run split over several devices (`run.devices`) trains its seeds one after another.
- The manifest's `seeds_per_program` (or `--seeds-per-program`) overrides all of this.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rlfit.hardware.probe import DeviceInfo
from rlfit.planning.budget import SAME_BACKEND_MARGIN
from rlfit.planning.plan import PlanExtra
from rlfit.hardware.units import format_bytes


class SeedGroupPlan(NamedTuple):
    """How many seeds go in one program, and why."""

    size: int
    """Seeds per compiled program (1: one after another)."""
    reason: str


def seeds_per_program(plan: Any, num_seeds: int, requested: int | None, device: DeviceInfo) -> SeedGroupPlan:
    """The seeds per program for `num_seeds` seeds of a config planned as `plan` (`requested`: the manifest's
    `seeds_per_program`, None for auto)."""
    if requested is not None:
        size = max(1, min(requested, num_seeds))
        return SeedGroupPlan(size, f"seeds_per_program: {requested} (the manifest's)")
    if plan.devices > 1:
        return SeedGroupPlan(1, f"each run is split over {plan.devices} devices; seeds train one after another")
    if plan.backend == "cpu":
        return SeedGroupPlan(1, "on a CPU seeds train one after another: one program of several seeds measured slower "
                                "(rlfit.planning.seed_groups)")
    budget = device.budget_bytes
    if budget is None or not plan.predicted_bytes:
        return SeedGroupPlan(num_seeds, f"all {num_seeds} seeds in one program (no memory prediction for one seed); "
                                        "checked on the compiled program's analysis before training")
    per_seed = plan.predicted_bytes * SAME_BACKEND_MARGIN
    size = max(1, min(num_seeds, int(budget // per_seed)))
    model = PlanExtra.from_json(plan.extra or {}).memory_model or {}
    lowered = model.get("source") == "lowered"  # the estimate from the lowered step, not XLA's figure
    return SeedGroupPlan(size, f"{size} seed(s) per program: one seed is {'estimated' if lowered else 'predicted'} at "
                               f"{format_bytes(per_seed)} with the x{SAME_BACKEND_MARGIN:g} margin, against a budget "
                               f"of {format_bytes(budget)}")


def group_fits(compiled_step: Any, device: DeviceInfo) -> tuple[bool, str]:
    """Whether a compiled group step's XLA memory analysis, with the safety margin, fits `device`'s budget (true
    when either is unknown: the out-of-memory fallback still guards)."""
    from rlfit.planning.memory_model import point_from_analysis

    analysis = compiled_step.memory_analysis()
    if analysis is None or device.budget_bytes is None:
        return True, "no memory analysis or budget to check"
    needed = point_from_analysis(None, analysis).total_bytes * SAME_BACKEND_MARGIN
    fits = needed <= device.budget_bytes
    return fits, (f"the group's program needs {format_bytes(needed)} with the x{SAME_BACKEND_MARGIN:g} margin; "
                  f"budget {format_bytes(device.budget_bytes)}")
