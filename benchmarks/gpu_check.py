"""The GPU figures that matter most, from one prepared command of at most 9 minutes, most valuable first.

In this order, each step in a new process with a time box of its own (a slow step cannot eat the rest; one that
would start with too little time left is recorded "not reached"):

 1. doctor                       `rlfit doctor --json`: the device, its memory, JAX and driver versions
 2. g1_ppo_cold                  G1JoystickFlatTerrain PPO `--preset g1` at Playground's G1 sizes (8,192
                                 environments, batch 256), empty compile cache: the plan, time_to_first_step_s and
                                 each program's compile, the first iteration's env steps/s
 3. g1_ppo_warm                  the same in a new process with step 2's cache: time_to_first_step_s, then
                                 training until its budget: env steps/s (median), iterations per minute
 4. cartpole_ppo_playground      CartpoleBalance PPO at Playground's DM Control settings (the default preset, 2,048
                                 environments): env steps/s, beside the Playground paper's A100 figure
 5. trace_bound ENV:PRESET:ALGO  (three cases) the planner's bound against XLA's memory analysis (trace_bound.py)
 6. memory_prediction            one size (CartpoleBalance, 1,024 environments; memory_prediction.py)
 7. fasttd3_g1                   FastTD3 on G1 (`--algo fasttd3 --preset g1`): env steps/s
 8. g1_randomization_on / _off   G1 PPO at step 2's sizes with Playground's domain randomization
                                 (`env.randomization=auto`), then without it (`off`): the cost of randomization in
                                 env steps/s and first step

It writes DIR/gpu_check.json again after every step (a command cut off keeps what it measured; the step under way
reads "running"), and per run DIR/runs/STEP/{summary.json,plan.json,metrics.jsonl} and DIR/logs/STEP.log.

    .venv/bin/python benchmarks/gpu_bundle.py prepare             # here, once: .gpu/ (wheels, G1 assets), its size
    python3 benchmarks/gpu_check.py --bundle .gpu --out "$OUT/gpu"   # there (benchmarks/README.md: the run command)
    .venv/bin/python benchmarks/gpu_check.py --dry-run             # here: the rehearsal, toy stand-ins, ~1 minute
    .venv/bin/python benchmarks/gpu_check.py --dry-run --stand-in CartpoleBalance   # with Playground's Cartpole
    .venv/bin/python benchmarks/gpu_check.py --dry-run --steps doctor g1_ppo_cold   # these steps only

`--dry-run` runs the same steps on this CPU with small stand-ins (tests/toy_env.py's environment, or --stand-in,
for G1 and CartpoleBalance; the smoke preset; seconds per step), prints the size that would travel to the GPU
machine, and checks the JSON it wrote (fields and types; exit 1 when a check fails).
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
from brax_compare import xla_compiles  # noqa: E402
from common import BENCH_DIR, REPO, RESULTS, TMP, load_1min, machine  # noqa: E402
from gpu_bundle import BUNDLE, describe_size, install, transfer_size  # noqa: E402
from gpu_figures import (REFERENCE, TARGETS, check_record, headline, memory_figures, read_json,  # noqa: E402
                         run_figures)

TOY_ENV = "tests.toy_env:make"
RUNNER_SHARE = 0.6
"""A training step's `run.time_budget` is this share of its box (less the grace): the budget counts from the
runner's start, after planning and loading the environment, and a run that stops by its budget saves a checkpoint
whose time it has measured (the runner saves before its first step), where one stopped by the box's SIGTERM has
the grace alone to save."""
LOG_TAIL_BYTES = 200_000
"""The end of each step's log copied to DIR/logs (what comes back from the GPU machine must stay small)."""


class Setup(NamedTuple):
    """What the steps run: the GPU's environments and time boxes, or the dry run's stand-ins."""

    g1: str
    g1_preset: str
    g1_sizes: tuple[str, ...]
    """The G1 PPO steps' size arguments (the GPU: Playground's G1 sizes; the dry run: `--num-envs auto`)."""
    cartpole: str
    cartpole_preset: str
    trace_cases: tuple[str, ...]
    memory_env: str
    memory_num_envs: int
    fasttd3_preset: str
    timesteps: dict[str, int]
    """`--timesteps` of a training step (absent: the preset's; the time box ends the run)."""
    boxes: dict[str, float]
    """Seconds each step may take (a trace_bound case: "trace_bound")."""
    deadline_s: float
    """Seconds from the script's start by which every step has ended."""
    min_start_s: float
    """A step starts only with at least this many seconds left before the deadline."""
    grace_s: float
    """Seconds between a time box's SIGTERM (rlfit saves a checkpoint and summary.json) and SIGKILL."""


