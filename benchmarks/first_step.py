"""From command to first training step: where the seconds go, cold cache, warm cache, resumed, and Brax beside it.

For one environment and preset, the wall clock from the process's start (the kernel's record, read with psutil, as
rlfit's `time_to_first_step_s` does) to the end of the first training iteration, split into its phases. Each case
is a new process; the compile cache (RLFIT_CACHE_DIR) is a fresh empty folder of this invocation:

1. cold: this script's child (`--child`) runs rlfit's API in the order `rlfit.api.train` does (config, plan,
   JAX set-up, environment, Trainer, run folder, Runner) with a timer around each phase; the Runner's own figures
   (`init_s`, each compiled program, `time_to_first_step_s`) come from summary.json, the first iteration's from
   metrics.jsonl. One iteration (`run.num_timesteps=1`), a checkpoint at its end.
2. resume: `rlfit resume` of the cold run's folder in a new process (same cache): its compile against the cold one.
3. warm: the child again, a new run folder, the same cache (now holding what 1 and 2 wrote).
4. brax: Brax's `ppo.train` (benchmarks/brax_child.py, run by brax_compare.py's `run_brax` in the jax 0.9.2
   venv, no compile cache) with the same environment and PPO settings, two iterations, an evaluation after each.

JAX_LOG_COMPILES=1 in every process: each XLA compile is listed with its seconds (and, in the child, whether the
persistent cache supplied it). The child also keeps JAX's tracing and lowering lines, so each program's compile is
split into tracing, lowering to StableHLO and XLA's compile (`jax_stages`); `starting_state` is that split for the
starting state's program (`jit(starting_state)`: parameters, optimizer and the environments' reset), beside when the
training step's XLA compile ended (the first step waits for both).

Brax's "first step" is the process's start to the end of its first training epoch (one iteration): its progress
callback after that epoch, less the evaluation that precedes the callback.

    .venv/bin/python benchmarks/first_step.py --env CartpoleBalance --preset quick
    .venv/bin/python benchmarks/first_step.py --env CheetahRun --preset quick
    .venv/bin/python benchmarks/first_step.py --env G1JoystickFlatTerrain --preset g1 --num-envs 64
    .venv/bin/python benchmarks/first_step.py --env G1JoystickFlatTerrain --preset g1 --num-envs auto --no-brax
    .venv/bin/python benchmarks/first_step.py --quick    # tiny sizes: checks the script (results/tmp/)
    .venv/bin/python benchmarks/first_step.py --env G1JoystickFlatTerrain --preset g1 --quick --no-brax --cold-only

--quick only shrinks the sizes: the compiles remain (about 7 minutes for all four cases on the loaded 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from brax_compare import (COMPILE_LINE, brax_spec, ensure_brax_venv, log_compiles_env, new_work_dir,
                          ppo_shared_settings, run_brax, xla_compiles)
from compile_stages import jax_stages, stage_of, starting_state_record
from common import RESULTS, RLFIT, TMP, finish_record, fresh_cache_env, load_1min, print_table, run_timed, start_record

QUICK_OVERRIDES = ("ppo.num_envs=16", "ppo.batch_size=16", "ppo.num_minibatches=2", "ppo.unroll_length=10",
                   "run.num_eval_envs=4")
"""--quick: sizes small enough to check the script end to end in about a minute (PPO)."""
TARGETS = {"warm_time_to_first_step_s_at_most": 5.0, "resume_compile_over_cold_at_most": 0.2,
           "rlfit_cold_over_brax_at_most": 0.5}
"""Issue 29's targets (the 5 s one is for CartpoleBalance quick on the 2-core CPU)."""
HIT_LINE = "Persistent compilation cache hit for"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--num-envs", default=None, help="N, or 'auto' (the planner sizes the run to the device); "
                        "default: the preset's")
    parser.add_argument("--no-brax", action="store_true", help="leave out Brax's run")
    parser.add_argument("--cold-only", action="store_true", help="the cold case alone (no resume, no warm case)")
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes ({' '.join(QUICK_OVERRIDES)}): a check")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/first_step_<env>_"
                        "<preset>[_n<num_envs>].json; --quick: results/tmp/)")
    parser.add_argument("--child", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    return parser.parse_args()


def overrides_for(args: argparse.Namespace, algo: str) -> list[str]:
    """The `--set` items of every rlfit case (as `rlfit train`'s flags would add them): one iteration, no
    evaluation period, the --quick sizes, an explicit --num-envs N."""
    items = ["run.num_timesteps=1", "run.eval_every=0", *(QUICK_OVERRIDES if args.quick else ())]
    if args.num_envs is not None and args.num_envs != "auto":
        items += [f"{algo}.num_envs={int(args.num_envs)}", "run.fit_to_device=false"]
    return items


def record_name(args: argparse.Namespace) -> str:
    size = "" if args.num_envs is None else f"_n{args.num_envs}"
    return (f"first_step_{args.env}_{args.preset}{size}" + ("_quick_sizes" if args.quick and args.cold_only else "")
            + ("_cold" if args.cold_only else "") + ("_check" if args.quick and not args.cold_only else ""))


def main() -> None:
    args = parse_args()
    if args.child:
        return child(*args.child)
    from rlfit.config.schema import resolve

    algo = resolve(args.env, args.preset).algo
    record = start_record(record_name(args))
    overrides = overrides_for(args, algo)
    record["settings"] = {"env": args.env, "preset": args.preset, "algo": algo, "num_envs": args.num_envs,
                          "quick": args.quick, "cold_only": args.cold_only, "overrides": overrides,
                          "pythonpath": os.environ.get("PYTHONPATH")}  # another rlfit source, when set
    work = new_work_dir(f"{record['benchmark']}-")
    cache = work / "cache"
    spec = {"env": args.env, "preset": args.preset, "overrides": overrides, "auto": args.num_envs == "auto"}
    record["cold"] = run_child({**spec, "run_dir": str(work / "cold_run")}, cache, work / "cold")
    if not args.cold_only:
        record["resume"] = run_resume(work / "cold_run", cache, work / "resume.log")
        record["warm"] = run_child({**spec, "run_dir": str(work / "warm_run")}, cache, work / "warm")
    if not args.no_brax:
        record["brax"] = brax_case(args, algo, record["cold"], work / "brax")
    record["verdict"] = verdict(record)
    record["notes"] = NOTES
    print_report(record)
    folder = TMP if args.quick and not args.cold_only else RESULTS
    finish_record(record, args.out or folder / f"{record['benchmark']}.json")


def run_child(spec: dict[str, Any], cache: Path, stem: Path) -> dict[str, Any]:
    """Runs the in-process driver (`child`) in a new process with the cache `cache`; its record."""
    spec_path, out_path = stem.with_suffix(".spec.json"), stem.with_suffix(".json")
    spec_path.write_text(json.dumps(spec, indent=2))
    argv = [sys.executable, __file__, "--child", str(spec_path), str(out_path)]
    print(f"rlfit ({stem.name}):", " ".join(argv), flush=True)
    load_before = load_1min()
    timed = run_timed(argv, env={**fresh_cache_env(cache), **log_compiles_env(), "PYTHONUNBUFFERED": "1"},
                      log=stem.with_suffix(".log"))
    result = {"argv": argv, "log": str(stem.with_suffix(".log")), "loadavg_1min_before": load_before,
              "loadavg_1min_after": load_1min(), "process_wall_s": timed["wall_s"], "process_cpu_s": timed["cpu_s"],
              "exit_code": timed["exit_code"]}
    if timed["exit_code"] != 0:
        raise SystemExit(f"the {stem.name} case failed (exit {timed['exit_code']}); see {result['log']}")
    return {**result, **json.loads(out_path.read_text())}


def run_resume(run_dir: Path, cache: Path, log: Path) -> dict[str, Any]:
    """`rlfit resume RUN_DIR --iterations 2` in a new process with the cache `cache`; figures from summary.json."""
    argv = [str(RLFIT), "resume", str(run_dir), "--iterations", "2", "--quiet"]
    print("rlfit (resume):", " ".join(argv), flush=True)
    load_before = load_1min()
    timed = run_timed(argv, env={**fresh_cache_env(cache), **log_compiles_env()}, log=log)
    if timed["exit_code"] != 0:
        raise SystemExit(f"the resume failed (exit {timed['exit_code']}); see {log}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"argv": argv, "log": str(log), "loadavg_1min_before": load_before, "loadavg_1min_after": load_1min(),
            "process_wall_s": timed["wall_s"], "process_cpu_s": timed["cpu_s"],
            **{key: summary[key] for key in ("time_to_first_step_s", "init_s", "compile_s", "programs")},
            **xla_compiles(log), "xla_compiles_listed": listed_compiles(log)}


def listed_compiles(log: Path) -> list[list[Any]]:
    """Every 'Finished XLA compilation of NAME in T sec' line of a log: [name, seconds]."""
    return [[m[1], round(float(m[2]), 3)] for m in COMPILE_LINE.finditer(log.read_text())]


def brax_case(args: argparse.Namespace, algo: str, cold: dict[str, Any], work: Path) -> dict[str, Any]:
    """Brax's `ppo.train` on the settings rlfit's cold run trained (its planned sizes), two iterations of one
    epoch each; its time to the end of the first epoch from the process's start."""
    if algo != "ppo":
        return {"skipped": f"the preset trains {algo}; this script runs Brax's PPO only"}
    sizes = [f"ppo.{key}={value}" for key, value in cold["sizes"].items()]
    shared = ppo_shared_settings(argparse.Namespace(env=args.env, preset=args.preset, seed=0, iterations=2,
                                                    eval_every=1), [*overrides_for(args, algo), *sizes])
    result = {"venv": ensure_brax_venv(), "shared_settings": shared,
              **run_brax(brax_spec(shared), ensure_dir(work))}
    if result.get("exit_code") != 0:
        raise SystemExit(f"Brax's run failed; see {result.get('log')}")
    return {**result, **brax_first_step(result)}


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def brax_first_step(result: dict[str, Any]) -> dict[str, Any]:
    """Brax's phases from brax_child.py's figures: start-up, imports, environment load, its set-up in `train`
    (to the evaluation at step 0), that evaluation (eval/walltime, cumulative in Brax: differences), the first
    epoch (its training/walltime, compile included). The first step ends that epoch: callback 1's time from the
    process's start less the evaluation run between the epoch and the callback."""
    first, second = result["callbacks"][0], result["callbacks"][1]
    start = result["script_start_since_process_start_s"]
    call_start = start + result["train_call_start_since_script_start_s"]
    end = second["since_process_start_s"] - (second["eval_walltime"] - first["eval_walltime"])
    phases = {"interpreter_start_s": start, "import_s": result["import_s"], "env_load_s": result["env_load_s"],
              "other_before_train_call_s": call_start - start - result["import_s"] - result["env_load_s"],
              "setup_in_train_s": first["t_s"] - first["eval_walltime"],
              "step0_eval_s": first["eval_walltime"],
              "first_epoch_s": second["brax_training_walltime"]}
    phases["other_s"] = end - sum(phases.values())
    return {"time_to_first_step_s": end, "phases": phases}


def verdict(record: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets against the figures measured here (with --cold-only, those of the cold case)."""
    cold = record["cold"]
    found: dict[str, Any] = {**TARGETS, "starting_state": cold["starting_state"]}
    if "warm" in record:
        warm, resume = record["warm"], record["resume"]
        found.update({"warm_time_to_first_step_s": warm["time_to_first_step_s"],
                      "resume_compile_over_cold": resume["compile_s"] / cold["compile_s"]})
        found["warm_within_target"] = (found["warm_time_to_first_step_s"]
                                       <= TARGETS["warm_time_to_first_step_s_at_most"])
        found["resume_within_target"] = (found["resume_compile_over_cold"]
                                         <= TARGETS["resume_compile_over_cold_at_most"])
    brax = record.get("brax", {})
    if "time_to_first_step_s" in brax:
        found["rlfit_cold_over_brax"] = cold["time_to_first_step_s"] / brax["time_to_first_step_s"]
        if "warm" in record:
            found["rlfit_warm_over_brax"] = record["warm"]["time_to_first_step_s"] / brax["time_to_first_step_s"]
        found["rlfit_cold_within_target"] = found["rlfit_cold_over_brax"] <= TARGETS["rlfit_cold_over_brax_at_most"]
    return found


def print_report(record: dict[str, Any]) -> None:
    """Each case's phases side by side, then the verdict."""
    cases = [name for name in ("cold", "warm", "brax") if "phases" in record.get(name, {})]
    keys = list(dict.fromkeys(key for name in cases for key in record[name]["phases"]))
    rows = [[key, *(record[name]["phases"].get(key) for name in cases)] for key in keys]
    rows.append(["time_to_first_step_s", *(record[name]["time_to_first_step_s"] for name in cases)])
    print_table(rows, ["phase (s)", *cases])
    for name in ("cold", "warm"):
        if name not in record:
            continue
        print(f"{name}: programs (compiled beside the phases above)", ", ".join(
            f"{p['name']} {p['compile_s']:.1f}s{' (cache)' if p['from_cache'] else ''}" for p in record[name]["programs"]),
            f"; waited for compiles {record[name].get('compile_wait_s')}")
        print(f"{name}: jax stages (s) by program:", json.dumps(record[name]["jax_stages"]))
    if "resume" in record:
        resume = record["resume"]
        print(f"\nresume: time_to_first_step_s {resume['time_to_first_step_s']:.1f}, init_s {resume['init_s']:.1f}, "
              f"compile_s {resume['compile_s']:.1f} (cold {record['cold']['compile_s']:.1f})")
    print_table(list(record["verdict"].items()), ["verdict", "value"])


# --- the child: rlfit's API phase by phase, in a process of its own ---------------------------------------------

def since_process_start() -> float:
    """Seconds since this process started (psutil's create time: the measure of rlfit's time_to_first_step_s)."""
    import psutil

    return time.time() - psutil.Process(os.getpid()).create_time()


class CompileLog(logging.Handler):
    """Keeps JAX's compile log lines (JAX_LOG_COMPILES=1): each XLA compile's name, seconds, end time since the
    process's start, the phase it fell in, and whether a persistent-cache hit was logged for it."""

    def __init__(self, phase: list[str], created: float):
        super().__init__()
        self.phase, self.created, self.compiles, self._hit = phase, created, [], False
        self.stages: list[dict[str, Any]] = []
        """Each tracing, lowering and XLA compile JAX logged: stage, program name, seconds, end since the start."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        stage = stage_of(message)
        if stage is not None:
            self.stages.append({**stage, "end_since_process_start_s": round(record.created - self.created, 3)})
        if message.startswith(HIT_LINE):
            self._hit = True
        elif match := COMPILE_LINE.search(message):
            self.compiles.append({"name": match[1], "seconds": round(float(match[2]), 3), "phase": self.phase[0],
                                  "end_since_process_start_s": round(record.created - self.created, 3),
                                  "cache_hit": self._hit})
            self._hit = False


def summarize_compiles(compiles: list[dict[str, Any]]) -> dict[str, Any]:
    """JAX's compiles: their count and seconds (all, cache hits), seconds per phase, and each one of >= 0.1 s."""
    by_phase: dict[str, float] = {}
    for item in compiles:
        by_phase[item["phase"]] = round(by_phase.get(item["phase"], 0.0) + item["seconds"], 3)
    return {"xla_compiles_count": len(compiles), "xla_compile_s_total": round(sum(c["seconds"] for c in compiles), 3),
            "xla_cache_hits": sum(c["cache_hit"] for c in compiles), "xla_compile_s_by_phase": by_phase,
            "xla_compiles_over_0.1s": [c for c in compiles if c["seconds"] >= 0.1]}


def child(spec_path: str, out_path: str) -> None:
    """rlfit's `train` for SPEC (env, preset, overrides, auto, run_dir) with each phase timed; writes OUT."""
    marks = {"interpreter_start_s": since_process_start()}
    phase = ["import"]
    import psutil

    compile_log = CompileLog(phase, psutil.Process(os.getpid()).create_time())
    logging.getLogger("jax").addHandler(compile_log)
    spec = json.loads(Path(spec_path).read_text())
    result = run_phases(spec, marks, phase)
    result.update(summarize_compiles(compile_log.compiles))
    result["jax_stages"] = jax_stages(compile_log.stages)
    result["starting_state"] = starting_state_record(result["jax_stages"], result["programs"])
    Path(out_path).write_text(json.dumps(result, indent=2))


def run_phases(spec: dict[str, Any], marks: dict[str, float], phase: list[str]) -> dict[str, Any]:
    """The phases of `rlfit.api.train`/`train_config` in their order; `marks` gets each one's end since the
    process's start, `phase[0]` names the phase under way."""
    def done(name: str, following: str) -> None:
        marks[name] = since_process_start()
        phase[0] = following

    import rlfit  # noqa: F401 - first, as the `rlfit` command imports it (MJX then skips Warp on a CPU-only JAX)
    import jax  # noqa: F401
    import mujoco_playground  # noqa: F401 - Playground's import, counted here as in brax_child.py

    from rlfit.run.session import execute
    from rlfit.config.schema import resolve
    from rlfit.envs import load_env
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.device_plan import plan_for
    from rlfit.run.probes import StepProbes
    from rlfit.rundir.layout import write_json
    from rlfit.run.new_run import check_new_run_dir, create_run_dir
    from rlfit.sinks.wandb import check_wandb_available
    from rlfit.run.trainer import Trainer
    done("import", "config")
    config = resolve(spec["env"], spec["preset"], overrides=spec["overrides"])
    done("config", "jax_setup")
    configure_jax(config.run.precision)  # once, before planning, as `rlfit train` does
    done("jax_setup", "plan")
    config, plan, env = plan_for(config, StepProbes(), auto_num_envs=spec["auto"] or config.run.fit_to_device)
    check_wandb_available(config)
    done("plan", "env_load")
    env = env if env is not None else load_env(config.env, plan.backend)  # planning's, when it loaded one
    done("env_load", "trainer_build")
    trainer = Trainer.build(config, plan, env)
    done("trainer_build", "run_dir")
    check_new_run_dir(Path(spec["run_dir"]))
    directory, lock = create_run_dir(Path(spec["run_dir"]), config)
    done("run_dir", "runner")
    with lock:
        write_json(directory.plan, plan.to_dict())
        result = execute(trainer, directory, quiet=True)
    return child_record(result.summary, directory.metrics, marks, plan)


def child_record(summary: dict[str, Any], metrics: Path, marks: dict[str, float], plan: Any) -> dict[str, Any]:
    """The phases (seconds each) to the first step: the driver's marks, then the Runner's init_s, the compile of
    each program, the first iteration (metrics.jsonl) and what the Runner spent besides (`runner_other_s`)."""
    ends = list(marks.items())
    phases = {ends[0][0]: ends[0][1]}
    phases.update({f"{name}_s" if not name.endswith("_s") else name: end - previous
                   for (name, end), (_, previous) in zip(ends[1:], ends[:-1], strict=True)})
    from rlfit.sinks.jsonl import read_rows

    first = next(row for row in read_rows(metrics) if row.get("kind") == "train")
    phases["init_s"] = summary["init_s"]
    if "compile_wait_s" not in summary:  # rlfit before the background compiles: one program after the other
        for program in summary["programs"]:
            phases[f"compile {program['name']}_s"] = program["compile_s"]
    phases["first_iteration_s"] = first["iteration_s"]
    phases["runner_other_s"] = summary["time_to_first_step_s"] - sum(phases.values())
    return {"time_to_first_step_s": summary["time_to_first_step_s"], "phases": phases,
            "compile_s": summary["compile_s"], "compile_wait_s": summary.get("compile_wait_s"),
            "init_s": summary["init_s"], "programs": summary["programs"],
            "sizes": summary["sizes"], "device": summary["device"], "plan_reasons": list(plan.reasons),
            "versions": summary["versions"]}


NOTES = [
    "Every time is wall clock from the process's start (psutil's create_time, the kernel's record), the measure of "
    "rlfit's summary.json time_to_first_step_s; on a shared machine compare loadavg_1min_* with nproc.",
    "rlfit phases (cold, warm): interpreter_start_s (to the child's first line), import_s (jax, mujoco_playground "
    "and the rlfit modules rlfit.api.train uses), config_s, plan_s, jax_setup_s (configure_jax: compile cache, "
    "flags), env_load_s (rlfit.envs.load_env), trainer_build_s (Trainer.build with that environment), run_dir_s, "
    "then from summary.json init_s (the training state: its program's compile or cache read and its run), "
    "first_iteration_s (metrics.jsonl iteration_s) and runner_other_s (the rest of Runner.run before the first "
    "step ends: the checkpoint written before the first step, placing the state, and waiting for the training "
    "step's compile). Since the training step and the evaluation compile in a background thread from the "
    "Runner's start (beside init_s, the checkpoint and the first iteration), their compile times (`programs`) "
    "overlap the phases and are not among them; compile_wait_s is how long the run waited for them (the "
    "evaluation's wait, if any, comes after the first step). Before that change (no compile_wait_s in "
    "summary.json) each program's compile was a phase of its own.",
    "xla_compiles: JAX's own log of each XLA compile (JAX_LOG_COMPILES=1) with the phase it ended in and whether "
    "JAX logged a persistent-cache hit for it.",
    "jax_stages: per program name, JAX's logged tracing ('Finished tracing NAME for jit'), lowering ('Finished "
    "jaxpr to MLIR module conversion jit(NAME)') and XLA compile seconds added up, with their counts; a nested "
    "jit (the environments' `reset` inside the starting state and the training step) is also listed under its own "
    "name, its seconds inside the outer tracing. starting_state: that split for jit(starting_state) (parameters, "
    "optimizer, statistics and the environments' reset in one program; its export for the program store traces and "
    "lowers it under the same name), its compile_s from summary.json, and when its XLA compile and the training "
    "step's ended: the Runner builds the starting state while the step compiles in the background, so the first "
    "step waits for the later of the two.",
    "resume: `rlfit resume` of the cold run's folder (one iteration done, its checkpoint) in a new process with the "
    "same compile cache, before the warm case ran; figures from its summary.json and log.",
    "A program's compile in summary.json (compile training step_s, compile evaluation_s) is tracing, lowering and "
    "XLA's compile or cache read; xla_compiles_over_0.1s has XLA's part alone (jit(train_iteration): the training "
    "step; jit(<lambda>): the evaluation).",
    "brax: Brax's ppo.train via brax_child.py in the jax 0.9.2 venv, no persistent compile cache, the same "
    "environment (impl 'jax'), sizes (rlfit's cold run's planned sizes) and PPO settings; two iterations of one "
    "epoch each. Its time_to_first_step_s is the process's start to the end of its first training epoch: the "
    "progress callback after that epoch (since_process_start_s) less the evaluation between them (the increase of "
    "Brax's cumulative eval/walltime). "
    "It includes Brax's evaluation before training (step 0, its compile included): Brax's own path to its first "
    "step. first_epoch_s is Brax's training/walltime of that epoch (the compile of its training epoch included).",
    "Brax imports brax and mujoco_playground in import_s; rlfit imports mujoco_playground too, so env_load_s "
    "compares the environment's construction on both sides.",
]


if __name__ == "__main__":
    main()
