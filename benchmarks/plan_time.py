"""What planning costs: `rlfit plan` wall time and compiles, and `train --num-envs auto` against a plain `train`.

Each case is a new `rlfit` process with a fresh, empty compile cache (RLFIT_CACHE_DIR) and JAX_LOG_COMPILES=1, so
every XLA compile is listed with its seconds. A compile of the training step is a line 'Finished XLA compilation
of jit(train_iteration)' (the planner's probes and training's step alike); the evaluation is jit(evaluate).

1. plan: `rlfit plan ENV --preset PRESET --json`: wall time, step compiles, the chosen sizes and the memory line.
2. auto: `rlfit train ENV --preset PRESET --num-envs auto` for one iteration (`run.num_timesteps=1`): wall time,
   step compiles, summary.json's `programs` and `time_to_first_step_s`.
3. plain: `rlfit train` the same at the sizes auto chose (plan.json: `--num-envs N` and `--set ppo.batch_size=...`
   etc.): the same figures. Each train case also records its first iteration's seconds and the time to its start.

`--src DIR` runs the cases on another checkout's `src` (PYTHONPATH), e.g. the code before a change; `--timeout`
stops a case after that many seconds (reported as "over N s").

    .venv/bin/python benchmarks/plan_time.py --env CartpoleBalance --preset quick
    .venv/bin/python benchmarks/plan_time.py --env G1JoystickFlatTerrain --preset g1 --cases plan --timeout 1800
    .venv/bin/python benchmarks/plan_time.py --env CartpoleBalance --preset quick --cases plan --src /tmp/before/src --tag before
    .venv/bin/python benchmarks/plan_time.py --quick    # plan and plain on the toy environment: a check of the script
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brax_compare import COMPILE_LINE  # noqa: E402
from common import TOY_ENV, REPO, RESULTS, TMP, child_env, finish_record, load_1min, print_table, start_record  # noqa: E402

STEP, EVALUATION = "jit(train_iteration)", "jit(evaluate)"
"""The tests' point-reaching environment (no physics: it plans and compiles in seconds); REPO on the children's
PYTHONPATH imports it."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--cases", nargs="+", default=["plan", "auto", "plain"], choices=("plan", "auto", "plain"))
    parser.add_argument("--src", help="run on this checkout's src folder (PYTHONPATH), e.g. the code before a change")
    parser.add_argument("--tag", default="", help="a suffix for the record's name (e.g. before)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds after which a case is stopped")
    parser.add_argument("--quick", action="store_true", help=f"plan, then plain at its choice, on the toy environment "
                        f"({TOY_ENV}), smoke preset: a check of the script (results/tmp/)")
    args = parser.parse_args()
    if args.quick:
        # auto is train_case again, with one more compile: plain at the plan's choice runs the same code once.
        args.env, args.preset, args.cases, args.tag = TOY_ENV, "smoke", ["plan", "plain"], "quick"
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return args


def case_env(cache: Path, src: str | None) -> dict[str, str]:
    return child_env(cache, src, JAX_LOG_COMPILES="1")


