"""Where a program's compile goes, from JAX's own log (JAX_LOG_COMPILES=1): tracing, lowering to StableHLO and XLA's
compile, per program name; and the starting state's program split that way (first_step.py, gpu_check.py). Pure:
no JAX."""

from __future__ import annotations

import re
from typing import Any

from brax_compare import COMPILE_LINE

STAGE_LINES = {"tracing": re.compile(r"Finished tracing (\S+) for jit in ([0-9.]+) sec"),
               "lowering": re.compile(r"Finished jaxpr to MLIR module conversion (\S+) in ([0-9.]+) sec"),
               "xla_compile": COMPILE_LINE}
"""JAX's log line of each stage of a program's compile: its name and seconds."""
STARTING_STATE = "starting_state"
"""The starting state's function (`rlfit.run.trainer.Trainer.starting_state_fn`): its program is jit(starting_state)."""
TRAINING_STEPS = ("train_iteration", "train_step")
"""The training step's function names (PPO's `train_iteration`; the off-policy algorithms' `train_step`)."""


def stages_in_log(text: str) -> list[dict[str, Any]]:
    """Every stage line of a log's text, in order (`stage_of`; no end times: a log file's lines carry none)."""
    return [stage for line in text.splitlines() if (stage := stage_of(line)) is not None]


def stage_of(message: str) -> dict[str, Any] | None:
    """A JAX log line's stage of a program's compile (`STAGE_LINES`): {stage, name, seconds}, the name without
    `jit(...)` around it; None for any other line."""
    for stage, pattern in STAGE_LINES.items():
        if match := pattern.search(message):
            name = match[1][4:-1] if match[1].startswith("jit(") and match[1].endswith(")") else match[1]
            return {"stage": stage, "name": name, "seconds": float(match[2])}
    return None


def jax_stages(stages: list[dict[str, Any]], at_least_s: float = 0.5) -> dict[str, dict[str, Any]]:
    """Per program name, its stages' seconds added up (`tracing_s`, `lowering_s`, `xla_compile_s`), how many of
    each JAX logged, and when its last XLA compile ended (since the process's start); the programs whose stages
    add up to at least `at_least_s`. A function traced inside another (a nested jit) is listed under its own
    name too, and its seconds are also in the outer one's tracing."""
    found: dict[str, dict[str, Any]] = {}
    for item in stages:
        program = found.setdefault(item["name"], {f"{stage}_s": 0.0 for stage in STAGE_LINES} | {
            f"{stage}_count": 0 for stage in STAGE_LINES} | {"xla_compile_ended_since_process_start_s": None})
        program[f"{item['stage']}_s"] = round(program[f"{item['stage']}_s"] + item["seconds"], 3)
        program[f"{item['stage']}_count"] += 1
        if item["stage"] == "xla_compile":
            program["xla_compile_ended_since_process_start_s"] = item.get("end_since_process_start_s")
    return {name: program for name, program in found.items()
            if sum(program[f"{stage}_s"] for stage in STAGE_LINES) >= at_least_s}


def starting_state_record(stages_by_name: dict[str, dict[str, Any]], programs: list[dict[str, Any]]
                          ) -> dict[str, Any]:
    """The starting state's program (the environments' reset inside) split into JAX's stages (`jax_stages`), its
    compile as summary.json's `programs` record it, and when its XLA compile and the training step's ended (since
    the process's start, where the stages carry it): the Runner builds the starting state while the step compiles
    in the background and the first step needs both, so the later of the two is on the first step's path."""
    stages = stages_by_name.get(STARTING_STATE, {})
    program = next((p for p in programs if p["name"] == "starting state"), {})
    step = next((p for p in programs if p["name"] == "training step"), {})
    step_end = [v["xla_compile_ended_since_process_start_s"] for name, v in stages_by_name.items()
                if name in TRAINING_STEPS and v["xla_compile_ended_since_process_start_s"] is not None]
    return {"program_compile_s": program.get("compile_s"), "from_cache": program.get("from_cache"),
            "from_store": program.get("from_store"), **stages,
            "training_step_compile_s": step.get("compile_s"),
            "training_step_xla_compile_ended_since_process_start_s": max(step_end) if step_end else None}
