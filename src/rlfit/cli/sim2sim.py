"""`rlfit sim2sim RUN_DIR`: the exported policy driven by the robot-side controller (no JAX) in native MuJoCo, on
nominal and randomized models; `--sweep` adds the sim-to-real margin table."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlfit.cli.output import add_output_arguments, progress, report_folder, show_result, writing_report


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sim2sim", help="run the exported policy through the robot-side controller in native MuJoCo",
        description="Run RUN_DIR's exported policy (policy.onnx and deploy.yaml from `rlfit export`) through "
                    "rlfit.deploy.controller, the loop a robot runs (sensors -> observation -> ONNX -> motor "
                    "targets, kp, kd), in native MuJoCo on the nominal model and on randomized ones; the "
                    "environment's own reward and termination score it. Writes sim2sim.json, sim2sim.md and a "
                    "video of the first nominal episode.")
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory written by `rlfit train`")
    parser.add_argument("--onnx", metavar="FILE", type=Path,
                        help="the exported model (default: RUN_DIR/policy.onnx; its bundle beside it)")
    parser.add_argument("--models", metavar="N", type=int, default=2, help="randomized models to draw (default: 2)")
    parser.add_argument("--episodes-per-model", metavar="K", type=int, default=2,
                        help="episodes on each model, the nominal one included (default: 2)")
    parser.add_argument("--max-steps", metavar="STEPS", type=int,
                        help="control steps per episode at most (default and most: the run's episode length)")
    parser.add_argument("--seed", metavar="S", type=int, default=0,
                        help="seed of the models and resets (the transfer check's draw for the same seed)")
    parser.add_argument("--sweep", action="store_true",
                        help="also run the margin grid: action and observation delays, kp, kd and torque limits "
                             "scaled, a gyro bias and a tilted IMU (one departure at a time)")
    parser.add_argument("--out", metavar="DIR", type=Path, help="folder for the report and video (default: RUN_DIR)")
    parser.add_argument("--no-video", action="store_true", help="write no video")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.deploy.sim2sim.check import Sim2SimOptions, run_sim2sim
    from rlfit.deploy.sim2sim.report import build_report, summary_line, write_report

    out = report_folder(args)
    video = None if args.no_video else out / "sim2sim.mp4"
    options = Sim2SimOptions(args.run_dir, args.onnx, args.models, args.episodes_per_model, args.max_steps,
                             args.seed, args.sweep, video)
    result = run_sim2sim(options, say=progress(args))
    report = build_report(result)
    with writing_report("sim2sim"):
        json_path, md_path = write_report(out, report)
    where = f"; wrote {json_path} and {md_path}" + (f" and {result.video}" if result.video else "")
    show_result(args, summary_line(report) + where + (f" ({result.video_note})" if result.video_note and video
                                                     else ""), {"json": json_path, "markdown": md_path, **report})
    return 0
