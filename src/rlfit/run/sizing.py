"""Sizing a run to its device: the cheapest measure of the algorithm's step that decides the plan (a bound read
from its lowered program, no compile; else XLA's analysis of one size; else the line through a few sizes,
`rlfit.run.probes`), the memory model it gives (`rlfit.planning.memory`), and the planner's choice
(`rlfit.planning.planner`).

This is the part of planning that builds and compiles the learner (`rlfit.run.build`); the planner itself only
reasons about numbers."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax

from rlfit.algos.registry import algorithm
from rlfit.config.schema import Config
from rlfit.envs import load_env
from rlfit.errors import UserError
from rlfit.hardware.jax_setup import configure_jax
from rlfit.hardware.probe import DeviceInfo, probe_device
from rlfit.hardware.units import format_bytes, parse_size
from rlfit.planning.budget import Budget, local_budget, stated_budget
from rlfit.planning.memory import MemoryModel, fit_coefficients
from rlfit.planning.plan import Plan, PlanExtra, make_plan
from rlfit.planning.planner import (MemoryPlan, check_device_precision, cpu_device, encoder_candidates,
                                    memory_plan_from_model, num_envs_cap, planned_device_count, unlimited_choice)
from rlfit.run.build import Trainer
from rlfit.run.probes import analyze_probes, bound_model, described, measured_alone


def planning_message(text: str) -> None:
    """A line of the planner's (what it compiles) on standard error, where the console writes once training starts."""
    import sys

    print(text, file=sys.stderr, flush=True)


def fit_memory_model(config: Config, env: Any = None, target_backend: str | None = None,
                     for_training: bool = False, say: Callable[[str], None] | None = None,
                     lowered: dict[Any, tuple[Any, Trainer]] | None = None) -> MemoryModel:
    """Compiles the step at the algorithm's probe sizes for `target_backend` (default: this process's; a CPU target
    caps the environments, `num_envs_cap`) and fits the model through the results.

    `env` is the loaded environment (loaded once here when None). Takes one compile per probe (side by side).
    `for_training` (`train --num-envs auto` on one device): the probe at the sizes the rules choose when memory does
    not limit compiles with training's options, so training, when it runs those sizes, reads its step from the
    persistent compile cache instead of compiling it again. `lowered`: programs already lowered, by sizes
    (`analyze_probes`). (`deciding_model` measures that size alone first where that may decide.)
    """
    env = env if env is not None else load_env(config.env, jax.default_backend())
    cap = num_envs_cap(target_backend or jax.default_backend())
    probes = algorithm(config.algo).memory.measured_sizes(config, cap)
    likely = unlimited_choice(config, cap)
    as_training = likely if for_training else None
    points = analyze_probes(config, probes, env, as_training=as_training, say=say, lowered=lowered)
    return MemoryModel(*fit_coefficients(points), points, jax.default_backend(),
                       first_is_unlimited_choice=probes[0] == likely)


BOUND_OVER_XLA_AT_MOST = 2.0
"""How far above XLA's analysis the bound from the lowered step can be expected to lie: at most 1.71x on the steps
measured (benchmarks/trace_bound.py). Where even the bound divided by this does not fit the budget, XLA's analysis
of that size is not expected to fit either, so the planner does not compile that size alone first (a wrong guess
costs a compile, never a wrong choice)."""


def may_fit_by_xla(config: Config, bounded: MemoryModel, budget: Budget, devices: int) -> bool:
    """Whether XLA's analysis of the bounded size may fit `budget`: the plan from the bound divided by
    BOUND_OVER_XLA_AT_MOST chooses that size."""
    point = bounded.points[0]
    hopeful = point.total_bytes / BOUND_OVER_XLA_AT_MOST
    scaled = dataclasses.replace(point, temp_bytes=math.ceil(hopeful) - point.argument_bytes - point.output_bytes)
    optimistic = dataclasses.replace(bounded, points=(scaled,))
    return chose_the_first_probe(memory_plan_from_model(config, optimistic, budget, devices=devices))


def fit_line(config: Config, model: MemoryModel, env: Any = None, target_backend: str | None = None,
             say: Callable[[str], None] | None = None) -> MemoryModel:
    """`model` measured once, completed: the algorithm's probes not yet measured compiled (as probes) and the line
    fitted through them and the first point. A fitted model is returned as it is."""
    if not model.measured_once:
        return model
    env = env if env is not None else load_env(config.env, jax.default_backend())
    probes = algorithm(config.algo).memory.measured_sizes(config, num_envs_cap(target_backend or
                                                                               jax.default_backend()))
    measured = [point.sizes for point in model.points]
    points = model.points + analyze_probes(config, [p for p in probes if p not in measured], env, say=say)
    return dataclasses.replace(model, **dict(zip(("intercept_bytes", "bytes_per_env", "bytes_per_transition"),
                                                 fit_coefficients(points), strict=True)), points=points)


