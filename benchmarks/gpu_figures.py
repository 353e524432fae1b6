"""gpu_check.py's figures: what a run folder, `rlfit doctor --json` and the other scripts' JSON give, and the check
of the record it writes (its fields and their types). Pure functions of files and dictionaries; no JAX."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

STATUSES = ("not reached", "running", "ok", "timed out", "failed", "not available")
"""A step's status: not started (the time ran out first), under way (a command cut off leaves this), measured,
its time box ran out before its figures, it ended without them, or it cannot run on this code (a missing key)."""
NUMBER = (int, float)
MAYBE_NUMBER = (int, float, type(None))
MAYBE_INT = (int, type(None))
MAYBE_STR = (str, type(None))

TARGETS = {"g1_cold_time_to_first_step_s_at_most": 90.0, "g1_warm_time_to_first_step_s_at_most": 15.0,
           "memory_prediction_error_at_most": 0.10}
"""Issue 29's first-step targets for G1 PPO on a GPU; issue 3's memory target (predicted / peak)."""
REFERENCE = {"playground_cartpole_balance_a100_env_steps_per_s": 718_626,
             "source": "MuJoCo Playground paper: CartpoleBalance, Brax PPO at its DM Control settings (2,048 "
                       "environments), one A100 (another GPU and trainer: a reference, not a target)"}

RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "time_to_first_step_s": NUMBER, "init_s": MAYBE_NUMBER, "compile_s": MAYBE_NUMBER,
    "compile_wait_s": MAYBE_NUMBER, "programs": (list,), "plan": (dict,), "iterations": (int,),
    "env_steps": (int,), "env_steps_per_s_median": MAYBE_NUMBER, "first_iteration_env_steps_per_s": MAYBE_NUMBER,
    "iterations_per_min": MAYBE_NUMBER,
    "sps_mean": MAYBE_NUMBER, "device_peak_bytes": MAYBE_INT, "predicted_bytes": MAYBE_INT,
    "predicted_over_peak_minus_1": MAYBE_NUMBER, "stopped_by": MAYBE_STR, "final_eval_reward": MAYBE_NUMBER,
    "versions": (dict,), "xla_compile_s_total": NUMBER, "xla_compiles_over_1s": (list,),
}
"""A training step's figures (`run_figures`) when its status is ok."""
PLAN_FIELDS: dict[str, tuple[type, ...]] = {
    "sizes": (dict,), "predicted_bytes": MAYBE_INT, "impl": (str,), "precision": (str,), "backend": (str,),
    "device": (str,), "bound_source": MAYBE_STR, "budget_bytes": MAYBE_INT, "reasons": (list,),
}
FIELDS_BY_KIND: dict[str, dict[str, tuple[type, ...]]] = {
    "doctor": {"device": (dict,), "jax_devices": (list,)},
    "train": RUN_FIELDS,
    "trace_bound": {"case": (str,), "sizes": (dict,), "bound_bytes": (int,), "xla_bytes": (int,), "ratio": NUMBER,
                    "lower_s": NUMBER, "walk_s": NUMBER, "compile_s": NUMBER},
    "memory_prediction": {"env": (str,), "num_envs": (int,), "measured_bytes": (int,), "line_bytes": NUMBER,
                          "xla_exact_bytes": (int,), "line_error": NUMBER, "xla_exact_error": NUMBER,
                          "method": (str,), "peak_bytes_by_stage": (dict,)},
}
STEP_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,), "kind": (str,), "measures": (str,), "status": (str,), "box_s": NUMBER, "wall_s": MAYBE_NUMBER,
    "figures": (dict,), "note": MAYBE_STR,
}
RECORD_FIELDS: dict[str, tuple[type, ...]] = {
    "benchmark": (str,), "dry_run": (bool,), "deadline_s": NUMBER, "steps": (list,), "transfer": (dict, type(None)),
    "install": (dict, type(None)), "targets": (dict,), "reference": (dict,), "headline": (dict,),
}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def metrics_rows(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's rows; a last line cut off mid-write is left out."""
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def plan_figures(plan: dict[str, Any]) -> dict[str, Any]:
    """plan.json's choice: sizes, predicted bytes, MJX implementation, precision, the bound's source, reasons."""
    extra = plan.get("extra") or {}
    model = extra.get("memory_model") or {}
    return {"sizes": plan["sizes"], "predicted_bytes": plan.get("predicted_bytes"), "impl": plan["impl"],
            "precision": plan["precision"], "backend": plan["backend"], "device": plan["device"],
            "bound_source": model.get("source"), "budget_bytes": extra.get("budget_bytes"),
            "reasons": list(plan.get("reasons", []))}


def training_rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """From metrics.jsonl's train rows: env steps/s (the median iteration, the first left out: it may wait for the
    evaluation's compile; the first's own rate apart), and iterations per minute (between the first and the last
    row, evaluations included)."""
    train = [row for row in rows if row.get("kind") == "train"]
    later = train[1:]
    median = statistics.median(row["sps"] for row in later) if later else None
    per_min = None
    if len(train) >= 2 and train[-1]["wall_s"] > train[0]["wall_s"]:
        per_min = 60 * (train[-1]["iteration"] - train[0]["iteration"]) / (train[-1]["wall_s"] - train[0]["wall_s"])
    return {"iterations": len(train), "env_steps": train[-1]["env_steps"] if train else 0,
            "env_steps_per_s_median": median, "first_iteration_env_steps_per_s": train[0]["sps"] if train else None,
            "iterations_per_min": per_min}


def run_figures(run_dir: Path) -> dict[str, Any]:
    """A training run's figures from its folder (summary.json, plan.json, metrics.jsonl): what exists of them. The
    prediction's error is predicted / device peak - 1 (negative: the peak was above the prediction)."""
    summary, plan = read_json(run_dir / "summary.json") or {}, read_json(run_dir / "plan.json")
    figures: dict[str, Any] = {"plan": plan_figures(plan) if plan else {}}
    figures.update(training_rates(metrics_rows(run_dir / "metrics.jsonl")))
    for key in ("time_to_first_step_s", "init_s", "compile_s", "compile_wait_s", "sps_mean", "device_peak_bytes",
                "predicted_bytes", "stopped_by", "final_eval_reward"):
        if key in summary:
            figures[key] = summary[key]
    figures["programs"] = summary.get("programs", [])
    figures["versions"] = summary.get("versions", {})
    peak, predicted = figures.get("device_peak_bytes"), figures.get("predicted_bytes")
    figures["predicted_over_peak_minus_1"] = predicted / peak - 1 if peak and predicted else None
    return figures


def memory_figures(record: dict[str, Any]) -> dict[str, Any]:
    """memory_prediction.py's one row (one environment, one size)."""
    result = record["results"][0]
    row = result["rows"][0]
    return {"env": result["env"], **{key: row[key] for key in (
        "num_envs", "measured_bytes", "line_bytes", "xla_exact_bytes", "line_error", "xla_exact_error",
        "line_with_same_backend_margin_error", "method", "peak_bytes_by_stage", "state_bytes", "compile_s")},
        "model": result["model"], "device": record.get("device")}


def figure(record: dict[str, Any], step_name: str, *keys: str) -> Any:
    """A figure of a measured step (None when the step has not measured it)."""
    step = next((s for s in record["steps"] if s["name"] == step_name), None)
    value: Any = step["figures"] if step and step["status"] == "ok" else None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def first_measured(*values: Any) -> Any:
    """The first value that is not None (None when none is)."""
    return next((value for value in values if value is not None), None)


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """The figures the README quotes, beside their targets (None where not measured)."""
    cold = figure(record, "g1_ppo_cold", "time_to_first_step_s")
    warm = figure(record, "g1_ppo_warm", "time_to_first_step_s")
    cartpole = figure(record, "cartpole_ppo_playground", "env_steps_per_s_median")
    reference = REFERENCE["playground_cartpole_balance_a100_env_steps_per_s"]
    return {
        "device": figure(record, "doctor", "device", "name"),
        "device_total_bytes": figure(record, "doctor", "device", "total_bytes"),
        "driver": figure(record, "doctor", "device", "driver"),
        "jax": figure(record, "doctor", "device", "jax_version"),
        "mjx_impl": figure(record, "g1_ppo_cold", "plan", "impl"),
        "g1_plan_sizes": figure(record, "g1_ppo_cold", "plan", "sizes"),
        "g1_predicted_bytes": figure(record, "g1_ppo_cold", "plan", "predicted_bytes"),
        "g1_bound_source": figure(record, "g1_ppo_cold", "plan", "bound_source"),
        "g1_cold_time_to_first_step_s": cold,
        "g1_cold_within_target": None if cold is None else cold <= TARGETS["g1_cold_time_to_first_step_s_at_most"],
        "g1_warm_time_to_first_step_s": warm,
        "g1_warm_within_target": None if warm is None else warm <= TARGETS["g1_warm_time_to_first_step_s_at_most"],
        "g1_first_iteration_env_steps_per_s": figure(record, "g1_ppo_cold", "first_iteration_env_steps_per_s"),
        "g1_env_steps_per_s": first_measured(figure(record, "g1_ppo_warm", "env_steps_per_s_median"),
                                             figure(record, "g1_ppo_cold", "env_steps_per_s_median")),
        "g1_iterations_per_min": first_measured(figure(record, "g1_ppo_warm", "iterations_per_min"),
                                                figure(record, "g1_ppo_cold", "iterations_per_min")),
        "g1_device_peak_bytes": figure(record, "g1_ppo_cold", "device_peak_bytes"),
        "g1_predicted_over_peak_minus_1": figure(record, "g1_ppo_cold", "predicted_over_peak_minus_1"),
        "cartpole_env_steps_per_s": cartpole,
        "cartpole_over_playground_a100": None if cartpole is None else cartpole / reference,
        "trace_bound_over_xla": {s["name"].split(" ", 1)[1]: s["figures"]["ratio"] for s in record["steps"]
                                 if s["kind"] == "trace_bound" and s["status"] == "ok"},
        "memory_prediction_line_error": figure(record, "memory_prediction", "line_error"),
        "fasttd3_g1_env_steps_per_s": figure(record, "fasttd3_g1", "env_steps_per_s_median"),
    }


def type_problems(values: dict[str, Any], fields: dict[str, tuple[type, ...]], where: str) -> list[str]:
    """One line per field of `fields` missing from `values` or of another type (a bool is not a number)."""
    problems = []
    for key, types in fields.items():
        if key not in values:
            problems.append(f"{where}: no {key}")
        elif isinstance(values[key], bool) and bool not in types or not isinstance(values[key], types):
            problems.append(f"{where}: {key} is {type(values[key]).__name__}, not "
                            f"{' or '.join(t.__name__ for t in types)}")
    return problems


def check_record(record: dict[str, Any]) -> list[str]:
    """Every problem with gpu_check.py's record: fields and types of the record, of each step and of each measured
    step's figures (by its kind); an empty list when it is whole."""
    problems = type_problems(record, RECORD_FIELDS, "record")
    for number, step in enumerate(record.get("steps") or []):
        where = f"step {number + 1} ({step.get('name', '?')})"
        problems += type_problems(step, STEP_FIELDS, where)
        if step.get("status") not in STATUSES:
            problems.append(f"{where}: status {step.get('status')!r} is none of {', '.join(STATUSES)}")
        elif step["status"] == "ok" and step.get("kind") in FIELDS_BY_KIND:
            problems += type_problems(step.get("figures") or {}, FIELDS_BY_KIND[step["kind"]], where)
            if step["kind"] == "train":
                problems += type_problems(step["figures"].get("plan") or {}, PLAN_FIELDS, f"{where} plan")
        elif step["status"] == "not reached" and step.get("figures"):
            problems.append(f"{where}: not reached, yet it has figures")
    return problems
