"""The planner's choice against a sweep of num_envs, per memory budget: does it run, and how fast is it?

For each budget the script asks `rlfit plan ENV --json` for the planner's choice, trains that choice with
`rlfit train ENV --num-envs auto` for a few iterations, and trains a sweep of `num_envs` (powers of two,
the config's proportions, as the planner scales them) under the same budget, each in its own process with
`run.oom_backoff=false`, so that an out-of-memory error shows as exit code 5 instead of being absorbed.
Throughput is the median `sps` of the iterations after the first (from `metrics.jsonl`: env steps of the
iteration / its wall time, compile excluded). Reported per budget: the planner's choice, whether it ran,
its steps/s, the sweep's best steps/s among the sizes that ran, and their ratio (target: >= 0.9).

How a budget is imposed:
- GPU: the process's pool is capped with `XLA_PYTHON_CLIENT_MEM_FRACTION` = budget / the GPU's total memory
  (from `rlfit doctor --json`); `full` leaves JAX's defaults. The sweep goes up from `--sweep-min` until the
  first size that runs out of memory. A size that ran under a smaller budget is not run again under a
  larger one: the compiled program is the same and the cap only bounds the pool, so its figure is reused
  (the JSON says under which budget it was measured); so is the planner's own run at the sweep's size that
  equals its choice (`planner_run`: the same program under the same cap). `summary.json`'s `device_peak_bytes` (JAX's
  `peak_bytes_in_use`) is recorded beside the planner's `predicted_bytes`.
- CPU: XLA's CPU allocator has no cap, so nothing can run out of memory in the GPU sense. The budget goes
  to the planner as `--device-memory` (target cpu) and the sweep runs every size from `--sweep-min` to
  `--sweep-max` uncapped; the comparison then says whether the planner's choice is about as fast as the
  fastest size (it stops at 1024 environments on the CPU).

    # On a GPU (the G1 assets: env.menagerie_path or RLFIT_MENAGERIE_PATH pointing at a Menagerie copy)
    .venv/bin/python benchmarks/planner_sweep.py --env G1JoystickFlatTerrain --preset g1 --budgets 8 12 16 24 40 full
    # On the CPU
    .venv/bin/python benchmarks/planner_sweep.py --env CartpoleBalance --preset quick --budgets 0.25 4 \
        --sweep-max 8192 --min-steps 8000000
    .venv/bin/python benchmarks/planner_sweep.py --quick     # a check of the script (one tiny run, one compile)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RLFIT, TMP, finish_record, print_table, start_record  # noqa: E402

from rlfit.planning.out_of_memory import EXIT_OUT_OF_MEMORY  # noqa: E402

GIB = 1 << 30
TARGET_RATIO = 0.9


def child_env(fraction: float | None) -> dict[str, str]:
    """This process's environment with the GPU pool capped at `fraction` of total memory (None: JAX's default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")}
    if fraction is not None:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.4f}"
    return env


def run_rlfit(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(RLFIT), *args], capture_output=True, text=True, env=env, timeout=timeout)


def device_total_bytes() -> tuple[str, str, int]:
    """(platform, name, total bytes) of this machine's device, from `rlfit doctor --json` in a child process."""
    result = run_rlfit(["doctor", "--json"], child_env(None), 300)
    device = json.loads(result.stdout)["device"]
    if not device.get("total_bytes"):
        raise SystemExit(f"rlfit doctor could not tell the total memory of {device['name']}; cannot cap budgets")
    return device["platform"], device["name"], int(device["total_bytes"])


def plan_choice(env_name: str, preset: str, overrides: list[str], budget: dict[str, Any], on_gpu: bool,
                timeout: float) -> dict[str, Any]:
    """`rlfit plan --json` under the budget: the chosen sizes, predicted bytes and the budget it saw."""
    args = ["plan", env_name, "--preset", preset, "--json", *sum((["--set", o] for o in overrides), [])]
    if not on_gpu:
        args += ["--device-memory", f"{budget['bytes']}B", "--target", "cpu"]
    result = run_rlfit(args, child_env(budget["fraction"]), timeout)
    if result.returncode != 0:
        return {"error": result.stderr.strip()[-500:], "returncode": result.returncode}
    return json.loads(result.stdout)


def iteration_sps(run_dir: Path) -> list[float]:
    """Every training iteration's env-steps/s from the run's metrics.jsonl."""
    from rlfit.sinks.jsonl import read_rows

    return [r["sps"] for r in read_rows(run_dir / "metrics.jsonl") if r.get("kind") == "train"]


