"""Video encoders on this machine: parameters, forward+backward time, and the device memory XLA plans for them.

Method: for each encoder at its usual clip size, one jitted `value_and_grad` of a scalar loss (mean square of the
features) with respect to the parameters, fed uint8 clips. Time: median of a few calls after the compile
(`--batch`, 32 by default; a case too big for this machine's memory at that batch is timed at a smaller batch,
and the row says which). Memory: `jax.jit(step).lower(...).compile().memory_analysis()` for batch 128/256/512,
compiled from shapes only (nothing allocated): argument + output - alias + temp bytes, the same reading as
rlfit.planning.memory_model, with the native 3D convolutions a GPU runs (timing uses this backend's choice: on a CPU,
sums of 2D convolutions, rlfit.networks.conv3d). On a CPU backend the plan is XLA's CPU buffer plan, a guide to,
not a measure of, a GPU's. fp32 throughout.

    .venv/bin/python benchmarks/encoders.py [--quick] [--only r3d18,timesformer_base] [--reps 3]

Writes results/encoders.json. `--quick` checks the script, not the figures: simple2dcnn only (unless --only names
others; the big encoders take minutes a step on a CPU), batch 2, one rep, memory at batch 128 only; to
results/tmp/encoders_quick.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from common import finish_record, print_table, start_record

from rlfit.networks.conv3d import choose_impl
from rlfit.networks.encoders import EncoderSpec, make_encoder


class Case(NamedTuple):
    label: str
    spec: EncoderSpec
    guide: str = ""
    """A hand-made figure from users' guides, shown beside the XLA plan."""
    max_reps: int = 10
    """Timed calls at most (a step of the big encoders takes minutes on a laptop-class CPU)."""


CASES = (
    Case("simple2dcnn", EncoderSpec("simple2dcnn", 50, 3, 64)),
    Case("simple3dcnn", EncoderSpec("simple3dcnn", 50, 8, 64)),
    Case("r3d18", EncoderSpec("r3d18", 512, 16, 112, norm="frozen_bn"),
         guide="users' guides (PyTorch, training): batch 256 ~4-6 GB, batch 512 ~8-12 GB", max_reps=2),
    Case("timesformer_small", EncoderSpec("timesformer", 128, 8, 64, preset="small")),
    Case("timesformer_base", EncoderSpec("timesformer", 768, 8, 224, preset="base"), max_reps=2),
)
QUICK_CASES = ("simple2dcnn",)
"""--quick's encoders without --only: the cheapest to compile and run (one case takes every path of the script)."""
MEMORY_BATCHES = (128, 256, 512)
GIB = 1024 ** 3


def step_function(spec: EncoderSpec, conv_impl: str):
    """(params, frozen variables, frames [B, T, H, W, C] uint8) -> (loss, grads): the jitted forward + backward."""
    module = make_encoder(spec, conv_impl=conv_impl)

    def loss(params, frozen, frames):
        return jnp.mean(jnp.square(module.apply({"params": params, **frozen}, frames)))

    return module, jax.jit(jax.value_and_grad(loss))


def plan_bytes(step, params, frozen, spec: EncoderSpec, batch: int) -> dict[str, int]:
    """XLA's compile-time memory plan of `step` at `batch` (shapes only, nothing allocated)."""
    frames = jax.ShapeDtypeStruct(spec.input_shape(batch), jnp.uint8)
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, frozen))
    started = time.perf_counter()
    analysis = step.lower(*shapes, frames).compile().memory_analysis()
    compile_s = time.perf_counter() - started
    parts = {"argument_bytes": int(analysis.argument_size_in_bytes), "output_bytes": int(analysis.output_size_in_bytes),
             "alias_bytes": int(analysis.alias_size_in_bytes), "temp_bytes": int(analysis.temp_size_in_bytes)}
    parts["total_bytes"] = parts["argument_bytes"] + parts["output_bytes"] - parts["alias_bytes"] + parts["temp_bytes"]
    parts["compile_s"] = round(compile_s, 1)
    return parts


