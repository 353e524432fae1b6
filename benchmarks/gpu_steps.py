"""gpu_check.py's steps: each runs one child process in a time box of its own and returns its entry of the record
(status, note, figures, wall_s, argv). The order, the boxes and the record are gpu_check.py's; the figures' arithmetic
is gpu_figures.py's (pure, no JAX)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brax_compare import xla_compiles  # noqa: E402
from common import BENCH_DIR, REPO  # noqa: E402
from compile_stages import jax_stages, stages_in_log, starting_state_record  # noqa: E402
from gpu_figures import (T4, brax_figures, learn_figures, memory_figures, read_json, run_figures,  # noqa: E402
                         t4_figures)

RUNNER_SHARE = 0.6
"""A training step's `run.time_budget` is this share of its box (less the grace), unless the step keeps a fixed
reserve (`Setup.reserve_s`): the budget counts from the runner's start, after planning and loading the environment,
and a run that stops by its budget saves a checkpoint whose time it has measured (the runner saves before its first
step), where one stopped by the box's SIGTERM has the grace alone to save."""
LOG_TAIL_BYTES = 200_000
"""The end of each step's log copied to DIR/logs (what comes back from the GPU machine must stay small)."""


class Setup(NamedTuple):
    """What the steps run: the GPU's environments and time boxes, or the dry run's stand-ins."""

    learn_env: str
    """The DM Control locomotion task trained at Playground's settings (the GPU: CheetahRun)."""
    learn_argv: tuple[str, ...]
    """Its preset and settings (the GPU: `--preset default`, Playground's brax_ppo_config)."""
    g1: str
    g1_learn_argv: tuple[str, ...]
    """G1 at Playground's published settings with evaluations often enough for a curve within the box."""
    t4_argv: tuple[str, ...]
    """The T4 steps' preset (the guides' G1 recipe: `--preset g1`), sized by the planner (`--num-envs auto`) or at
    `t4_num_envs`."""
    t4_num_envs: int
    """The guides' T4 size (1,024 environments)."""
    g1_preset: str
    g1_sizes: tuple[str, ...]
    """The earlier G1 steps' (FastTD3, randomization) preset and size arguments."""
    cartpole: str
    cartpole_preset: str
    brax_envs: dict[str, tuple[str, str, tuple[str, ...]]]
    """Brax's runs by step name: environment, preset, `--set` overrides (the same settings as the rlfit step it
    stands beside)."""
    brax_shim: bool
    """gpu_brax.py restores `jax.device_put_replicated` where JAX lacks it (False: such a JAX is "not available")."""
    trace_cases: tuple[str, ...]
    line_cases: dict[str, tuple[str, str, tuple[str, ...]]]
    """The planner's estimate at a training step's own sizes, by that step's name: its environment, preset and
    `--set` overrides (the `line` steps)."""
    memory_env: str
    memory_num_envs: int
    fasttd3_preset: str
    timesteps: dict[str, int]
    """`--timesteps` of a training step (absent: the preset's; the time box ends the run)."""
    reserve_s: dict[str, float]
    """Seconds of a training step's box kept after its `run.time_budget` for the final evaluation and the save
    (absent: the budget is RUNNER_SHARE of the box)."""
    boxes: dict[str, float]
    """Seconds each step may take (a trace_bound case: "trace_bound")."""
    deadline_s: float
    """Seconds from the script's start by which every step has ended."""
    min_start_s: float
    """A step starts only with at least this many seconds left before the deadline."""
    grace_s: float
    """Seconds between a time box's SIGTERM (rlfit saves a checkpoint and summary.json) and SIGKILL."""


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
    figures = read_doctor(out)
    status, note = ended(boxed, bool(figures), "JSON from rlfit doctor")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s}


def train(ctx: Context, name: str, box_s: float, argv: list[str], cache: str,
          variables: dict[str, str] | None = None) -> dict[str, Any]:
    """`rlfit train ARGV` into a run folder of its own (compile cache `cache`, shared by the steps that name it;
    `variables` added to its environment), stopped by `run.time_budget`, `Setup.timesteps` or its time box; the
    run's figures (`run_figures`), XLA's compile log, the starting state's program split into tracing, lowering
    and XLA's compile (`starting_state`: compile_stages.py), and summary.json, plan.json, metrics.jsonl into
    DIR/runs/NAME."""
    run_dir, log = ctx.work / "runs" / name, ctx.work / f"{name}.log"
    reserve = ctx.setup.reserve_s.get(name)
    usable = box_s - ctx.setup.grace_s
    budget = max(10, int(usable - reserve if reserve is not None else RUNNER_SHARE * usable))
    timesteps = ctx.setup.timesteps.get(name)
    command = [ctx.python, "-m", "rlfit", "train", *argv, "--run-dir", str(run_dir), "--set",
               f"run.time_budget={budget}s", *(["--timesteps", str(timesteps)] if timesteps else [])]
    env = {**ctx.env, "RLFIT_CACHE_DIR": str(ctx.work / "cache" / cache), **(variables or {})}
    boxed = run_boxed(command, env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    figures = {**run_figures(run_dir), **xla_compiles(log)}
    figures["starting_state"] = starting_state_record(jax_stages(stages_in_log(log.read_text()), at_least_s=0.0),
                                                      figures.get("programs", []))
    kept = ctx.out / "runs" / name
    kept.mkdir(parents=True, exist_ok=True)
    for file in ("summary.json", "plan.json", "metrics.jsonl"):
        if (run_dir / file).is_file():
            shutil.copy2(run_dir / file, kept / file)
    status, note = ended(boxed, figures.get("time_to_first_step_s") is not None, "first training step")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s, "argv": command,
            "run_dir": run_dir}


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


