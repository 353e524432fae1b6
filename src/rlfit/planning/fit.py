"""What fits: the candidates' predicted bytes against the budget and the algorithm's choice, for a memory model that
is given (compiles nothing):

    memory model (`rlfit.planning.memory_model`: bytes = intercept + per env * num_envs + per transition * stored
    transitions, or a bound from one size: XLA's analysis of it, or the estimate read from its lowered program)
    + budget (`rlfit.planning.budget`)
        -> the algorithm's rules (`Algorithm.memory`) judge each candidate (predicted bytes with margin <= budget?)
        -> MemoryPlan(candidates, requested, chosen, reasons)

PPO chooses the most environments that fit; SAC the largest replay buffer (`rlfit.algos.<name>.planning`). How the
model is measured is `rlfit.planning.measure`; the device, its budget and the Plan are `rlfit.planning.device_plan`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rlfit.algos.contract import Candidate
from rlfit.config.schema import Config
from rlfit.hardware.units import format_bytes
from rlfit.planning.budget import Budget, margin_for, num_envs_cap
from rlfit.planning.memory_model import MemoryModel
from rlfit.planning.plan import config_sizes


@dataclass(frozen=True)
class MemoryPlan:
    """Everything `rlfit plan` shows: the budget, every candidate, the choice and why."""

    budget: Budget
    margin: float
    model: MemoryModel
    candidates: tuple[Candidate, ...]
    requested: Candidate
    """The config's own sizes, predicted the same way."""
    chosen: Candidate | None
    reasons: tuple[str, ...]
    columns: tuple[str, ...]
    """The size fields that tell the candidates apart (the algorithm's)."""
    nothing_fits: str
    """One line for when `chosen` is None."""
    config: Config | None = None
    """The config planned: the one given, with `network.encoder=auto` resolved where the planner chose it."""
    devices: int = 1
    """Devices the run is split over; every byte figure is per device (`memory_plan_from_model`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.budget.device, "target_backend": self.budget.target_backend, "devices": self.devices,
                "budget_bytes": self.budget.budget_bytes, "margin": self.margin,
                "candidates": [c.to_dict() for c in self.candidates], "requested": self.requested.to_dict(),
                "chosen": self.chosen.to_dict() if self.chosen else None, "reasons": list(self.reasons),
                "memory_model": self.model.to_dict(),
                **({"encoder": self.config.network.encoder} if self.config is not None and
                   self.config.env.observation == "pixels" else {})}


def predict(model: MemoryModel, sizes: Any, transitions: int, margin: float, budget_bytes: int) -> Candidate:
    """`sizes` (storing `transitions`) judged against the budget: fitted bytes, bytes with margin, fits or not."""
    estimate = max(model.estimate(sizes.num_envs, transitions), 0)
    predicted = math.ceil(estimate * margin)
    return Candidate(sizes, estimate, predicted, predicted <= budget_bytes)


def memory_plan_from_model(config: Config, model: MemoryModel, budget: Budget,
                           cpu_cores: int | None = None, devices: int = 1) -> MemoryPlan:
    """The candidates, their predictions and the choice for a fitted model and a budget (compiles nothing).

    `cpu_cores` (default: this process's) sets the cap on environments when the target is a CPU. Over `devices`
    (`rlfit.parallel.mesh`) the sizes stay totals and are judged per device: one device runs num_envs / devices
    environments and stores 1 / devices of the transitions beside a whole copy of the parameters (the model's
    intercept), against one device's budget (a CPU's devices share one budget); a total that does not split
    evenly does not fit.
    """
    from rlfit.algos.registry import algorithm

    rules = algorithm(config.algo).memory
    margin, margin_reason = margin_for(model.backend, budget.target_backend, model.source)
    cap = num_envs_cap(budget.target_backend, cpu_cores)
    shared = budget.target_backend == "cpu" and devices > 1
    device_budget = budget.budget_bytes // devices if shared else budget.budget_bytes

    def judge(sizes: Any) -> Candidate:
        one_device = sizes._replace(num_envs=max(1, sizes.num_envs // devices))
        candidate = predict(model, one_device, rules.stored_transitions(sizes) // devices, margin, device_budget)
        return dataclasses.replace(candidate, sizes=sizes, fits=candidate.fits and sizes.num_envs % devices == 0)

    requested = judge(config_sizes(config))
    choice = rules.choose(config, judge, cap)
    reasons = list(budget.reasons) + [margin_reason, _fit_reason(model)]
    reasons.append(f"the config's sizes are predicted at {'most ' if model.measured_once else ''}"
                   f"{format_bytes(requested.predicted_bytes)}: "
                   f"{'fits' if requested.fits else 'does not fit'}")
    reasons += choice.reasons
    if devices > 1:
        reasons.append(f"split over {devices} devices: each runs num_envs / {devices} environments beside a copy of "
                       f"the parameters; bytes are per device"
                       + (f", against 1/{devices} of the CPU's budget" if shared else ""))
    reasons.append("the evaluation program runs apart and is not included"
                   + ("; the trainer uses one device" if devices == 1 else ""))
    smallest = choice.smallest
    described = " ".join(f"{c}={getattr(smallest.sizes, c)}" for c in rules.columns)
    nothing_fits = (f"no configuration fits the budget of {format_bytes(budget.budget_bytes)}: even {described} "
                    f"is predicted at {format_bytes(smallest.predicted_bytes)}; {choice.fix}")
    return MemoryPlan(budget, margin, model, choice.candidates, requested, choice.chosen, tuple(reasons),
                      rules.columns, nothing_fits, devices=devices)


def _fit_reason(model: MemoryModel) -> str:
    def point(p: Any) -> str:
        stored = f" storing {p.transitions:,}" if p.transitions else ""
        return f"{p.sizes.num_envs} envs{stored}: {format_bytes(p.total_bytes)}"

    if model.source == "lowered":
        return (f"memory estimated at one size without compiling, {point(model.points[0])} (the lowered step's "
                "values alive at once, with XLA's expected fusion; within 10% of XLA's CPU analysis for the DM "
                "Control PPO steps measured, more for G1): with the margin it fits, so nothing was compiled for "
                "planning; every other figure is a bound from it (`rlfit plan --fit-line` compiles the step and fits XLA's line)")
    if model.measured_once:
        return (f"memory measured at one size, {point(model.points[0])} (XLA's analysis of what training runs when "
                "memory does not limit): it fits, so no other size was compiled; every other figure is a bound "
                "from it (no more at fewer environments or a smaller buffer, at most in proportion at more; "
                "`rlfit plan --fit-line` fits the line through a second size)")
    stored = (f" + {model.bytes_per_transition:,.0f} B per stored transition" if model.bytes_per_transition
              else "")
    return (f"memory = {format_bytes(model.intercept_bytes)} + {format_bytes(model.bytes_per_env)} per env{stored} "
            f"(fitted to XLA's analysis at {', '.join(point(p) for p in model.points)}"
            + ("; the first is what training runs when memory does not limit, and `--num-envs auto` compiles it as "
               "training does, so that training reuses it when chosen; the others are compile-only probes at sizes "
               "never chosen)" if model.first_is_unlimited_choice else
               ": compile-only probes at sizes never chosen, so training compiles no size twice)"))
