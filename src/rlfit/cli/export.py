"""`rlfit export RUN_DIR --format onnx`: the policy with its observation normalization, for deployment."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlfit.cli.output import add_output_arguments, show_result
from rlfit.deploy.export import FORMATS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="export a trained policy (ONNX) for deployment",
        description="Write RUN_DIR's deterministic policy, observation normalization included, as an ONNX model; "
                    "it is checked against rlfit.load_policy with onnxruntime before it is written.")
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="a run directory written by `rlfit train`")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="output format (default: onnx)")
    parser.add_argument("--out", metavar="FILE", type=Path, help="output file (default: RUN_DIR/policy.onnx)")
    parser.add_argument("--checkpoint", metavar="STEP",
                        help="export RUN_DIR/checkpoints/STEP (default: the newest save)")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.rundir.layout import existing_run_dir

    existing_run_dir(args.run_dir)  # a wrong path is one line at once, before JAX is imported
    from rlfit.deploy.export.onnx import export_onnx

    result = export_onnx(args.run_dir, args.out, args.checkpoint)
    dim, actions = ", ".join(str(d) for d in result.input_shape), result.action_size
    output = (f"int64 [batch] in [0, {actions}) (and 'logits' [batch, {actions}])" if result.discrete
              else f"float32 [batch, {actions}] in [-1, 1]")
    show_result(args, f"wrote {result.path}: input '{result.input_name}' {result.input_dtype} [batch, {dim}] -> "
                      f"output '{result.output_name}' {output}; matches rlfit.load_policy within "
                      f"{result.max_abs_diff:.1e} on random observations"
                      + (f"; wrote {result.bundle} (the deployment bundle, also in the model's metadata)"
                         if result.bundle else f"; no deployment bundle: {result.bundle_note}"), result._asdict())
    return 0
