"""Predicted against measured peak memory of one training iteration, over several num_envs and environments.

For each environment the planner's own model is fitted (`rlfit.planning.measure.fit_memory_model`: XLA's
compile-time analysis at 256 and 2048 environments, a line in num_envs). Then, at each measured num_envs,
the iteration is compiled (XLA's analysis at that exact size is recorded too), the state is created, one
warm-up iteration runs, and one measured iteration runs.

Measurement:
- CPU backend: growth of the process's resident set. The script runs with glibc's mmap threshold fixed at
  128 KiB (`MALLOC_MMAP_THRESHOLD_`, re-executing itself if needed), so every large buffer is a fresh
  mapping that counts when touched instead of reusing freed heap. After the warm-up, Python's garbage is
  collected and glibc's free memory returned (`malloc_trim(0)`), the kernel's peak-RSS mark is reset
  (`echo 5 > /proc/self/clear_refs`) and VmRSS read; after the measured iteration VmHWM is read. Measured
  bytes = (VmHWM - VmRSS before) + the state's bytes (already resident before, and counted by XLA as
  arguments). Page granularity and XLA's CPU runtime make this approximate.
- GPU backend: `device.memory_stats()["peak_bytes_in_use"]` after the measured iteration. The allocator's
  peak cannot be reset, so each size is measured in its own child process (`--child ENV NUM_ENVS`, with
  `XLA_PYTHON_CLIENT_PREALLOCATE=false` so parent and child can share the GPU): in one process, the second
  environment's small sizes read the first environment's largest peak (seen on an H100, 2026-11-23).

Error = predicted / measured - 1 for the line fitted through XLA's probes (without and with the planner's margin),
for XLA's analysis at the exact size, and for the estimate the planner reads from the lowered step without
compiling (`rlfit.hardware.program_memory.ProgramBound.estimate_bytes`, what it plans from where that decides).

    .venv/bin/python benchmarks/memory_prediction.py            # CartpoleBalance and CheetahRun, 4 sizes each
    .venv/bin/python benchmarks/memory_prediction.py --quick    # the toy environment at one size, small networks
                                                                # (a check only)
    .venv/bin/python benchmarks/memory_prediction.py --envs CartpoleBalance --num-envs 1024 --out x.json  # one size
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import TOY_ENV, REPO, finish_record, print_table, start_record  # noqa: E402

ENVS = ("CartpoleBalance", "CheetahRun")
NUM_ENVS = (256, 1024, 4096)
"""256: a point of the fit; 1024: between the fit's points; 4096: beyond them (extrapolated)."""
QUICK_ENV = TOY_ENV
"""The tests' point-reaching environment (no physics: it compiles in seconds); imported from REPO."""
QUICK_NUM_ENVS = (64,)
OVERRIDES = (
    # 4 unrolls of 10 steps per env per iteration, one epoch of 4 minibatches; rlfit's default networks
    # (the 5 x 256 value network's activations over the whole batch dominate the memory).
    "ppo.num_envs=256", "ppo.batch_size=256", "ppo.num_minibatches=4", "ppo.unroll_length=10",
    "ppo.num_updates_per_batch=1", "ppo.policy_hidden=[32,32,32,32]",
    "ppo.value_hidden=[256,256,256,256,256]", "env.episode_length=1000", "run.num_eval_envs=8",
)
QUICK_OVERRIDES = tuple({"ppo.policy_hidden=[32,32,32,32]": "ppo.policy_hidden=[32,32]",
                         "ppo.value_hidden=[256,256,256,256,256]": "ppo.value_hidden=[32,32]"}.get(o, o)
                        for o in OVERRIDES)
"""--quick's: two-layer networks (its errors mean nothing; the script took 8.8 CPU seconds with OVERRIDES' networks,
7.1 with these, 2026-11-28)."""


def overrides_for(name: str) -> tuple[str, ...]:
    """The overrides measured on `name`: QUICK_OVERRIDES on --quick's toy environment, else OVERRIDES."""
    return QUICK_OVERRIDES if name == QUICK_ENV else OVERRIDES


def rss_bytes(field: str) -> int:
    """VmRSS / VmHWM of this process from /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def settle_host_memory() -> None:
    """Collects Python garbage and hands glibc's free pages back to the OS."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def tree_bytes(tree: Any) -> int:
    import jax

    return sum(int(leaf.nbytes) for leaf in jax.tree.leaves(tree))