G1_PLAYGROUND_SIZES = ("--set", "ppo.num_envs=8192", "--set", "ppo.batch_size=256", "--set", "run.fit_to_device=false")
"""Playground's G1 PPO sizes (8,192 environments, batch 256 x 32 minibatches x unroll 20: 163,840 env steps an
iteration, 2.0 s on the H200: results/gpu/g1_8192/). Not `--num-envs auto`: on the H200 it chose 65,536
environments, whose one iteration of 10.5M env steps took 98 s, longer than a warm step's box
(results/gpu/gpu_check.json, 2026-11-28)."""

GPU = Setup(g1="G1JoystickFlatTerrain", g1_preset="g1", g1_sizes=G1_PLAYGROUND_SIZES, cartpole="CartpoleBalance",
            cartpole_preset="default",
            trace_cases=("CartpoleBalance:quick:ppo", "CartpoleBalance:quick:sac", "G1JoystickFlatTerrain:g1:ppo"),
            memory_env="CartpoleBalance", memory_num_envs=1024, fasttd3_preset="g1", timesteps={},
            boxes={"doctor": 45, "g1_ppo_cold": 240, "g1_ppo_warm": 90, "cartpole_ppo_playground": 130,
                   "trace_bound": 45, "memory_prediction": 60, "fasttd3_g1": 90, "g1_randomization": 60},
            deadline_s=490, min_start_s=20, grace_s=20)
"""490 s from the script's start, the install (about 20 s) included: within the command's 9 minutes (the device
tool's `timeout_s` 540), 50 s to spare."""


def dry_setup(stand_in: str) -> Setup:
    """The rehearsal on this CPU: `stand_in` for G1 and CartpoleBalance, the smoke preset, seconds per step (a
    Playground stand-in: three times the toy's boxes, for its compiles of a minute each on 2 cores)."""
    scale = 1 if stand_in == TOY_ENV else 3
    return Setup(g1=stand_in, g1_preset="smoke", g1_sizes=("--num-envs", "auto"), cartpole=stand_in,
                 cartpole_preset="smoke",
                 trace_cases=(f"{stand_in}:smoke:ppo", f"{stand_in}:smoke:sac", f"{stand_in}:smoke:fasttd3"),
                 memory_env=stand_in, memory_num_envs=64, fasttd3_preset="smoke",
                 timesteps={"g1_ppo_cold": 20_000, "g1_ppo_warm": 1, "cartpole_ppo_playground": 640,
                            "fasttd3_g1": 640, "g1_randomization": 640},
                 boxes={"doctor": 30, **{key: scale * box for key, box in (
                     ("g1_ppo_cold", 90), ("g1_ppo_warm", 60), ("cartpole_ppo_playground", 60), ("trace_bound", 60),
                     ("memory_prediction", 60), ("fasttd3_g1", 60), ("g1_randomization", 30))}},
                 deadline_s=300 * scale, min_start_s=5, grace_s=5)


class Context(NamedTuple):
    setup: Setup
    python: str
    env: dict[str, str]
    """The children's environment: the installed wheels and src/ on PYTHONPATH, the Menagerie, compile logs."""
    work: Path
    """Compile caches, run folders and checkpoints: left on the machine (not under --out)."""
    out: Path
    started: float


class Boxed(NamedTuple):
    """A child process's end: its exit code (None: killed), seconds, and whether its time box ended it."""

    exit_code: int | None
    wall_s: float
    timed_out: bool