def memory_plan(config: Config, device_memory: int | str | None = None, target_backend: str | None = None,
                env: Any = None, device: DeviceInfo | None = None,
                models: dict[str, MemoryModel] | None = None, devices: int | None = None,
                for_training: bool = False, fit_lines: bool = False,
                say: Callable[[str], None] | None = None) -> MemoryPlan:
    """Probes the device (unless given), fits the memory model (compiles, unless `models` holds it) and plans.

    `device_memory` plans for a device of that size instead of this one; `target_backend` ('gpu' or 'cpu')
    is the backend that device computes on (default: this process's). `models` caches fitted models by the
    planned config's `network.encoder` across calls (one fit serves every device size). With pixel
    observations and `network.encoder=auto` on an accelerator, R3D-18 is planned first and kept where some
    configuration of it fits; else the CPU's encoder for the frames (`encoder_candidates`). `devices` (default:
    `run.devices` on this process; a stated `device_memory` may name more devices than this machine has) is how
    many devices of that size the run is split over. `for_training`: training follows on this process
    (`fit_memory_model`; on one device only, where training's step is the probe's program).

    The model is the cheapest that decides (`deciding_model`): the bound read from the lowered step at the size the
    rules choose when memory does not limit (no compile); else XLA's analysis of that size alone; else the line
    through the algorithm's probes. A model from one size bounds the other sizes (`MemoryModel.estimate`).
    `fit_lines` compiles every probe and fits the line whatever one size gives (`rlfit plan --fit-line`). `say`
    (a console's, or None) hears what is bounded and compiled, and why.
    """
    device = device or probe_device()
    local = device if device.jax_uses_it else cpu_device(device)
    if device_memory is None:
        budget = local_budget(local)
    else:
        budget = stated_budget(parse_size(device_memory), target_backend or local.jax_backend, local)
    if devices is None:
        devices = planned_device_count(config.run.devices, stated=device_memory is not None)
    models = {} if models is None else models
    candidates = encoder_candidates(config, budget.target_backend)
    tried: list[MemoryPlan] = []
    for encoder in candidates:
        planned_config = config if encoder is None else config.replace(network={"encoder": encoder})
        key = planned_config.network.encoder
        models[key], planned = deciding_model(planned_config, models.get(key), budget, devices, env,
                                              for_training=for_training and devices == 1, fit_lines=fit_lines,
                                              say=say)
        tried.append(dataclasses.replace(planned, config=planned_config))
        if tried[-1].chosen is not None:
            break
    planned = tried[-1]
    if candidates == (None,):
        return planned
    first = tried[0]
    if planned is first:
        reason = (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} fits "
                  f"(predicted {format_bytes(first.chosen.predicted_bytes)})" if first.chosen else
                  f"network.encoder=auto on {budget.target_backend}: nothing fits, not even the smallest encoder")
    else:
        smallest = min(c.predicted_bytes for c in first.candidates)
        reason = (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} does not fit the "
                  f"budget of {format_bytes(budget.budget_bytes)} in any configuration (its smallest is predicted "
                  f"at {format_bytes(smallest)}); planned {planned.config.network.encoder} instead")
    return dataclasses.replace(planned, reasons=(reason,) + planned.reasons)


