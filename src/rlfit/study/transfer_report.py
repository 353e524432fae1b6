"""The transfer check's report: figures per condition from its per-episode records, the run's MJX evaluation
beside them, and the gaps between them (`rlfit transfer-check`, `rlfit.deploy.transfer`).

Conditions:

    native_nominal      the ONNX policy in native MuJoCo on the environment's own model
    native_randomized   the same on models drawn afresh by the environment's randomizer
    mjx_nominal         the run's last evaluation in training (MJX, rlfit's JAX policy): eval/... of metrics.jsonl
    mjx_randomized      the same on its randomized models: eval/randomized/...

A native condition's figures come from its episodes: the return's mean and IQM with 95% intervals
(`rlfit.study.stats.interval_estimates`: t-based below 30 units, BCa from 30), the episode length's mean with
its interval and its five-number summary, and the early-termination (fall) rate with a Wilson interval. The unit of
an interval is what is independent: on the nominal model, an episode (each starts from its own reset key); on
randomized models, a MODEL (episodes on one model share its draw and are not independent), so the randomized
condition's mean, IQM and their intervals are over the per-model means (each model weighs the same), and its fall
rate's Wilson interval counts models, each with its fraction of falls (statsmodels' `proportion_confint`; a model's
fraction in [0, 1] varies at most as a Bernoulli would, so this is conservative). The MJX evaluation recorded only
the mean, standard deviation and mean length of its episodes (one model each on randomized models): its return
interval is Student's t from those, and it has no termination rate. Gaps are differences of mean return: native
minus MJX (Welch's t from the two conditions' means, standard deviations and unit counts) and randomized minus
nominal in native MuJoCo (paired t over models: model i's mean against the mean of the nominal episodes that
started from the same reset keys).

The MJX evaluation ran the run's whole episodes: when the check's episodes are cut shorter (`--max-steps` below the
run's episode length) the returns are not comparable, so the MJX conditions and their gaps are left out and the
report says why (`mjx_left_out`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.stats
from statsmodels.stats.proportion import proportion_confint

from rlfit.deploy.transfer.check import TransferRun
from rlfit.deploy.transfer.episodes import EpisodeRecord
from rlfit.study.report_format import fmt_interval
from rlfit.study.stats import compare, interval_estimates

CONFIDENCE = 0.95
REPORT_JSON = "transfer_check.json"
REPORT_MD = "transfer_check.md"
NATIVE_NOMINAL, NATIVE_RANDOMIZED = "native_nominal", "native_randomized"
MJX_NOMINAL, MJX_RANDOMIZED = "mjx_nominal", "mjx_randomized"
MJX_COLUMNS = {MJX_NOMINAL: "eval/", MJX_RANDOMIZED: "eval/randomized/"}


class ConditionFigures(NamedTuple):
    """One condition's figures; None where its source does not record them (the MJX evaluation's distributions)."""

    episodes: int
    return_mean: float
    return_low: float | None
    return_high: float | None
    """The mean return's 95% interval (None for one episode)."""
    return_sd: float | None
    """Standard deviation of the episodes' returns (ddof 1)."""
    return_iqm: float | None
    return_iqm_low: float | None
    return_iqm_high: float | None
    length_mean: float | None
    length_low: float | None
    length_high: float | None
    length_quartiles: list[float] | None
    """[min, 25%, median, 75%, max] of the episodes' lengths in policy steps (numpy's linear quantiles)."""
    terminated: int | None
    """Episodes the environment ended early (a fall or another termination) before the step limit."""
    terminated_rate: float | None
    terminated_low: float | None
    terminated_high: float | None
    """The rate's 95% Wilson interval over `units` (statsmodels' `proportion_confint`); on randomized models the
    rate is the mean of the models' fractions of falls."""
    source: str
    unit: str = "episode"
    """What the intervals count as independent: `episode`, or `model` (randomized models in native MuJoCo)."""
    units: int = 0
    """How many units the intervals rest on (episodes, or models)."""


class Gap(NamedTuple):
    """Mean return of condition `a` minus that of condition `b`, with its 95% interval."""

    a: str
    b: str
    difference: float
    low: float | None
    high: float | None
    method: str


