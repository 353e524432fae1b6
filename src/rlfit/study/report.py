"""The report of an experiment: per measure and suite, each variant's IQM and mean with 95% intervals, intervals on
the differences between variants with P(improvement), tests adjusted for the report's family, the evaluation's
noise beside the spread between seeds, a seeds planner, correlations, ratios, plots; `report.md` and
`results.json` hold the same numbers, every file written atomically. With `zip_path`, one archive of report,
plots, manifest, configs, summaries and (with checkpoints) policies. A measure no finished trial recorded (null in
every summary.json) is left out and named as such.

    EXP_DIR/report/report.md  results.json  learning_curves.png  <measure>.png  suites.png  correlation-<i>.png
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlfit.rundir.atomic import write_atomic
from rlfit.errors import UserError
from rlfit.rundir.layout import write_json
from rlfit.study.experiment import (Experiment, failed_trials, measure_names)
from rlfit.study.curves import variant_curve_seeds, variant_curves
from rlfit.study.measures import SUITE_FIELDS
from rlfit.study.report_zip import check_report_paths, write_zip
from rlfit.study.trials import TrialResult, collect, paired_values, variant_seed_scores

BOOTSTRAP_REPS = 2000
ALPHA = 0.05
"""The family-wise (Holm) or false-discovery (BH) level a difference is called at."""
PROFILE_POINTS = 50
"""Thresholds of a performance profile, evenly spaced over the measure's observed range."""
PLANNER_SDS = (0.5, 1.0, 2.0)
"""The seeds planner's differences to detect, in units of the pilot's pooled per-seed SD."""
NOISE_RATIO_LIMIT = 1 / 3
"""An evaluation's standard error counts as well below the spread between seeds at a third of it or less."""
NO_PAIRS = "no finished trial has both measures"


def seed_blocked_comparison(name_a: str, a: dict[int, float], name_b: str, b: dict[int, float],
                            interval: str) -> dict[str, Any]:
    """`stats.compare` of two variants' {seed: value}: paired by seed where both finished the same seeds
    (`rlfit.study.paired`), unpaired otherwise, with the reason why it is unpaired in `pairing`."""
    from rlfit.study.paired import UNPAIRED_REASON, shared_seeds
    from rlfit.study.stats import compare

    blocks = shared_seeds(list(a), list(b))
    if blocks:
        row = compare(name_a, np.array([a[s] for s in blocks]), name_b, np.array([b[s] for s in blocks]),
                      reps=BOOTSTRAP_REPS, method=interval, paired=True)
        return _json_numbers(row._asdict())
    row = compare(name_a, np.array(list(a.values())), name_b, np.array(list(b.values())), reps=BOOTSTRAP_REPS,
                  method=interval)
    return {**_json_numbers(row._asdict()), "pairing": UNPAIRED_REASON}


