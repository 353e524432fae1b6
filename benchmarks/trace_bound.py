"""The planner's estimate and bound from the lowered program against XLA's exact analysis of the same program.

For each case (environment, preset, algorithm) a child process lowers the training step at the sizes the planner
would choose when memory does not limit (on this CPU: `rlfit.planning.measure.unlimited_choice` within the core cap),
or at the config's own sizes (`--config-sizes`: what a run of it trains), or at each of `--num-envs` (the
config's sizes scaled, `rlfit.algos.ppo.candidates.scale_sizes`; an off-policy
algorithm's environments alone), times the lowering and the walk of its StableHLO
(`rlfit.hardware.program_memory.lowered_bound`: the bound, every value its own buffer, and the estimate the planner
uses, XLA's fusion modelled), then compiles it as the planner's probes compile (`rlfit.run.probes.probe_options`)
and reads XLA's memory analysis. The bound must never be below XLA's figure; the estimate should lie within 10% of
it (issue 65, item 3). Fresh compile cache and program store off in every child, so every compile is cold.
`--no-xla` skips the compile (the estimate at sizes whose compile takes minutes: the GPU check, beside a run's
measured peak).

    .venv/bin/python benchmarks/trace_bound.py
    .venv/bin/python benchmarks/trace_bound.py --cases CartpoleBalance:quick:ppo --num-envs 128 512 2048 --tag sizes
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
from rlfit.algos.ppo.candidates import scale_sizes
from rlfit.config.schema import resolve
from rlfit.envs import load_env
from rlfit.hardware.jax_setup import configure_jax
from rlfit.hardware.program_memory import lowered_bound
from rlfit.planning.budget import num_envs_cap
from rlfit.planning.measure import unlimited_choice
from rlfit.planning.plan import config_sizes
from rlfit.run.probes import analyze_compiled, lower_iteration, probe_options

env_name, preset, algo, compile_too = sys.argv[1:5]
configure_jax("fp32")
config = resolve(env_name, preset, overrides=[f"algo={algo}", *sys.argv[6:]])
env = load_env(config.env, jax.default_backend())
planned = unlimited_choice(config, num_envs_cap(jax.default_backend()))
counts = [int(n) for n in sys.argv[5].split(",") if n.isdigit()]
chosen = ([config_sizes(config)] if sys.argv[5] == "config" else [planned] if not counts
          else [scale_sizes(config_sizes(config), n) for n in counts] if algo == "ppo"
          else [planned._replace(num_envs=n) for n in counts])
for sizes in chosen:
    started = time.perf_counter()
    lowered, trainer = lower_iteration(config, sizes, env)
    lowered_at = time.perf_counter()
    bound = lowered_bound(lowered)
    walked_at = time.perf_counter()
    point = (analyze_compiled(config, sizes, lowered.compile(compiler_options=probe_options(trainer.step_ynn_fusions)))
             if compile_too == "1" else None)
    compiled_at = time.perf_counter()
    xla = point.total_bytes if point else None
    print(json.dumps({"sizes": sizes._asdict(), "lower_s": lowered_at - started, "walk_s": walked_at - lowered_at,
                      "compile_s": compiled_at - walked_at if point else None, "operations": bound.operations,
                      "bound_bytes": bound.total_bytes, "bound_argument_bytes": bound.argument_bytes,
                      "bound_peak_bytes": bound.peak_bytes, "estimate_bytes": bound.estimate_bytes,
                      "estimate_peak_bytes": bound.fused_peak_bytes,
                      "xla": point.to_dict() if point else None, "xla_bytes": xla,
                      "ratio": bound.total_bytes / xla if xla else None,
                      "estimate_ratio": bound.estimate_bytes / xla if xla else None}), flush=True)
"""

CASES = ("CartpoleBalance:quick:ppo", "CheetahRun:quick:ppo", "G1JoystickFlatTerrain:g1:ppo", "CartpoleBalance:quick:sac",
         "CheetahRun:quick:fasttd3", "CartpoleBalance:pixels:sac")
