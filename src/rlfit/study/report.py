"""The report of an experiment: per measure and suite, each variant's IQM and mean with 95% CIs, pairwise
comparisons, correlations, ratios of measures per variant, plots; `report.md` and `results.json` hold the same
numbers, every file written atomically. With `zip_path`, one archive of report, plots, manifest, configs and
summaries. A measure no finished trial recorded (null in every summary.json) is left out and named as such.

    EXP_DIR/report/report.md  results.json  learning_curves.png  <measure>.png  suites.png  correlation-<i>.png
"""

from __future__ import annotations

import itertools
import math
import os
import zipfile
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlfit.rundir.atomic import write_atomic
from rlfit.errors import UserError
from rlfit.rundir.layout import write_json
from rlfit.rundir.write_failures import naming
from rlfit.study.experiment import (SUITES_FILE, Experiment, failed_trials, measure_names, read_json,
                                    trial_status)
from rlfit.study.manifest import Trial

TRIAL_FILES_IN_ZIP = ("config.yaml", "plan.json", "summary.json", "metrics.jsonl", SUITES_FILE)
BOOTSTRAP_REPS = 2000
PROFILE_POINTS = 50
"""Thresholds of a performance profile, evenly spaced over the measure's observed range."""
NO_PAIRS = "no finished trial has both measures"


@dataclass(frozen=True)
class TrialResult:
    """What one finished trial measured."""

    trial: Trial
    values: dict[str, float | None]
    """measure name -> value (summary.json fields, suite/<name> rewards) and every 'section.key' of its config."""
    curve: tuple[np.ndarray, np.ndarray]
    """(env steps (T,), eval reward (T,)) from metrics.jsonl's eval rows."""


def collect(experiment: Experiment) -> list[TrialResult]:
    """The finished trials' numbers (unfinished ones are left out of the report and counted in it)."""
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
        values.update({k: summary.get(k) for k in experiment.manifest.measures})
        values.update({f"suite/{name}": r.get("episode_reward") for name, r in suites.items()})
        rows = [r for r in read_rows(run_dir / "metrics.jsonl") if r.get("kind") == "eval"]
        curve = (np.array([r["env_steps"] for r in rows], float),
                 np.array([r["eval/episode_reward"] for r in rows], float))
        results.append(TrialResult(trial, values, curve))
    return results


def variant_scores(results: list[TrialResult], measure: str, variants: list[str]) -> dict[str, np.ndarray]:
    """variant -> the finished seeds' values of `measure`, shape (num_seeds,); variants without any left out."""
    scores = {}
    for variant in variants:
        values = [r.values.get(measure) for r in results if r.trial.variant == variant]
        values = [float(v) for v in values if v is not None and np.isfinite(v)]
        if values:
            scores[variant] = np.array(values)
    return scores


def paired_values(results: list[TrialResult], x: str, y: str) -> np.ndarray:
    """(n, 2): the (x, y) values of the trials in `results` that have both, finite (others left out)."""
    pairs = [(r.values.get(x), r.values.get(y)) for r in results]
    pairs = [(float(a), float(b)) for a, b in pairs if a is not None and b is not None]
    return np.array([p for p in pairs if np.isfinite(p).all()], float).reshape(-1, 2)


def ratio_entries(results: list[TrialResult], ratios: Sequence[tuple[str, str]],
                  variants: list[str]) -> list[dict[str, Any]]:
    """Per (numerator, denominator): each variant's ratio of means (`stats.ratio_of_means`) over its trials that
    have both measures; NaN numbers become None (JSON null), a variant without such trials has n 0."""
    from rlfit.study.stats import ratio_of_means

    entries = []
    for numerator, denominator in ratios:
        per_variant = {}
        for variant in variants:
            pairs = paired_values([r for r in results if r.trial.variant == variant], numerator, denominator)
            if not pairs.size:
                per_variant[variant] = {"n": 0, "ratio": None, "low": None, "high": None, "note": NO_PAIRS}
                continue
            estimate = ratio_of_means(pairs[:, 0], pairs[:, 1], reps=BOOTSTRAP_REPS)
            per_variant[variant] = {k: None if isinstance(v, float) and math.isnan(v) else v
                                    for k, v in estimate._asdict().items()}
        entries.append({"numerator": numerator, "denominator": denominator, "per_variant": per_variant})
    return entries


