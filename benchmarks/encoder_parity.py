"""rlfit's r3d18 and timesformer against torchvision's r3d_18 and Hugging Face's TimesformerModel at full size.

Method: build the reference model with random weights (torch.manual_seed(0); batch-norm statistics and affine
terms, and TimeSformer's embeddings, randomized so that every term matters), convert its state dict with
`rlfit.networks.convert` (the same functions `rlfit convert-weights` uses), run both on the same random clip in
eval mode, and report max |rlfit - reference| (issue 10's target: within 1e-4). Sizes are the published ones:
R3D-18 on 16x112x112 clips, TimeSformer base (768 wide, 12 layers, 12 heads, patch 16) on 8x224x224.
Needs torch, torchvision and transformers (not rlfit dependencies), e.g. in a separate environment put on
PYTHONPATH after rlfit's:

    .venv/bin/python benchmarks/encoder_parity.py            # both, batch 2
    .venv/bin/python benchmarks/encoder_parity.py --quick    # small sizes (a check of the script)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import finish_record, print_table, start_record  # noqa: E402

TOLERANCE = 1e-4


def r3d18_case(torch, frames: int, size: int, batch: int) -> dict:
    from torchvision.models.video import r3d_18

    from rlfit.networks.convert import r3d18_from_torch_state_dict
    from rlfit.networks.encoders import EncoderSpec, make_encoder

    torch.manual_seed(0)
    model = r3d_18(weights=None).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm3d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.1, 0.1)
    params, batch_stats = r3d18_from_torch_state_dict({k: v.numpy() for k, v in model.state_dict().items()})
    model.fc = torch.nn.Identity()
    clip = np.random.default_rng(1).uniform(0, 1, (batch, frames, size, size, 3)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(clip.transpose(0, 4, 1, 2, 3).copy())).numpy()
    module = make_encoder(EncoderSpec("r3d18", 512, frames, size, norm="frozen_bn"))
    ours = np.asarray(module.apply({"params": params, "batch_stats": batch_stats}, clip))
    return {"model": "torchvision r3d_18", "clip": [batch, frames, size, size, 3], "output": list(expected.shape),
            "max_abs_diff": float(np.max(np.abs(ours - expected))), "max_abs_output": float(np.max(np.abs(expected)))}


def timesformer_case(torch, frames: int, size: int, patch: int, hidden: int, depth: int, heads: int,
                     batch: int) -> dict:
    import transformers

    from rlfit.networks.convert import timesformer_from_hf_state_dict
    from rlfit.networks.timesformer import TimeSformer

    config = transformers.TimesformerConfig(image_size=size, patch_size=patch, num_frames=frames, hidden_size=hidden,
                                            num_hidden_layers=depth, num_attention_heads=heads,
                                            intermediate_size=4 * hidden)
    torch.manual_seed(0)
    model = transformers.TimesformerModel(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.startswith("embeddings."):
                param.normal_(0, 0.2)
    params = timesformer_from_hf_state_dict({k: v.numpy() for k, v in model.state_dict().items()})
    clip = np.random.default_rng(2).uniform(0, 1, (batch, frames, size, size, 3)).astype(np.float32)
    with torch.no_grad():
        expected = model(pixel_values=torch.from_numpy(clip.transpose(0, 1, 4, 2, 3).copy())).last_hidden_state[:, 0]
    module = TimeSformer(features=hidden, frames=frames, image_size=size, patch_size=patch, hidden=hidden, depth=depth,
                         heads=heads)
    ours = np.asarray(module.apply({"params": params}, clip))
    expected = expected.numpy()
    return {"model": "transformers TimesformerModel", "clip": [batch, frames, size, size, 3],
            "config": {"hidden": hidden, "depth": depth, "heads": heads, "patch": patch},
            "output": list(expected.shape), "max_abs_diff": float(np.max(np.abs(ours - expected))),
            "max_abs_output": float(np.max(np.abs(expected)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a check of the script)")
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    import jax
    import torch
    import torchvision
    import transformers

    jax.config.update("jax_default_matmul_precision", "highest")
    record = start_record("encoder_parity_quick" if args.quick else "encoder_parity")
    record["versions"] = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                          "transformers": transformers.__version__, "jax": jax.__version__}
    record["tolerance"] = TOLERANCE
    cases = []
    for name, run in (("r3d18", lambda: r3d18_case(torch, *((4, 32) if args.quick else (16, 112)), args.batch)),
                      ("timesformer", lambda: timesformer_case(
                          torch, *((3, 16, 8, 32, 2, 4) if args.quick else (8, 224, 16, 768, 12, 12)), args.batch))):
        started = time.perf_counter()
        case = {"encoder": name, **run()}
        case["seconds"] = round(time.perf_counter() - started, 1)
        case["within_tolerance"] = case["max_abs_diff"] <= TOLERANCE
        cases.append(case)
        print(f"{name}: max |rlfit - {case['model']}| = {case['max_abs_diff']:.2e} over {case['clip']}", flush=True)
    record["cases"] = cases
    print_table([(c["encoder"], c["model"], "x".join(map(str, c["clip"])), f"{c['max_abs_diff']:.2e}",
                  c["within_tolerance"]) for c in cases], ("encoder", "reference", "clip", "max abs diff", "<= 1e-4"))
    finish_record(record)


if __name__ == "__main__":
    main()
