"""`rlfit play RUN_DIR`: watch a trained policy in native MuJoCo (a video file, or MuJoCo's viewer)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlfit.cli.output import add_output_arguments, progress, show_result


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "play", help="run a trained policy in native MuJoCo and write a video",
        description="Run RUN_DIR's policy in native MuJoCo (the C simulator) with the environment's own "
                    "observations; render headless (EGL or OSMesa, picked automatically) to a video.")
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory written by `rlfit train`")
    parser.add_argument("--checkpoint", metavar="STEP", help="play RUN_DIR/checkpoints/STEP (default: the newest save)")
    parser.add_argument("--out", metavar="FILE", type=Path, help="video file, .mp4 or .gif (default: RUN_DIR/play.mp4)")
    parser.add_argument("--seconds", metavar="S", type=float, default=10.0, help="simulated seconds (default: 10)")
    parser.add_argument("--command", metavar="VX,VY,WZ",
                        help="fixed joystick command for joystick environments, e.g. 0.5,0,0 (m/s, m/s, rad/s)")
    parser.add_argument("--viewer", action="store_true", help="open MuJoCo's interactive viewer (needs a desktop)")
    parser.add_argument("--seed", metavar="S", type=int, default=0,
                        help="seed of the environment's resets (default: 0)")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.config.rules import check_seed
    from rlfit.deploy.play.commands import parse_command
    from rlfit.rundir.layout import existing_run_dir

    check_seed(args.seed, "--seed")
    command = parse_command(args.command) if args.command is not None else None
    existing_run_dir(args.run_dir)  # a wrong path is one line at once, before JAX is imported
    from rlfit.deploy.play.session import PlayOptions, play

    options = PlayOptions(run_dir=args.run_dir, checkpoint=args.checkpoint, out=args.out, seconds=args.seconds,
                          command=command, viewer=args.viewer, seed=args.seed)
    result = play(options, say=progress(args))  # its last line describes the result
    show_result(args, None, result._asdict())
    return 0
