"""The plan for a device, in one place: the device (its precision, how many, the encoder that suits it), its budget,
the model that decides (`rlfit.planning.measure`), what fits (`rlfit.planning.fit`), and the Plan. The training step
is measured by the `StepMeasurer` that `rlfit.run` hands in (`rlfit.run.probes.StepProbes`), which loads the
environment once; the result carries that environment so that training builds on it instead of loading it again.

    planned = plan_for(config, StepProbes(say), PlanRequest(device_memory, for_training=True), auto_num_envs=True)
    planned.config, planned.plan, planned.env
    memory_plan(config, measurer, PlanRequest(...), device, models) -> MemoryPlan   # what `rlfit plan` shows

The caller configures JAX (`rlfit.hardware.jax_setup.configure_jax`) once, before planning: the probes compile
with the settings, and into the compile cache, that training uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from rlfit.config.schema import Config
from rlfit.errors import UserError
from rlfit.hardware.probe import DeviceInfo, cpu_info, probe_device
from rlfit.hardware.units import format_bytes, parse_size
from rlfit.planning.budget import Budget, local_budget, stated_budget
from rlfit.planning.fit import MemoryPlan
from rlfit.planning.measure import StepMeasurer, Target, deciding_model
from rlfit.planning.memory_model import MemoryModel
from rlfit.planning.plan import Plan, PlanExtra, make_plan


class PlanRequest(NamedTuple):
    """What a plan is asked for, besides the config."""

    device_memory: int | str | None = None
    """Plan for a device of this many bytes (or a size such as '12GiB') instead of this process's."""
    target_backend: str | None = None
    """The backend of that device ('gpu' or 'cpu'; default: this process's)."""
    devices: int | None = None
    """Devices of that size the run is split over (default: `run.devices` on this process; a stated
    `device_memory` may name more devices than this machine has)."""
    for_training: bool = False
    """Training follows on this process (`rlfit.planning.measure.Target.for_training`; one device only)."""
    fit_lines: bool = False
    """Compile every probe and fit the line whatever one size gives (`rlfit plan --fit-line`)."""


class Planned(NamedTuple):
    """What `plan_for` decided, and what it loaded for it."""

    config: Config
    """The config to run: the one given, with `network.encoder=auto` resolved where the planner chose it."""
    plan: Plan
    env: Any | None
    """The environment loaded while planning (None where nothing was measured): training builds on it."""


def plan_for(config: Config, measurer: StepMeasurer, device_memory: int | str | None = None,
             auto_num_envs: bool = False, shrink_to_fit: bool = False) -> Planned:
    """The config to run and its Plan on this process's device, and the environment loaded for it.

    Without `auto_num_envs` the config's sizes run as given (with `device_memory`, their predicted bytes are
    recorded too). With it, the largest valid configuration predicted to fit the budget (this device's, or
    `device_memory` bytes, e.g. '12GiB') runs. With `shrink_to_fit` (a preset chosen for an accelerator) the
    config's sizes run where they are predicted to fit, else the planner's choice. The config returned differs
    from the one given only where the planner resolved `network.encoder=auto` for pixels on an accelerator
    (`memory_plan`). Raises UserError for bf16 on a device without it, a bad size, or when nothing fits.
    """
    device = check_device_precision(config.run.precision)
    encoder_choice = encoder_candidates(config, device.jax_backend if device.jax_uses_it else "cpu") != (None,)
    if not auto_num_envs and not shrink_to_fit and device_memory is None and not encoder_choice:
        return Planned(config, make_plan(config), measurer.env)
    request = PlanRequest(device_memory, for_training=auto_num_envs or shrink_to_fit)
    planned = memory_plan(config, measurer, request, device)
    config = planned.config or config  # the planner's config (set once it resolves)
    extra = PlanExtra(budget_bytes=planned.budget.budget_bytes, margin=planned.margin,
                      memory_model=planned.model.to_dict()).to_json()
    if not auto_num_envs and (not shrink_to_fit or planned.requested.fits):
        plan = make_plan(config, reasons=("sizes from the config",) + planned.reasons)
        return Planned(config, dataclasses.replace(plan, predicted_bytes=planned.requested.predicted_bytes,
                                                   extra=extra), measurer.env)
    if planned.chosen is None:
        raise UserError(planned.nothing_fits)
    reasons = ("num_envs auto: sizes chosen by the memory planner" if auto_num_envs else
               "the preset's sizes do not fit this device: sizes chosen by the memory planner",) + planned.reasons
    plan = make_plan(config, planned.chosen.sizes, reasons)
    return Planned(config, dataclasses.replace(plan, predicted_bytes=planned.chosen.predicted_bytes, extra=extra),
                   measurer.env)