def native_figures(records: Sequence[EpisodeRecord], condition: str) -> ConditionFigures | None:
    """The figures of `condition`'s ('nominal' or 'randomized') episodes; None when it ran none. Randomized: the
    model is the unit (the module docstring)."""
    mine = [r for r in records if r.condition == condition]
    if not mine:
        return None
    by_model = condition == "randomized"
    groups = per_unit(mine, by_model)
    returns = np.array([np.mean([r.episode_return for r in group]) for group in groups], np.float64)
    lengths = np.array([np.mean([r.length for r in group]) for group in groups], np.float64)
    estimates = interval_estimates({"return": returns, "length": lengths}, confidence=CONFIDENCE)
    ret, length = estimates["return"], estimates["length"]
    ended = int(sum(r.terminated for r in mine))
    falls = float(sum(np.mean([r.terminated for r in group]) for group in groups))
    low, high = proportion_confint(falls, len(groups), alpha=1 - CONFIDENCE, method="wilson")
    all_lengths = np.array([r.length for r in mine], np.float64)
    return ConditionFigures(
        len(mine), ret.mean, _finite(ret.mean_low), _finite(ret.mean_high), _finite(ret.sd), ret.iqm,
        _finite(ret.iqm_low), _finite(ret.iqm_high), length.mean, _finite(length.mean_low), _finite(length.mean_high),
        [float(q) for q in np.quantile(all_lengths, [0.0, 0.25, 0.5, 0.75, 1.0])], ended, falls / len(groups),
        float(low), float(high), f"native MuJoCo, the ONNX policy ({condition} model)",
        "model" if by_model else "episode", len(groups))


def per_unit(records: Sequence[EpisodeRecord], by_model: bool) -> list[list[EpisodeRecord]]:
    """`records` grouped into independent units: one group per model (in model order) or one per episode."""
    if not by_model:
        return [[r] for r in records]
    models = sorted({r.model_index for r in records})
    return [[r for r in records if r.model_index == m] for m in models]


def mjx_figures(rows: Sequence[dict[str, Any]], episodes: int) -> dict[str, ConditionFigures]:
    """The last evaluation in metrics.jsonl `rows` (eval/... and, with randomization, eval/randomized/...) over
    `episodes` (run.num_eval_envs) episodes each: {condition: figures}; {} when the run recorded no evaluation."""
    evaluated = [row for row in rows if "eval/episode_reward" in row]
    if not evaluated:
        return {}
    last, figures = evaluated[-1], {}
    for condition, prefix in MJX_COLUMNS.items():
        mean = last.get(f"{prefix}episode_reward")
        if mean is None:
            continue
        sd = sample_sd(float(last.get(f"{prefix}episode_reward_std", math.nan)), episodes)
        low, high = t_interval(float(mean), sd, episodes)
        figures[condition] = ConditionFigures(
            episodes, float(mean), low, high, _finite(sd), None, None, None,
            _finite(last.get(f"{prefix}episode_length")), None, None, None, None, None, None, None,
            f"MJX evaluation in training (iteration {last.get('iteration')}, env step {last.get('env_steps')}), "
            "rlfit's JAX policy", "episode", episodes)
    return figures


def sample_sd(population_sd: float, n: int) -> float:
    """The standard deviation with ddof 1 from one with ddof 0 (what the evaluation records) over n values."""
    return population_sd * math.sqrt(n / (n - 1)) if n > 1 else math.nan


def t_interval(mean: float, sd: float, n: int) -> tuple[float | None, float | None]:
    """Student's t interval of a mean from its sample's sd (ddof 1) and size; (None, None) where undefined."""
    if n < 2 or not math.isfinite(sd):
        return None, None
    low, high = scipy.stats.t.interval(CONFIDENCE, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return float(low), float(high)


def welch_interval(a: ConditionFigures, b: ConditionFigures) -> tuple[float | None, float | None]:
    """Welch's t interval of mean(a) - mean(b) from each condition's mean, sd and count of units."""
    if a.return_sd is None or b.return_sd is None or a.units < 2 or b.units < 2:
        return None, None
    va, vb = a.return_sd ** 2 / a.units, b.return_sd ** 2 / b.units
    difference = a.return_mean - b.return_mean
    if va + vb == 0:
        return difference, difference
    df = (va + vb) ** 2 / (va ** 2 / (a.units - 1) + vb ** 2 / (b.units - 1))
    half = scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)
    return difference - half, difference + half


