"""`rlfit plan ENV`: predict the memory of each candidate configuration and choose the largest that fits."""

from __future__ import annotations

import argparse
import json
import sys

from rlfit.cli.output import QUIET_HELP
from rlfit.cli.train import add_config_arguments, flag_overrides
from rlfit.config.schema import DEFAULT_ENV


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan", help="predict memory per configuration and choose the largest that fits",
        description="Predict the device memory of ENV's training step for candidate sizes (from XLA's "
                    "compile-time analysis, or a bound read from its lowered program; nothing is allocated) and choose "
                    "the largest that fits, by the algorithm's own rule (PPO: the most environments; SAC, "
                    "FastTD3: the largest replay buffer).")
    parser.add_argument("env", nargs="?", default=DEFAULT_ENV, metavar="ENV",
                        help=f"Playground environment name or module:factory (default: {DEFAULT_ENV})")
    add_config_arguments(parser)
    parser.add_argument("--device-memory", metavar="SIZE", nargs="+",
                        help="plan for a device with this much memory (e.g. 16GiB for a T4) instead of this one; "
                             "several sizes (e.g. 8GiB 16GiB 24GiB 80GiB) print one choice per size")
    parser.add_argument("--target", choices=("gpu", "cpu"),
                        help="backend of the --device-memory device (default: gpu)")
    parser.add_argument("--fit-line", action="store_true",
                        help="compile the step at two sizes and fit XLA's memory line even where a bound decides "
                             "(the step at the size chosen whenever memory does not limit, bounded from its lowered "
                             "program or measured once, fits), so that every size is predicted rather than bounded; "
                             "two compiles more")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP + "; the exit code says whether it fits")
    parser.add_argument("--json", action="store_true",
                        help="print the plan as one JSON object on stdout instead of the table, and nothing else "
                             "there ({\"plans\": [...]} for several sizes)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.errors import UserError
    from rlfit.hardware.units import parse_size

    if args.target and args.device_memory is None:
        raise UserError("--target describes the --device-memory device; pass --device-memory SIZE too")
    sizes = [parse_size(size) for size in args.device_memory] if args.device_memory is not None else [None]

    from rlfit.config.schema import resolve
    from rlfit.hardware.probe import probe_device
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.device_plan import check_precision
    from rlfit.planning.device_plan import PlanRequest, memory_plan
    from rlfit.run.probes import StepProbes, planning_message
    from rlfit.run.session import preset_for_device
    from rlfit.envs.randomization import resolve_randomization

    target = args.target or ("gpu" if sizes != [None] else None)
    preset = preset_for_device(args.env, args.preset, args.config, flag_overrides(args), backend=target)
    config = resolve(args.env, preset.name, args.config, flag_overrides(args))
    configure_jax(config.run.precision)
    device = probe_device()
    if sizes == [None]:
        check_precision(config.run.precision, device)
    models: dict = {}  # one fitted model per encoder serves every size: no more compiles
    say = planning_message if sys.stderr.isatty() and not args.quiet else None  # scripts see the output alone
    measurer = StepProbes(say)  # loads the environment once, for every size and the randomization's line
    plans = [memory_plan(config, measurer, PlanRequest(size, target, fit_lines=args.fit_line), device, models)
             for size in sizes]
    if len(plans) > 1:  # a later size may have needed the line: every size planned from the same model
        plans = [memory_plan(config, measurer, PlanRequest(size, target), device, models) for size in sizes]
    env = measurer.environment(config)
    randomization = resolve_randomization(config.env.randomization, config.env.name, env, 1)
    plans = [with_randomization_reason(planned, randomization) for planned in plans]
    if len(plans) > 1:
        if args.json or not args.quiet:
            print(json.dumps({"preset": preset._asdict(), "plans": [p.to_dict() for p in plans]}, indent=2)
                  if args.json else "\n".join([preset.reason, *comparison(plans, sizes, config.env.name)]))
        if all(p.chosen is None for p in plans):
            largest = max(plans, key=lambda p: p.budget.budget_bytes)
            print(f"rlfit: error: {largest.nothing_fits}", file=sys.stderr)
            return UserError.exit_code
        return 0
    planned = plans[0]
    if args.json:
        print(json.dumps({"preset": preset._asdict(), **planned.to_dict(), "randomization": randomization.to_dict()},
                         indent=2))
    elif not args.quiet:
        print("\n".join([preset.reason, *table(planned, config.env.name)]))
    if planned.chosen is None:
        print(f"rlfit: error: {planned.nothing_fits}", file=sys.stderr)
        return UserError.exit_code
    return 0


def with_randomization_reason(planned, randomization):
    """`planned` with a reason that says what the randomized model batch adds at the chosen sizes (counted in every
    prediction: the batch is part of the training step's arguments), or that the models are not randomized."""
    import dataclasses

    from rlfit.hardware.units import format_bytes

    if not randomization.enabled:
        return dataclasses.replace(planned, reasons=planned.reasons + (randomization.note,)) if randomization.note \
            else planned
    reason = randomization.note
    if planned.chosen is not None:
        num_envs = planned.chosen.sizes.num_envs
        reason += (f"; {format_bytes(num_envs * randomization.bytes_per_env)} at num_envs={num_envs}, counted in "
                   "the predictions")
    return dataclasses.replace(planned, reasons=planned.reasons + (reason,))


def comparison(plans, device_sizes: list[int], env_name: str) -> list[str]:
    """One line per device size: the budget it leaves and the configuration chosen for it."""
    from rlfit.hardware.units import format_bytes

    columns = plans[0].columns
    lines = [f"{env_name}: the planner's choice per device memory", ""]
    header = ["device memory", "   budget"] + [f"{c:>{len(c)}s}" for c in columns] + [f"{'predicted':>11s}"]
    lines.append("  ".join(header))
    for planned, device_size in zip(plans, device_sizes, strict=True):
        cells = [f"{format_bytes(device_size):>13s}", f"{format_bytes(planned.budget.budget_bytes):>9s}"]
        if planned.chosen is None:
            cells.append("nothing fits")
        else:
            cells += [f"{getattr(planned.chosen.sizes, c):>{len(c)}d}" for c in columns]
            cells.append(f"{format_bytes(planned.chosen.predicted_bytes):>11s}")
        lines.append("  ".join(cells))
    lines += ["", f"reasons, for {format_bytes(device_sizes[0])} "
                  "(for the other sizes only the budget and the choice differ):"]
    lines += [f"  - {reason}" for reason in plans[0].reasons]
    return lines

def table(planned, env_name: str) -> list[str]:
    """The guides' table: sizes, predicted memory, fits; then the choice and the reasons."""
    from rlfit.hardware.units import format_bytes

    budget, columns = planned.budget, planned.columns
    lines = [f"{env_name} on {budget.device}: budget {format_bytes(budget.budget_bytes)}", ""]
    predicted = "at most" if planned.model.measured_once else "predicted"  # bounds from one size
    header = [f"{c:>{len(c)}s}" for c in columns] + [f"{predicted:>11s}", "fits"]
    lines.append("  ".join(header))
    for candidate in planned.candidates:
        cells = [f"{getattr(candidate.sizes, c):>{len(c)}d}" for c in columns]
        cells += [f"{format_bytes(candidate.predicted_bytes):>11s}", "yes " if candidate.fits else "no  "]
        marks = []
        if planned.chosen is not None and candidate.sizes == planned.chosen.sizes:
            marks.append("<- chosen")
        if candidate.sizes == planned.requested.sizes:
            marks.append("(the config's)")
        lines.append("  ".join(cells) + " ".join(marks))
    lines.append("")
    if planned.chosen is not None:
        sizes = " ".join(f"{c}={getattr(planned.chosen.sizes, c)}" for c in columns)
        lines.append(f"chosen: {sizes} ({predicted} {format_bytes(planned.chosen.predicted_bytes)} of "
                     f"{format_bytes(budget.budget_bytes)})")
    else:
        lines.append("chosen: none (nothing fits)")
    lines.append("reasons:")
    lines += [f"  - {reason}" for reason in planned.reasons]
    return lines
