"""`rlfit report EXP_DIR [--zip] [--with-checkpoints] [--interval M] [--correction C]`: an experiment's statistics,
plots and report.md."""

from __future__ import annotations

import argparse

from rlfit.cli.output import add_output_arguments, show_result


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="write an experiment's report: statistics, plots, report.md, results.json",
        description="Write EXP_DIR/report/ from the finished trials: IQM and mean with 95% CIs per variant, "
                    "intervals on the differences between variants, tests adjusted for the report's family, "
                    "correlations, plots; --zip also packs it for download.")
    parser.add_argument("experiment", metavar="EXP_DIR", help="an experiment directory written by `rlfit experiment`")
    parser.add_argument("--zip", action="store_true", help="also write EXP_DIR/<name>.zip")
    parser.add_argument("--with-checkpoints", action="store_true", help="put the trials' checkpoints in the zip")
    parser.add_argument("--interval", default="auto", metavar="METHOD",
                        help="confidence intervals: auto (t-based below 30 seeds per variant, BCa bootstrap from 30; "
                             "the default), t or bca")
    parser.add_argument("--correction", default="holm", metavar="NAME",
                        help="multiple-comparison correction over the report's tests: holm (family-wise error rate; "
                             "the default) or bh (Benjamini-Hochberg, false discovery rate)")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.errors import UserError
    from rlfit.study.corrections import check_correction
    from rlfit.study.experiment import open_experiment
    from rlfit.study.intervals import check_method
    from rlfit.study.report import write_report
    from rlfit.rundir.write_failures import stop_on_refusal

    if args.with_checkpoints and not args.zip:
        raise UserError("--with-checkpoints only applies with --zip")
    interval = check_method(args.interval)
    check_correction(args.correction)
    experiment = open_experiment(args.experiment)
    zip_path = experiment.path / f"{experiment.manifest.name}.zip" if args.zip else None
    with stop_on_refusal("free space, then run `rlfit report` again (the trials are intact)"):
        report = write_report(experiment, zip_path=zip_path, with_checkpoints=args.with_checkpoints,
                              interval=interval, correction=args.correction)
    show_result(args, f"report: {report}" + (f"\nzip: {zip_path}" if zip_path else ""),
                {"report": report, "zip": zip_path})
    return 0
