"""report.md from a report's numbers (`rlfit.study.report.report_numbers`): setup, how the statistics were made,
what each measure is, a table and the comparisons per measure, the evaluation's noise, the seeds planner,
correlations and ratios. Numbers in one interval share their decimals (`fmt_interval`)."""

from __future__ import annotations

from typing import Any

from rlfit.study.corrections import CORRECTION_NAMES
from rlfit.study.intervals import describe
from rlfit.study.measures import MOST_LIKELY, MOST_LIKELY_DEFINITION, info, is_return
from rlfit.study.paired import PAIRED_REASON
from rlfit.study.report_fits import generalization_lines
from rlfit.study.report_format import fmt_interval, fmt_number, fmt_p

def markdown(experiment: Any, numbers: dict[str, Any]) -> str:
    """report.md: setup, method, definitions, a section per measure, suites, correlations, ratios."""
    lines = setup_lines(experiment, numbers) + method_lines(numbers) + definition_lines(numbers)
    if "learning_curves" in numbers["figures"]:
        lines += [f"![learning curves]({numbers['figures']['learning_curves']})", ""]
    lines += plateau_lines(numbers.get("plateau", {}), numbers.get("plateau_pooled"), numbers.get("plateau_headline"))
    for measure, entry in numbers["measures"].items():
        lines += measure_lines(measure, entry, numbers)
    if "suites" in numbers["figures"]:
        lines += ["## Evaluation suites", "", f"![suites]({numbers['figures']['suites']})", ""]
    lines += correlation_lines(numbers)
    lines += ratio_lines(numbers["ratios"])
    lines += generalization_lines(numbers.get("generalization", []))
    lines += ["Every number above is in `results.json`.", ""]
    return "\n".join(lines)


def setup_lines(experiment: Any, numbers: dict[str, Any]) -> list[str]:
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
    return lines + [""]


def method_lines(numbers: dict[str, Any]) -> list[str]:
    """How the intervals, comparisons, corrections and planner were made, in a few sentences."""
    correction = CORRECTION_NAMES[numbers["correction"]]
    return ["## How to read the statistics", "",
            f"- Intervals are 95% confidence intervals, {describe(numbers['interval_method'])}; a bootstrap uses "
            f"{numbers['bootstrap_reps']} resamples. IQM is the interquartile mean over seeds (the mean of the middle "
            "half). One seed gives no interval.",
            "- A comparison's headline is the difference between two variants (a minus b) with its interval, and "
            "P(a > b): the probability that a seed of a beats a seed of b (ties half), with a BCa bootstrap interval.",
            f"- Seeds as blocks: {PAIRED_REASON}. Two variants that did not finish the same seeds are compared "
            "unpaired (Welch's t, Mann-Whitney U), and the comparison says so.",
            f"- Tests: each comparison's test (paired t, or Welch's t where seeds are not paired) and Pearson's "
            f"correlation test per correlation form the report's family of {numbers.get('family_size', 0)} tests, "
            f"adjusted with {correction}; raw and adjusted p are both shown, and a difference is called at adjusted "
            f"p < {numbers['alpha']}. The Wilcoxon signed-rank test (paired) or Mann-Whitney U test (unpaired) is shown "
            "unadjusted, as a check that does not assume normal scores.",
            "- The seeds planner is a-priori: from this study's spread between seeds (a pilot) it gives the seeds per "
            "variant a Welch test needs for 80% power at differences of chosen sizes. It is not a verdict on this "
            "study's result.", ""]


def definition_lines(numbers: dict[str, Any]) -> list[str]:
    """What each measure is, its unit and the policy evaluated."""
    lines = ["## Measures", "", "| measure | definition | unit | policy evaluated |", "| --- | --- | --- | --- |"]
    policies = numbers.get("suite_policies", {})
    for measure in numbers["measures"]:
        suite = measure.removeprefix("suite/").partition("/")[0] if measure.startswith("suite/") else ""
        about = info(measure, policies.get(suite, ""))
        lines.append(f"| `{measure}` | {about.definition} | {about.unit} | {about.policy or 'none (not an evaluation)'} |")
    reference = numbers.get("reference_return")
    if reference:
        lines += ["", f"Normalized return: a return divided by the manifest's reference return, {reference:g}."]
    lines += ["", f"Policies: \"{MOST_LIKELY}\" is {MOST_LIKELY_DEFINITION}. The stochastic policy (actions "
              "sampled, as in training) is not evaluated unless a suite's results name it.", ""]
    return lines