def deciding_model(config: Config, model: MemoryModel | None, budget: Budget, devices: int, env: Any,
                   for_training: bool, fit_lines: bool,
                   say: Callable[[str], None] | None) -> tuple[MemoryModel, MemoryPlan]:
    """(the cheapest model that decides the plan for `budget`, the plan from it), starting from `model` (one made for
    another budget, or None). In order, each step only where the one before does not choose its own point:

    1. the bound from the lowered step at the sizes chosen when memory does not limit (`bound_model`; skipped with
       `fit_lines`): if even the bound fits, those sizes are the choice and nothing compiles;
    2. XLA's analysis of that step alone (`measured_alone`), for training to reuse under `for_training`: where those
       sizes are the algorithm's first probe (a CPU; SAC, FastTD3), or where the bound leaves hope that XLA's figure
       fits (`may_fit_by_xla`: PPO's largest candidate on an accelerator);
    3. the algorithm's other probes compiled and the line fitted through XLA's points (`fit_line`), or all of them
       at once (`fit_memory_model`) where step 2 was skipped.
    """
    target = budget.target_backend
    lowered: dict[Any, tuple[Any, Trainer]] = {}
    if model is None and not fit_lines:
        env = env if env is not None else load_env(config.env, jax.default_backend())
        model, lowered = bound_model(config, env, target, say=say)
    if model is not None:
        planned = memory_plan_from_model(config, model, budget, devices=devices)
        if not model.measured_once or chose_the_first_probe(planned):
            if say is not None and model.source == "lowered":
                say(f"planning: {described(config, model.points[0].sizes)} is bounded at "
                    f"{format_bytes(model.points[0].total_bytes)} without compiling: it fits the budget of "
                    f"{format_bytes(budget.budget_bytes)}")
            return model, planned
    env = env if env is not None else load_env(config.env, jax.default_backend())  # once for every compile below
    if model is None or model.source == "lowered":
        if say is not None and model is not None:
            say(f"planning: the bound at {described(config, model.points[0].sizes)}, "
                f"{format_bytes(model.points[0].total_bytes)}, does not fit the budget of "
                f"{format_bytes(budget.budget_bytes)}: compiling for XLA's analysis")
        cap = num_envs_cap(target)
        likely = unlimited_choice(config, cap)
        first_probe = algorithm(config.algo).memory.measured_sizes(config, cap)[0] == likely
        hopeful = model is not None and may_fit_by_xla(config, model, budget, devices)
        if fit_lines or likely is None or not (first_probe or hopeful):
            model = fit_memory_model(config, env, target, for_training=for_training, say=say, lowered=lowered)
            return model, memory_plan_from_model(config, model, budget, devices=devices)
        model = measured_alone(config, likely, env, for_training, say=say, lowered=lowered)
        planned = memory_plan_from_model(config, model, budget, devices=devices)
        if chose_the_first_probe(planned):
            return model, planned
    if say is not None:
        say(f"planning: {described(config, model.points[0].sizes)} does not fit the budget of "
            f"{format_bytes(budget.budget_bytes)}: compiling another size to fit the memory line")
    model = fit_line(config, model, env, target, say=say)
    return model, memory_plan_from_model(config, model, budget, devices=devices)


def chose_the_first_probe(planned: MemoryPlan) -> bool:
    """Whether `planned` chose the sizes of its model's first probe (so a model measured there alone decides)."""
    return planned.chosen is not None and planned.chosen.sizes == planned.model.points[0].sizes


def plan_for(config: Config, device_memory: int | str | None = None,
             auto_num_envs: bool = False, say: Callable[[str], None] | None = None,
             shrink_to_fit: bool = False) -> tuple[Config, Plan]:
    """(the config to run, its Plan) on this process's device.

    Without `auto_num_envs` the config's sizes run as given (with `device_memory`, their predicted bytes are
    recorded too). With it, the largest valid configuration predicted to fit the budget (this device's, or
    `device_memory` bytes, e.g. '12GiB') runs. With `shrink_to_fit` (a preset chosen for an accelerator) the
    config's sizes run where they are predicted to fit, else the planner's choice. The config returned differs
    from the one given only where the planner resolved `network.encoder=auto` for pixels on an accelerator
    (`memory_plan`). Raises UserError for bf16 on a device without it, a bad size, or when nothing fits. `say`
    hears what the planner compiles.
    """
    device = check_device_precision(config.run.precision)
    encoder_choice = encoder_candidates(config, device.jax_backend if device.jax_uses_it else "cpu") != (None,)
    if not auto_num_envs and not shrink_to_fit and device_memory is None and not encoder_choice:
        return config, make_plan(config)

    configure_jax(config.run.precision)  # the same settings (and compile cache) the run will use
    planned = memory_plan(config, device_memory, None, device=device, for_training=auto_num_envs or shrink_to_fit,
                          say=say)
    config = planned.config
    extra = PlanExtra(budget_bytes=planned.budget.budget_bytes, margin=planned.margin,
                      memory_model=planned.model.to_dict()).to_json()
    if not auto_num_envs and (not shrink_to_fit or planned.requested.fits):
        return config, dataclasses.replace(make_plan(config, reasons=("sizes from the config",) + planned.reasons),
                                           predicted_bytes=planned.requested.predicted_bytes, extra=extra)
    if planned.chosen is None:
        raise UserError(planned.nothing_fits)
    reasons = ("num_envs auto: sizes chosen by the memory planner" if auto_num_envs else
               "the preset's sizes do not fit this device: sizes chosen by the memory planner",) + planned.reasons
    return config, dataclasses.replace(make_plan(config, planned.chosen.sizes, reasons),
                                       predicted_bytes=planned.chosen.predicted_bytes, extra=extra)
