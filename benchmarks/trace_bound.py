"""The planner's bound from the lowered program against XLA's exact analysis of the same program.

For each case (environment, preset, algorithm) a child process lowers the training step at the sizes the planner
would choose when memory does not limit (on this CPU: `rlfit.planning.measure.unlimited_choice` within the core cap),
times the lowering and the walk of its StableHLO (`rlfit.hardware.program_memory.lowered_bound`), then compiles it as the
planner's probes compile (`rlfit.run.probes.probe_options`) and reads XLA's memory analysis. The bound must never
be below XLA's figure; how far above it is what the planner gives up when it decides on the bound. Fresh compile
cache and program store off in every child, so every compile is cold.

    .venv/bin/python benchmarks/trace_bound.py
    .venv/bin/python benchmarks/trace_bound.py --cases CartpoleBalance:quick:ppo --tag quick
    .venv/bin/python benchmarks/trace_bound.py --quick    # the toy environment: a check of the script
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, child_env, finish_record, load_1min, print_table, start_record  # noqa: E402

CHILD = """
import json, sys, time
import rlfit.api  # as the command line imports it first (MJX without Warp on a CPU)
import jax
from rlfit.config.schema import resolve
from rlfit.envs import load_env
from rlfit.hardware.jax_setup import configure_jax
from rlfit.hardware.program_memory import lowered_bound
from rlfit.planning.budget import num_envs_cap
from rlfit.planning.measure import unlimited_choice
from rlfit.run.probes import analyze_compiled, lower_iteration, probe_options

env_name, preset, algo = sys.argv[1:4]
configure_jax("fp32")
config = resolve(env_name, preset, overrides=[f"algo={algo}"])
env = load_env(config.env, jax.default_backend())
sizes = unlimited_choice(config, num_envs_cap(jax.default_backend()))
started = time.perf_counter()
lowered, trainer = lower_iteration(config, sizes, env)
lowered_at = time.perf_counter()
bound = lowered_bound(lowered)
walked_at = time.perf_counter()
point = analyze_compiled(config, sizes, lowered.compile(compiler_options=probe_options(trainer.step_ynn_fusions)))
compiled_at = time.perf_counter()
print(json.dumps({"sizes": sizes._asdict(), "lower_s": lowered_at - started, "walk_s": walked_at - lowered_at,
                  "compile_s": compiled_at - walked_at, "operations": bound.operations,
                  "bound_bytes": bound.total_bytes, "bound_argument_bytes": bound.argument_bytes,
                  "bound_peak_bytes": bound.peak_bytes, "xla": point.to_dict(), "xla_bytes": point.total_bytes,
                  "ratio": bound.total_bytes / point.total_bytes}))
"""

CASES = ("CartpoleBalance:quick:ppo", "CheetahRun:quick:ppo", "G1JoystickFlatTerrain:g1:ppo", "CartpoleBalance:quick:sac",
         "CheetahRun:quick:fasttd3", "CartpoleBalance:pixels:sac")
QUICK_CASE = "tests.toy_env:make:smoke:ppo"
"""The tests' point-reaching environment (no physics: it lowers and compiles in seconds); the children run from the
repository root, so `tests` imports."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="ENV:PRESET:ALGO each")
    parser.add_argument("--tag", default="", help="a suffix for the record's name")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/trace_bound[_TAG].json)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CASE} only: a check of the script "
                        "(results/tmp/)")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.tag = [QUICK_CASE], "quick"
    return args


def measure(case: str) -> dict:
    env_name, preset, algo = case.rsplit(":", 2)  # ENV may be module:factory
    with tempfile.TemporaryDirectory(prefix="rlfit-trace-bound-") as work:
        load = load_1min()
        done = subprocess.run([sys.executable, "-c", CHILD, env_name, preset, algo], cwd=REPO,
                              env=child_env(Path(work) / "cache", None, RLFIT_PROGRAM_STORE="0"),
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{case}: the child failed:\n{done.stderr[-3000:]}")
    return {"case": case, **json.loads(done.stdout.strip().splitlines()[-1]), "loadavg_1min_before": load}


def main() -> None:
    args = parse_args()
    record = start_record("trace_bound" + (f"_{args.tag}" if args.tag else ""))
    record["cases"] = []
    rows = []
    for case in args.cases:
        result = measure(case)
        record["cases"].append(result)
        rows.append([case, result["sizes"]["num_envs"], result["operations"], round(result["xla_bytes"] / 2**20, 1),
                     round(result["bound_bytes"] / 2**20, 1), round(result["ratio"], 2),
                     round(result["lower_s"], 1), round(result["walk_s"], 2), round(result["compile_s"], 1)])
        print(rows[-1], flush=True)
    record["never_below_xla"] = all(c["bound_bytes"] >= c["xla_bytes"] for c in record["cases"])
    print_table(rows, ["case", "num_envs", "operations", "XLA MiB", "bound MiB", "bound/XLA", "lower s", "walk s",
                       "XLA compile s"])
    print(f"bound never below XLA's analysis: {record['never_below_xla']}")
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