def measure_lines(measure: str, entry: dict[str, Any], numbers: dict[str, Any]) -> list[str]:
    reference = numbers.get("reference_return") if is_return(measure) else None
    unit = entry["unit"]
    header = "| variant | seeds | IQM [95% CI] | mean [95% CI] | SD between seeds |"
    if reference:
        header += " mean / reference [95% CI] |"
    lines = [f"## {measure}", "", f"Unit: {unit}.", "", header, "|" + " --- |" * (header.count("|") - 1)]
    for variant, e in entry["estimates"].items():
        row = (f"| {variant} | {e['n']} | {fmt_interval(e['iqm'], e['iqm_low'], e['iqm_high'], note=e['note'])} | "
               f"{fmt_interval(e['mean'], e['mean_low'], e['mean_high'], note=e['note'])} | {fmt_number(e['sd'])} |")
        if reference:
            scaled = [None if v is None else v / reference for v in (e["mean"], e["mean_low"], e["mean_high"])]
            row += f" {fmt_interval(*scaled, note=e['note'])} |"
        lines.append(row)
    lines.append("")
    lines += [comparison_line(c, numbers["correction"]) for c in entry["comparisons"]]
    lines += noise_lines(entry["evaluation_noise"]) + planner_lines(entry["planner"])
    figure = numbers["figures"].get(measure)
    lines += ["", f"![{measure}]({figure})" if figure else "", ""]
    profile = numbers["figures"].get(f"{measure}/profile")
    if profile:
        lines += [f"Performance profile (the fraction of seeds above each threshold, 95% percentile bootstrap band): "
                  f"![profile]({profile})", ""]
    return lines


def plateau_lines(plateau: dict[str, Any], pooled: dict[str, Any] | None = None,
                  headline: dict[str, Any] | None = None) -> list[str]:
    """The late rise of each variant's evaluation return and pooled over trials (`rlfit.study.plateau`), then the
    same on the study's headline measure or why it cannot be checked; nothing for an old results.json."""
    if not plateau:
        return []
    lines = ["## Has training plateaued?", ""] + late_rise_table(plateau) + pooled_lines(pooled)
    if headline:
        lines += [f"**On the headline measure** (`{headline['measure']}`): "
                  + (headline["note"] + "." if "note" in headline else f"recorded along training as `{headline['column']}`."), ""]
        if "variants" in headline:
            lines += late_rise_table(headline["variants"], f"`{headline['column']}`") + pooled_lines(headline.get("pooled"))
    return lines


POOLED_UNITS = {"over_seeds": "seeds (each the mean over its variants)", "over_trials": "trials",
                "over_variant_means": "variant means"}


def pooled_lines(pooled: dict[str, Any] | None) -> list[str]:
    """The late rise pooled over seeds as blocks (where trials share seeds), every trial and the variants' means,
    the headline first, in a sentence."""
    if not pooled:
        return []
    if "note" in pooled:
        return [f"Pooled: {pooled['note']}.", ""]
    headline = pooled.get("headline", "over_trials")
    parts = [_pooled_part(pooled[units], POOLED_UNITS[units]) for units in POOLED_UNITS if units in pooled]
    head, rest = parts[0], parts[1:]
    if headline == "over_seeds":
        text = (f"Pooled late rise, with seeds as blocks ({pooled['shared_seeds']} seeds shared between variants: "
                f"a seed's evaluation episodes are the same for every variant, so its luck moves them alike): "
                f"**over the {head}**. Treating the units as independent, which they are not here, for reference "
                f"only: {'; '.join(rest)}.")
    else:
        text = f"Pooled late rise: **over the {head}**" + (f"; {'; '.join(rest)}." if rest else ".")
    return [f"{text} The mean rise is above 0 in {pooled['rising_variants']} of {pooled['variants']} variants. Each "
            "variant's interval above has few seeds; pooled, the test has more power.", ""]


