"""`rlfit convert-weights SOURCE --kind r3d18|timesformer --out FILE`: pretrained encoder weights as safetensors."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlfit.cli.output import add_output_arguments, show_result
from rlfit.errors import UserError

KINDS = ("r3d18", "timesformer")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "convert-weights", help="convert torchvision R3D-18 or Hugging Face TimeSformer weights for network.pretrained",
        description="Read a torchvision r3d_18 (Kinetics-400) or Hugging Face TimesformerModel checkpoint (a "
                    ".safetensors file, or a PyTorch file read with torch.load(weights_only=True), never unpickled "
                    "as arbitrary objects) and write rlfit encoder weights (safetensors, with the encoder and the "
                    "input normalization its weights expect) for `--set network.pretrained=FILE`.")
    parser.add_argument("source", metavar="SOURCE", type=Path, help="the checkpoint file to convert")
    parser.add_argument("--kind", choices=KINDS, required=True, help="which architecture SOURCE holds")
    parser.add_argument("--out", metavar="FILE", type=Path, required=True,
                        help="the safetensors file to write (refused if it exists)")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.networks.convert import convert_weights

    out = args.out
    if out.exists():
        raise UserError(f"{out} already exists; give another --out or remove it first")
    if not out.parent.is_dir():
        raise UserError(f"the folder of --out, {out.parent}, does not exist; create it first")
    written = convert_weights(str(args.source), args.kind, out)
    show_result(args, f"wrote {written}: {args.kind} encoder weights; use them with --set network.pretrained={written}",
                {"path": written, "kind": args.kind})
    return 0