def variant_curves(results: list[TrialResult], variants: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """variant -> (steps (T,), rewards (num_seeds, T)) over the evaluation steps every seed reached."""
    curves = {}
    for variant in variants:
        runs = [r.curve for r in results if r.trial.variant == variant and r.curve[0].size]
        if not runs:
            continue
        common = sorted(set.intersection(*(set(steps.tolist()) for steps, _ in runs)))
        if not common:
            continue
        rewards = np.stack([rewards[np.searchsorted(steps, common)] for steps, rewards in runs])
        curves[variant] = (np.array(common), rewards)
    return curves


def write_report(experiment: Experiment, zip_path: Path | None = None, with_checkpoints: bool = False) -> Path:
    """Writes EXP_DIR/report/ (and the zip when asked); returns report.md's path."""
    from rlfit.study import plots
    from rlfit.study.stats import compare, correlation, interval_estimates, performance_profile

    check_report_paths(experiment, zip_path)
    manifest = experiment.manifest
    results = collect(experiment)
    if not results:
        failed = failed_trials(experiment)
        if failed:
            raise UserError(f"no trial in {experiment.path} finished: {len(failed)} failed ({', '.join(failed)}); "
                            "see failed.json in each")
        raise UserError(f"no finished trial in {experiment.path} yet; run `rlfit experiment resume {experiment.path}`")
    variants = [v.name for v in manifest.variants]
    out = experiment.report_dir
    out.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, Any] = {"experiment": manifest.name, "stage": manifest.stage,
                               "trials_finished": len(results), "trials_total": len(manifest.trials()),
                               "trials_failed": failed_trials(experiment),
                               "measures": {}, "measures_not_recorded": [], "correlations": [], "ratios": [],
                               "figures": {}}
    curves = variant_curves(results, variants)
    if curves:
        numbers["figures"]["learning_curves"] = plots.learning_curves(
            curves, out / "learning_curves.png", f"{manifest.name}: evaluation reward (IQM, 95% CI)").name
    suite_estimates = {}
    for measure in measure_names(manifest):
        scores = variant_scores(results, measure, variants)
        if not scores:
            numbers["measures_not_recorded"].append(measure)
            continue
        estimates = interval_estimates(scores, reps=BOOTSTRAP_REPS)
        comparisons = [compare(a, scores[a], b, scores[b], reps=BOOTSTRAP_REPS)
                       for a, b in itertools.combinations(scores, 2) if min(scores[a].size, scores[b].size) >= 2]
        numbers["measures"][measure] = {"estimates": {k: e._asdict() for k, e in estimates.items()},
                                        "comparisons": [c._asdict() for c in comparisons],
                                        "values": {k: v.tolist() for k, v in scores.items()}}
        if measure.startswith("suite/"):
            suite_estimates[measure.removeprefix("suite/")] = estimates
        else:
            name = f"{measure}.png"
            numbers["figures"][measure] = plots.interval_plot(estimates, out / name, f"{manifest.name}: {measure}",
                                                              measure).name
            values = np.concatenate(list(scores.values()))
            if np.ptp(values) > 0:
                taus = np.linspace(values.min(), values.max(), PROFILE_POINTS)
                profiles = performance_profile(scores, taus, reps=BOOTSTRAP_REPS)
                numbers["measures"][measure]["profile"] = {
                    "taus": taus.tolist(), **{k: {"fraction": f.tolist(), "low": lo.tolist(), "high": hi.tolist()}
                                              for k, (f, lo, hi) in profiles.items()}}
                numbers["figures"][f"{measure}/profile"] = plots.profile_plot(
                    profiles, taus, out / f"{measure}-profile.png", f"{manifest.name}: performance profile", measure).name
    if suite_estimates:
        numbers["figures"]["suites"] = plots.suite_plot(suite_estimates, out / "suites.png",
                                                        f"{manifest.name}: evaluation suites (IQM, 95% CI)").name
    for index, (x_name, y_name) in enumerate(manifest.correlations):
        pairs = paired_values(results, x_name, y_name)
        entry: dict[str, Any] = {"x": x_name, "y": y_name, "n": len(pairs)}
        xs, ys = pairs[:, 0], pairs[:, 1]
        if len(pairs) >= 3 and np.ptp(xs) > 0 and np.ptp(ys) > 0:
            corr = correlation(xs, ys, reps=BOOTSTRAP_REPS)
            entry.update(corr._asdict())
            entry["figure"] = plots.scatter_fit(xs, ys, corr, out / f"correlation-{index}.png", x_name, y_name,
                                                f"{y_name} against {x_name}").name
        else:
            entry["verdict"] = "not computed: needs 3 or more trials and values that vary"
        numbers["correlations"].append(entry)
    numbers["ratios"] = ratio_entries(results, manifest.ratios, variants)
    write_json(out / "results.json", numbers)
    report = out / "report.md"
    write_atomic(report, markdown(experiment, numbers))
    if zip_path is not None:
        write_zip(experiment, zip_path, with_checkpoints)
    return report