def device_peak() -> int:
    """The device allocator's peak so far (GPU), in bytes."""
    import jax

    return int(jax.devices()[0].memory_stats()["peak_bytes_in_use"])


def measure(config, sizes, env) -> dict[str, Any]:
    """Compiles and runs one iteration at `sizes`; XLA's analysis and the measured peak, in bytes."""
    import jax

    from rlfit.hardware.program_memory import lowered_bound
    from rlfit.planning.plan import make_plan
    from rlfit.planning.memory_model import point_from_analysis
    from rlfit.run.trainer import Trainer

    trainer = Trainer.build(config, make_plan(config, sizes), env=env)
    started = time.perf_counter()
    lowered = jax.jit(trainer.train_iteration_fn(), donate_argnums=0).lower(trainer.abstract_state())
    estimate = lowered_bound(lowered).estimate_bytes  # the planner's estimate from the lowered step (no compile)
    compiled = lowered.compile()
    compile_s = time.perf_counter() - started
    analysis = point_from_analysis(sizes, compiled.memory_analysis())
    on_gpu = jax.default_backend() != "cpu"
    stages = {"after_compile": device_peak()} if on_gpu else {}
    state = jax.block_until_ready(trainer.init_state())
    if on_gpu:
        stages["after_init"] = device_peak()
    state, metrics = jax.block_until_ready(compiled(state))  # warm-up
    if on_gpu:
        started = time.perf_counter()
        state, metrics = jax.block_until_ready(compiled(state))
        measured = device_peak()
        method = "memory_stats peak_bytes_in_use"
    else:
        settle_host_memory()
        Path("/proc/self/clear_refs").write_text("5")
        before = rss_bytes("VmRSS")
        started = time.perf_counter()
        state, metrics = jax.block_until_ready(compiled(state))
        measured = rss_bytes("VmHWM") - before + tree_bytes(state)
        method = "RSS growth + state bytes"
    iteration_s = time.perf_counter() - started
    state_bytes = tree_bytes(state)
    del state, metrics, compiled
    settle_host_memory()
    return {"analysis": analysis, "measured_bytes": measured, "peak_bytes_by_stage": stages, "method": method,
            "state_bytes": state_bytes, "estimate_bytes": estimate,
            "compile_s": round(compile_s, 1), "iteration_s": round(iteration_s, 2)}