def ratio_entries(results: list[TrialResult], ratios: Sequence[tuple[str, str]], variants: list[str],
                  suites: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Per (numerator, denominator): each variant's ratio of means (`stats.ratio_of_means`) over its trials that
    have both measures; NaN numbers become None (JSON null), a variant without such trials has n 0. A ratio whose
    measures are not on one ratio scale (`ratio_refusal`) is refused whole: `refused` says why, no variant has one."""
    from rlfit.study.stats import ratio_of_means

    entries = []
    for numerator, denominator in ratios:
        refusal = ratio_refusal(results, numerator, denominator, suites)
        if refusal:
            entries.append({"numerator": numerator, "denominator": denominator, "refused": refusal, "per_variant": {}})
            continue
        per_variant = {}
        for variant in variants:
            pairs = paired_values([r for r in results if r.trial.variant == variant], numerator, denominator)
            if not pairs.size:
                per_variant[variant] = {"n": 0, "ratio": None, "low": None, "high": None, "note": NO_PAIRS}
                continue
            estimate = ratio_of_means(pairs[:, 0], pairs[:, 1], reps=BOOTSTRAP_REPS)
            per_variant[variant] = _json_numbers(estimate._asdict())
        entries.append({"numerator": numerator, "denominator": denominator, "per_variant": per_variant})
    return entries


REWARD_WORDS = ("reward", "cost", "penalty", "bonus")
"""An environment setting whose name holds one of these changes what a return counts (its units)."""


def ratio_refusal(results: list[TrialResult], numerator: str, denominator: str, suites: Sequence[Any]) -> str:
    """Why mean(numerator) / mean(denominator) is not a ratio of one quantity on a ratio scale, or '': a value <= 0
    in any trial (returns with step costs), or two suites that set the reward differently (returns in other units)."""
    pairs = paired_values(results, numerator, denominator)
    for name, column in ((numerator, 0), (denominator, 1)):
        if pairs.size and pairs[:, column].min() <= 0:
            return (f"`{name}` has values <= 0 (smallest {pairs[:, column].min():.3g}): not a ratio scale, so no "
                    "ratio; compare differences instead")
    rewards = {name: _reward_settings(name, suites) for name in (numerator, denominator)}
    if rewards[numerator] != rewards[denominator]:
        changed = next(name for name in (numerator, denominator) if rewards[name])
        settings = ", ".join(f"{k}={v}" for k, v in rewards[changed].items())
        return f"`{changed}` changes the reward ({settings}): its returns are in other units, so no ratio"
    return ""


def _reward_settings(measure: str, suites: Sequence[Any]) -> dict[str, Any]:
    """The reward-defining env.overrides of the suite behind `measure` ({} for anything else)."""
    suite = next((s for s in suites if measure == f"suite/{s.name}"), None)
    overrides = dict((suite.overrides.get("env.overrides") or {}) if suite is not None else {})
    return {k: v for k, v in overrides.items() if any(word in str(k).lower() for word in REWARD_WORDS)}


def evaluation_noise(results: list[TrialResult], measure: str, scores: dict[str, np.ndarray]) -> dict[str, Any]:
    """variant -> the evaluation's standard error (root mean square over seeds), episodes, the SD between seeds,
    and the episodes that would bring the standard error to NOISE_RATIO_LIMIT of that SD; {} when not recorded."""
    noise = {}
    for variant, values in scores.items():
        recorded = [r.noise[measure] for r in results if r.trial.variant == variant and measure in r.noise]
        if not recorded or values.size < 2:
            continue
        se = math.sqrt(np.mean([s ** 2 for s, _ in recorded]))
        episodes = int(np.median([e for _, e in recorded]))
        sd = float(values.std(ddof=1))
        needed = math.ceil(episodes * (se / (NOISE_RATIO_LIMIT * sd)) ** 2) if sd > 0 else None
        noise[variant] = {"eval_se": se, "episodes": episodes, "seed_sd": sd, "ratio": se / sd if sd > 0 else None,
                          "episodes_for_a_third": needed}
    return noise


def seeds_plan(scores: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """The a-priori planner on this study as a pilot: the pooled per-seed SD over variants and, per difference of
    PLANNER_SDS of it, the seeds per variant a Welch test at ALPHA needs for 80% power; None below 2 variants with
    2 seeds."""
    from rlfit.study.power import POWER_TARGET, seeds_needed

    groups = [v for v in scores.values() if v.size >= 2]
    if len(groups) < 2:
        return None
    pooled = math.sqrt(sum((v.size - 1) * v.var(ddof=1) for v in groups) / sum(v.size - 1 for v in groups))
    if pooled == 0:
        return None
    return {"pooled_sd": pooled, "power": POWER_TARGET, "alpha": ALPHA,
            "rows": [{"sds": k, "difference": k * pooled, "seeds": seeds_needed(k * pooled, pooled, pooled, alpha=ALPHA)}
                     for k in PLANNER_SDS]}


def write_report(experiment: Experiment, zip_path: Path | None = None, with_checkpoints: bool = False,
                 interval: str = "auto", correction: str = "holm") -> Path:
    """Writes EXP_DIR/report/ (and the zip when asked); returns report.md's path. `interval`: a method of
    `rlfit.study.intervals`; `correction`: one of `rlfit.study.corrections` (both checked before anything is written)."""
    from rlfit.study.corrections import check_correction
    from rlfit.study.intervals import check_method
    from rlfit.study.report_text import markdown

    interval = check_method(interval)
    check_correction(correction)
    check_report_paths(experiment, zip_path)
    results = collect(experiment)
    if not results:
        failed = failed_trials(experiment)
        if failed:
            raise UserError(f"no trial in {experiment.path} finished: {len(failed)} failed ({', '.join(failed)}); "
                            "see failed.json in each")
        raise UserError(f"no finished trial in {experiment.path} yet; run `rlfit experiment resume {experiment.path}`")
    out = experiment.report_dir
    out.mkdir(parents=True, exist_ok=True)
    numbers = report_numbers(experiment, results, interval, correction)
    write_json(out / "results.json", numbers)
    report = out / "report.md"
    write_atomic(report, markdown(experiment, numbers))
    if zip_path is not None:
        write_zip(experiment, zip_path, with_checkpoints)
    return report


def report_numbers(experiment: Experiment, results: list[TrialResult], interval: str, correction: str) -> dict[str, Any]:
    """Every number of the report (results.json), with the figures drawn into EXP_DIR/report/."""
    from rlfit.study.corrections import adjust

    manifest = experiment.manifest
    variants = [v.name for v in manifest.variants]
    numbers: dict[str, Any] = {"experiment": manifest.name, "stage": manifest.stage,
                               "trials_finished": len(results), "trials_total": len(manifest.trials()),
                               "trials_failed": failed_trials(experiment), "interval_method": interval,
                               "correction": correction, "alpha": ALPHA, "bootstrap_reps": BOOTSTRAP_REPS,
                               "reference_return": manifest.reference_return,
                               "suite_policies": {k: v for r in results for k, v in r.policies.items()},
                               "measures": {}, "measures_not_recorded": [], "correlations": [], "ratios": [],
                               "figures": {}}
    curves = variant_curves(results, variants)
    draw_curves(experiment, results, variants, curves, numbers)
    suite_estimates = {}
    for measure in measure_names(manifest) + recorded_suite_fields(results, manifest):
        entry = measure_entry(experiment, results, measure, variants, interval, numbers["figures"])
        if entry is None:
            numbers["measures_not_recorded"].append(measure)
            continue
        numbers["measures"][measure] = entry
        if measure.startswith("suite/") and measure.count("/") == 1:
            suite_estimates[measure.removeprefix("suite/")] = entry["_estimates"]
    if suite_estimates:
        from rlfit.study import plots

        numbers["figures"]["suites"] = plots.suite_plot(suite_estimates, experiment.report_dir / "suites.png",
                                                        f"{manifest.name}: evaluation suites (IQM, 95% CI)").name
    numbers["correlations"] = correlation_entries(experiment, results)
    comparisons = [c for entry in numbers["measures"].values() for c in entry["comparisons"]]
    family = [c for c in comparisons if c.get("p_value") is not None]  # None: the test is undefined (no spread)
    for c in comparisons:
        if c.get("p_value") is None:
            c["p_adjusted"] = None
            same = "every per-seed difference is the same" if c["paired"] else "every seed of both variants scored the same"
            c["verdict"] = f"not tested: {same}, so {c['test']} is undefined (difference {c['mean_diff']:.3g})"
    tested = [c for c in numbers["correlations"] if c.get("pearson_p") is not None]
    adjusted = adjust([c["p_value"] for c in family] + [c["pearson_p"] for c in tested], correction)
    from rlfit.study.stats import Comparison, comparison_verdict

    for c, p in zip(family, adjusted):
        c["p_adjusted"] = p
        c["verdict"] = comparison_verdict(Comparison(**{k: c[k] for k in Comparison._fields}), p, ALPHA)
    for c, p in zip(tested, adjusted[len(family):]):
        c["pearson_p_adjusted"] = p
    numbers["family_size"] = len(adjusted)
    for entry in numbers["measures"].values():
        entry.pop("_estimates")
    numbers["ratios"] = ratio_entries(results, manifest.ratios, variants, manifest.suites)
    numbers["generalization"] = generalization_entries(experiment, results)
    from rlfit.study.generalization import adjust_headlines

    adjust_headlines(numbers["generalization"], correction)
    from rlfit.study.plateau import plateau_entries, pooled_late_rise

    numbers["plateau"] = plateau_entries(curves)
    numbers["plateau_pooled"] = pooled_late_rise(curves, variant_curve_seeds(results, variants))
    numbers["plateau_headline"] = headline_plateau(results, manifest, variants)
    return numbers


def headline_measure(manifest: Any) -> str:
    """The study's headline measure: the first generalization entry's out-of-distribution measure, else the first
    of the manifest's measures."""
    if manifest.generalization:
        return manifest.generalization[0][0]
    return next(iter(measure_names(manifest)), "final_eval_reward")


def headline_plateau(results: list[TrialResult], manifest: Any, variants: list[str]) -> dict[str, Any]:
    """The plateau check on the headline measure where it is recorded along training (per variant and pooled), or
    the reason it cannot be checked."""
    from rlfit.study.measures import TRAINING_COLUMNS
    from rlfit.study.plateau import plateau_entries, pooled_late_rise

    measure = headline_measure(manifest)
    column = TRAINING_COLUMNS.get(measure)
    entry: dict[str, Any] = {"measure": measure, "column": column}
    if column is None:
        return {**entry, "note": f"the headline measure `{measure}` is measured on the final policy only, not along "
                                 "training, so whether it has plateaued cannot be checked; the check above is on the "
                                 "evaluation return"}
    curves = variant_curves(results, variants, column=column)
    if not curves:
        return {**entry, "note": f"no trial recorded `{column}` at every evaluation, so the headline measure "
                                 f"`{measure}` cannot be checked along training"}
    return {**entry, "variants": plateau_entries(curves),
            "pooled": pooled_late_rise(curves, variant_curve_seeds(results, variants, column=column))}


def generalization_entries(experiment: Experiment, results: list[TrialResult]) -> list[dict[str, Any]]:
    """Per manifest `generalization` entry: both fits of ood ~ in_distribution + log2(description) (variant as the
    grouping factor, `rlfit.study.generalization`) and a scatter of ood against in_distribution, coloured by variant."""
    from rlfit.study import plots
    from rlfit.study.generalization import fit_entry
    from rlfit.study.measures import axis_label

    entries = []
    for index, (ood, in_distribution, description) in enumerate(experiment.manifest.generalization):
        entry = fit_entry(results, ood, in_distribution, description)
        pairs = paired_values(results, in_distribution, ood)
        if len(pairs) >= 3 and "refused" not in entry:
            labels = [r.trial.variant for r in results if _has_pair(r, in_distribution, ood)]
            entry["figure"] = plots.scatter_by_variant(
                pairs[:, 0], pairs[:, 1], labels, experiment.report_dir / f"generalization-{index}.png",
                axis_label(in_distribution), axis_label(ood), f"{ood} against {in_distribution} (y = x dashed)").name
        entries.append(entry)
    return entries


def recorded_suite_fields(results: list[TrialResult], manifest: Any) -> list[str]:
    """suite/<name>/<field> for each optional suite field (success rate, normalized return) some trial recorded."""
    names = [f"suite/{s.name}/{key}" for s in manifest.suites for key in SUITE_FIELDS]
    return [name for name in names if any(r.values.get(name) is not None for r in results)]


def draw_curves(experiment: Experiment, results: list[TrialResult], variants: list[str],
                curves: dict[str, tuple[np.ndarray, np.ndarray]], numbers: dict[str, Any]) -> None:
    """learning_curves.png: IQM of the evaluation return (`curves`, from `variant_curves`) against env steps and
    against training wall-clock."""
    from rlfit.study import plots

    if curves:
        clock = variant_curves(results, variants, clock=True)
        numbers["figures"]["learning_curves"] = plots.learning_curves(
            curves, experiment.report_dir / "learning_curves.png",
            f"{experiment.manifest.name}: evaluation return (IQM, 95% CI)", clock=clock or None,
            method=numbers["interval_method"]).name


def measure_entry(experiment: Experiment, results: list[TrialResult], measure: str, variants: list[str],
                  interval: str, figures: dict[str, str]) -> dict[str, Any] | None:
    """One measure's estimates, comparisons (raw p), evaluation noise, planner and figures; None if not recorded."""
    from rlfit.study import plots
    from rlfit.study.measures import axis_label, info
    from rlfit.study.stats import interval_estimates, performance_profile

    seeded = variant_seed_scores(results, measure, variants)
    if not seeded:
        return None
    scores = {variant: np.array(list(values.values())) for variant, values in seeded.items()}
    estimates = interval_estimates(scores, reps=BOOTSTRAP_REPS, method=interval)
    comparisons = [seed_blocked_comparison(a, seeded[a], b, seeded[b], interval)
                   for a, b in itertools.combinations(scores, 2) if min(scores[a].size, scores[b].size) >= 2]
    entry: dict[str, Any] = {"_estimates": estimates, "unit": info(measure).unit, "definition": info(measure).definition,
                             "estimates": {k: _json_numbers(e._asdict()) for k, e in estimates.items()},
                             "comparisons": comparisons,
                             "values": {k: v.tolist() for k, v in scores.items()},
                             "evaluation_noise": evaluation_noise(results, measure, scores), "planner": seeds_plan(scores)}
    if measure.startswith("suite/"):
        return entry
    out, name = experiment.report_dir, experiment.manifest.name
    figures[measure] = plots.interval_plot(estimates, out / f"{measure}.png", f"{name}: {measure}", axis_label(measure)).name
    values = np.concatenate(list(scores.values()))
    if info(measure).score and np.ptp(values) > 0:  # a profile ranks scores; a time or a bit count is not one
        taus = np.linspace(values.min(), values.max(), PROFILE_POINTS)
        profiles = performance_profile(scores, taus, reps=BOOTSTRAP_REPS)
        entry["profile"] = {"taus": taus.tolist(), **{k: {"fraction": f.tolist(), "low": lo.tolist(), "high": hi.tolist()}
                                                      for k, (f, lo, hi) in profiles.items()}}
        figures[f"{measure}/profile"] = plots.profile_plot(profiles, taus, out / f"{measure}-profile.png",
                                                           f"{name}: performance profile", axis_label(measure)).name
    return entry


def correlation_entries(experiment: Experiment, results: list[TrialResult]) -> list[dict[str, Any]]:
    """Per manifest correlation: Pearson's r (on log10 of a variable that spans two decades or more) and Spearman's
    rho, with a scatter coloured by variant."""
    from rlfit.study import plots
    from rlfit.study.measures import axis_label
    from rlfit.study.stats import correlation

    entries = []
    for index, (x_name, y_name) in enumerate(experiment.manifest.correlations):
        pairs = paired_values(results, x_name, y_name)
        labels = [r.trial.variant for r in results if _has_pair(r, x_name, y_name)]
        entry: dict[str, Any] = {"x": x_name, "y": y_name, "n": len(pairs)}
        xs, ys = pairs[:, 0], pairs[:, 1]
        x_scale, y_scale = plots.axis_scale(xs), plots.axis_scale(ys)
        fit_x, fit_y = plots.on_scale(xs, x_scale), plots.on_scale(ys, y_scale)
        if len(pairs) >= 3 and np.ptp(fit_x) > 0 and np.ptp(fit_y) > 0:
            corr = correlation(fit_x, fit_y, reps=BOOTSTRAP_REPS)
            entry.update(_json_numbers(corr._asdict()), x_scale=x_scale, y_scale=y_scale)
            entry["figure"] = plots.scatter_fit(xs, ys, corr, experiment.report_dir / f"correlation-{index}.png",
                                                axis_label(x_name), axis_label(y_name), f"{y_name} against {x_name}",
                                                labels=labels).name
        else:
            entry["verdict"] = "not computed: needs 3 or more trials and values that vary"
        entries.append(entry)
    return entries


def _has_pair(result: TrialResult, x: str, y: str) -> bool:
    values = (result.values.get(x), result.values.get(y))
    return all(v is not None and np.isfinite(v) for v in values)


def _json_numbers(row: dict[str, Any]) -> dict[str, Any]:
    """NaN floats as None (JSON null)."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