def check_report_paths(experiment: Experiment, zip_path: Path | None) -> None:
    """UserError, before anything is written, when EXP_DIR/report is a file or the zip's path is a directory."""
    if experiment.report_dir.exists() and not experiment.report_dir.is_dir():
        raise UserError(f"{experiment.report_dir} is a file, not a directory; move it aside so the report can be "
                        "written there")
    if zip_path is not None:
        for path in (zip_path, zip_staging(zip_path)):
            if path.is_dir():
                raise UserError(f"{path} is a directory; move it aside so the zip can be written there")


def markdown(experiment: Experiment, numbers: dict[str, Any]) -> str:
    """report.md: setup, a table per measure, comparisons and correlations in words, figures linked."""
    manifest = experiment.manifest
    lines = [f"# {manifest.name}" + (f" (stage {manifest.stage})" if manifest.stage else ""), "",
             "## Setup", "",
             f"- environment `{manifest.env}`, preset `{manifest.preset}`, seeds {list(manifest.seeds)}",
             f"- overrides for every trial: {fmt_overrides(manifest.overrides)}",
             f"- trials finished: {numbers['trials_finished']} of {numbers['trials_total']}"]
    lines += [f"- trial `{path}` failed (left out of the statistics): {error}"
              for path, error in numbers["trials_failed"].items()]
    lines += [f"- variant `{v.name}`: {fmt_overrides(v.overrides)}" for v in manifest.variants]
    lines += [f"- suite `{s.name}`: {fmt_overrides(s.overrides)}, {s.episodes} episodes per trial"
              for s in manifest.suites]
    lines += [f"- measure `{m}` was not recorded (no finished trial has a value for it): left out"
              for m in numbers["measures_not_recorded"]]
    lines += ["", "Intervals are 95% stratified bootstrap confidence intervals (rliable, "
              f"{BOOTSTRAP_REPS} resamples); IQM is the interquartile mean over seeds.", ""]
    if "learning_curves" in numbers["figures"]:
        lines += [f"![learning curves]({numbers['figures']['learning_curves']})", ""]
    for measure, entry in numbers["measures"].items():
        lines += [f"## {measure}", "", "| variant | seeds | IQM [95% CI] | mean [95% CI] |", "| --- | --- | --- | --- |"]
        for variant, e in entry["estimates"].items():
            lines.append(f"| {variant} | {e['n']} | {e['iqm']:.4g} [{e['iqm_low']:.4g}, {e['iqm_high']:.4g}] | "
                         f"{e['mean']:.4g} [{e['mean_low']:.4g}, {e['mean_high']:.4g}] |")
        lines.append("")
        for c in entry["comparisons"]:
            lines.append(f"- `{c['a']}` vs `{c['b']}`: mean difference {c['mean_diff']:+.4g}, Hedges' g "
                         f"{c['effect_size']:+.2f}; Welch's t = {c['welch_t']:.3g}, p = {c['welch_p']:.3g}; "
                         f"Mann-Whitney U = {c['mannwhitney_u']:.3g}, p = {c['mannwhitney_p']:.3g}; "
                         f"P({c['a']} > {c['b']}) = {c['prob_improvement']:.2f} "
                         f"[{c['prob_improvement_low']:.2f}, {c['prob_improvement_high']:.2f}]; power "
                         f"{c['power']:.2f}. **{c['verdict']}**")
        figure = numbers["figures"].get(measure)
        lines += ["", f"![{measure}]({figure})" if figure else "", ""]
        profile = numbers["figures"].get(f"{measure}/profile")
        if profile:
            lines += [f"Performance profile (the fraction of seeds above each threshold, 95% CI): ![profile]({profile})",
                      ""]
    if "suites" in numbers["figures"]:
        lines += ["## Evaluation suites", "", f"![suites]({numbers['figures']['suites']})", ""]
    if numbers["correlations"]:
        lines += ["## Correlations", ""]
        for c in numbers["correlations"]:
            if "pearson_r" in c:
                lines.append(f"- `{c['y']}` against `{c['x']}` over {c['n']} trials: Pearson's r = "
                             f"{c['pearson_r']:.3f} [{c['pearson_low']:.3f}, {c['pearson_high']:.3f}] (p = "
                             f"{c['pearson_p']:.3g}); Spearman's rho = {c['spearman_rho']:.3f} "
                             f"[{c['spearman_low']:.3f}, {c['spearman_high']:.3f}]. {c['verdict']} "
                             f"![scatter]({c['figure']})")
            else:
                lines.append(f"- `{c['y']}` against `{c['x']}` ({c['n']} trials): {c['verdict']}")
        lines.append("")
    lines += ratio_lines(numbers["ratios"])
    lines += ["Every number above is in `results.json`.", ""]
    return "\n".join(lines)