def line(ctx: Context, name: str, box_s: float) -> dict[str, Any]:
    """`line STEP`: the planner's estimate from the lowered step (and the bound) at the sizes training step STEP
    runs (`Setup.line_cases`), trace_bound.py without XLA's compile; its device peak is STEP's (`line_figures`)."""
    against = name.split(" ", 1)[1]
    env, preset, overrides = ctx.setup.line_cases[against]
    log, result = ctx.work / f"{name.replace(' ', '_')}.log", ctx.work / f"{name.replace(' ', '_')}.json"
    argv = [ctx.python, str(BENCH_DIR / "trace_bound.py"), "--cases", f"{env}:{preset}:ppo", "--config-sizes",
            "--no-xla", "--out", str(result), *[part for value in overrides for part in ("--set", value)]]
    boxed = run_boxed(argv, ctx.env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    found = read_json(result)
    figures = {**found["cases"][0], "against_step": against} if found else {}
    status, note = ended(boxed, bool(figures), "estimate")
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
    argv = [setup.g1, "--preset", setup.g1_preset, *setup.g1_sizes, "--set",
            f"env.randomization={'auto' if on else 'off'}"]
    return dropped_run_dir(train(ctx, name, box_s, argv, "g1_randomization"))



def read_doctor(path: Path) -> dict[str, Any]:
    """`rlfit doctor --json`'s output ({} where there is none or it is cut off)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def dropped_run_dir(entry: dict[str, Any]) -> dict[str, Any]:
    """A training step's entry as the record holds it (the run folder, on the machine only, left out)."""
    entry.pop("run_dir", None)
    return entry


def plain_train(ctx: Context, name: str, box_s: float, argv: list[str], cache: str) -> dict[str, Any]:
    """`train`, its entry as the record holds it."""
    return dropped_run_dir(train(ctx, name, box_s, argv, cache))


def learn(ctx: Context, name: str, box_s: float, argv: list[str], cache: str, reference: str) -> dict[str, Any]:
    """A training run for its box at Playground's settings: `train`'s figures with the evaluation curve and the final
    reward beside Playground's published settings and reward (`gpu_figures.REFERENCE[reference]`)."""
    entry = train(ctx, name, box_s, argv, cache)
    entry["figures"].update(learn_figures(entry.pop("run_dir"), reference))
    return entry


def device_total_bytes(ctx: Context) -> int | None:
    """The GPU's total memory from the doctor step's JSON (or a doctor run of its own when that step did not run);
    None on another device (a CPU's JAX has no pool to cap)."""
    found = read_doctor(ctx.work / "doctor.out")
    if not found:
        run_boxed([ctx.python, "-m", "rlfit", "doctor", "--json"], ctx.env, 30, 5, ctx.work / "t4_doctor.log",
                  ctx.work / "doctor.out")
        found = read_doctor(ctx.work / "doctor.out")
    device = found.get("device") or {}
    total = device.get("total_bytes")
    return total if device.get("platform") == "gpu" and isinstance(total, int) else None


def t4_variables(total: int | None) -> dict[str, str]:
    """JAX's pool on this device held to a T4's (`gpu_figures.T4`): XLA_PYTHON_CLIENT_MEM_FRACTION = the T4's pool
    / this device's total (none where the total is unknown: a CPU, whose JAX has no pool)."""
    if not total:
        return {}
    return {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{min(1.0, T4['pool_bytes'] / total):.6f}"}


def t4(ctx: Context, name: str, box_s: float, argv: list[str]) -> dict[str, Any]:
    """G1 with the guides' T4 recipe in a T4's memory: JAX's pool capped at what JAX leaves a process on a T4
    (`t4_variables`), out-of-memory back-off off (a run that does not fit ends with exit code 5); `train`'s figures
    with the pool, the peak against it and the plan, and iterations a minute beside the guides' T4 figure."""
    total = device_total_bytes(ctx)
    variables = t4_variables(total)
    entry = dropped_run_dir(train(ctx, name, box_s, [*argv, "--set", "run.oom_backoff=false"], name, variables))
    out_of_memory = "exit code 5" in entry["note"]  # rlfit's exit code for out of device memory, back-off off
    entry["figures"].update(t4_figures(entry["figures"], total, variables, out_of_memory))
    if out_of_memory:
        entry["note"] += " (out of device memory: it does not fit)"
    return entry


def brax(ctx: Context, name: str, box_s: float) -> dict[str, Any]:
    """Brax's PPO (gpu_brax.py) at the settings of the rlfit step it stands beside, for the box: env steps/s by
    Brax's own count and by the wall clock; "not available" where Brax cannot run on this JAX."""
    env, preset, overrides = ctx.setup.brax_envs[name]
    log, out = ctx.work / f"{name}.log", ctx.work / f"{name}.json"
    argv = [ctx.python, str(BENCH_DIR / "gpu_brax.py"), env, preset, str(out),
            *[item for override in overrides for item in ("--set", override)],
            *(["--timesteps", str(ctx.setup.timesteps[name])] if name in ctx.setup.timesteps else []),
            *([] if ctx.setup.brax_shim else ["--no-shim"])]
    boxed = run_boxed(argv, ctx.env, box_s, ctx.setup.grace_s, log)
    keep_log(ctx, name, log)
    found = read_json(out) or {}
    if found.get("available") is False:
        return {"status": "not available", "note": f"Brax cannot run here: {found.get('reason')}",
                "figures": {}, "wall_s": boxed.wall_s, "argv": argv}
    figures = {**brax_figures(found), **xla_compiles(log)} if found.get("callbacks") else {}
    status, note = ended(boxed, len(found.get("callbacks") or []) >= 2, "training epoch from Brax")
    return {"status": status, "note": note, "figures": figures, "wall_s": boxed.wall_s, "argv": argv}