def run_boxed(argv: list[str], env: dict[str, str], box_s: float, grace_s: float, log: Path,
              stdout: Path | None = None) -> Boxed:
    """Runs `argv` in a process group of its own, output to `log` (stdout to `stdout` when given); after `box_s`
    seconds SIGTERM to the group, after `grace_s` more SIGKILL."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log.open("w") as errors, (stdout or Path(os.devnull)).open("w") as output:
        child = subprocess.Popen(argv, env=env, stdout=output if stdout else errors, stderr=errors,
                                 start_new_session=True, cwd=REPO)
        try:
            code: int | None = child.wait(timeout=box_s)
            timed_out = False
        except BaseException as stop:  # its box ended, or this script is stopped (then the child goes too)
            if not isinstance(stop, subprocess.TimeoutExpired):
                os.killpg(child.pid, signal.SIGKILL)
                raise
            timed_out = True
            os.killpg(child.pid, signal.SIGTERM)
            try:
                code = child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                code = None
    return Boxed(code, round(time.perf_counter() - started, 1), timed_out)


def keep_log(ctx: Context, name: str, log: Path) -> None:
    """The end of `log` into DIR/logs/NAME.log."""
    target = ctx.out / "logs" / f"{name.replace(':', '_').replace('/', '_')}.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    with log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
        target.write_bytes(handle.read())


def ended(boxed: Boxed, measured: bool, what: str) -> tuple[str, str]:
    """A step's status and note from how its process ended and whether its figures were found."""
    how = "its time box ended it" if boxed.timed_out else f"exit code {boxed.exit_code}"
    if measured:
        return "ok", f"{how}; {what}"
    return ("timed out" if boxed.timed_out else "failed"), f"{how}; no {what}"


# --- the steps -------------------------------------------------------------------------------------------------

def doctor(ctx: Context, name: str, box_s: float) -> dict[str, Any]:
    log, out = ctx.work / f"{name}.log", ctx.work / f"{name}.out"
    boxed = run_boxed([ctx.python, "-m", "rlfit", "doctor", "--json"], ctx.env, box_s, ctx.setup.grace_s, log, out)
    keep_log(ctx, name, log)
    try:
        figures = json.loads(out.read_text())
    except json.JSONDecodeError:
        figures = {}
    status, note = ended(boxed, bool(figures), "JSON from rlfit doctor")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s}


def train(ctx: Context, name: str, box_s: float, argv: list[str], cache: str, timesteps: int | None) -> dict[str, Any]:
    """`rlfit train ARGV` into a run folder of its own (compile cache `cache`, shared by the steps that name it),
    stopped by `run.time_budget`, `timesteps` or its time box; the run's figures (`run_figures`), XLA's compile
    log, and summary.json, plan.json, metrics.jsonl into DIR/runs/NAME."""
    run_dir, log = ctx.work / "runs" / name, ctx.work / f"{name}.log"
    budget = max(10, int(RUNNER_SHARE * (box_s - ctx.setup.grace_s)))
    command = [ctx.python, "-m", "rlfit", "train", *argv, "--run-dir", str(run_dir), "--set",
               f"run.time_budget={budget}s", *(["--timesteps", str(timesteps)] if timesteps else [])]
    env = {**ctx.env, "RLFIT_CACHE_DIR": str(ctx.work / "cache" / cache)}
    boxed = run_boxed(command, env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    figures = {**run_figures(run_dir), **xla_compiles(log)}
    kept = ctx.out / "runs" / name
    kept.mkdir(parents=True, exist_ok=True)
    for file in ("summary.json", "plan.json", "metrics.jsonl"):
        if (run_dir / file).is_file():
            shutil.copy2(run_dir / file, kept / file)
    status, note = ended(boxed, figures.get("time_to_first_step_s") is not None, "first training step")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s, "argv": command}


def trace_bound(ctx: Context, name: str, box_s: float) -> dict[str, Any]:
    case = name.split(" ", 1)[1]
    log, result = ctx.work / f"{name}.log", ctx.work / f"{name.replace(' ', '_').replace(':', '_')}.json"
    argv = [ctx.python, str(BENCH_DIR / "trace_bound.py"), "--cases", case, "--out", str(result)]
    boxed = run_boxed(argv, ctx.env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    found = read_json(result)
    figures = found["cases"][0] if found else {}
    status, note = ended(boxed, bool(figures), "bound and XLA analysis")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s, "argv": argv}


def memory_prediction(ctx: Context, name: str, box_s: float) -> dict[str, Any]:
    log, result = ctx.work / f"{name}.log", ctx.work / f"{name}.json"
    argv = [ctx.python, str(BENCH_DIR / "memory_prediction.py"), "--envs", ctx.setup.memory_env, "--num-envs",
            str(ctx.setup.memory_num_envs), "--out", str(result)]
    boxed = run_boxed(argv, ctx.env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    found = read_json(result)
    figures = memory_figures(found) if found else {}
    status, note = ended(boxed, bool(figures), "measured size")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s, "argv": argv}