def time_step(step, params, frozen, spec: EncoderSpec, batch: int, reps: int) -> dict[str, Any]:
    """Compile time and the median of `reps` timed calls at `batch`."""
    frames = np.random.default_rng(0).integers(0, 256, spec.input_shape(batch), dtype=np.uint8)
    started = time.perf_counter()
    jax.block_until_ready(step(params, frozen, frames))  # compile + first call
    first_s = time.perf_counter() - started
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        jax.block_until_ready(step(params, frozen, frames))
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {"batch": batch, "reps": reps, "first_call_s": round(first_s, 2), "median_s": round(median, 3),
            "times_s": [round(t, 3) for t in times], "ms_per_clip": round(1000 * median / batch, 2)}


def available_bytes() -> int:
    """Memory this machine can give a timing run now (MemAvailable)."""
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 8 * GIB


def run_case(case: Case, batch: int, reps: int, memory_batches: tuple[int, ...]) -> dict[str, Any]:
    """Parameters, the memory plan with the accelerator's native 3D convolutions, the time with this backend's."""
    module, step = step_function(case.spec, "native")
    timing_impl = choose_impl(jax.default_backend())
    _, timed_step = step_function(case.spec, timing_impl)
    variables = module.init(jax.random.PRNGKey(0), jnp.zeros(case.spec.input_shape(1), jnp.uint8))
    params = variables["params"]
    frozen = {k: v for k, v in variables.items() if k != "params"}
    result: dict[str, Any] = {"encoder": case.label, "spec": case.spec.to_dict(),
                              "parameters": sum(int(np.prod(a.shape)) for a in jax.tree.leaves(params)),
                              "guide": case.guide, "memory_conv_impl": "native", "timing_conv_impl": timing_impl}
    result["memory"] = {str(b): plan_bytes(step, params, frozen, case.spec, b) for b in memory_batches}
    timing_batch = batch
    while timing_batch > 1:  # the largest batch <= `batch` whose plan fits in 70% of the free memory
        need = plan_bytes(timed_step, params, frozen, case.spec, timing_batch)["total_bytes"]
        if need < 0.7 * available_bytes():
            break
        timing_batch //= 2
    result["timing_note"] = "" if timing_batch == batch else (
        f"batch {batch} needs more than 70% of this machine's free memory; timed at batch {timing_batch}")
    result["timing"] = time_step(timed_step, params, frozen, case.spec, timing_batch, min(reps, case.max_reps))
    return result


def chosen_cases(only: str, quick: bool) -> list[Case]:
    """The cases `--only` names (comma-separated labels); without it every case, or QUICK_CASES for `--quick`."""
    labels = only.split(",") if only else QUICK_CASES if quick else ()
    return [case for case in CASES if not labels or case.label in labels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a check of the script: simple2dcnn, batch 2, one rep, memory at batch 128; to results/tmp")
    parser.add_argument("--only", default="", help="comma-separated encoder labels (default: all; --quick: "
                                                   f"{','.join(QUICK_CASES)})")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    batch, reps, memory_batches = (2, 1, (128,)) if args.quick else (args.batch, args.reps, MEMORY_BATCHES)
    chosen = chosen_cases(args.only, args.quick)
    record = start_record("encoders_quick" if args.quick else "encoders") | {
        "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "loss": "mean(features^2), grads w.r.t. params",
        "cases": []}
    for case in chosen:
        print(f"{case.label} ...", flush=True)
        record["cases"].append(run_case(case, batch, reps, memory_batches))
    rows = []
    for r in record["cases"]:
        t = r["timing"]
        rows.append([r["encoder"], f"{r['spec']['frames']}x{r['spec']['image_size']}", r["parameters"],
                     t["batch"], t["median_s"], t["ms_per_clip"],
                     *[r["memory"][str(b)]["total_bytes"] / GIB for b in memory_batches]])
    print()
    print_table(rows, ["encoder", "clip", "params", "batch", "fwd+bwd s", "ms/clip",
                       *[f"plan GiB @{b}" for b in memory_batches]])
    for r in record["cases"]:
        for note in (r["timing_note"], r["guide"]):
            if note:
                print(f"{r['encoder']}: {note}")
    finish_record(record)


if __name__ == "__main__":
    main()
