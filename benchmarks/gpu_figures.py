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
GIB = 2**30
T4 = {"total_bytes": 15 * GIB, "pool_bytes": int(0.75 * 15 * GIB),
      "basis": "a 16 GB T4 shows 15,360 MiB (15 GiB) to CUDA; JAX's default pool is 0.75 of that, 11.25 GiB (12.08 GB: "
               "the guides' '~12 GB'), and rlfit's probe plans within that pool. The T4 steps hold JAX's pool on the "
               "big GPU to the same bytes (XLA_PYTHON_CLIENT_MEM_FRACTION = pool / the device's total, preallocated "
               "as JAX does by default), so rlfit's probe budgets what it would on a T4 and the run must fit in it"}
"""The T4 the T4 steps stand in for. A pool and not the platform allocator: `platform` allocates on demand with no
cap, and rlfit's budget under it is the whole free memory (rlfit.hardware.xla_memory.gpu_budget). Not `--device-memory
16GiB` under a capped pool: rlfit budgets a stated device under this process's XLA settings, so the fraction that caps
the big GPU's pool would shrink the stated 16 GiB too."""
REFERENCE: dict[str, dict[str, Any]] = {
    "cartpole_balance": {
        "playground_a100_env_steps_per_s": 718_626,
        "source": "MuJoCo Playground paper: CartpoleBalance, Brax PPO at its DM Control settings (2,048 "
                  "environments), one A100 (another GPU and trainer: a reference, not a target)"},
    "cheetah_run": {
        "env": "CheetahRun", "published_num_timesteps": 60_000_000, "published_num_evals": 10,
        "settings_source": "mujoco_playground/config/dm_control_suite_params.py, brax_ppo_config('CheetahRun') "
                           "(playground 0.2.0; rlfit's `default` preset reads it): 2,048 environments, batch 1,024 x "
                           "32 minibatches x unroll 30, 16 epochs, lr 1e-3, 60M env steps",
        "published_reward": None,
        "reward_note": "no tabulated figure found offline: the Playground paper (arXiv 2502.08844) shows CheetahRun's "
                       "PPO reward as a curve only; read off a figure by hand, with its page, before quoting one"},
    "g1": {
        "env": "G1JoystickFlatTerrain", "published_num_timesteps": 200_000_000, "published_num_evals": 20,
        "settings_source": "mujoco_playground/config/locomotion_params.py, brax_ppo_config('G1JoystickFlatTerrain') "
                           "(playground 0.2.0; rlfit's `default` preset reads it): 8,192 environments, batch 256 x 32 "
                           "minibatches x unroll 20, 4 epochs, lr 3e-4, networks (512, 256, 128), 200M env steps",
        "published_curve": None,
        "curve_note": "no tabulated curve found offline: the Playground paper (arXiv 2502.08844) shows G1's reward "
                      "against env steps as a figure; compare at the same env steps by hand, with its page"},
    "t4_guides": {
        "num_envs": 1024, "iterations_per_min": 18.0, "memory": "~12 GB",
        "source": "the users' guides' G1 recipe on a free 16 GB T4 (benchmarks/README.md, 'G1 plans made on the "
                  "CPU'): another GPU, and whether their iterations hold rlfit's 163,840 env steps is not known: a "
                  "reference, not a target"},
}

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
LEARN_FIELDS: dict[str, tuple[type, ...]] = {
    **RUN_FIELDS, "eval_curve": (list,), "reference": (str,), "published_num_timesteps": (int,),
    "share_of_published_timesteps": NUMBER, "published_reward": MAYBE_NUMBER,
}
"""A learning step's figures: a training step's, its evaluation curve, and Playground's published run beside it."""
T4_FIELDS: dict[str, tuple[type, ...]] = {
    **RUN_FIELDS, "device_total_bytes": MAYBE_INT, "mem_fraction": MAYBE_NUMBER, "pool_bytes": (int,),
    "cap_in_effect": (bool,), "peak_over_pool": MAYBE_NUMBER, "fits": (bool, type(None)),
    "guides_iterations_per_min": NUMBER,
}
BRAX_FIELDS: dict[str, tuple[type, ...]] = {
    "env": (str,), "num_envs": (int,), "steps_per_iteration": (int,), "eval_every": (int,), "callbacks": (int,),
    "env_steps": (int,), "time_to_first_training_progress_s": MAYBE_NUMBER, "brax_sps_median": MAYBE_NUMBER,
    "wall_env_steps_per_s": MAYBE_NUMBER, "final_eval_reward": MAYBE_NUMBER, "eval_curve": (list,),
    "shim": MAYBE_STR, "xla_compile_s_total": NUMBER,
}
FIELDS_BY_KIND: dict[str, dict[str, tuple[type, ...]]] = {
    "doctor": {"device": (dict,), "jax_devices": (list,)},
    "train": RUN_FIELDS, "learn": LEARN_FIELDS, "t4": T4_FIELDS, "brax": BRAX_FIELDS,
    "trace_bound": {"case": (str,), "sizes": (dict,), "bound_bytes": (int,), "xla_bytes": (int,), "ratio": NUMBER,
                    "estimate_bytes": (int,), "estimate_ratio": NUMBER,
                    "lower_s": NUMBER, "walk_s": NUMBER, "compile_s": NUMBER},
    "line": {"case": (str,), "sizes": (dict,), "estimate_bytes": (int,), "bound_bytes": (int,), "against_step": (str,),
             "lower_s": NUMBER, "walk_s": NUMBER},
    "memory_prediction": {"env": (str,), "num_envs": (int,), "measured_bytes": (int,), "line_bytes": NUMBER,
                          "xla_exact_bytes": (int,), "line_error": NUMBER, "xla_exact_error": NUMBER,
                          "estimate_bytes": (int,), "estimate_error": NUMBER,
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


def eval_curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """metrics.jsonl's evaluations in order: env steps (the row's, else its iteration's training row's), mean reward
    and its spread across the evaluation's episodes."""
    steps_at = {row["iteration"]: row["env_steps"] for row in rows if row.get("kind") == "train"}
    return [{"env_steps": row.get("env_steps", steps_at.get(row.get("iteration"))), "reward": row["eval/episode_reward"],
             "reward_std": row.get("eval/episode_reward_std")} for row in rows if row.get("kind") == "eval"]


def learn_figures(run_dir: Path, reference: str) -> dict[str, Any]:
    """A learning step's figures beyond `run_figures`: the evaluation curve, and how far the run got of Playground's
    published env steps (`REFERENCE[reference]`), whose published reward stays None unless one is found."""
    published = REFERENCE[reference]
    rows = metrics_rows(run_dir / "metrics.jsonl")
    steps = training_rates(rows)["env_steps"]
    return {"eval_curve": eval_curve(rows), "reference": reference,
            "published_num_timesteps": published["published_num_timesteps"],
            "share_of_published_timesteps": steps / published["published_num_timesteps"],
            "published_reward": published.get("published_reward")}


def t4_figures(figures: dict[str, Any], total: int | None, variables: dict[str, str],
               out_of_memory: bool = False) -> dict[str, Any]:
    """A T4 step's figures beyond `run_figures`: the pool it ran in (`T4`; in effect on a GPU only), its peak
    against the pool, whether it fit (True: a measured peak within the pool; False: a peak above it, or the run
    ran out of memory, which ends it with exit code 5 and no summary; None: no peak measured, as on a CPU), and the
    guides' iterations a minute beside its own."""
    fraction = variables.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    peak = figures.get("device_peak_bytes")
    in_effect = fraction is not None and (figures.get("plan") or {}).get("backend") == "gpu"
    fits = False if out_of_memory else None if peak is None else peak <= T4["pool_bytes"]
    return {"device_total_bytes": total, "mem_fraction": None if fraction is None else float(fraction),
            "pool_bytes": T4["pool_bytes"], "cap_in_effect": in_effect,
            "peak_over_pool": None if peak is None else peak / T4["pool_bytes"], "fits": fits,
            "guides_iterations_per_min": REFERENCE["t4_guides"]["iterations_per_min"]}


def brax_figures(found: dict[str, Any]) -> dict[str, Any]:
    """gpu_brax.py's record: env steps/s by Brax's own count (`training/sps`: an epoch's steps over its training
    time, evaluations left out; the median after the first epoch, which compiles) and by the wall clock from the
    end of the first epoch to the last callback (evaluations included), the evaluation curve, the shim."""
    rows, settings = found.get("callbacks") or [], found.get("settings") or {}
    later = [row["brax_training_sps"] for row in rows[2:] if row.get("brax_training_sps") is not None]
    wall = None
    if len(rows) >= 3 and rows[-1]["t_s"] > rows[1]["t_s"]:
        wall = (rows[-1]["step"] - rows[1]["step"]) / (rows[-1]["t_s"] - rows[1]["t_s"])
    return {"env": settings.get("env", "?"), "num_envs": (settings.get("ppo") or {}).get("num_envs", 0),
            "steps_per_iteration": settings.get("steps_per_iteration", 0), "eval_every": settings.get("eval_every", 0),
            "callbacks": len(rows), "env_steps": rows[-1]["step"] if rows else 0,
            "time_to_first_training_progress_s": rows[1]["t_s"] if len(rows) >= 2 else None,
            "brax_sps_median": statistics.median(later) if later else None, "wall_env_steps_per_s": wall,
            "final_eval_reward": rows[-1].get("eval_reward") if rows else None,
            "eval_curve": [{"env_steps": row["step"], "reward": row.get("eval_reward")} for row in rows],
            "shim": found.get("shim"), "jax_version": found.get("jax_version"), "device": found.get("device")}


def memory_figures(record: dict[str, Any]) -> dict[str, Any]:
    """memory_prediction.py's one row (one environment, one size)."""
    result = record["results"][0]
    row = result["rows"][0]
    return {"env": result["env"], **{key: row[key] for key in (
        "num_envs", "measured_bytes", "line_bytes", "xla_exact_bytes", "line_error", "xla_exact_error",
        "line_with_same_backend_margin_error", "estimate_bytes", "estimate_error", "method", "peak_bytes_by_stage",
        "state_bytes", "compile_s")},
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


def ratio(numerator: Any, denominator: Any) -> float | None:
    """numerator / denominator where both are measured (None otherwise)."""
    return numerator / denominator if numerator is not None and denominator else None


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """The figures the README quotes, beside their targets and references (None where not measured)."""
    return {**device_headline(record), **learning_headline(record), **t4_headline(record),
            **brax_headline(record), "line": line_headline(record), **earlier_headline(record)}


def line_headline(record: dict[str, Any], peaks_from: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each `line STEP` step's estimate beside STEP's device peak, from this record or `peaks_from` (the record of
    the call that ran STEP): {STEP: {estimate_bytes, device_peak_bytes, estimate_over_peak_minus_1}} (None where
    not measured). Issue 65's target: within 10%."""
    lines = {}
    for step in record.get("steps") or []:
        if step.get("kind") != "line" or step.get("status") != "ok":
            continue
        against, estimate = step["figures"]["against_step"], step["figures"]["estimate_bytes"]
        peak = figure(record, against, "device_peak_bytes")
        if peak is None and peaks_from is not None:
            peak = figure(peaks_from, against, "device_peak_bytes")
        lines[against] = {"estimate_bytes": estimate, "device_peak_bytes": peak,
                          "estimate_over_peak_minus_1": estimate / peak - 1 if peak else None}
    return lines


def device_headline(record: dict[str, Any]) -> dict[str, Any]:
    return {"device": figure(record, "doctor", "device", "name"),
            "device_total_bytes": figure(record, "doctor", "device", "total_bytes"),
            "driver": figure(record, "doctor", "device", "driver"),
            "jax": figure(record, "doctor", "device", "jax_version")}


def learning_headline(record: dict[str, Any]) -> dict[str, Any]:
    """The DM Control task and G1 at Playground's settings: reward, env steps reached, rates, G1's first step."""
    cold = figure(record, "learn_g1", "time_to_first_step_s")
    curve = figure(record, "learn_g1", "eval_curve")
    return {
        "learn_env_steps": figure(record, "learn_cheetah_run", "env_steps"),
        "learn_share_of_published_timesteps": figure(record, "learn_cheetah_run", "share_of_published_timesteps"),
        "learn_final_eval_reward": figure(record, "learn_cheetah_run", "final_eval_reward"),
        "learn_published_reward": REFERENCE["cheetah_run"]["published_reward"],
        "learn_env_steps_per_s": figure(record, "learn_cheetah_run", "env_steps_per_s_median"),
        "learn_time_to_first_step_s": figure(record, "learn_cheetah_run", "time_to_first_step_s"),
        "mjx_impl": figure(record, "learn_g1", "plan", "impl"),
        "g1_env_steps": figure(record, "learn_g1", "env_steps"),
        "g1_final_eval_reward": figure(record, "learn_g1", "final_eval_reward"),
        "g1_eval_points": None if curve is None else len(curve),
        "g1_cold_time_to_first_step_s": cold,
        "g1_cold_within_target": None if cold is None else cold <= TARGETS["g1_cold_time_to_first_step_s_at_most"],
        "g1_first_iteration_env_steps_per_s": figure(record, "learn_g1", "first_iteration_env_steps_per_s"),
        "g1_env_steps_per_s": first_measured(figure(record, "learn_g1", "env_steps_per_s_median"),
                                             figure(record, "g1_ppo_warm", "env_steps_per_s_median")),
        "g1_device_peak_bytes": figure(record, "learn_g1", "device_peak_bytes"),
    }


def t4_headline(record: dict[str, Any]) -> dict[str, Any]:
    """G1 in a T4's pool: the planner's choice (plan, prediction, peak, fits) and the guides' 1,024 environments."""
    return {
        "t4_pool_bytes": T4["pool_bytes"],
        "t4_cap_in_effect": first_measured(figure(record, "t4_g1_plan", "cap_in_effect"),
                                           figure(record, "t4_g1_1024", "cap_in_effect")),
        "t4_plan_sizes": figure(record, "t4_g1_plan", "plan", "sizes"),
        "t4_plan_budget_bytes": figure(record, "t4_g1_plan", "plan", "budget_bytes"),
        "t4_plan_predicted_bytes": figure(record, "t4_g1_plan", "predicted_bytes"),
        "t4_plan_device_peak_bytes": figure(record, "t4_g1_plan", "device_peak_bytes"),
        "t4_plan_predicted_over_peak_minus_1": figure(record, "t4_g1_plan", "predicted_over_peak_minus_1"),
        "t4_plan_fits": figure(record, "t4_g1_plan", "fits"),
        "t4_plan_iterations_per_min": figure(record, "t4_g1_plan", "iterations_per_min"),
        "t4_1024_device_peak_bytes": figure(record, "t4_g1_1024", "device_peak_bytes"),
        "t4_1024_fits": figure(record, "t4_g1_1024", "fits"),
        "t4_1024_iterations_per_min": figure(record, "t4_g1_1024", "iterations_per_min"),
        "t4_guides_iterations_per_min": REFERENCE["t4_guides"]["iterations_per_min"],
    }


def brax_headline(record: dict[str, Any]) -> dict[str, Any]:
    """Brax's PPO beside rlfit's on the same GPU and settings: env steps/s, training iterations only on both sides
    (rlfit's median iteration, Brax's median epoch after its first)."""
    cartpole = figure(record, "cartpole_ppo_playground", "env_steps_per_s_median")
    brax_cartpole = figure(record, "brax_cartpole", "brax_sps_median")
    g1, brax_g1 = figure(record, "learn_g1", "env_steps_per_s_median"), figure(record, "brax_g1", "brax_sps_median")
    return {
        "cartpole_env_steps_per_s": cartpole,
        "cartpole_over_playground_a100": ratio(cartpole,
                                               REFERENCE["cartpole_balance"]["playground_a100_env_steps_per_s"]),
        "brax_cartpole_env_steps_per_s": brax_cartpole, "rlfit_over_brax_cartpole": ratio(cartpole, brax_cartpole),
        "brax_g1_env_steps_per_s": brax_g1, "rlfit_over_brax_g1": ratio(g1, brax_g1),
        "brax_status": {name: step["status"] for name in ("brax_cartpole", "brax_g1")
                        for step in record["steps"] if step["name"] == name},
    }


def earlier_headline(record: dict[str, Any]) -> dict[str, Any]:
    """The steps measured once before, now behind `--steps`."""
    warm = figure(record, "g1_ppo_warm", "time_to_first_step_s")
    return {
        "g1_warm_time_to_first_step_s": warm,
        "g1_warm_within_target": None if warm is None else warm <= TARGETS["g1_warm_time_to_first_step_s_at_most"],
        "trace_bound_over_xla": {s["name"].split(" ", 1)[1]: s["figures"]["ratio"] for s in record["steps"]
                                 if s["kind"] == "trace_bound" and s["status"] == "ok"},
        "trace_estimate_over_xla": {s["name"].split(" ", 1)[1]: s["figures"]["estimate_ratio"] for s in record["steps"]
                                    if s["kind"] == "trace_bound" and s["status"] == "ok"},
        "memory_prediction_line_error": figure(record, "memory_prediction", "line_error"),
        "memory_prediction_estimate_error": figure(record, "memory_prediction", "estimate_error"),
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
            if step["kind"] in ("train", "learn", "t4"):
                problems += type_problems(step["figures"].get("plan") or {}, PLAN_FIELDS, f"{where} plan")
        elif step["status"] == "not reached" and step.get("figures"):
            problems.append(f"{where}: not reached, yet it has figures")
    return problems