def memory_plan(config: Config, measurer: StepMeasurer, request: PlanRequest = PlanRequest(),
                device: DeviceInfo | None = None, models: dict[str, MemoryModel] | None = None) -> MemoryPlan:
    """Probes the device (unless given), finds the model that decides (`deciding_model`; compiles only what it
    needs, unless `models` holds it) and plans.

    `models` caches models by the planned config's `network.encoder` across calls (one fit serves every device
    size). With pixel observations and `network.encoder=auto` on an accelerator, R3D-18 is planned first and kept
    where some configuration of it fits; else the CPU's encoder for the frames (`encoder_candidates`).
    """
    target = resolve_target(config, request, device or probe_device())
    models = {} if models is None else models
    candidates = encoder_candidates(config, target.budget.target_backend)
    tried: list[MemoryPlan] = []
    for encoder in candidates:
        planned_config = config if encoder is None else config.replace(network={"encoder": encoder})
        key = planned_config.network.encoder
        models[key], planned = deciding_model(planned_config, models.get(key), target, measurer)
        tried.append(dataclasses.replace(planned, config=planned_config))
        if tried[-1].chosen is not None:
            break
    if candidates == (None,):
        return tried[-1]
    return dataclasses.replace(tried[-1], reasons=(encoder_reason(tried, target.budget),) + tried[-1].reasons)


def resolve_target(config: Config, request: PlanRequest, device: DeviceInfo) -> Target:
    """The budget (this device's, or the stated `device_memory`'s), the devices and the options of `request`."""
    local = device if device.jax_uses_it else cpu_device(device)
    if request.device_memory is None:
        budget = local_budget(local)
    else:
        budget = stated_budget(parse_size(request.device_memory), request.target_backend or local.jax_backend, local)
    devices = request.devices
    if devices is None:
        devices = planned_device_count(config.run.devices, stated=request.device_memory is not None)
    return Target(budget, devices, for_training=request.for_training and devices == 1, fit_lines=request.fit_lines)


def encoder_reason(tried: list[MemoryPlan], budget: Budget) -> str:
    """Why `network.encoder=auto` planned the encoder it did (`tried`: the plans of each encoder tried, in order)."""
    first, planned = tried[0], tried[-1]
    assert first.config is not None and planned.config is not None, "each encoder's plan holds its config"
    if planned is first:
        return (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} fits "
                f"(predicted {format_bytes(first.chosen.predicted_bytes)})" if first.chosen else
                f"network.encoder=auto on {budget.target_backend}: nothing fits, not even the smallest encoder")
    smallest = min(c.predicted_bytes for c in first.candidates)
    return (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} does not fit the "
            f"budget of {format_bytes(budget.budget_bytes)} in any configuration (its smallest is predicted at "
            f"{format_bytes(smallest)}); planned {planned.config.network.encoder} instead")


def planned_device_count(requested: str, stated: bool) -> int:
    """Devices to plan for: `run.devices` (auto: this process's); more than this machine has only for a stated
    device (`--device-memory`: planning for another machine)."""
    import jax

    from rlfit.parallel.mesh import device_count, parse_devices

    if stated and (parsed := parse_devices(requested)) is not None:
        return parsed
    return device_count(requested, len(jax.devices()), jax.default_backend())


def encoder_candidates(config: Config, target_backend: str) -> tuple[str | None, ...]:
    """The encoders the planner tries in order: (None,) (the config's, resolved later) except for pixel
    observations with `network.encoder=auto` on an accelerator: R3D-18, then the CPU's choice for the frames."""
    from rlfit.networks.encoders import choose_encoder

    if config.env.observation != "pixels" or config.network.encoder != "auto" or target_backend == "cpu":
        return (None,)
    return (choose_encoder("auto", target_backend, config.env.frames),
            choose_encoder("auto", "cpu", config.env.frames))


def check_precision(precision: str, device: DeviceInfo) -> None:
    """Refuses bf16 on a device without native bf16 (e.g. T4, V100) with the fix in the message."""
    if precision == "bf16" and device.bf16 is False:
        raise UserError(f"run.precision=bf16 needs a GPU with bf16 (compute capability 8.0+, e.g. A100, L4, RTX 30xx "
                        f"or newer); {device.name} has compute capability {device.compute_capability or 'unknown'}: "
                        "set run.precision=fp32")


def check_device_precision(precision: str) -> DeviceInfo:
    """Probes this process's device and runs `check_precision` on it (as `train` and `resume` both do)."""
    from rlfit.hardware.probe import probe_device  # looked up when called (tests stand a T4 in for it)

    device = probe_device()
    check_precision(precision, device if device.jax_uses_it else cpu_device(device))
    return device


def cpu_device(device: DeviceInfo) -> DeviceInfo:
    """The CPU as the device, for a machine whose GPU JAX cannot use."""
    notes = list(device.notes) + [f"{device.name} was found but JAX computes on the CPU; planning for the CPU"]
    return cpu_info(device.jax_backend, device.jax_version, device.xla, notes)
