"""The GPU figures that matter most, from one prepared command of at most 9 minutes, most valuable first.

In this order, each step in a new process with a time box of its own (a slow step cannot eat the rest; one that
would start with too little time left is recorded "not reached"). One call of 490 s reaches the first group; the
others run in later calls by name (`--steps GROUP`, GROUPS below):

 learning  doctor                   `rlfit doctor --json`: the device, its memory, JAX and driver versions
           learn_cheetah_run        CheetahRun PPO at Playground's published settings (`--preset default`: 2,048
                                    environments, 60M env steps) for its box: the final eval reward, the env steps
                                    reached and the evaluation curve, beside Playground's settings and reward
           learn_g1                 G1JoystickFlatTerrain PPO at Playground's published settings (`--preset default`:
                                    8,192 environments, networks 512-256-128), empty compile cache, an evaluation
                                    every 5 iterations: the cold first step, env steps/s, the evaluation curve
 t4        t4_g1_plan               G1 with the guides' T4 recipe (`--preset g1`: the planner sizes it) in a T4's
                                    memory (JAX's pool held to 11.25 GiB, gpu_figures.T4): its plan, the predicted
                                    bytes against the peak, whether it fits, iterations a minute
 t4_1024   t4_g1_1024               the same recipe at the guides' 1,024 environments: the peak, iterations a minute
                                    beside the guides' ~18 on a T4
 brax      cartpole_ppo_playground  rlfit's CartpoleBalance at Playground's settings: env steps/s
           brax_cartpole, brax_g1   Brax's PPO (gpu_brax.py) at the settings of cartpole_ppo_playground and learn_g1:
                                    env steps/s beside rlfit's ("not available" where Brax cannot run on this JAX)
 line      line STEP (when named)   the planner's estimate from the lowered step (trace_bound.py --no-xla) at the
                                    sizes of learn_cheetah_run, learn_g1, t4_g1_1024 and cartpole_ppo_playground, each
                                    beside that step's device peak (gpu_figures.line_headline; the same call, or the
                                    peaks of an earlier call's record)
 earlier   (only when named)        g1_ppo_warm (learn_g1's command again with its cache), trace_bound (three
                                    cases), memory_prediction, fasttd3_g1, g1_randomization_on / _off

It writes DIR/gpu_check.json again after every step (a command cut off keeps what it measured; the step under way
reads "running"), and per run DIR/runs/STEP/{summary.json,plan.json,metrics.jsonl} and DIR/logs/STEP.log.

    .venv/bin/python benchmarks/gpu_bundle.py prepare             # here, once: .gpu/ (wheels, G1 assets), its size
    python3 benchmarks/gpu_check.py --bundle .gpu --out "$OUT/gpu"   # there: the learning group (methods/gpu_check.md)
    python3 benchmarks/gpu_check.py --bundle .gpu --out "$OUT/gpu" --steps t4     # a later call: the T4 group
    .venv/bin/python benchmarks/gpu_check.py --dry-run             # here: the rehearsal, toy stand-ins, minutes
    .venv/bin/python benchmarks/gpu_check.py --dry-run --steps doctor learn_g1    # these steps only

`--dry-run` runs the same steps on this CPU with small stand-ins (tests/toy_env.py's environment, or --stand-in,
for G1 and CheetahRun; the smoke preset; seconds per step; Brax on CartpoleBalance without the shim, so "not
available" on this JAX), prints the size that would travel to the GPU machine, and checks the JSON it wrote (fields
and types; exit 1 when a check fails).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, TMP, load_1min, machine  # noqa: E402
from gpu_bundle import BUNDLE, describe_size, install, transfer_size  # noqa: E402
from gpu_figures import REFERENCE, T4, TARGETS, check_record, headline  # noqa: E402
from gpu_steps import (Boxed, Context, Setup, brax, doctor, learn, line, memory_prediction,  # noqa: E402,F401
                       plain_train, randomization, run_boxed, t4, trace_bound)

TOY_ENV = "tests.toy_env:make"

G1_PLAYGROUND_SIZES = ("--set", "ppo.num_envs=8192", "--set", "ppo.batch_size=256", "--set", "run.fit_to_device=false")
"""Playground's G1 PPO sizes for the earlier steps' guides' recipe (`--preset g1`; FastTD3 and randomization).
Not `--num-envs auto`: on the H200 it chose 65,536 environments, whose one iteration of 10.5M env steps took 98 s
(results/gpu/gpu_check.json, 2026-11-28)."""
EVAL_EVERY = 5
"""The learning steps' iterations between evaluations (CheetahRun: 4.9M env steps, where Playground's 10 evaluations
over 60M are 6M apart; G1: 819,200, where Playground's 20 over 200M are 10M apart): several points of the curve within
the box, and a final reward (the last evaluation's: a run stopped by its budget evaluates no more) at most 5
iterations old."""

GPU = Setup(learn_env="CheetahRun", learn_argv=("--preset", "default", "--set", f"run.eval_every={EVAL_EVERY}"),
            g1="G1JoystickFlatTerrain", g1_learn_argv=("--preset", "default", "--set", f"run.eval_every={EVAL_EVERY}"),
            t4_argv=("--preset", "g1"), t4_num_envs=REFERENCE["t4_guides"]["num_envs"],
            g1_preset="g1", g1_sizes=G1_PLAYGROUND_SIZES, cartpole="CartpoleBalance", cartpole_preset="default",
            brax_envs={"brax_cartpole": ("CartpoleBalance", "default", ()),
                       "brax_g1": ("G1JoystickFlatTerrain", "default", (f"run.eval_every={EVAL_EVERY}",))},
            brax_shim=True,
            trace_cases=("CartpoleBalance:quick:ppo", "CartpoleBalance:quick:sac", "G1JoystickFlatTerrain:g1:ppo"),
            line_cases={"learn_cheetah_run": ("CheetahRun", "default", ()),
                        "learn_g1": ("G1JoystickFlatTerrain", "default", ()),
                        "t4_g1_1024": ("G1JoystickFlatTerrain", "g1", ("ppo.num_envs=1024",)),
                        "cartpole_ppo_playground": ("CartpoleBalance", "default", ())},
            memory_env="CartpoleBalance", memory_num_envs=1024, fasttd3_preset="g1", timesteps={},
            reserve_s={"learn_cheetah_run": 25, "learn_g1": 25, "t4_g1_plan": 30, "t4_g1_1024": 30,
                       "cartpole_ppo_playground": 25},
            boxes={"doctor": 45, "learn_cheetah_run": 200, "learn_g1": 280, "t4_g1_plan": 420, "t4_g1_1024": 420,
                   "cartpole_ppo_playground": 120, "brax_cartpole": 120, "brax_g1": 250, "g1_ppo_warm": 90,
                   "trace_bound": 45, "line": 90, "memory_prediction": 60, "fasttd3_g1": 90, "g1_randomization": 60},
            deadline_s=490, min_start_s=20, grace_s=20)
"""490 s from the script's start, the install (about 2 s) included: within the command's 9 minutes (the device
tool's `timeout_s` 540), 50 s to spare. The learning group: doctor 5 s, CheetahRun 200 s, G1 the rest (about
265 s: its cold first step was 194 s at these sizes on the H200, 2026-11-28). A T4 step has a call to itself: the
planner's lowering and a cold compile of G1 (269 s at 1,024 environments on the H100, 2026-11-23) before its first
iteration. The reserve after a step's budget covers the last iteration, the save and the exit (the final reward is
the last periodic evaluation's); CartpoleBalance's budget of 75 s leaves about 20 s of iterations after its first
step (52 s on the H200), where 0.6 of its box gave it one iteration and no median rate."""


def dry_setup(stand_in: str) -> Setup:
    """The rehearsal on this CPU: `stand_in` for G1 and CheetahRun, the smoke preset with an evaluation every
    iteration, seconds per step (a Playground stand-in: three times the toy's boxes, for its compiles of a minute each
    on 2 cores); Brax on CartpoleBalance without the shim. The T4 pool is left alone: a CPU has none."""
    scale = 1 if stand_in == TOY_ENV else 3
    smoke = ("--preset", "smoke", "--set", "run.eval_every=1")
    return Setup(learn_env=stand_in, learn_argv=smoke, g1=stand_in, g1_learn_argv=smoke,
                 t4_argv=("--preset", "smoke"), t4_num_envs=16,
                 g1_preset="smoke", g1_sizes=("--num-envs", "auto"), cartpole=stand_in, cartpole_preset="smoke",
                 brax_envs={name: ("CartpoleBalance", "smoke", ()) for name in ("brax_cartpole", "brax_g1")},
                 brax_shim=False,
                 trace_cases=(f"{stand_in}:smoke:ppo", f"{stand_in}:smoke:sac", f"{stand_in}:smoke:fasttd3"),
                 line_cases={name: (stand_in, "smoke", ()) for name in ("learn_cheetah_run", "learn_g1",
                                                                       "t4_g1_1024", "cartpole_ppo_playground")},
                 memory_env=stand_in, memory_num_envs=64, fasttd3_preset="smoke",
                 timesteps={"learn_cheetah_run": 192, "learn_g1": 192, "t4_g1_plan": 128, "t4_g1_1024": 128,
                            "g1_ppo_warm": 1, "cartpole_ppo_playground": 640, "fasttd3_g1": 640,
                            "g1_randomization_on": 640, "g1_randomization_off": 640, "brax_cartpole": 128,
                            "brax_g1": 128},
                 reserve_s={"learn_cheetah_run": 10, "learn_g1": 10},
                 boxes={"doctor": 30, **{key: scale * box for key, box in (
                     ("learn_cheetah_run", 90), ("learn_g1", 90), ("t4_g1_plan", 120), ("t4_g1_1024", 90),
                     ("cartpole_ppo_playground", 90), ("brax_cartpole", 60), ("brax_g1", 60), ("g1_ppo_warm", 45),
                     ("trace_bound", 60), ("line", 60), ("memory_prediction", 60), ("fasttd3_g1", 60),
                     ("g1_randomization", 30))}},
                 deadline_s=720 * scale, min_start_s=5, grace_s=5)


class Step(NamedTuple):
    name: str
    kind: str
    measures: str
    box: str
    """The key of its seconds in `Setup.boxes`."""
    run: Callable[[Context, str, float], dict[str, Any]]
    default: bool = True
    """Run without `--steps` (False: only when named; the steps measured once before)."""


GROUPS = {"learning": ("doctor", "learn_cheetah_run", "learn_g1"), "t4": ("doctor", "t4_g1_plan"),
          "t4_1024": ("doctor", "t4_g1_1024"),
          "brax": ("doctor", "cartpole_ppo_playground", "brax_cartpole", "brax_g1"),
          "line": ("doctor", "line"),
          "earlier": ("doctor", "trace_bound", "memory_prediction", "fasttd3_g1", "g1_randomization_on",
                      "g1_randomization_off")}
"""`--steps` shorthands, one GPU call each (a name that starts a step's name, such as trace_bound, names them all).
A T4 step is a cold G1 compile of about 200 s on the H200 and its planning: one per call."""


def steps(setup: Setup) -> list[Step]:
    """The steps in their order (the most valuable first; the steps measured once before last, when named)."""
    learn_g1 = [setup.g1, *setup.g1_learn_argv]

    def training(argv: list[str], cache: str) -> Callable[[Context, str, float], dict[str, Any]]:
        return lambda ctx, name, box: plain_train(ctx, name, box, argv, cache)

    def learning(argv: list[str], reference: str) -> Callable[[Context, str, float], dict[str, Any]]:
        return lambda ctx, name, box: learn(ctx, name, box, argv, name, reference)

    def t4_run(argv: list[str]) -> Callable[[Context, str, float], dict[str, Any]]:
        return lambda ctx, name, box: t4(ctx, name, box, argv)

    found = [
        Step("doctor", "doctor", "the device, its memory, JAX and driver versions", "doctor", doctor),
        Step("learn_cheetah_run", "learn", "CheetahRun PPO at Playground's settings for its box: final eval reward, "
             "env steps reached, the evaluation curve", "learn_cheetah_run",
             learning([setup.learn_env, *setup.learn_argv], "cheetah_run")),
        Step("learn_g1", "learn", "G1 PPO at Playground's settings, empty cache: first step, env steps/s, the "
             "evaluation curve", "learn_g1", learning(learn_g1, "g1")),
        Step("t4_g1_plan", "t4", "G1 (the guides' recipe, sized by the planner) in a T4's pool: plan, predicted "
             "against peak, fits, iterations/min", "t4_g1_plan", t4_run([setup.g1, *setup.t4_argv, "--num-envs", "auto"])),
        Step("t4_g1_1024", "t4", "G1 (the guides' recipe) at 1,024 environments in a T4's pool: peak, "
             "iterations/min beside the guides' ~18", "t4_g1_1024",
             t4_run([setup.g1, *setup.t4_argv, "--num-envs", str(setup.t4_num_envs)])),
        Step("cartpole_ppo_playground", "train", "CartpoleBalance PPO at Playground's DM Control settings: env "
             "steps/s", "cartpole_ppo_playground",
             training([setup.cartpole, "--preset", setup.cartpole_preset], "cartpole")),
        Step("brax_cartpole", "brax", "Brax's PPO at cartpole_ppo_playground's settings: env steps/s",
             "brax_cartpole", brax),
        Step("brax_g1", "brax", "Brax's PPO at learn_g1's settings: env steps/s", "brax_g1", brax),
        Step("g1_ppo_warm", "train", "learn_g1's command in a new process with its cache: time_to_first_step_s",
             "g1_ppo_warm", lambda ctx, name, box: plain_train(ctx, name, box, learn_g1, "learn_g1"), False),
    ]
    found += [Step(f"trace_bound {case}", "trace_bound", "the planner's bound against XLA's memory analysis",
                   "trace_bound", trace_bound, False) for case in setup.trace_cases]
    found += [Step(f"line {against}", "line", f"the planner's estimate from the lowered step at {against}'s sizes "
                   "(no compile), against that step's device peak", "line", line, False)
              for against in setup.line_cases]
    found += [
        Step("memory_prediction", "memory_prediction", "predicted against measured peak at one size",
             "memory_prediction", memory_prediction, False),
        Step("fasttd3_g1", "train", "FastTD3 on G1: env steps/s", "fasttd3_g1",
             training([setup.g1, "--algo", "fasttd3", "--preset", setup.fasttd3_preset], "fasttd3"), False),
        Step("g1_randomization_on", "train", "G1 PPO with domain randomization on: env steps/s", "g1_randomization",
             lambda ctx, name, box: randomization(ctx, name, box, True), False),
        Step("g1_randomization_off", "train", "G1 PPO with domain randomization off: env steps/s",
             "g1_randomization", lambda ctx, name, box: randomization(ctx, name, box, False), False),
    ]
    return found


def chosen(order: list[Step], named: list[str] | None) -> tuple[set[str], list[str]]:
    """The steps `--steps` names (a group, a step's name, or the start of names such as `trace_bound`), else the
    default ones; and the names that match nothing."""
    if not named:
        return {step.name for step in order if step.default}, []
    wanted, unknown = set(), []
    for name in named:
        matched = {step.name for step in order if step.name == name or step.name.startswith(f"{name} ")}
        for member in GROUPS.get(name, ()):
            matched |= {step.name for step in order if step.name == member or step.name.startswith(f"{member} ")}
        wanted |= matched
        if not matched:
            unknown.append(name)
    return wanted, unknown


# --- the order, the time boxes and the record ------------------------------------------------------------------

def write(record: dict[str, Any], out: Path) -> Path:
    """DIR/gpu_check.json, rewritten whole (through a temporary file, so a cut-off write leaves the last one)."""
    record["headline"] = headline(record)
    record["loadavg_1min_end"] = load_1min()
    path = out / "gpu_check.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(path)
    return path


def run_steps(ctx: Context, record: dict[str, Any], order: list[Step], only: set[str] | None = None,
              left_out: str = "left out by --steps") -> None:
    """Each step in turn within its box and the deadline (`only`: these steps, the others left "not reached" with
    the note `left_out`); the record written before and after each."""
    for entry, step in zip(record["steps"], order, strict=True):
        if only is not None and step.name not in only:
            entry["note"] = left_out
            continue
        left = ctx.setup.deadline_s - (time.perf_counter() - ctx.started)
        box = min(ctx.setup.boxes[step.box], left - ctx.setup.grace_s)
        if box < ctx.setup.min_start_s:
            entry["note"] = f"{left:.0f} s left before the deadline: not started"
            continue
        entry.update(status="running", box_s=round(box, 1), started_s=round(time.perf_counter() - ctx.started, 1))
        write(record, ctx.out)
        print(f"[{entry['started_s']:6.1f} s] {step.name} (box {box:.0f} s) ...", flush=True)
        try:
            entry.update(step.run(ctx, step.name, box))
        except Exception as error:  # noqa: BLE001 - a step's bug must not cost the steps after it
            entry.update(status="failed", note=f"{type(error).__name__}: {error}")
        print(f"          {entry['status']}: {entry.get('note') or ''}", flush=True)
        write(record, ctx.out)


def safe_machine() -> dict[str, Any]:
    """common.machine(), or what is known without git (the GPU machine's copy may have none)."""
    try:
        return machine()
    except (OSError, subprocess.SubprocessError):
        return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "nproc": os.cpu_count(), "git": None}


def child_env(site: Path | None, menagerie: str | None, dry_run: bool) -> dict[str, str]:
    """This environment plus: the installed wheels (`site`) and src/ first on PYTHONPATH (and the repository, whose
    tests/toy_env.py is the dry run's stand-in), the Menagerie, unbuffered output and JAX's compile log."""
    from common import MENAGERIE

    paths = [str(site)] if site else []
    paths += [str(REPO / "src"), *([str(REPO)] if dry_run else []), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1", "JAX_LOG_COMPILES": "1"}
    if menagerie:
        env["RLFIT_MENAGERIE_PATH"] = menagerie
    elif MENAGERIE.is_dir():
        env.setdefault("RLFIT_MENAGERIE_PATH", str(MENAGERIE))
    return env


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the results (default results/gpu; --dry-run: results/tmp/gpu_dry_run)")
    parser.add_argument("--bundle", type=Path, default=None,
                        help="install this folder's wheels and G1 assets first (gpu_bundle.py prepare's .gpu)")
    parser.add_argument("--dry-run", action="store_true", help="rehearse here: stand-ins, seconds per step")
    parser.add_argument("--stand-in", default=TOY_ENV, help=f"the dry run's environment (default {TOY_ENV})")
    parser.add_argument("--deadline", type=float, default=None, help="seconds for all steps (default: GPU 490, "
                        "dry run 720 with the toy, 2,160 with a Playground stand-in)")
    parser.add_argument("--steps", nargs="+", default=None, metavar="STEP",
                        help="run only these steps (their names as in the record, a group: "
                        f"{', '.join(GROUPS)}), the others left \"not reached\"")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # a step's process is ended with it
    setup = dry_setup(args.stand_in) if args.dry_run else GPU
    if args.deadline is not None:
        setup = setup._replace(deadline_s=args.deadline)
    started = time.perf_counter()
    order = steps(setup)
    only, unknown = chosen(order, args.steps)
    if unknown:
        print(f"gpu_check: no step {', '.join(map(repr, unknown))}: choose from "
              f"{', '.join(repr(name) for name in [*GROUPS, *(step.name for step in order)])}", file=sys.stderr)
        return 2
    if args.bundle is not None and not (args.bundle / "wheels").is_dir():
        print(f"gpu_check: no {args.bundle / 'wheels'}: run `benchmarks/gpu_bundle.py prepare` here and carry "
              f"{args.bundle}", file=sys.stderr)
        return 2
    out = args.out or (TMP / "gpu_dry_run" if args.dry_run else RESULTS / "gpu")
    for previous in (out / "gpu_check.json", out / "runs", out / "logs"):  # this script's own files, nothing else
        shutil.rmtree(previous, ignore_errors=True) if previous.is_dir() else previous.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rlfit-gpu-check-"))
    record = {"benchmark": "gpu_check", "command": " ".join(sys.argv), **safe_machine(),
              "loadavg_1min_start": load_1min(), "dry_run": args.dry_run, "stand_in": args.stand_in if args.dry_run
              else None, "deadline_s": setup.deadline_s, "boxes_s": setup.boxes, "transfer": None, "install": None,
              "targets": TARGETS, "reference": REFERENCE, "t4": T4,
              "steps": [{"name": s.name, "kind": s.kind, "measures": s.measures, "status": "not reached",
                         "box_s": setup.boxes[s.box], "wall_s": None, "figures": {}, "note": None} for s in order]}
    if args.dry_run:
        record["transfer"] = transfer_size(REPO, [args.bundle or BUNDLE])
        print(describe_size(record["transfer"]) + ("" if record["transfer"]["carried_present"][
            str((args.bundle or BUNDLE).relative_to(REPO))] else " (not prepared: run gpu_bundle.py prepare)"))
    site, menagerie = None, None
    if args.bundle is not None:
        try:
            record["install"] = install(args.bundle, work / "site")
        except SystemExit as error:
            record["install"] = {"failed": str(error)}
            write(record, out)
            print(error, file=sys.stderr)
            return 1
        site, menagerie = work / "site", record["install"]["menagerie"]
    write(record, out)
    ctx = Context(setup, sys.executable, child_env(site, menagerie, args.dry_run), work, out, started)
    run_steps(ctx, record, order, only, "left out by --steps" if args.steps else
              "not run by default: name it in --steps (`--steps earlier`)")
    path = write(record, out)
    shutil.rmtree(work, ignore_errors=True)  # compile caches and checkpoints; what counts is under `out`
    print(json.dumps(record["headline"], indent=2))
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
    if not args.dry_run:
        return 0
    problems = check_record(json.loads(path.read_text()))
    if not record["transfer"]["fits"]:
        problems.append(describe_size(record["transfer"]))
    for problem in problems:
        print(f"check: {problem}", file=sys.stderr)
    print("check: the record is whole" if not problems else f"check: {len(problems)} problems", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