def ratio_lines(ratios: list[dict[str, Any]]) -> list[str]:
    """report.md's "Ratios" section: one table per ratio (none when the manifest has no ratios)."""
    if not ratios:
        return []
    lines = ["## Ratios", "", "A ratio is mean(numerator) / mean(denominator) over the variant's trials that have "
             "both measures, with a 95% paired percentile bootstrap interval (trials resampled with their two values "
             f"together, {BOOTSTRAP_REPS} resamples).", ""]
    for ratio in ratios:
        lines += [f"### `{ratio['numerator']}` / `{ratio['denominator']}`", "", "| variant | trials | ratio [95% CI] |",
                  "| --- | --- | --- |"]
        lines += [f"| {variant} | {e['n']} | {fmt_ratio(e)} |" for variant, e in ratio["per_variant"].items()]
        lines.append("")
    return lines


def fmt_ratio(estimate: dict[str, Any]) -> str:
    """'0.512 [0.47, 0.55]', or the ratio (or n/a) with the note saying why there is no interval."""
    if estimate["ratio"] is None:
        return f"n/a ({estimate['note']})"
    if estimate["low"] is None:
        return f"{estimate['ratio']:.4g} ({estimate['note']})"
    return f"{estimate['ratio']:.4g} [{estimate['low']:.4g}, {estimate['high']:.4g}]"


def fmt_overrides(overrides: Any) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in dict(overrides).items()) or "none"


def write_zip(experiment: Experiment, zip_path: Path, with_checkpoints: bool) -> Path:
    """One archive of the report, manifest, record and each trial's config, plan, summary, metrics and suite
    results (checkpoints only `with_checkpoints`), written aside and renamed into place."""
    root = experiment.path
    files = [p for p in sorted(experiment.report_dir.rglob("*")) if p.is_file()]
    files += [root / name for name in ("manifest.yaml", "experiment.json")]
    for trial in experiment.manifest.trials():
        run_dir = experiment.trial_dir(trial)
        files += [run_dir / name for name in TRIAL_FILES_IN_ZIP if (run_dir / name).is_file()]
        if with_checkpoints and (run_dir / "checkpoints").is_dir():
            files += [p for p in sorted((run_dir / "checkpoints").rglob("*")) if p.is_file()]
    staging = zip_staging(zip_path)
    try:
        with naming(zip_path, staging), zipfile.ZipFile(staging, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, Path(root.name) / path.relative_to(root))
        os.replace(staging, zip_path)
    except BaseException:
        staging.unlink(missing_ok=True)  # a failed write (a full disk) leaves the previous zip and no partial one
        raise
    return zip_path


def zip_staging(zip_path: Path) -> Path:
    """Where the zip is written before it is renamed into place."""
    return zip_path.with_name(f".{zip_path.name}.partial")
