"""What each finished trial of an experiment measured, read back from its run directory (summary.json,
suites.json, metrics.jsonl, config.yaml), and the per-variant views of it that the report compares.

    collect(experiment) -> [TrialResult]  ->  variant_scores / variant_seed_scores / paired_values
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from rlfit.study.experiment import SUITES_FILE, Experiment, read_json, trial_status
from rlfit.study.manifest import Trial
from rlfit.study.measures import SUITE_FIELDS


@dataclass(frozen=True)
class TrialResult:
    """What one finished trial measured."""

    trial: Trial
    values: dict[str, float | None]
    """measure name -> value (summary.json fields, suite/<name> rewards) and every 'section.key' of its config."""
    curve: tuple[np.ndarray, np.ndarray]
    """(env steps (T,), eval reward (T,)) from metrics.jsonl's eval rows."""
    wall: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """(T,): training wall-clock seconds (the train rows' wall_s) when each evaluation's env steps were reached."""
    noise: dict[str, tuple[float, int]] = field(default_factory=dict)
    """measure -> (standard error of the evaluation's mean return, episodes) where the trial recorded its spread."""
    policies: dict[str, str] = field(default_factory=dict)
    """suite -> the policy its suites.json entry names (`policy`), where it names one."""
    training: dict[str, np.ndarray] = field(default_factory=dict)
    """eval column of metrics.jsonl (e.g. 'eval/description_length_bits') -> (T,) its values at `curve`'s steps,
    for the columns every eval row has."""


def collect(experiment: Experiment) -> list[TrialResult]:
    """The finished trials' numbers (unfinished ones are left out of the report and counted in it)."""
    from rlfit.config.moved_keys import MOVED_KEYS
    from rlfit.run.restore import flat_keys
    from rlfit.sinks.jsonl import read_rows

    results = []
    for trial in experiment.manifest.trials():
        run_dir = experiment.trial_dir(trial)
        if trial_status(run_dir) != "done":
            continue
        summary = read_json(run_dir / "summary.json") or {}
        suites = read_json(run_dir / SUITES_FILE) or {}
        config = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        values: dict[str, Any] = {k: v for k, v in flat_keys(config).items() if isinstance(v, (int, float))}
        for old, new in MOVED_KEYS.items():  # a trial saved before a key moved, or a manifest naming its old name
            if old in values or new in values:
                values.setdefault(new, values.get(old))
                values.setdefault(old, values[new])
        values.update({k: summary.get(k) for k in experiment.manifest.measures})
        values.update({f"suite/{name}": r.get("episode_reward") for name, r in suites.items()})
        values.update({f"suite/{name}/{key}": r[key] for name, r in suites.items() for key in SUITE_FIELDS if key in r})
        rows = read_rows(run_dir / "metrics.jsonl")
        evals = [r for r in rows if r.get("kind") == "eval"]
        curve = (np.array([r["env_steps"] for r in evals], float), np.array([r["eval/episode_reward"] for r in evals], float))
        noise = {f"suite/{name}": _standard_error(r.get("episode_reward_std"), r.get("episodes")) for name, r in suites.items()}
        noise.update(suite_field_noise(suites))
        if evals and summary.get("final_eval_reward") == evals[-1]["eval/episode_reward"]:
            episodes = (config.get("run") or {}).get("num_eval_envs")
            noise["final_eval_reward"] = _standard_error(evals[-1].get("eval/episode_reward_std"), episodes)
        policies = {name: str(r["policy"]) for name, r in suites.items() if "policy" in r}
        columns = set.intersection(*(set(r) for r in evals)) if evals else set()
        training = {k: np.array([r[k] for r in evals], float) for k in sorted(columns)
                    if k.startswith("eval/") and all(isinstance(r[k], (int, float)) for r in evals)}
        results.append(TrialResult(trial, values, curve, _wall_at(rows, curve[0]),
                                   {k: v for k, v in noise.items() if v is not None}, policies, training))
    return results


def suite_field_noise(suites: dict[str, Any]) -> dict[str, tuple[float, int] | None]:
    """suite/<name>/<field> -> (standard error, episodes) of the success rate (a binomial proportion: its SD over
    episodes is sqrt(p (1 - p))) and the normalized return (its recorded SD over episodes)."""
    noise: dict[str, tuple[float, int] | None] = {}
    for name, r in suites.items():
        if isinstance(r.get("success_rate"), (int, float)):
            p = float(r["success_rate"])
            noise[f"suite/{name}/success_rate"] = _standard_error(math.sqrt(max(p * (1.0 - p), 0.0)), r.get("episodes"))
        if "normalized_reward_std" in r:
            noise[f"suite/{name}/normalized_reward"] = _standard_error(r["normalized_reward_std"], r.get("episodes"))
    return noise


def _standard_error(std: Any, episodes: Any) -> tuple[float, int] | None:
    """(std / sqrt(episodes - 1), episodes): the standard error of a mean over `episodes` returns whose spread
    (ddof 0, as the evaluator records it) is `std`; None when either is missing."""
    if not isinstance(std, (int, float)) or not isinstance(episodes, int) or episodes < 2:
        return None
    return float(std) / math.sqrt(episodes - 1), episodes


def _wall_at(rows: list[dict[str, Any]], steps: np.ndarray) -> np.ndarray:
    """(T,): the train rows' wall_s interpolated at `steps`; empty when the rows have none."""
    train = [(r["env_steps"], r["wall_s"]) for r in rows if r.get("kind", "train") == "train" and "wall_s" in r]
    if not train or not steps.size:
        return np.zeros(0)
    known = np.array(sorted(train), float)
    return np.interp(steps, known[:, 0], known[:, 1])


def variant_scores(results: list[TrialResult], measure: str, variants: list[str]) -> dict[str, np.ndarray]:
    """variant -> the finished seeds' values of `measure`, shape (num_seeds,); variants without any left out."""
    return {variant: np.array(list(values.values())) for variant, values in
            variant_seed_scores(results, measure, variants).items()}


def variant_seed_scores(results: list[TrialResult], measure: str, variants: list[str]) -> dict[str, dict[int, float]]:
    """variant -> {seed: value of `measure`} over its finished trials with a finite value, in trial order;
    variants without any left out."""
    scores: dict[str, dict[int, float]] = {}
    for variant in variants:
        values = {r.trial.seed: r.values.get(measure) for r in results if r.trial.variant == variant}
        values = {seed: float(v) for seed, v in values.items() if v is not None and np.isfinite(v)}
        if values:
            scores[variant] = values
    return scores


def paired_values(results: list[TrialResult], x: str, y: str) -> np.ndarray:
    """(n, 2): the (x, y) values of the trials in `results` that have both, finite (others left out)."""
    pairs = [(r.values.get(x), r.values.get(y)) for r in results]
    pairs = [(float(a), float(b)) for a, b in pairs if a is not None and b is not None]
    return np.array([p for p in pairs if np.isfinite(p).all()], float).reshape(-1, 2)