def measure_in_child(name: str, num_envs: int) -> dict[str, Any]:
    """`measure` in a fresh process, so the device's peak is this size's alone."""
    import json
    import subprocess

    from types import SimpleNamespace

    done = subprocess.run([sys.executable, __file__, "--child", name, str(num_envs)], check=True,
                          capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["analysis"] = SimpleNamespace(**result["analysis"])
    return result


def child_main(name: str, num_envs: int) -> None:
    """Measures one size and prints `measure`'s result as one JSON line."""
    import json

    import jax

    from rlfit.algos.ppo.candidates import scale_sizes
    from rlfit.config.schema import resolve
    from rlfit.envs import load_env
    from rlfit.planning.plan import config_sizes

    config = resolve(name, "smoke", overrides=list(overrides_for(name)))
    env = load_env(config.env, jax.default_backend())
    result = measure(config, scale_sizes(config_sizes(config), num_envs), env)
    result["analysis"] = {"total_bytes": result["analysis"].total_bytes}
    print(json.dumps(result), flush=True)


def benchmark_env(name: str, num_envs: tuple[int, ...]) -> dict[str, Any]:
    import jax

    from rlfit.config.schema import resolve
    from rlfit.envs import load_env
    from rlfit.planning.plan import config_sizes
    from rlfit.planning.budget import CROSS_BACKEND_MARGIN, SAME_BACKEND_MARGIN
    from rlfit.algos.ppo.candidates import scale_sizes
    from rlfit.planning.measure import fit_memory_model
    from rlfit.run.probes import StepProbes

    config = resolve(name, "smoke", overrides=list(overrides_for(name)))
    env = load_env(config.env, jax.default_backend())
    started = time.perf_counter()
    model = fit_memory_model(config, StepProbes(env=env))
    fit_s = time.perf_counter() - started
    rows = []
    for n in num_envs:
        sizes = scale_sizes(config_sizes(config), n)
        result = measure_in_child(name, n) if jax.default_backend() != "cpu" else measure(config, sizes, env)
        measured, line = result["measured_bytes"], model.estimate(n)
        rows.append({
            "num_envs": n, "sizes": sizes._asdict(), "measured_bytes": measured, "line_bytes": line,
            "xla_exact_bytes": result["analysis"].total_bytes, "state_bytes": result["state_bytes"],
            "line_error": round(line / measured - 1, 4),
            "estimate_bytes": result["estimate_bytes"],
            "estimate_error": round(result["estimate_bytes"] / measured - 1, 4),
            "xla_exact_error": round(result["analysis"].total_bytes / measured - 1, 4),
            "line_with_same_backend_margin_error": round(line * SAME_BACKEND_MARGIN / measured - 1, 4),
            "peak_bytes_by_stage": result["peak_bytes_by_stage"],
            "method": result["method"], "compile_s": result["compile_s"], "iteration_s": result["iteration_s"],
        })
        print(f"  {name} {n:>5d} envs: measured {measured / 2**20:8.1f} MiB, line {line / 2**20:8.1f} MiB "
              f"({rows[-1]['line_error']:+.1%}), XLA at size {result['analysis'].total_bytes / 2**20:8.1f} MiB, "
              f"estimate from the lowered step {result['estimate_bytes'] / 2**20:8.1f} MiB "
              f"({rows[-1]['estimate_error']:+.1%})",
              flush=True)
    return {"env": name, "overrides": list(overrides_for(name)), "model": model.to_dict(), "fit_s": round(fit_s, 1),
            "margins": {"same_backend": SAME_BACKEND_MARGIN, "cross_backend": CROSS_BACKEND_MARGIN}, "rows": rows}


MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072",
                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def main() -> None:
    if any(os.environ.get(k) != v for k, v in MALLOC_SETTINGS.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_SETTINGS})
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"the toy environment ({QUICK_ENV}) at one small size "
                        "(checks the script)")
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help=f"environments to measure (default: {' '.join(ENVS)})")
    parser.add_argument("--num-envs", nargs="+", type=int, default=None,
                        help=f"the sizes measured (default {' '.join(map(str, NUM_ENVS))}; --quick: "
                        f"{' '.join(map(str, QUICK_NUM_ENVS))})")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/memory_prediction_<backend>"
                        ".json; --quick: results/tmp/)")
    parser.add_argument("--child", nargs=2, metavar=("ENV", "NUM_ENVS"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    import jax

    from rlfit.hardware.jax_setup import configure_jax

    configure_jax("fp32")
    if args.child:
        return child_main(args.child[0], int(args.child[1]))
    record = start_record("memory_prediction_quick" if args.quick else f"memory_prediction_{jax.default_backend()}")
    record["backend"] = jax.default_backend()
    record["device"] = str(jax.devices()[0].device_kind)
    record["method"] = __doc__.split("Measurement:")[1].split("Error =")[0].strip()
    record["malloc"] = MALLOC_SETTINGS
    if args.quick:
        sys.path.insert(0, str(REPO))  # for tests.toy_env
    envs, sizes = ((QUICK_ENV,), QUICK_NUM_ENVS) if args.quick else (tuple(args.envs), NUM_ENVS)
    sizes = tuple(args.num_envs or sizes)
    record["results"] = []
    for name in envs:  # written after each environment, so a run stopped by a time limit keeps what it measured
        record["results"].append(benchmark_env(name, sizes))
        finish_record(record, args.out)
    rows = [(r["env"], row["num_envs"], row["measured_bytes"] / 2**20, row["line_bytes"] / 2**20,
             f"{row['line_error']:+.1%}", f"{row['xla_exact_error']:+.1%}",
             f"{row['line_with_same_backend_margin_error']:+.1%}", f"{row['estimate_error']:+.1%}")
            for r in record["results"] for row in r["rows"]]
    print()
    print_table(rows, ("env", "num_envs", "measured MiB", "predicted MiB", "error", "error (XLA at size)",
                       "error with margin", "error (estimate from the lowered step)"))


if __name__ == "__main__":
    main()