def run_case(name: str, argv: list[str], work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Runs `argv` (an rlfit command) in a new process with a fresh cache; wall time, exit code, compiles."""
    log, out = work / f"{name}.log", work / f"{name}.out"
    cache = work / f"cache-{name}"
    command = [sys.executable, "-m", "rlfit", *argv]
    print(f"{name}:", " ".join(command), flush=True)
    load_before, started = load_1min(), time.perf_counter()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("w") as errors, out.open("w") as output:
        try:
            code: int | None = subprocess.run(command, env=case_env(cache, args.src), stdout=output,
                                              stderr=errors, timeout=args.timeout, cwd=work).returncode
        except subprocess.TimeoutExpired:
            code = None
    wall = round(time.perf_counter() - started, 1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = round(after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime, 1)  # 0 for a killed case
    compiles = [(m[1], float(m[2])) for m in COMPILE_LINE.finditer(log.read_text())]
    steps = [round(t, 1) for n, t in compiles if n == STEP]
    return {"argv": command, "log": str(log), "out": str(out), "exit_code": code, "timed_out": code is None, "wall_s": wall,
            "cpu_s": cpu,
            "loadavg_1min_before": load_before, "loadavg_1min_after": load_1min(), "step_compiles": len(steps),
            "step_compile_s": steps, "evaluation_compiles": sum(n == EVALUATION for n, _ in compiles),
            "xla_compile_s_total": round(sum(t for _, t in compiles), 1)}


def plan_case(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    result = run_case("plan", ["plan", args.env, "--preset", args.preset, "--json"], work, args)
    if result["exit_code"] == 0:
        planned = json.loads(Path(result["out"]).read_text())
        result["chosen"] = planned["chosen"]
        kept = ("intercept_bytes", "bytes_per_env", "measured_once", "source")
        result["memory_model"] = {k: planned["memory_model"][k] for k in kept if k in planned["memory_model"]}
        result["probes"] = [p["num_envs"] for p in planned["memory_model"]["points"]]
        result["reasons"] = planned["reasons"]
    return result


def train_case(name: str, args: argparse.Namespace, work: Path, num_envs: str,
               other_sizes: dict[str, Any] | None = None) -> dict[str, Any]:
    """`rlfit train` for one iteration at `num_envs` (with `other_sizes`, PPO's other sizes as well: the plain case
    runs the very sizes auto chose, not the preset's batch at that many environments)."""
    run_dir = work / f"run-{name}"
    sets = [arg for key, value in (other_sizes or {}).items() for arg in ("--set", f"ppo.{key}={value}")]
    argv = ["train", args.env, "--preset", args.preset, "--num-envs", num_envs, "--run-dir", str(run_dir), "--quiet",
            "--set", "run.num_timesteps=1", *sets]
    result = run_case(name, argv, work, args)
    if result["exit_code"] == 0:
        summary = json.loads((run_dir / "summary.json").read_text())
        result.update({key: summary.get(key) for key in ("time_to_first_step_s", "compile_s", "programs")})
        result["sizes"] = json.loads((run_dir / "plan.json").read_text())["sizes"]
        result["num_envs"] = result["sizes"]["num_envs"]
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        first = next(row for row in rows if row.get("kind") == "train")
        result["first_iteration_s"] = first["iteration_s"]
        result["to_first_iteration_start_s"] = round(summary["time_to_first_step_s"] - first["iteration_s"], 1)
    return result


def main() -> None:
    args = parse_args()
    name = f"plan_time_{args.env.replace(':', '_')}_{args.preset}" + (f"_{args.tag}" if args.tag else "")
    record = start_record(name)
    record.update({"env": args.env, "preset": args.preset, "src": args.src or "this checkout", "cases": {}})
    work = Path(tempfile.mkdtemp(prefix="rlfit-plan-time-"))
    if "plan" in args.cases:
        record["cases"]["plan"] = plan_case(args, work)
    if "auto" in args.cases:
        record["cases"]["auto"] = train_case("auto", args, work, "auto")
    if "plain" in args.cases:
        auto = record["cases"].get("auto", {})
        chosen = auto.get("sizes") or record["cases"].get("plan", {}).get("chosen")
        if chosen:
            others = {key: chosen[key] for key in ("batch_size", "num_minibatches", "unroll_length")}
            record["cases"]["plain"] = train_case("plain", args, work, str(chosen["num_envs"]), others)
    rows = [[case, r["wall_s"], r["cpu_s"], "over" if r["timed_out"] else r["exit_code"], r["step_compiles"],
             r["step_compile_s"], r.get("time_to_first_step_s", ""), r.get("to_first_iteration_start_s", "")]
            for case, r in record["cases"].items()]
    print_table(rows, ["case", "wall s", "cpu s", "exit", "step compiles", "their seconds", "time to first step s",
                       "to the first iteration's start s"])
    finish_record(record, (TMP if args.quick else RESULTS) / f"{name}.json")
    if all(r["exit_code"] == 0 for r in record["cases"].values()):
        shutil.rmtree(work, ignore_errors=True)  # its run dirs and compile caches; kept, with the logs, after a failure
    else:
        print(f"logs kept in {work}")


if __name__ == "__main__":
    main()
