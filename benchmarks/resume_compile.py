"""Fast restart: with a fresh compilation cache, how long does a resumed run spend compiling?

Method: point RLFIT_CACHE_DIR at an empty directory; `rlfit train ENV --preset quick` for a few iterations;
then `rlfit resume` the same run (a new process, as after a disconnect) to a few more. `compile_s` in
summary.json is the compile time of each session (training iteration + evaluator, ahead of time).

    .venv/bin/python benchmarks/resume_compile.py [--env CartpoleBalance]
    .venv/bin/python benchmarks/resume_compile.py --quick    # the toy environment, smoke preset: a check of the script
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import TOY_ENV, finish_record, start_record

REPO = Path(__file__).resolve().parents[1]
"""The tests' point-reaching environment (no physics: it compiles in seconds); REPO on the children's PYTHONPATH
imports it."""


def rlfit(env: dict, *args: str) -> float:
    """Runs `rlfit ARGS`; returns its wall-clock seconds (imports included)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlfit", *args], env=env, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--quick", action="store_true", help=f"the toy environment ({TOY_ENV}), smoke preset: a check "
                        "of the script (results/tmp/)")
    parser.add_argument("--out", default=None, help="JSON path (default results/resume_compile.json)")
    args = parser.parse_args()
    if args.quick:
        args.env, args.preset = TOY_ENV, "smoke"
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        env = dict(os.environ, RLFIT_CACHE_DIR=str(Path(tmp) / "cache"), PYTHONPATH=os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        load_before = os.getloadavg()[0]
        first_wall = rlfit(env, "train", args.env, "--preset", args.preset, "--set", "run.eval_every=0",
                           "--set", "run.save_interval=2", "--run-dir", str(run_dir), "--quiet",
                           "--set", "run.num_timesteps=1")
        first = json.loads((run_dir / "summary.json").read_text())
        resumed_wall = rlfit(env, "resume", str(run_dir), "--iterations", "3", "--quiet")
        resumed = json.loads((run_dir / "summary.json").read_text())
    report = start_record("resume_compile_quick" if args.quick else "resume_compile") | {
        "env": args.env,
        "preset": args.preset,
        "device": first["device"],
        "load_average_1min_before_first_session": load_before,
        "first_session_compile_s": first["compile_s"],
        "resumed_session_compile_s": resumed["compile_s"],
        "ratio": resumed["compile_s"] / first["compile_s"],
        "first_session_wall_s": first_wall,
        "resumed_session_wall_s": resumed_wall,
        "target_ratio_at_most": 0.5,
    }
    report["meets_target"] = report["ratio"] <= 0.5
    finish_record(report, Path(args.out) if args.out else None)
    print(f"compile_s first session {first['compile_s']:.2f}s, resumed {resumed['compile_s']:.2f}s "
          f"(ratio {report['ratio']:.2f})")


if __name__ == "__main__":
    main()