def _pooled_part(e: dict[str, Any], words: str) -> str:
    if e.get("low") is None:
        return f"{e['n']} {words} {fmt_number(e['mean'])} ({e['verdict']})"
    return (f"{e['n']} {words} {fmt_interval(e['mean'], e['low'], e['high'], sign=True)} (t = {e['t']:.2f}, "
            f"p = {fmt_p(e['p_value'])}: {e['verdict']})")


def late_rise_table(plateau: dict[str, Any], what: str = "evaluation return") -> list[str]:
    """One row per variant: its late rise of `what` with the interval and verdict."""
    lines = [f"Late rise: per seed, the mean {what} over the last quarter of its evaluations (after the "
             "first) minus the mean over the quarter before; mean over seeds with a 95% t interval. An interval "
             "covering 0 finds no rise at this number of seeds; its upper end bounds the rise still possible.", "",
             "| variant | seeds | last quarter (env steps) | value there | late rise [95% CI] | verdict |",
             "| --- | --- | --- | --- | --- | --- |"]
    for variant, e in plateau.items():
        if "note" in e:
            lines.append(f"| {variant} | | | | | {e['note']} |")
            continue
        first, last = e["last_quarter_steps"]
        lines.append(f"| {variant} | {e['seeds']} | {first:,.0f}-{last:,.0f} | {fmt_number(e['last_quarter_return'])} "
                     f"| {fmt_interval(e['mean'], e['low'], e['high'], sign=True)} | {e['verdict']} |")
    return lines + [""]


def comparison_line(c: dict[str, Any], correction: str) -> str:
    name = "Holm" if correction == "holm" else "BH"
    mean = fmt_interval(c["mean_diff"], c["mean_diff_low"], c["mean_diff_high"], sign=True)
    iqm = fmt_interval(c["iqm_diff"], c["iqm_diff_low"], c["iqm_diff_high"], sign=True)
    better = fmt_interval(c["prob_improvement"], c["prob_improvement_low"], c["prob_improvement_high"])
    welch = f"Welch's t = {fmt_number(c['welch_t'])} (df {fmt_number(c['welch_df'])}), p = {fmt_p(c['welch_p'])}"
    if c.get("paired"):
        tests = (f"seeds paired: mean of the per-seed differences {mean}, IQM difference {iqm}; P({c['a']} > {c['b']}) = "
                 f"{better}. Paired t = {fmt_number(c['paired_t'])} (df {c['paired_df']:.0f}), p = {fmt_p(c['paired_p'])}, "
                 f"{name}-adjusted p = {fmt_p(c.get('p_adjusted'))}; Wilcoxon signed-rank W = "
                 f"{fmt_number(c['wilcoxon_w'])}, p = {fmt_p(c['wilcoxon_p'])} (unadjusted); unpaired, for reference: "
                 f"{welch}")
    else:
        tests = (f"mean difference {mean}, IQM difference {iqm}; P({c['a']} > {c['b']}) = {better}. {welch}, "
                 f"{name}-adjusted p = {fmt_p(c.get('p_adjusted'))}; Mann-Whitney U = {fmt_number(c['mannwhitney_u'])}, "
                 f"p = {fmt_p(c['mannwhitney_p'])} (unadjusted)" + (f"; unpaired: {c['pairing']}" if c.get("pairing") else ""))
    return f"- `{c['a']}` - `{c['b']}`: {tests}; Hedges' g = {fmt_number(c['effect_size'])}. **{c.get('verdict', '')}**"


