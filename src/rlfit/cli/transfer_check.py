"""`rlfit transfer-check RUN_DIR`: the exported policy in native MuJoCo on nominal and randomized models, beside
the run's MJX evaluation, before it meets a robot."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlfit.cli.output import add_output_arguments, progress, report_folder, show_result, writing_report
from rlfit.deploy.transfer.options import DEFAULT_EPISODES_PER_MODEL, DEFAULT_MODELS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "transfer-check", help="run the exported ONNX policy in native MuJoCo on randomized models",
        description="Run RUN_DIR's exported policy (the ONNX file, through onnxruntime) in native MuJoCo on the "
                    "nominal model and on models drawn afresh by the environment's randomizer, with the "
                    "environment's pushes and observation noise; write transfer_check.json and transfer_check.md "
                    "(return, episode length and early terminations with 95% intervals, beside the run's MJX "
                    "evaluation).")
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory written by `rlfit train`")
    parser.add_argument("--onnx", metavar="FILE", type=Path,
                        help="the exported model (default: RUN_DIR/policy.onnx, from `rlfit export RUN_DIR`)")
    parser.add_argument("--models", metavar="N", type=int, default=DEFAULT_MODELS,
                        help=f"randomized models to draw (default: {DEFAULT_MODELS})")
    parser.add_argument("--episodes-per-model", metavar="K", type=int, default=DEFAULT_EPISODES_PER_MODEL,
                        help=f"episodes on each randomized model (default: {DEFAULT_EPISODES_PER_MODEL}); the nominal "
                             "model runs N * K")
    parser.add_argument("--max-steps", metavar="STEPS", type=int,
                        help="policy steps per episode at most (default and most: the run's episode length; "
                             "shorter, the run's MJX evaluation of whole episodes is left out of the comparison)")
    parser.add_argument("--seed", metavar="S", type=int, default=0,
                        help="seed of the check's models and resets, apart from training's and evaluation's "
                             "(default: 0)")
    parser.add_argument("--out", metavar="DIR", type=Path, help="folder for the report (default: RUN_DIR)")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.deploy.transfer.options import TransferCheckOptions, check_counts
    from rlfit.rundir.layout import existing_run_dir

    out = report_folder(args)
    options = TransferCheckOptions(args.run_dir, args.onnx, args.models, args.episodes_per_model, args.max_steps,
                                   args.seed)
    check_counts(options)
    existing_run_dir(args.run_dir)  # wrong input is one line at once, before JAX is imported
    from rlfit.deploy.transfer.check import run_transfer_check
    from rlfit.sinks.jsonl import read_rows
    from rlfit.study.transfer_report import build_report, summary_line, write_report

    result = run_transfer_check(options, say=progress(args))
    metrics = args.run_dir / "metrics.jsonl"
    rows = read_rows(metrics) if metrics.is_file() else []
    settings = {"seed": args.seed, "models": args.models, "episodes_per_model": args.episodes_per_model}
    report = build_report(result, rows, settings)
    with writing_report("transfer-check"):
        json_path, md_path = write_report(out, report)
    show_result(args, f"{summary_line(report)}; wrote {json_path} and {md_path}",
                {"json": json_path, "markdown": md_path, **report})
    return 0