def has_config_key(ctx: Context, section: str, key: str) -> bool:
    """Whether rlfit's config (as the children import it) has `section.key`."""
    code = ("import dataclasses, typing; from rlfit.config.schema import Config; "
            f"fields = dataclasses.fields(typing.get_type_hints(Config)[{section!r}]); "
            f"print({key!r} in {{field.name for field in fields}})")
    done = subprocess.run([ctx.python, "-c", code], env=ctx.env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"could not read rlfit's config: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip() == "True"


def randomization(ctx: Context, name: str, box_s: float, on: bool) -> dict[str, Any]:
    """G1 PPO with `env.randomization` on or off, or "not available" where rlfit has no such key."""
    if not has_config_key(ctx, "env", "randomization"):
        return {"status": "not available", "figures": {},
                "note": "env.randomization is not a config key in this rlfit (domain randomization not landed)"}
    setup = ctx.setup
    return train(ctx, name, box_s, [setup.g1, "--preset", setup.g1_preset, *setup.g1_sizes, "--set",
                                    f"env.randomization={'auto' if on else 'off'}"], "g1_ppo",
                 setup.timesteps.get("g1_randomization"))


class Step(NamedTuple):
    name: str
    kind: str
    measures: str
    box: str
    """The key of its seconds in `Setup.boxes`."""
    run: Callable[[Context, str, float], dict[str, Any]]


def steps(setup: Setup) -> list[Step]:
    """The steps in their order (the most valuable first)."""
    g1 = [setup.g1, "--preset", setup.g1_preset, *setup.g1_sizes]

    def training(argv: list[str], cache: str, key: str) -> Callable[[Context, str, float], dict[str, Any]]:
        return lambda ctx, name, box: train(ctx, name, box, argv, cache, setup.timesteps.get(key))

    found = [
        Step("doctor", "doctor", "the device, its memory, JAX and driver versions", "doctor", doctor),
        Step("g1_ppo_cold", "train", "G1 PPO, empty cache: plan, first step, its first iteration's rate",
             "g1_ppo_cold", training(g1, "g1_ppo", "g1_ppo_cold")),
        Step("g1_ppo_warm", "train", "the same, new process, step 2's cache: time_to_first_step_s, training rates",
             "g1_ppo_warm",
             training(g1, "g1_ppo", "g1_ppo_warm")),
        Step("cartpole_ppo_playground", "train", "CartpoleBalance PPO at Playground's DM Control settings: env "
             "steps/s", "cartpole_ppo_playground",
             training([setup.cartpole, "--preset", setup.cartpole_preset], "cartpole", "cartpole_ppo_playground")),
    ]
    found += [Step(f"trace_bound {case}", "trace_bound", "the planner's bound against XLA's memory analysis",
                   "trace_bound", trace_bound) for case in setup.trace_cases]
    found += [
        Step("memory_prediction", "memory_prediction", "predicted against measured peak at one size",
             "memory_prediction", memory_prediction),
        Step("fasttd3_g1", "train", "FastTD3 on G1: env steps/s", "fasttd3_g1",
             training([setup.g1, "--algo", "fasttd3", "--preset", setup.fasttd3_preset], "fasttd3", "fasttd3_g1")),
        Step("g1_randomization_on", "train", "G1 PPO with domain randomization on: env steps/s", "g1_randomization",
             lambda ctx, name, box: randomization(ctx, name, box, True)),
        Step("g1_randomization_off", "train", "G1 PPO with domain randomization off: env steps/s",
             "g1_randomization", lambda ctx, name, box: randomization(ctx, name, box, False)),
    ]
    return found


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


def run_steps(ctx: Context, record: dict[str, Any], order: list[Step], only: set[str] | None = None) -> None:
    """Each step in turn within its box and the deadline (`only`: these steps, the others left "not reached");
    the record written before and after each."""
    for entry, step in zip(record["steps"], order, strict=True):
        if only is not None and step.name not in only:
            entry["note"] = "left out by --steps"
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
                        "dry run 300)")
    parser.add_argument("--steps", nargs="+", default=None, metavar="STEP",
                        help="run only these steps (their names as in the record), the others left \"not reached\"")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # a step's process is ended with it
    setup = dry_setup(args.stand_in) if args.dry_run else GPU
    if args.deadline is not None:
        setup = setup._replace(deadline_s=args.deadline)
    started = time.perf_counter()
    order = steps(setup)
    unknown = sorted(set(args.steps or []) - {step.name for step in order})
    if unknown:
        print(f"gpu_check: no step {', '.join(map(repr, unknown))}: choose from "
              f"{', '.join(repr(step.name) for step in order)}", file=sys.stderr)
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
              "targets": TARGETS, "reference": REFERENCE,
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
    run_steps(ctx, record, order, set(args.steps) if args.steps else None)
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
