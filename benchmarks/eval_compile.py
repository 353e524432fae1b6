"""What compiling the evaluation program costs, cold: rlfit's `Trainer.compile_evaluator` timed in a new process.

For each environment a child process builds the trainer for the preset (`Trainer.build`), then times
`compile_evaluator()`: tracing the evaluation (reset, then a scan of policy steps), lowering it and XLA's compile,
in a fresh, empty compile cache with the program store off, so nothing is read back. `--src DIR` runs the children
on another checkout's `src` (PYTHONPATH), e.g. the code before a change; `--repeats` runs each child that many
times (the median is reported beside each run's seconds).

    .venv/bin/python benchmarks/eval_compile.py --envs CartpoleBalance CheetahRun
    .venv/bin/python benchmarks/eval_compile.py --envs CartpoleBalance CheetahRun --src /tmp/before/src --tag before
    .venv/bin/python benchmarks/eval_compile.py --quick    # the toy environment once: a check of the script
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import TOY_ENV, REPO, child_env, finish_record, load_1min, print_table, start_record  # noqa: E402

CHILD = """
import json, sys, time
import rlfit.api  # as the command line imports it first (MJX without Warp on a CPU)
from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

env, preset, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
configure_jax("fp32")
config = resolve(env, preset, overrides=overrides)
trainer = Trainer.build(config, make_plan(config))
started = time.perf_counter()
trainer.compile_evaluator()
print(json.dumps({"compile_s": time.perf_counter() - started, "num_eval_envs": config.run.num_eval_envs}))
"""

"""The tests' point-reaching environment (no physics: its evaluation compiles in seconds); the children run from
the repository root, so `tests` imports."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartpoleBalance", "CheetahRun"])
    parser.add_argument("--preset", default="quick", help="the preset of every environment but G1 (which takes g1)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="key=value for every child")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--src", help="run on this checkout's src folder (PYTHONPATH), e.g. the code before a change")
    parser.add_argument("--tag", default="", help="a suffix for the record's name (e.g. before)")
    parser.add_argument("--quick", action="store_true", help=f"the toy environment ({TOY_ENV}), smoke preset, once: "
                        "a check of the script (results/tmp/)")
    args = parser.parse_args()
    if args.quick:
        args.envs, args.preset, args.repeats, args.tag = [TOY_ENV], "smoke", 1, "quick"
    return args


def time_once(env_name: str, preset: str, overrides: list[str], src: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlfit-eval-compile-") as work:
        load = load_1min()
        done = subprocess.run([sys.executable, "-c", CHILD, env_name, preset, *overrides], cwd=REPO,
                              env=child_env(Path(work) / "cache", src, RLFIT_PROGRAM_STORE="0"), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{env_name}: the child failed:\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "loadavg_1min_before": load}


def main() -> None:
    args = parse_args()
    record = start_record("eval_compile" + (f"_{args.tag}" if args.tag else ""))
    record["src"] = args.src or "this checkout"
    record["envs"] = {}
    rows = []
    for env_name in args.envs:
        preset = "g1" if env_name.startswith("G1") else args.preset
        runs = [time_once(env_name, preset, args.overrides, args.src) for _ in range(args.repeats)]
        seconds = [round(run["compile_s"], 2) for run in runs]
        record["envs"][env_name] = {"preset": preset, "overrides": args.overrides, "runs": runs,
                                    "median_compile_s": statistics.median(seconds)}
        rows.append([env_name, preset, runs[0]["num_eval_envs"], seconds, statistics.median(seconds)])
    print_table(rows, ["env", "preset", "eval envs", "compile s (each run)", "median s"])
    finish_record(record)


if __name__ == "__main__":
    main()
