"""The sim2sim report: per margin condition and model condition, return and fall rate with 95% intervals.

Episodes on one model are not independent (the same robot), so intervals take the **model** as the unit: each
model's mean return and fall fraction, then Student's t over the models of a condition (nominal plus randomized
models together in the `all models` row). The per-episode records are in the JSON, so any figure can be recomputed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from rlfit.deploy.sim2sim.check import Sim2SimRun

CONFIDENCE = 0.95
REPORT_JSON = "sim2sim.json"
REPORT_MD = "sim2sim.md"


def model_unit_interval(values_by_model: list[float]) -> tuple[float, float | None, float | None]:
    """(mean over models, low, high): Student's t over the models' values; no interval for one model."""
    values = np.asarray(values_by_model, np.float64)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, None, None
    sem = float(values.std(ddof=1) / np.sqrt(len(values)))
    if sem == 0.0:
        return mean, mean, mean
    low, high = scipy.stats.t.interval(CONFIDENCE, len(values) - 1, loc=mean, scale=sem)
    return mean, float(low), float(high)


def condition_figures(records: list[Any]) -> dict[str, Any]:
    """Figures over every model of one margin condition (models as units)."""
    by_model: dict[tuple[str, int], list[Any]] = {}
    for record in records:
        by_model.setdefault((record.condition, record.model_index), []).append(record)
    returns = [float(np.mean([r.episode_return for r in rs])) for rs in by_model.values()]
    falls = [float(np.mean([r.terminated for r in rs])) for rs in by_model.values()]
    ret, ret_low, ret_high = model_unit_interval(returns)
    fall, fall_low, fall_high = model_unit_interval(falls)
    return {"models": len(by_model), "episodes": len(records), "return_mean": ret, "return_low": ret_low,
            "return_high": ret_high, "fall_rate": fall, "fall_low": None if fall_low is None else max(0.0, fall_low),
            "fall_high": None if fall_high is None else min(1.0, fall_high),
            "length_mean": float(np.mean([r.length for r in records]))}


def build_report(run: Sim2SimRun) -> dict[str, Any]:
    rows = []
    for condition in run.conditions:
        figures = condition_figures(condition.records)
        rows.append({"margins": condition.margins.label(), **condition.margins.__dict__, **figures})
    return {"env": run.env_name, "onnx": str(run.onnx_path), "bundle": str(run.bundle_path),
            "observation_set": run.observation_set, "max_steps": run.max_steps, "control_dt": run.control_dt,
            "randomization": run.randomization, "interval_unit": "model (t over models; episodes on one model are "
            "not independent)", "video": None if run.video is None else str(run.video), "video_note": run.video_note,
            "conditions": rows,
            "episodes": [{"margins": c.margins.label(), **r._asdict()} for c in run.conditions for r in c.records]}


def _interval(mean: float, low: float | None, high: float | None, digits: int = 2) -> str:
    return f"{mean:.{digits}f}" + ("" if low is None else f" [{low:.{digits}f}, {high:.{digits}f}]")


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# sim2sim: {report['env']} ({report['observation_set']} observation set)", "",
             f"The controller (`rlfit.deploy.controller`, no JAX) with `{Path(report['onnx']).name}` in native MuJoCo,"
             f" up to {report['max_steps']} steps of {report['control_dt']:g} s; the environment's own reward and "
             "termination. 95% intervals take the model as the unit (nominal and randomized models).", "",
             "| condition | models | episodes | return [95%] | fall rate [95%] | mean length |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in report["conditions"]:
        lines.append(f"| {row['margins']} | {row['models']} | {row['episodes']} | "
                     f"{_interval(row['return_mean'], row['return_low'], row['return_high'])} | "
                     f"{_interval(row['fall_rate'], row['fall_low'], row['fall_high'])} | {row['length_mean']:.1f} |")
    return "\n".join(lines) + "\n"


def write_report(out: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    from rlfit.rundir.atomic import write_synced

    json_path, md_path = Path(out) / REPORT_JSON, Path(out) / REPORT_MD
    write_synced(json_path, json.dumps(report, indent=2).encode())
    write_synced(md_path, markdown(report).encode())
    return json_path, md_path


def summary_line(report: dict[str, Any]) -> str:
    first = report["conditions"][0]
    return (f"sim2sim of {report['env']}: return {_interval(first['return_mean'], first['return_low'], first['return_high'])}, "
            f"fall rate {first['fall_rate']:.2f} over {first['models']} models ({first['episodes']} episodes)"
            + (f", {len(report['conditions'])} margin conditions" if len(report["conditions"]) > 1 else ""))
