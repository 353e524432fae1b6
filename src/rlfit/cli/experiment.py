"""`rlfit experiment MANIFEST.yaml [--stage S] [--set K=V]` runs a study; `rlfit experiment resume EXP_DIR`
finishes one that was stopped or killed. Both end with the report and its zip (`rlfit report`)."""

from __future__ import annotations

import argparse
import sys

from rlfit.cli.output import add_output_arguments, progress, show_result
from rlfit.exit_codes import TRIALS_FAILED


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "experiment", help="run a manifest of variants x seeds, then its report; `experiment resume EXP_DIR`",
        description="Run every trial (variant x seed) of MANIFEST.yaml as its own run directory under "
                    "--dir/<name>-<stage>-<time>/trials/, evaluate the suites, and write the report and its zip. "
                    "`rlfit experiment resume EXP_DIR` finishes what is missing and never retrains a finished trial.")
    parser.add_argument("target", nargs="+", metavar="MANIFEST",
                        help="the study's manifest (YAML); or `resume EXP_DIR` to finish a stopped or killed "
                             "experiment")
    parser.add_argument("--stage", help="a stage of the manifest (e.g. gpu-test, mini, full)")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="a config override for every trial, applied last")
    parser.add_argument("--dir", default="experiments", help="where experiment directories go (default: experiments)")
    parser.add_argument("--ray", metavar="ADDRESS", help="run the trials as Ray tasks: a cluster's address, 'auto' "
                        "(the running cluster) or 'local' (start one here); needs rlfit[ray] and EXP_DIR on storage "
                        "every node sees")
    parser.add_argument("--seeds-per-program", metavar="N|auto", help="seeds of a variant trained in one compiled "
                        "program (default: the manifest's, else auto: planned for this device); may differ on resume")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.errors import UserError
    from rlfit.study.experiment import failed_trials, open_experiment, start_experiment
    from rlfit.study.manifest import parse_seeds_per_program
    from rlfit.study.report import check_report_paths, write_report
    from rlfit.rundir.write_failures import stop_on_refusal

    say = progress(args)
    if args.ray:
        from rlfit.study.ray_runner import check_ray_installed

        check_ray_installed()  # before the experiment's directory is made
    per_program = args.seeds_per_program
    count = parse_seeds_per_program(per_program, "--seeds-per-program") if per_program is not None else None
    if args.target[0] == "resume":
        if len(args.target) != 2 or args.stage or args.overrides:  # --ray may differ from the first session's
            raise UserError("usage: rlfit experiment resume EXP_DIR (the stage and --set are the experiment's own)")
        experiment = open_experiment(args.target[1], check=True)
    elif len(args.target) == 1:
        experiment = start_experiment(args.target[0], args.stage, args.overrides, args.dir)
        say(f"experiment directory: {experiment.path}")
    else:
        raise UserError(f"give one manifest, got {' '.join(args.target)} (to resume: rlfit experiment resume EXP_DIR)")
    if per_program is not None:
        experiment = experiment.with_seeds_per_program(count)
    zip_path = experiment.path / f"{experiment.manifest.name}.zip"
    check_report_paths(experiment, zip_path)  # before hours of training
    from rlfit.study.schedule import run_experiment  # imports JAX: after every check of the input

    with stop_on_refusal(f"free space, then `rlfit experiment resume {experiment.path}`"):
        run_experiment(experiment, say=say, ray=args.ray)
        report = write_report(experiment, zip_path=zip_path)
    failed = failed_trials(experiment)
    show_result(args, f"report: {report}\nzip: {zip_path}", {"experiment_dir": experiment.path, "report": report,
                                                              "zip": zip_path, "trials_failed": failed})
    if failed:
        print(f"rlfit: {len(failed)} trial(s) failed and are left out of the statistics: {', '.join(failed)}",
              file=sys.stderr)
        return TRIALS_FAILED
    return 0
