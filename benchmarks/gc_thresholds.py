"""CPU seconds an `rlfit` process spends before XLA compiles anything (importing JAX and Playground, building the
environment and the algorithm, tracing and lowering the training step) under Python's default garbage-collector
thresholds (700, 10, 10) and under the ones `rlfit` sets at its start (`rlfit.cli.gc_thresholds`).

Each run is a fresh child process that sets its thresholds first, as `rlfit.cli.run` does, then times each stage
with its own CPU clock (user + system: what the work costs, whatever else shares the cores), counts the collections
of each generation and reads its peak resident memory. The two settings alternate, repeat after repeat, so a burst
of load on the shared cores falls on both. Nothing is compiled: XLA's compile (C++) does not run the collector.

    .venv/bin/python benchmarks/gc_thresholds.py              # CartpoleBalance and G1 smoke, 5 repeats
    .venv/bin/python benchmarks/gc_thresholds.py --cases CartpoleBalance:quick --repeats 3
    .venv/bin/python benchmarks/gc_thresholds.py --quick      # the toy environment, 1 repeat (results/tmp/)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MENAGERIE, TMP, TOY_ENV, child_env, finish_record, print_table, start_record, toy_env_importable  # noqa: E402

SETTINGS = ("python", "rlfit")
"""Python's default thresholds, and rlfit's (`collect_less_often`)."""
CASES = ("CartpoleBalance:smoke", "G1JoystickFlatTerrain:smoke:env.observation_set=robot")
"""ENV:PRESET[:OVERRIDE...]: what a user's first run builds (the smoke preset's sizes; tracing does not depend on
them), and the robot the tracing takes longest on (G1 needs the offline Menagerie copy)."""
QUICK_CASE = f"{TOY_ENV}:smoke"
STAGES = ("imports", "build", "trace_and_lower")

CHILD = """
import gc, json, resource, sys
setting, env, preset, overrides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if setting == "rlfit":
    from rlfit.cli.gc_thresholds import collect_less_often
    collect_less_often()
else:
    gc.set_threshold(700, 10, 10)  # Python's default, whatever the interpreter was started with
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
seconds, start = {}, cpu()
import rlfit.api  # as the command line imports it first (MJX without Warp on a CPU)
import jax
from rlfit.config.schema import resolve
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.run.trainer import Trainer
seconds["imports"] = cpu() - start; start = cpu()
from rlfit.errors import UserError
try:
    config = resolve(env, preset, None, overrides)
    trainer = Trainer.build(config, make_plan(config, config_sizes(config), devices=1))
except UserError as error:  # bad input (an unknown environment, a bad override): one line, exit 2
    sys.exit(print(error, file=sys.stderr) or 2)
