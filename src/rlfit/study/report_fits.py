"""report.md's "Learned worse or generalized worse?" section from the report's generalization entries
(`rlfit.study.generalization.fit_entry`): each fit's coefficients, which fit is the headline and why, whether the
means fit rests on one variant (`rlfit.study.influence`), a step against the graded trend
(`rlfit.study.dose_response`) and the means fit against the seeds' noise (`rlfit.study.fit_noise`), in words."""

from __future__ import annotations

from typing import Any

from rlfit.study.generalization import BLOCKED, VARIANT_MEANS
from rlfit.study.report_format import fmt_interval, fmt_number, fmt_p

C_NAME = "log2_description_bits"


def fmt_c(c: dict[str, Any]) -> str:
    """'-0.0080 [-0.0134, -0.0026] (p 0.012)'."""
    return f"{fmt_interval(c['estimate'], c['low'], c['high'], sign=True)} (p {fmt_p(c['p_value'])})"


def generalization_lines(entries: list[dict[str, Any]]) -> list[str]:
    """Per generalization fit: its coefficients with intervals and the checks of its means fit."""
    if not entries:
        return []
    lines = ["## Learned worse or generalized worse?", "",
             "Out-of-distribution performance modelled as a + b x in-distribution + c x log2(description length), "
             "the variant as grouping factor (`rlfit.study.generalization`). c < 0: agents that describe their "
             "observations in fewer bits keep more out of distribution than their in-distribution performance "
             "predicts; an interval on c that covers 0 means no such effect is detectable here. Each fit on the "
             "variants' means is checked three ways: against the seeds' noise it must contain (when its residuals "
             "are smaller, the trial-level fit with seeds as blocks is the headline), for the variants it rests on "
             "(leverage, Cook's distance, the fit without each variant), and against a step between two "
             "neighbouring variants (permutation tests that choose the step's place again in every permutation).", ""]
    for e in entries:
        lines += [f"### `{e['ood']}` from `{e['in_distribution']}` and log2 `{e['description']}`", ""]
        if "refused" in e:
            lines += [f"Not fitted: {e['refused']}.", ""]
            continue
        lines += fit_table(e) + [f"{e['n']} trials in {e['groups']} variants. The cluster-robust row uses the spread "
                                 "within variants too, and its intervals are too narrow with this few variants.", ""]
        lines += (headline_lines(e) + headline_influence_lines(e.get("headline_influence"))
                  + influence_lines(e.get("influence")) + step_lines(e.get("step")))
        if "figure" in e:
            lines += [f"![generalization]({e['figure']})", ""]
    return lines


