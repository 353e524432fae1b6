"""Choose the largest valid configuration that fits the device: config + device -> sizes, precision, reasons.

    probe (or --device-memory) -> budget;  compile the step at the algorithm's measured sizes -> memory model
    (bytes = intercept + per env * num_envs + per transition * stored transitions);
    the algorithm's rules (`Algorithm.memory`) judge candidates with it (predicted bytes with margin <= budget?)
    and choose -> Plan(sizes, predicted_bytes, reasons)

PPO chooses the most environments that fit; SAC the largest replay buffer (`rlfit.algos.<name>.planning`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from rlfit.config import Config
from rlfit.errors import UserError
from rlfit.plan import Plan, config_sizes, make_plan
from rlfit.hardware.probe import DeviceInfo, usable_cores
from rlfit.planning.budget import Budget, cpu_max_num_envs, local_budget, margin_for, stated_budget
from rlfit.planning.memory import MemoryModel, fit_memory_model
from rlfit.planning.units import format_bytes, parse_size

@dataclass(frozen=True)
class Candidate:
    """One configuration the planner considered."""

    sizes: Any
    """The algorithm's sizes NamedTuple."""
    estimate_bytes: int
    """Fitted device bytes of one iteration."""
    predicted_bytes: int
    """`estimate_bytes` times the safety margin; what is compared with the budget."""
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.sizes._asdict(), "estimate_bytes": self.estimate_bytes, "predicted_bytes": self.predicted_bytes,
                "fits": self.fits}


class Choice(NamedTuple):
    """What an algorithm's rules (`MemoryRules.choose`) make of the candidates."""

    candidates: tuple[Candidate, ...]
    """The candidates worth showing, smallest first."""
    chosen: Candidate | None
    reasons: tuple[str, ...]
    smallest: Candidate
    """The smallest configuration the rules allow (named when nothing fits)."""
    fix: str
    """What to change when nothing fits."""


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

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.budget.device, "target_backend": self.budget.target_backend,
                "budget_bytes": self.budget.budget_bytes, "margin": self.margin,
                "candidates": [c.to_dict() for c in self.candidates], "requested": self.requested.to_dict(),
                "chosen": self.chosen.to_dict() if self.chosen else None, "reasons": list(self.reasons),
                "memory_model": self.model.to_dict()}


def predict(model: MemoryModel, sizes: Any, transitions: int, margin: float, budget_bytes: int) -> Candidate:
    """`sizes` (storing `transitions`) judged against the budget: fitted bytes, bytes with margin, fits or not."""
    estimate = max(model.estimate(sizes.num_envs, transitions), 0)
    predicted = math.ceil(estimate * margin)
    return Candidate(sizes, estimate, predicted, predicted <= budget_bytes)


def memory_plan_from_model(config: Config, model: MemoryModel, budget: Budget,
                           cpu_cores: int | None = None) -> MemoryPlan:
    """The candidates, their predictions and the choice for a fitted model and a budget (compiles nothing).

    `cpu_cores` (default: this process's) sets the cap on environments when the target is a CPU.
    """
    from rlfit.algos.registry import algorithm

    rules = algorithm(config.algo).memory
    margin, margin_reason = margin_for(model.backend, budget.target_backend)
    cores = cpu_cores or usable_cores()
    cap = cpu_max_num_envs(cores) if budget.target_backend == "cpu" else None

    def judge(sizes: Any) -> Candidate:
        return predict(model, sizes, rules.stored_transitions(sizes), margin, budget.budget_bytes)

    requested = judge(config_sizes(config))
    choice = rules.choose(config, judge, cap)
    reasons = list(budget.reasons) + [margin_reason, _fit_reason(model)]
    reasons.append(f"the config's sizes are predicted at {format_bytes(requested.predicted_bytes)}: "
                   f"{'fits' if requested.fits else 'does not fit'}")
    reasons += choice.reasons
    reasons.append("the evaluation program runs apart and is not included; the trainer uses one device")
    smallest = choice.smallest
    described = " ".join(f"{c}={getattr(smallest.sizes, c)}" for c in rules.columns)
    nothing_fits = (f"no configuration fits the budget of {format_bytes(budget.budget_bytes)}: even {described} "
                    f"is predicted at {format_bytes(smallest.predicted_bytes)}; {choice.fix}")
    return MemoryPlan(budget, margin, model, choice.candidates, requested, choice.chosen, tuple(reasons),
                      rules.columns, nothing_fits)