def train(env_name: str, preset: str, overrides: list[str], sizes: dict[str, int] | None, auto_args: list[str],
          iterations: int, steps_per_iteration: int, fraction: float | None, work: Path, timeout: float) -> dict[str, Any]:
    """One `rlfit train` of `iterations` iterations in a child process; its exit code, steps/s and memory."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work)) / "run"
    sets = list(overrides) + ["run.oom_backoff=false", "run.eval_every=0", f"run.save_interval={iterations + 1}",
                              "run.num_eval_envs=16"]
    if sizes is not None:
        sets += [f"ppo.{key}={sizes[key]}" for key in ("num_envs", "batch_size", "num_minibatches", "unroll_length")]
    args = ["train", env_name, "--preset", preset, *sum((["--set", s] for s in sets), []), *auto_args,
            "--timesteps", str(iterations * steps_per_iteration), "--run-dir", str(run_dir), "--quiet"]
    started = time.perf_counter()
    try:
        result = run_rlfit(args, child_env(fraction), timeout)
        returncode, stderr = result.returncode, result.stderr
    except subprocess.TimeoutExpired:
        returncode, stderr = None, f"timed out after {timeout:.0f} s"
    wall_s = time.perf_counter() - started
    per_iteration = iteration_sps(run_dir)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    plan_path = run_dir / "plan.json"
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else {}
    after_first = per_iteration[1:] or per_iteration
    return {
        "returncode": returncode,
        "out_of_memory": returncode == EXIT_OUT_OF_MEMORY,
        "error": stderr.strip().splitlines()[-1][:400] if returncode not in (0,) and stderr.strip() else None,
        "sizes": plan.get("sizes", sizes),
        "sps_median": round(statistics.median(after_first), 1) if after_first else None,
        "sps_per_iteration": [round(s, 1) for s in per_iteration],
        "compile_s": summary.get("compile_s"),
        "predicted_bytes": plan.get("predicted_bytes"),
        "device_peak_bytes": summary.get("device_peak_bytes"),
        "wall_s": round(wall_s, 1),
    }


def steps_per_iteration(sizes: dict[str, int]) -> int:
    """Env steps of one iteration of `sizes` (a plan's sizes as a dict)."""
    from rlfit.algos.ppo.sizes import BatchSizes

    return BatchSizes(**{k: sizes[k] for k in BatchSizes._fields}).steps_per_iteration


def iterations_for(sizes: dict[str, int], args: argparse.Namespace) -> int:
    """`--iterations`, or more where that many iterations would not reach `--min-steps` env steps."""
    return max(args.iterations, -(-args.min_steps // steps_per_iteration(sizes)))


def sweep_sizes(base: dict[str, int], smallest: int, largest: int) -> list[dict[str, int]]:
    """The config's proportions at every power of two in [smallest, largest], as the planner scales them."""
    from rlfit.algos.ppo.sizes import BatchSizes
    from rlfit.algos.ppo.candidates import candidate_sizes

    keys = ("num_envs", "batch_size", "num_minibatches", "unroll_length")
    scaled = candidate_sizes(BatchSizes(*(base[k] for k in keys)), smallest=smallest, largest=largest)
    return [s._asdict() for s in scaled]


def measure_budget(name: str, budget: dict[str, Any], args: argparse.Namespace, on_gpu: bool,
                   measured: dict[int, dict[str, Any]], work: Path) -> dict[str, Any]:
    """Plan, the planner's run and the sweep for one budget; `measured` carries sweep points between budgets."""
    overrides = list(args.set)
    plan = plan_choice(args.env, args.preset, overrides, budget, on_gpu, args.timeout)
    record: dict[str, Any] = {"budget": name, "budget_bytes": budget["bytes"], "mem_fraction": budget["fraction"],
                              "planner_budget_bytes": plan.get("budget_bytes"), "plan_error": plan.get("error")}
    if not plan.get("chosen"):
        record["chosen"] = None
        return record
    chosen = {k: plan["chosen"][k] for k in ("num_envs", "batch_size", "num_minibatches", "unroll_length")}
    auto_args = ["--num-envs", "auto"] + ([] if on_gpu else ["--device-memory", f"{budget['bytes']}B"])
    print(f"[{name}] planner chose num_envs={chosen['num_envs']} "
          f"(predicted {plan['chosen']['predicted_bytes'] / GIB:.2f} GiB of {plan['budget_bytes'] / GIB:.2f} GiB)",
          flush=True)
    planner = train(args.env, args.preset, overrides, None, auto_args, iterations_for(chosen, args),
                    steps_per_iteration(chosen),
                    budget["fraction"], work, args.timeout)
    record.update(chosen=chosen, chosen_predicted_bytes=plan["chosen"]["predicted_bytes"], planner_run=planner)
    print(f"[{name}] planner run: exit {planner['returncode']}, {planner['sps_median']} env-steps/s", flush=True)

    sweep = []
    for sizes in sweep_sizes(plan["requested"], args.sweep_min, args.sweep_max):
        n = sizes["num_envs"]
        if n in measured and not measured[n]["out_of_memory"]:
            point = {**measured[n], "reused_from": measured[n]["measured_under"]}
        elif planner["returncode"] == 0 and planner["sizes"] == sizes:
            # The planner's run trained these very sizes under this budget: the same program, measured already.
            point = {**planner, "measured_under": name, "planner_run": True}
            measured[n] = point
        else:
            point = {**train(args.env, args.preset, overrides, sizes, [], iterations_for(sizes, args),
                             steps_per_iteration(sizes), budget["fraction"], work, args.timeout), "measured_under": name}
            if point["returncode"] == 0:
                measured[n] = point
        sweep.append({"num_envs": n, **point})
        print(f"[{name}] sweep num_envs={n}: exit {point['returncode']}, {point['sps_median']} env-steps/s"
              + (f" (from budget {point['reused_from']})" if "reused_from" in point else "")
              + (" (the planner's run)" if point.get("planner_run") and "reused_from" not in point else ""), flush=True)
        if on_gpu and point["returncode"] != 0:
            break  # larger sizes need more memory still
    ran = [p for p in sweep if p["returncode"] == 0 and p["sps_median"]]
    best = max(ran, key=lambda p: p["sps_median"]) if ran else None
    record["sweep"] = sweep
    if best is not None:
        record["best"] = {"num_envs": best["num_envs"], "sps_median": best["sps_median"]}
        if planner["sps_median"]:
            record["ratio_to_best"] = round(planner["sps_median"] / best["sps_median"], 3)
            record["within_target"] = record["ratio_to_best"] >= TARGET_RATIO and planner["returncode"] == 0
    return record


def peak_gib(record: dict[str, Any]) -> float | None:
    """The planner run's measured device peak in GiB (None on the CPU, which keeps no statistics)."""
    peak = (record.get("planner_run") or {}).get("device_peak_bytes")
    return round(peak / GIB, 2) if peak else None


def budgets_for(names: list[str], on_gpu: bool, total: int) -> dict[str, dict[str, Any]]:
    """Budget name -> bytes and the GPU pool fraction that imposes it (None: JAX's default, or the CPU)."""
    budgets = {}
    for name in names:
        if name == "full":
            budgets[name] = {"bytes": total, "fraction": None}
            continue
        size = int(float(name) * GIB)
        fraction = size / total if on_gpu else None
        if fraction is not None and fraction > 1:
            raise SystemExit(f"budget {name} GiB is more than the device's {total / GIB:.1f} GiB")
        budgets[name] = {"bytes": size, "fraction": fraction}
    return budgets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    parser.add_argument("--budgets", nargs="+", default=["0.25", "4"], help="GiB each, or 'full'")
    parser.add_argument("--iterations", type=int, default=4, help="training iterations per run (at least)")
    parser.add_argument("--min-steps", type=int, default=0,
                        help="at least this many env steps per run (more iterations for small sizes, less noise)")
    parser.add_argument("--sweep-min", type=int, default=128)
    parser.add_argument("--sweep-max", type=int, default=65536)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    parser.add_argument("--out", type=Path, help="JSON path (default: results/planner_sweep_<cpu|gpu>.json)")
    parser.add_argument("--quick", action="store_true", help="a check of the script: one tiny run of the toy "
                        "environment at the same sizes (one compile)")
    args = parser.parse_args()
    if args.quick:
        args.env, args.preset, args.budgets, args.iterations = "tests.toy_env:make", "smoke", ["0.05"], 2
        # The toy's choice on a 2-core CPU (the cap, 256 environments a core), so the sweep's one size is the
        # planner's run, reused (`planner_run`), not trained again.
        args.sweep_min = args.sweep_max = 512
        args.set = args.set + ["env.episode_length=50", "ppo.value_hidden=[32,32]"]
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                 os.environ.get("PYTHONPATH")]))

    platform, device_name, total = device_total_bytes()
    on_gpu = platform != "cpu"
    if not on_gpu:
        args.sweep_max = min(args.sweep_max, 8192) if not args.quick else args.sweep_max
    record = start_record("planner_sweep_quick" if args.quick else f"planner_sweep_{'gpu' if on_gpu else 'cpu'}")
    record.update(env=args.env, preset=args.preset, overrides=args.set, device=device_name, platform=platform,
                  device_total_bytes=total, iterations=args.iterations, min_steps=args.min_steps,
                  target_ratio=TARGET_RATIO,
                  method=("GPU pool capped with XLA_PYTHON_CLIENT_MEM_FRACTION" if on_gpu else
                          "CPU: budget given to the planner with --device-memory; sweep uncapped"))
    TMP.mkdir(parents=True, exist_ok=True)
    measured: dict[int, dict[str, Any]] = {}
    results = []
    with tempfile.TemporaryDirectory(dir=TMP) as work:
        for name, budget in budgets_for(args.budgets, on_gpu, total).items():
            results.append(measure_budget(name, budget, args, on_gpu, measured, Path(work)))
    record["budgets"] = results

    print()
    print_table([[r["budget"], (r.get("chosen") or {}).get("num_envs"), (r.get("planner_run") or {}).get("returncode"),
                  (r.get("planner_run") or {}).get("sps_median"), (r.get("best") or {}).get("num_envs"),
                  (r.get("best") or {}).get("sps_median"), r.get("ratio_to_best"),
                  peak_gib(r)]
                 for r in results],
                ["budget GiB", "chosen num_envs", "exit", "env-steps/s", "sweep best num_envs", "best env-steps/s",
                 "ratio", "peak GiB"])
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
