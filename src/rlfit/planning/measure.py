"""How the step's memory is measured: the cheapest memory model that decides the plan, asked of a `StepMeasurer`,
what the planner needs from the code that can build and compile the training step, and nothing more:

    measurer.estimate(config, sizes) -> MemoryPoint | None     # read from the lowered step: no compile
    measurer.analyze(config, probes, as_training) -> points   # XLA's analysis of the compiled step at each size
    measurer.env                                               # the environment it loaded (None: none yet)

`rlfit.run.probes.StepProbes` is the one rlfit hands in (planning cannot import `rlfit.run`, which builds the
learner); this module decides which measure to ask for and what it means (`deciding_model`):

    1. estimate: the step at the sizes the rules choose when memory does not limit, estimated from its lowered
               program (no compile): where the estimate with the margin fits, those sizes are the choice;
    2. alone:  XLA's analysis of that step alone (for training to reuse): where it fits, the choice is made;
    3. line:   the algorithm's other probes compiled and the line fitted through XLA's points.

Each step runs only where the one before does not choose its own point. What fits a given model (candidates,
predictions, the choice) is `rlfit.planning.fit.memory_plan_from_model`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from rlfit.algos.contract import Candidate, Sizes
from rlfit.config.schema import Config
from rlfit.hardware.units import format_bytes
from rlfit.planning.budget import Budget, num_envs_cap
from rlfit.planning.fit import MemoryPlan, memory_plan_from_model
from rlfit.planning.memory_model import MemoryModel, MemoryPoint, fit_coefficients


class StepMeasurer(Protocol):
    """Measures the training step of a config at given sizes without running it (`rlfit.run.probes.StepProbes`).
    It loads the environment once, on its first measure, and keeps it (`env`) for training to build on."""

    say: Callable[[str], None] | None
    """Hears what the planner decides and the measurer compiles (a console's line printer), or None."""

    @property
    def env(self) -> Any | None:
        """The environment loaded for measuring (None where nothing was measured)."""

    def estimate(self, config: Config, sizes: Sizes) -> MemoryPoint | None:
        """The step's memory at `sizes` estimated from its lowered program (traced, not compiled; XLA's fusion
        modelled, `rlfit.hardware.program_memory.ProgramBound.estimate_bytes`); None where the program holds a value
        of no static size. The lowered program is kept for a compile of the same sizes that may follow."""

    def analyze(self, config: Config, probes: Sequence[Sizes], as_training: Sizes | None = None
                ) -> tuple[MemoryPoint, ...]:
        """XLA's memory analysis of the step compiled at each of `probes` (in order); the one at `as_training`
        compiled with training's own options, so that training reuses it from the compile cache."""


def described(config: Config, sizes: Sizes) -> str:
    """`num_envs=512`, and the transitions stored at `sizes` where the algorithm stores any
    (`MemoryRules.stored_transitions`)."""
    from rlfit.algos.registry import algorithm

    stored = algorithm(config.algo).memory.stored_transitions(sizes)
    return f"num_envs={sizes.num_envs}" + (f" storing {stored:,} transitions" if stored else "")


ESTIMATE_OVER_XLA_AT_MOST = 1.75
"""How far above XLA's analysis the estimate from the lowered step can be expected to lie (at most 1.51x on the CPU
steps measured: G1's randomized step at 8 environments; Playground's DM Control PPO steps within 10%,
benchmarks/trace_bound.py). Where even the estimate divided by this does not fit the budget, XLA's analysis of that
size is not expected to fit either, so the planner does not compile that size alone first (a wrong
guess costs a compile, never a wrong choice)."""


class Target(NamedTuple):
    """What one config is planned for (`rlfit.planning.device_plan.memory_plan` resolves it from a `PlanRequest`)."""

    budget: Budget
    devices: int
    """Devices the run is split over; every byte figure is per device."""
    for_training: bool = False
    """Training follows on this process (on one device): the probe at the sizes chosen when memory does not limit
    compiles with training's options, so training reads its step from the persistent compile cache."""
    fit_lines: bool = False
    """Compile every probe and fit the line whatever one size gives (`rlfit plan --fit-line`)."""


def deciding_model(config: Config, known: MemoryModel | None, target: Target,
                   measurer: StepMeasurer) -> tuple[MemoryModel, MemoryPlan]:
    """(the cheapest model that decides the plan for `target`, the plan from it), starting from `known` (a model
    made for another budget, or None): the estimate, else XLA's analysis of one size, else the line (module doc)."""
    model = known if known is not None or target.fit_lines else estimated(config, target, measurer)
    if model is not None:
        planned = plan_from(config, model, target)
        if not model.measured_once or chose_the_first_probe(planned):
            if model.source == "lowered":
                _say(measurer, f"planning: {described(config, model.points[0].sizes)} is estimated at "
                     f"{format_bytes(model.points[0].total_bytes)} without compiling: it fits the budget of "
                     f"{format_bytes(target.budget.budget_bytes)}")
            return model, planned
    if model is None or model.source == "lowered":
        model, planned = first_compile(config, model, target, measurer)
        if not model.measured_once or chose_the_first_probe(planned):
            return model, planned
    _say(measurer, f"planning: {described(config, model.points[0].sizes)} does not fit the budget of "
         f"{format_bytes(target.budget.budget_bytes)}: compiling another size to fit the memory line")
    model = fit_line(config, model, measurer, target.budget.target_backend)
    return model, plan_from(config, model, target)


def estimated(config: Config, target: Target, measurer: StepMeasurer) -> MemoryModel | None:
    """Step 1: the model estimated at the sizes the rules choose when memory does not limit (within the target's
    cap), from the lowered step (no compile); None where the rules choose nothing or the step cannot be estimated."""
    likely = unlimited_choice(config, num_envs_cap(target.budget.target_backend))
    if likely is None:
        return None
    point = measurer.estimate(config, likely)
    if point is None:
        return None
    return MemoryModel.from_one_point(point, _backend(), first_is_unlimited_choice=True, source="lowered")


def first_compile(config: Config, lowered: MemoryModel | None, target: Target,
                  measurer: StepMeasurer) -> tuple[MemoryModel, MemoryPlan]:
    """Step 2, where the estimate from the lowered step (`lowered`, if any) did not decide: XLA's analysis of the
    sizes chosen when memory does not limit, alone (`measured_alone`), where those sizes are the algorithm's first
    probe (a CPU; SAC, FastTD3) or where the estimate leaves hope that XLA's figure fits (`may_fit_by_xla`: PPO's
    largest candidate on an accelerator); else, or with `fit_lines`, every probe at once and the line (`fit_memory_model`)."""
    if lowered is not None:
        _say(measurer, f"planning: the estimate at {described(config, lowered.points[0].sizes)}, "
             f"{format_bytes(lowered.points[0].total_bytes)}, does not fit the budget of "
             f"{format_bytes(target.budget.budget_bytes)}: compiling for XLA's analysis")
    from rlfit.algos.registry import algorithm

    cap = num_envs_cap(target.budget.target_backend)
    likely = unlimited_choice(config, cap)
    first_probe = algorithm(config.algo).memory.measured_sizes(config, cap)[0] == likely
    hopeful = lowered is not None and may_fit_by_xla(config, lowered, target.budget, target.devices)
    if target.fit_lines or likely is None or not (first_probe or hopeful):
        model = fit_memory_model(config, measurer, target.budget.target_backend, for_training=target.for_training)
    else:
        model = measured_alone(config, likely, measurer, target.for_training)
    return model, plan_from(config, model, target)


def fit_memory_model(config: Config, measurer: StepMeasurer, target_backend: str | None = None,
                     for_training: bool = False) -> MemoryModel:
    """XLA's analysis of the step at the algorithm's probe sizes for `target_backend` (default: this process's; a
    CPU target caps the environments, `num_envs_cap`), and the line fitted through it. One compile per probe (side
    by side). `for_training`: the probe at the sizes the rules choose when memory does not limit compiles with
    training's options, so training, when it runs those sizes, reads its step from the persistent compile cache."""
    from rlfit.algos.registry import algorithm

    cap = num_envs_cap(target_backend or _backend())
    probes = algorithm(config.algo).memory.measured_sizes(config, cap)
    likely = unlimited_choice(config, cap)
    points = measurer.analyze(config, probes, likely if for_training else None)
    return MemoryModel(*fit_coefficients(points), points, _backend(), first_is_unlimited_choice=probes[0] == likely)


def unlimited_choice(config: Config, cap: int | None) -> Any:
    """The sizes the algorithm's rules choose when memory does not limit (every candidate fits), within `cap`; None
    when they choose nothing. The probe at these sizes is the one training may reuse (`deciding_model`)."""
    from rlfit.algos.registry import algorithm

    choice = algorithm(config.algo).memory.choose(config, lambda sizes: Candidate(sizes, 0, 0, True), cap)
    return choice.chosen.sizes if choice.chosen is not None else None


def measured_alone(config: Config, sizes: Sizes, measurer: StepMeasurer, for_training: bool) -> MemoryModel:
    """The model measured once: XLA's analysis of the step at `sizes`, the rules' choice when memory does not limit
    (with training's options, and training's starting state beside it, under `for_training`)."""
    point = measurer.analyze(config, [sizes], sizes if for_training else None)[0]
    return MemoryModel.from_one_point(point, _backend(), first_is_unlimited_choice=True)


def fit_line(config: Config, model: MemoryModel, measurer: StepMeasurer,
             target_backend: str | None = None) -> MemoryModel:
    """Step 3: `model` measured once, completed: the algorithm's probes not yet measured compiled (as probes) and
    the line fitted through them and the first point. A fitted model is returned as it is."""
    from rlfit.algos.registry import algorithm

    if not model.measured_once:
        return model
    probes = algorithm(config.algo).memory.measured_sizes(config, num_envs_cap(target_backend or _backend()))
    measured = [point.sizes for point in model.points]
    points = model.points + measurer.analyze(config, [p for p in probes if p not in measured])
    intercept, per_env, per_transition = fit_coefficients(points)
    return dataclasses.replace(model, intercept_bytes=intercept, bytes_per_env=per_env,
                               bytes_per_transition=per_transition, points=points)


def may_fit_by_xla(config: Config, estimated_model: MemoryModel, budget: Budget, devices: int) -> bool:
    """Whether XLA's analysis of the estimated size may fit `budget`: the plan from the estimate divided by
    ESTIMATE_OVER_XLA_AT_MOST chooses that size."""
    point = estimated_model.points[0]
    hopeful = point.total_bytes / ESTIMATE_OVER_XLA_AT_MOST
    scaled = dataclasses.replace(point, temp_bytes=math.ceil(hopeful) - point.argument_bytes - point.output_bytes)
    optimistic = dataclasses.replace(estimated_model, points=(scaled,))
    return chose_the_first_probe(memory_plan_from_model(config, optimistic, budget, devices=devices))


def chose_the_first_probe(planned: MemoryPlan) -> bool:
    """Whether `planned` chose the sizes of its model's first probe (so a model measured there alone decides)."""
    return planned.chosen is not None and planned.chosen.sizes == planned.model.points[0].sizes


def plan_from(config: Config, model: MemoryModel, target: Target) -> MemoryPlan:
    """The plan the model gives for `target` (compiles nothing)."""
    return memory_plan_from_model(config, model, target.budget, devices=target.devices)


def _say(measurer: StepMeasurer, line: str) -> None:
    if measurer.say is not None:
        measurer.say(line)


def _backend() -> str:
    import jax

    return jax.default_backend()