def gaps(records: Sequence[EpisodeRecord], figures: dict[str, ConditionFigures]) -> list[Gap]:
    """Native minus MJX for each model condition both have, and randomized minus nominal in native MuJoCo."""
    out = []
    for native, mjx in ((NATIVE_NOMINAL, MJX_NOMINAL), (NATIVE_RANDOMIZED, MJX_RANDOMIZED)):
        if native in figures and mjx in figures:
            a, b = figures[native], figures[mjx]
            low, high = welch_interval(a, b)
            out.append(Gap(native, mjx, a.return_mean - b.return_mean, low, high, "Welch's t"))
    if NATIVE_RANDOMIZED in figures:
        out.append(randomized_minus_nominal(records))
    return out


def randomized_minus_nominal(records: Sequence[EpisodeRecord]) -> Gap:
    """Randomized minus nominal mean return in native MuJoCo, paired by model: model i's mean return against the
    mean of the nominal episodes that started from the same reset keys (episode j of both conditions does)."""
    nominal = {r.episode: r.episode_return for r in records if r.condition == "nominal"}
    models = per_unit([r for r in records if r.condition == "randomized"], by_model=True)
    pairs = [(np.mean([r.episode_return for r in group]), np.mean([nominal[r.episode] for r in group]))
             for group in models if all(r.episode in nominal for r in group)]
    randomized, paired_nominal = (np.array(side, np.float64) for side in zip(*pairs, strict=True))
    if len(pairs) < 2:
        return Gap(NATIVE_RANDOMIZED, NATIVE_NOMINAL, float(randomized.mean() - paired_nominal.mean()), None, None,
                   "no interval: fewer than 2 randomized models")
    c = compare("randomized", randomized, "nominal", paired_nominal, confidence=CONFIDENCE, paired=True)
    return Gap(NATIVE_RANDOMIZED, NATIVE_NOMINAL, c.mean_diff, _finite(c.mean_diff_low), _finite(c.mean_diff_high),
               "paired t over models (model i's mean against the nominal episodes from the same reset keys)")


def build_report(run: TransferRun, metrics_rows: Sequence[dict[str, Any]], settings: dict[str, Any]
                 ) -> dict[str, Any]:
    """transfer_check.json's content: settings, the run's context, per-condition figures, gaps and every episode.
    `metrics_rows`: the run's metrics.jsonl; `settings`: the check's own (seed, models, episodes_per_model)."""
    figures: dict[str, ConditionFigures] = {}
    for name, condition in ((NATIVE_NOMINAL, "nominal"), (NATIVE_RANDOMIZED, "randomized")):
        native = native_figures(run.records, condition)
        if native is not None:
            figures[name] = native
    left_out = mjx_left_out(run)
    if left_out is None:
        figures.update(mjx_figures(metrics_rows, run.eval_episodes))
    return {
        "env": run.env_name, **settings, "onnx": str(run.onnx_path), "confidence": CONFIDENCE,
        "max_steps": run.max_steps, "run_episode_steps": run.run_episode_steps, "control_dt": run.control_dt,
        "randomization": run.randomization, "perturbations": run.perturbations, "mjx_left_out": left_out,
        "conditions": {name: value._asdict() for name, value in figures.items()},
        "gaps": [gap._asdict() for gap in gaps(run.records, figures)],
        "episodes": [record._asdict() for record in run.records],
    }


def mjx_left_out(run: TransferRun) -> str | None:
    """Why the MJX evaluation is not compared (the check's episodes were cut shorter than the run's), or None."""
    if run.max_steps >= run.run_episode_steps:
        return None
    return (f"the check's episodes stop at {run.max_steps} policy steps (--max-steps) and the run's MJX evaluation "
            f"ran whole episodes of {run.run_episode_steps}: their returns are not comparable (run the check without "
            "--max-steps to compare them)")


def write_report(out_dir: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Writes transfer_check.json and transfer_check.md into `out_dir` (each atomically); returns their paths."""
    from rlfit.rundir.atomic import write_atomic
    from rlfit.study.transfer_report_text import report_markdown

    json_path, md_path = Path(out_dir) / REPORT_JSON, Path(out_dir) / REPORT_MD
    write_atomic(json_path, json.dumps(report, indent=2) + "\n")
    write_atomic(md_path, report_markdown(report))
    return json_path, md_path


def summary_line(report: dict[str, Any]) -> str:
    """One line for the console: each condition's mean return with its interval, and the early-termination rate."""
    parts = []
    for name, figures in report["conditions"].items():
        text = f"{name} {fmt_interval(figures['return_mean'], figures['return_low'], figures['return_high'])}"
        if figures["terminated_rate"] is not None:
            text += f" ({100 * figures['terminated_rate']:.0f}% ended early)"
        parts.append(text)
    return f"mean return [95% interval]: {'; '.join(parts)}"


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