def fit_table(e: dict[str, Any]) -> list[str]:
    headline = e.get("headline", VARIANT_MEANS)
    lines = ["| fit | b (in-distribution) [95% CI] | c (per doubling of bits) [95% CI] | p (c = 0) | df | R^2 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, fit in e["fits"].items():
        b, c = fit["coefficients"]["in_distribution"], fit["coefficients"][C_NAME]
        label = f"**{fit['method']} (headline)**" if name == headline else fit["method"]
        lines.append(f"| {label} | {fmt_interval(b['estimate'], b['low'], b['high'])} | "
                     f"{fmt_interval(c['estimate'], c['low'], c['high'], sign=True)} | {fmt_p(c['p_value'])} | "
                     f"{fit['degrees_of_freedom']} | {fit['r_squared']:.2f} |")
    return lines + [""]


def headline_lines(e: dict[str, Any]) -> list[str]:
    """Which fit is the headline, and the noise check behind the choice."""
    noise = e.get("noise") or {}
    if "f" not in noise:
        return [(f"Noise check: {noise['note']}." if "note" in noise else "") + adjusted_words(e), ""]
    blocks = "seeds as blocks" if noise["seeds_as_blocks"] else "no seed shared between variants"
    check = (f"Noise check: the means fit's residual SD is {noise['residual_sd']:.2g}, the seeds' noise of a variant "
             f"mean {noise['expected_sd']:.2g} ({blocks}); F = {noise['f']:.2f} (df {noise['df'][0]}, {noise['df'][1]}), "
             f"lower-tail p = {fmt_p(noise['p_lower'])}, upper-tail p = {fmt_p(noise['p_upper'])}.")
    if e.get("headline") == BLOCKED:
        c = e["fits"][BLOCKED]["coefficients"][C_NAME]
        return [f"{check} **Headline: the trial-level fit with seeds as blocks, c = {fmt_c(c)}**, because "
                f"{e['headline_reason']}.{adjusted_words(e)}", ""]
    return [f"{check} The means fit carries at least that noise, so it is the headline.{adjusted_words(e)}", ""]


def adjusted_words(e: dict[str, Any]) -> str:
    """' The headline p adjusted over the report's fits: ...' where the entry has it, else ''."""
    if e.get("headline_p_adjusted") is None:
        return ""
    name = "Holm" if e.get("headline_correction", "holm") == "holm" else "BH"
    return (f" **Its p ({fmt_p(e['headline_p'])}) adjusted over the report's {e['headline_family']} generalization "
            f"fits ({name}): {fmt_p(e['headline_p_adjusted'])}.**")


def influence_lines(check: dict[str, Any] | None) -> list[str]:
    """The leverage and Cook's distance table and the sentence on the variants the fit rests on."""
    if not check:
        return []
    lines = [f"Influence (means fit): leverage counts as high above {check['leverage_limit']:.2f} (2p/G), Cook's "
             f"distance as large above {check['cook_limit']:.2f} (4/G).", "",
             "| variant | leverage | Cook's distance | c without it [95% CI] |", "| --- | --- | --- | --- |"]
    for name, leverage in check["leverage"].items():
        without = check["without"].get(name)
        flag = " (flagged)" if name in check["flagged"] else ""
        lines.append(f"| {name}{flag} | {fmt_number(leverage)} | {fmt_number(check['cooks_distance'][name])} | "
                     f"{fmt_c(without) if without else 'n/a'} |")
    lines.append("")
    if "note" in check:
        return lines + [f"{check['note']}.", ""]
    words = []
    if check.get("range_without_flagged"):
        low, high = check["range_without_flagged"]
        words.append(f"Without each flagged variant ({', '.join(f'`{n}`' for n in check['flagged'])}) c ranges from "
                     f"{low:+.3g} to {high:+.3g}.")
    words += verdict_change_words(check)
    return lines + [" ".join(words), ""]


def headline_influence_lines(check: dict[str, Any] | None) -> list[str]:
    """The headline fit with seeds as blocks again without each variant's trials, in a sentence."""
    if not check or not check["without"]:
        return []
    estimates = [c["estimate"] for c in check["without"].values()]
    return [f"Without each variant's trials, the headline fit (seeds as blocks) gives c from {min(estimates):+.3g} to "
            f"{max(estimates):+.3g}. " + " ".join(verdict_change_words(check)), ""]


def verdict_change_words(check: dict[str, Any]) -> list[str]:
    """A sentence per left-out variant that puts c's interval on another side of 0, either way, or one saying that
    none does."""
    without = check["without"]
    words = [f"**The fit rests on `{name}`: without it c = {fmt_c(without[name])}, an interval that covers 0.**"
             for name in check["rests_on"]]
    words += [f"**Leaving out `{name}` moves the interval off 0: without it c = {fmt_c(without[name])}, so the "
              "null result rests on that variant.**" for name in check.get("moves_off_zero", [])]
    words += [f"**Leaving out `{name}` turns c's sign: without it c = {fmt_c(without[name])}.**"
              for name in check.get("flips_sign", [])]
    if not words:
        full = check.get("full")
        where = ("covering 0" if full["low"] <= 0 <= full["high"] else "on the same side of 0") if full else \
            "on the same side of 0 (or covering it)"
        words.append(f"Leaving out any one variant keeps the interval {where}.")
    return words


def step_lines(step: dict[str, Any] | None) -> list[str]:
    """The step against the graded trend, in a paragraph."""
    if not step:
        return []
    if "note" in step:
        return [f"Graded or a step: not tested, {step['note']}.", ""]
    permutations = f"{step['permutations']:,} permutations" + (", all of them" if step["exact"] else "")
    with_step = step["graded_with_step"]
    return [f"Graded or a step: the best step lies between `{step['split_after']}` and `{step['split_before']}` "
            f"(low side {', '.join(f'`{n}`' for n in step['low_side'])}). The step beyond the graded trend: sup F = "
            f"{step['step_beyond_graded']['sup_f']:.2f}, permutation p = {fmt_p(step['step_beyond_graded']['p_value'])}; "
            f"the graded trend beyond the step: F = {step['graded_beyond_step']['f']:.2f}, permutation p = "
            f"{fmt_p(step['graded_beyond_step']['p_value'])} ({permutations}). With the step in the model, c = "
            f"{fmt_c(with_step)} (df {with_step['degrees_of_freedom']}; at the chosen split, so a little narrow). "
            f"**Verdict: {step['verdict']}.**", ""]