def noise_lines(noise: dict[str, Any]) -> list[str]:
    """The evaluation's standard error beside the spread between seeds, per variant."""
    if not noise:
        return []
    lines = ["", "Evaluation noise: the standard error of each trial's evaluated mean (root mean square over seeds) "
             "against the SD between seeds; well below means at most a third of it.", "",
             "| variant | episodes per evaluation | evaluation SE | SD between seeds | SE / SD | episodes for SE <= SD / 3 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for variant, n in noise.items():
        ratio = "n/a" if n["ratio"] is None else f"{n['ratio']:.2f}" + (" (not well below)" if n["ratio"] > 1 / 3 else "")
        needed = "n/a" if n["episodes_for_a_third"] is None else str(max(n["episodes_for_a_third"], 2))
        lines.append(f"| {variant} | {n['episodes']} | {fmt_number(n['eval_se'])} | {fmt_number(n['seed_sd'])} | {ratio} | "
                     f"{needed} |")
    return lines


def planner_lines(plan: dict[str, Any] | None) -> list[str]:
    if not plan:
        return []
    sizes = "; ".join(f"{fmt_number(row['difference'])} ({row['sds']:g} SD): "
                      + (f"{row['seeds']} seeds per variant" if row["seeds"] else "more than 10000 seeds")
                      for row in plan["rows"])
    return ["", f"Seeds planner (a-priori, this study as the pilot, pooled SD between seeds {fmt_number(plan['pooled_sd'])}): "
            f"to detect a difference of {sizes}, with {plan['power']:.0%} power in a two-sided Welch test at alpha "
            f"{plan['alpha']}. `rlfit.study.power.seeds_needed` gives it for any difference."]


def correlation_lines(numbers: dict[str, Any]) -> list[str]:
    if not numbers["correlations"]:
        return []
    lines = ["## Correlations", ""]
    for c in numbers["correlations"]:
        if "pearson_r" not in c:
            lines.append(f"- `{c['y']}` against `{c['x']}` ({c['n']} trials): {c['verdict']}")
            continue
        x = f"log10(`{c['x']}`)" if c.get("x_scale") == "log" else f"`{c['x']}`"
        y = f"log10(`{c['y']}`)" if c.get("y_scale") == "log" else f"`{c['y']}`"
        lines.append(f"- {y} against {x} over {c['n']} trials: Pearson's r = "
                     f"{fmt_interval(c['pearson_r'], c['pearson_low'], c['pearson_high'])} (p = {fmt_p(c['pearson_p'])}, "
                     f"adjusted p = {fmt_p(c.get('pearson_p_adjusted'))}); Spearman's rho = "
                     f"{fmt_interval(c['spearman_rho'], c['spearman_low'], c['spearman_high'])}. {c['verdict']} "
                     f"![scatter]({c['figure']})")
    return lines + [""]


def ratio_lines(ratios: list[dict[str, Any]]) -> list[str]:
    """report.md's "Ratios" section: one table per ratio (none when the manifest has no ratios)."""
    if not ratios:
        return []
    lines = ["## Ratios", "", "A ratio is mean(numerator) / mean(denominator) over the variant's trials that have "
             "both measures, with a 95% paired BCa bootstrap interval (trials resampled with their two values "
             "together). A ratio is refused where a value of either measure is 0 or below in any trial (not a ratio "
             "scale: a return with step costs) or where two suites set the reward differently (returns in other "
             "units).", ""]
    for ratio in ratios:
        title = f"### `{ratio['numerator']}` / `{ratio['denominator']}`"
        if ratio.get("refused"):
            lines += [title, "", f"Refused: {ratio['refused']}.", ""]
            continue
        lines += [title, "", "| variant | trials | ratio [95% CI] |", "| --- | --- | --- |"]
        lines += [f"| {variant} | {e['n']} | {fmt_ratio(e)} |" for variant, e in ratio["per_variant"].items()]
        lines.append("")
    return lines


def fmt_ratio(estimate: dict[str, Any]) -> str:
    """'0.512 [0.470, 0.550]', or the ratio (or n/a) with the note saying why there is no interval."""
    if estimate["ratio"] is None:
        return f"n/a ({estimate['note']})"
    return fmt_interval(estimate["ratio"], estimate["low"], estimate["high"], note=estimate["note"])


def fmt_overrides(overrides: Any) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in dict(overrides).items()) or "none"