state = trainer.abstract_state()
seconds["build"] = cpu() - start; start = cpu()
jax.jit(trainer.train_iteration_fn()).lower(state)
seconds["trace_and_lower"] = cpu() - start
print(json.dumps({"seconds": seconds, "thresholds": gc.get_threshold(),
                  "collections": [generation["collections"] for generation in gc.get_stats()],
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
"""The child: SETTING ENV PRESET [OVERRIDE...]; prints its record as one JSON line."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), metavar="ENV:PRESET[:OVERRIDE...]",
                        help="what to build and trace (default: CartpoleBalance and G1, smoke preset)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each setting per case (default: 5)")
    parser.add_argument("--quick", action="store_true", help="the toy environment, 1 repeat (results/tmp/)")
    args = parser.parse_args()
    if args.repeats < 1:
        refuse(f"--repeats must be at least 1, got {args.repeats}")
    for case in args.cases:
        name, preset, _ = split_case(case)
        if not name or not preset:
            refuse(f"a case is ENV:PRESET[:OVERRIDE...], got {case!r}")
    if args.quick:
        args.cases, args.repeats = [QUICK_CASE], 1
    return args


def refuse(message: str) -> None:
    """Bad input: one line, exit 2, nothing measured or written."""
    print(f"gc_thresholds.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def split_case(case: str) -> tuple[str, str, list[str]]:
    """ENV:PRESET[:OVERRIDE...] -> (env, preset, overrides). The overrides are the trailing parts with an `=`, the
    preset the part before them, the env everything before that (`gymnax:Pendulum-v1`, `tests.toy_env:make`)."""
    parts = case.split(":")
    first_override = next((index for index, part in enumerate(parts) if "=" in part), len(parts))
    if first_override < 2:
        return "", "", parts[first_override:]
    return ":".join(parts[:first_override - 1]), parts[first_override - 1], parts[first_override:]


def run_child(setting: str, case: str, env: dict[str, str]) -> dict[str, Any]:
    """One child's record (`CHILD`); exits with the child's error where it failed."""
    name, preset, overrides = split_case(case)
    done = subprocess.run([sys.executable, "-c", CHILD, setting, name, preset, *overrides], env=env,
                          capture_output=True, text=True)
    if done.returncode == 2:  # the case's config refused (`rlfit.errors.UserError`)
        refuse(f"{case}: {done.stderr.strip().splitlines()[-1]}")
    if done.returncode != 0:
        sys.exit(f"gc_thresholds: {case} under {setting} failed (exit {done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One setting's runs of a case: every run, and the median of each stage, of their total and of the peak memory."""
    totals = [round(sum(run["seconds"].values()), 3) for run in runs]
    return {"runs": runs, "thresholds": runs[-1]["thresholds"],
            "median_s": {stage: round(statistics.median(run["seconds"][stage] for run in runs), 3) for stage in STAGES},
            "total_s": totals, "median_total_s": round(statistics.median(totals), 3),
            "median_peak_rss_mib": round(statistics.median(run["peak_rss_mib"] for run in runs), 1),
            "median_collections": [statistics.median(run["collections"][g] for run in runs) for g in range(3)]}


def measure_case(case: str, repeats: int, env: dict[str, str]) -> dict[str, Any]:
    """Both settings `repeats` times each, alternating; their summaries and the ratio of their median totals."""
    runs: dict[str, list[dict[str, Any]]] = {setting: [] for setting in SETTINGS}
    for repeat in range(repeats):
        for setting in SETTINGS:
            runs[setting].append(run_child(setting, case, env))
        print(f"{case}: repeat {repeat + 1}/{repeats} done", flush=True)
    settings = {setting: summarize(runs[setting]) for setting in SETTINGS}
    ratio = settings["rlfit"]["median_total_s"] / settings["python"]["median_total_s"]
    return {"settings": settings, "rlfit_over_python": round(ratio, 3)}


def main() -> None:
    args = parse_args()
    toy_env_importable()
    record = start_record("gc_thresholds" + ("_quick" if args.quick else ""))
    record.update({"repeats": args.repeats, "stages": list(STAGES)})
    work = TMP / "gc_thresholds_work"
    work.mkdir(parents=True, exist_ok=True)
    env = child_env(work / "cache", None, RLFIT_PROGRAM_STORE="0")
    cases = [case for case in args.cases
             if not case.startswith("G1") or Path(env["RLFIT_MENAGERIE_PATH"]).is_dir() or MENAGERIE.is_dir()]
    record["left_out"] = {case: "the offline Menagerie copy is absent" for case in args.cases if case not in cases}
    record["cases"] = {case: measure_case(case, args.repeats, env) for case in cases}
    print_table([(case, setting, *(result["settings"][setting]["median_s"][stage] for stage in STAGES),
                  result["settings"][setting]["median_total_s"], result["settings"][setting]["median_peak_rss_mib"],
                  result["settings"][setting]["median_collections"][2])
                 for case, result in record["cases"].items() for setting in SETTINGS],
                ("case", "thresholds", *(f"{stage} CPU s" for stage in STAGES), "total CPU s", "peak MiB",
                 "full collections"))
    for case, result in record["cases"].items():
        print(f"{case}: rlfit's thresholds / Python's, median total CPU: {result['rlfit_over_python']}")
    finish_record(record)


if __name__ == "__main__":
    main()