def memory_plan(config: Config, device_memory: int | str | None = None, target_backend: str | None = None,
                env: Any = None, device: DeviceInfo | None = None, model: MemoryModel | None = None) -> MemoryPlan:
    """Probes the device (unless given), fits the memory model (two compiles, unless given) and plans.

    `device_memory` plans for a device of that size instead of this one; `target_backend` ('gpu' or 'cpu')
    is the backend that device computes on (default: this process's).
    """
    from rlfit.hardware.probe import probe_device

    device = device or probe_device()
    local = device if device.jax_uses_it else _cpu_device(device)
    if device_memory is None:
        budget = local_budget(local)
    else:
        budget = stated_budget(parse_size(device_memory), target_backend or local.jax_backend, local)
    model = model or fit_memory_model(config, env)
    return memory_plan_from_model(config, model, budget)


def check_precision(precision: str, device: DeviceInfo) -> None:
    """Refuses bf16 on a device without native bf16 (e.g. T4, V100) with the fix in the message."""
    if precision == "bf16" and device.bf16 is False:
        raise UserError(f"run.precision=bf16 needs a GPU with bf16 (compute capability 8.0+, e.g. A100, L4, RTX 30xx "
                        f"or newer); {device.name} has compute capability {device.compute_capability or 'unknown'}: "
                        "set run.precision=fp32")


def check_device_precision(precision: str) -> DeviceInfo:
    """Probes this process's device and runs `check_precision` on it (as `train` and `resume` both do)."""
    from rlfit.hardware.probe import probe_device

    device = probe_device()
    check_precision(precision, device if device.jax_uses_it else _cpu_device(device))
    return device


def plan_for(config: Config, device_memory: int | str | None = None, auto_num_envs: bool = False) -> Plan:
    """The Plan for a run on this process's device.

    Without `auto_num_envs` the config's sizes run as given (with `device_memory`, their predicted bytes are
    recorded too). With it, the largest valid configuration predicted to fit the budget (this device's, or
    `device_memory` bytes, e.g. '12GiB') runs. Raises UserError for bf16 on a device without it, a bad size,
    or when nothing fits.
    """
    device = check_device_precision(config.run.precision)
    if not auto_num_envs and device_memory is None:
        return make_plan(config)
    from rlfit.jax_setup import configure_jax

    configure_jax(config.run.precision)  # the same settings (and compile cache) the run will use
    planned = memory_plan(config, device_memory, None, device=device)
    extra = {"budget_bytes": planned.budget.budget_bytes, "margin": planned.margin,
             "memory_model": planned.model.to_dict()}
    if not auto_num_envs:
        return dataclasses.replace(make_plan(config, reasons=("sizes from the config",) + planned.reasons),
                                   predicted_bytes=planned.requested.predicted_bytes, extra=extra)
    if planned.chosen is None:
        raise UserError(planned.nothing_fits)
    reasons = ("num_envs auto: sizes chosen by the memory planner",) + planned.reasons
    return dataclasses.replace(make_plan(config, planned.chosen.sizes, reasons),
                               predicted_bytes=planned.chosen.predicted_bytes, extra=extra)


def _fit_reason(model: MemoryModel) -> str:
    def point(p: Any) -> str:
        stored = f" storing {p.transitions:,}" if p.transitions else ""
        return f"{p.sizes.num_envs} envs{stored}: {format_bytes(p.total_bytes)}"

    stored = (f" + {model.bytes_per_transition:,.0f} B per stored transition" if model.bytes_per_transition
              else "")
    return (f"memory = {format_bytes(model.intercept_bytes)} + {format_bytes(model.bytes_per_env)} per env{stored} "
            f"(fitted to XLA's analysis at {', '.join(point(p) for p in model.points)})")


def _cpu_device(device: DeviceInfo) -> DeviceInfo:
    """The CPU as the device, for a machine whose GPU JAX cannot use."""
    from rlfit.hardware.probe import cpu_info

    notes = list(device.notes) + [f"{device.name} was found but JAX computes on the CPU; planning for the CPU"]
    return cpu_info(device.jax_backend, device.jax_version, device.xla, notes)
