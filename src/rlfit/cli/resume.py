"""`rlfit resume RUN_DIR`: continue a run in its own directory to a new total."""

from __future__ import annotations

import argparse

from rlfit.cli.output import add_output_arguments, silent
from rlfit.cli.train import add_distributed_arguments, join_if_distributed, show_run_result
from rlfit.config.schema import parse_override


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "resume", help="continue a run from its last checkpoint",
        description="Continue RUN_DIR from its newest valid checkpoint to a new total (not an increment).")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `rlfit train`")
    total = parser.add_mutually_exclusive_group()
    total.add_argument("--timesteps", type=int, metavar="N", help="new total of env steps")
    total.add_argument("--iterations", type=int, metavar="N", help="new total of iterations")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="change run.eval_every, run.save_interval, run.keep_checkpoints, ...")
    add_output_arguments(parser)
    add_distributed_arguments(parser)
    parser.set_defaults(handler=run)


def overrides_by_section(items: list[str]) -> dict[str, dict]:
    from rlfit.errors import UserError
    from rlfit.run.restore import RESUMABLE_CHANGES

    sections: dict[str, dict] = {}
    for item in items:
        key, value = parse_override(item)
        if key not in RESUMABLE_CHANGES:
            raise UserError(f"{key} cannot change when resuming (only {', '.join(RESUMABLE_CHANGES)}); "
                            "start a new run to change it")
        section, _, name = key.partition(".")
        sections.setdefault(section, {})[name] = value
    return sections


def run(args: argparse.Namespace) -> int:
    from rlfit.rundir.layout import open_run

    open_run(args.run_dir)  # a wrong path is one line at once, before JAX is imported
    from rlfit.run.resume import resume

    join_if_distributed(args)
    result = resume(args.run_dir, timesteps=args.timesteps, iterations=args.iterations,
                    overrides=overrides_by_section(args.overrides), quiet=silent(args))
    show_run_result(args, result)
    return 0