QUICK_CASE = "tests.toy_env:make:smoke:ppo"
"""The tests' point-reaching environment (no physics: it lowers and compiles in seconds); the children run from the
repository root, so `tests` imports."""
WITHIN = 0.10
"""Issue 65's target for the estimate: within 10% of XLA's analysis."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="ENV:PRESET:ALGO each")
    parser.add_argument("--num-envs", nargs="+", type=int, default=[],
                        help="sizes to measure each case at (default: the planner's, once)")
    parser.add_argument("--config-sizes", action="store_true",
                        help="the config's own sizes (with --set), as `rlfit train` runs them")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every case (as `rlfit train --set`)")
    parser.add_argument("--no-xla", action="store_true", help="the bound and estimate only: no compile")
    parser.add_argument("--tag", default="", help="a suffix for the record's name")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/trace_bound[_TAG].json)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CASE} only: a check of the script "
                        "(results/tmp/)")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.tag = [QUICK_CASE], "quick"
    return args


def measure(case: str, sizes: list[str], overrides: list[str], compile_too: bool) -> list[dict]:
    """One child per case: a record per size (`sizes`: numbers of environments, ["config"] for the config's own,
    [] for the planner's), in order, with the load before it."""
    env_name, preset, algo = case.rsplit(":", 2)  # ENV may be module:factory
    with tempfile.TemporaryDirectory(prefix="rlfit-trace-bound-") as work:
        load = load_1min()
        done = subprocess.run([sys.executable, "-c", CHILD, env_name, preset, algo, "1" if compile_too else "0",
                               ",".join(sizes), *overrides], cwd=REPO,
                              env=child_env(Path(work) / "cache", None, RLFIT_PROGRAM_STORE="0"),
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{case}: the child failed:\n{done.stderr[-3000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return [{"case": case, **json.loads(line), "loadavg_1min_before": load} for line in lines]


def summarize(record: dict) -> None:
    """The record's verdicts: the bound never below XLA's analysis; the estimate within WITHIN of it."""
    measured = [c for c in record["cases"] if c["xla_bytes"]]
    record["never_below_xla"] = all(c["bound_bytes"] >= c["xla_bytes"] for c in measured)
    errors = [c["estimate_ratio"] - 1 for c in measured]
    record["estimate_error_range"] = [min(errors), max(errors)] if errors else None
    record["estimate_within_10_percent"] = all(abs(e) <= WITHIN for e in errors) if errors else None


def row(result: dict) -> list:
    def mib(value: int | None) -> float | None:
        return None if value is None else round(value / 2**20, 1)

    ratio, estimate = result["ratio"], result["estimate_ratio"]
    return [result["case"], result["sizes"]["num_envs"], result["operations"], mib(result["xla_bytes"]),
            mib(result["bound_bytes"]), None if ratio is None else round(ratio, 2), mib(result["estimate_bytes"]),
            None if estimate is None else f"{estimate - 1:+.1%}", round(result["lower_s"], 1),
            round(result["walk_s"], 2), None if result["compile_s"] is None else round(result["compile_s"], 1)]


def main() -> None:
    args = parse_args()
    record = start_record("trace_bound" + (f"_{args.tag}" if args.tag else ""))
    record.update(cases=[], num_envs=args.num_envs, config_sizes=args.config_sizes, overrides=args.overrides,
                  xla=not args.no_xla)
    rows = []
    for case in args.cases:
        sizes = ["config"] if args.config_sizes else [str(n) for n in args.num_envs]
        for result in measure(case, sizes, args.overrides, not args.no_xla):
            record["cases"].append(result)
            rows.append(row(result))
            print(rows[-1], flush=True)
        summarize(record)
        finish_record(record, args.out)  # after each case, so a run stopped by a time limit keeps what it measured
    print_table(rows, ["case", "num_envs", "operations", "XLA MiB", "bound MiB", "bound/XLA", "estimate MiB",
                       "estimate - XLA", "lower s", "walk s", "XLA compile s"])
    print(f"bound never below XLA's analysis: {record['never_below_xla']}; estimate within 10% of it: "
          f"{record['estimate_within_10_percent']} (errors {record['estimate_error_range']})")


if __name__ == "__main__":
    main()
