"""How long the deployment commands take on this CPU: `rlfit export` (the ONNX file and its deployment bundle),
`rlfit sim2sim` (the JAX-free controller in native MuJoCo, nominal and 2 randomized models, with its video) and
`rlfit sim2sim --sweep` (11 margin conditions), on a G1 smoke run.

    RLFIT_MENAGERIE_PATH=... .venv/bin/python benchmarks/deploy_time.py [--run-dir RUN] [--max-steps 100]

Without --run-dir it first trains `rlfit train G1JoystickFlatTerrain --preset smoke` (not timed). Each command's
wall and CPU seconds (`common.run_timed`) go to results/deploy_time.json with its command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from common import finish_record, run_timed, start_record

REPO = Path(__file__).resolve().parents[1]
G1 = "G1JoystickFlatTerrain"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, help="a G1 run to time the commands on (default: train a smoke run)")
    parser.add_argument("--max-steps", type=int, default=100, help="control steps per sim2sim episode (default 100)")
    parser.add_argument("--out", default=None, help="JSON path (default results/deploy_time.json)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    rlfit = [sys.executable, "-m", "rlfit"]
    record = start_record("deploy_time") | {"env": G1, "max_steps": args.max_steps, "commands": []}
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run_dir or Path(tmp) / "run"
        if args.run_dir is None:
            run_timed([*rlfit, "train", G1, "--preset", "smoke", "--run-dir", str(run), "--quiet"], env)
        out = Path(tmp) / "export"
        out.mkdir()
        onnx = out / "policy.onnx"
        steps = ["--models", "2", "--episodes-per-model", "1", "--max-steps", str(args.max_steps)]
        for argv in (["export", str(run), "--out", str(onnx)],
                     ["sim2sim", str(run), "--onnx", str(onnx), *steps, "--out", str(out)],
                     ["sim2sim", str(run), "--onnx", str(onnx), *steps, "--sweep", "--no-video", "--out", str(out)]):
            timed = run_timed([*rlfit, *argv], env)
            shown = " ".join(["rlfit", *argv]).replace(str(run), "RUN").replace(str(out), "OUT")
            record["commands"].append({"command": shown, **timed})
            print(f"{shown}: {timed['wall_s']:.1f} s wall, {timed['cpu_s']:.1f} s CPU (exit {timed['exit_code']})")
            if timed["exit_code"]:
                raise SystemExit(f"{shown} failed")
        record["video_written"] = (out / "sim2sim.mp4").is_file()
    finish_record(record, Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()
