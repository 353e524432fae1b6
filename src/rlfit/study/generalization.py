"""Separating "learned worse" from "generalized worse": out-of-distribution performance modelled from in-distribution
performance and the log of the description length, with the variant as a grouping factor.

    ood = a + b * in_distribution + c * log2(description_bits) + error

c is the change in out-of-distribution performance per doubling of the description length among agents that perform
the same in distribution: c < 0 says agents that describe their observations in fewer bits keep more out of
distribution than their in-distribution performance predicts; b near 1 with c near 0 says a variant that does worse
out of distribution does so because it learned worse. Trials of one variant share their training settings, and the
description length is set mostly by the variant (beta), so the seeds of a variant are not independent evidence
about c. Two fits, both statsmodels' OLS:

- `VARIANT_MEANS` (the headline): one row per variant, the means over its seeds of ood, in_distribution and
  log2(description_bits); classical OLS standard errors, t intervals with G - 3 degrees of freedom (G variants).
  Honest when clusters are few: in a simulation with 8 variants x 5 seeds, a per-variant shock and c = 0 (the tests'
  generator), its 95% interval covered 0 in 92.5% of 200 studies.
- `CLUSTER_ROBUST`: one row per trial, CR1 cluster-robust standard errors clustered by variant (the Liang-Zeger
  sandwich with the G / (G - 1) * (n - 1) / (n - k) factor), t with G - 1 degrees of freedom (Cameron and Miller,
  2015). Uses the within-variant spread too, but with 8 clusters the sandwich is too small: 87% coverage in the
  same simulation (a random-intercept MixedLM gave 87.5%), so it is shown beside the headline, not instead of it.

- `BLOCKED`: one row per trial with a fixed effect per seed (seeds as blocks: a seed's shared episodes move every
  variant alike), classical standard errors, t with n - 3 - (S - 1) degrees of freedom (S seeds). Its residual
  variance is the trials' own; it is the headline when the means fit's residuals are smaller than the seeds' noise
  of a variant mean allows (`rlfit.study.fit_noise`), and shown beside it otherwise.

Every report entry also checks the means fit: which variants it rests on (`rlfit.study.influence`) and whether a
step between two neighbouring variants explains the data as well as the graded log2 description length
(`rlfit.study.dose_response`). Where the headline is BLOCKED, that fit is refitted without each variant's trials
too (`blocked_influence`), so a verdict that rests on one variant shows in the headline as well.

    fit = fit_generalization(ood, in_dist, bits, groups)      # arrays [n]; groups: the variant of each trial
    fit.coefficients["log2_description_bits"].low, .high     # its 95% interval
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rlfit.errors import UserError

PREDICTORS = ("intercept", "in_distribution", "log2_description_bits")
VARIANT_MEANS = "variant-means"
CLUSTER_ROBUST = "cluster-robust"
BLOCKED = "trials-blocked"
METHODS = {VARIANT_MEANS: "OLS on the variants' means (one row per variant), classical standard errors, t with G - 3 "
                          "degrees of freedom",
           CLUSTER_ROBUST: "OLS on the trials with CR1 cluster-robust standard errors clustered by variant, t with "
                           "G - 1 degrees of freedom",
           BLOCKED: "OLS on the trials with a fixed effect per seed (seeds as blocks), classical standard errors"}
MIN_GROUPS = 4
"""The variant-means fit has G - 3 residual degrees of freedom: fewer variants are refused."""


class Coefficient(NamedTuple):
    """One coefficient's estimate, cluster-robust standard error, interval and two-sided p-value (H0: 0)."""

    estimate: float
    std_error: float
    low: float
    high: float
    p_value: float


class GeneralizationFit(NamedTuple):
    """The fitted model: coefficients by PREDICTORS name, sizes and the method in words."""

    coefficients: dict[str, Coefficient]
    n: int
    groups: int
    degrees_of_freedom: int
    r_squared: float
    method: str


def fit_generalization(ood: Sequence[float], in_distribution: Sequence[float], description_bits: Sequence[float],
                       groups: Sequence[Any], method: str = VARIANT_MEANS, confidence: float = 0.95,
                       seeds: Sequence[int] | None = None) -> GeneralizationFit:
    """Fits ood ~ 1 + in_distribution + log2(description_bits) by `method` (METHODS), variants `groups` (all [n]);
    `BLOCKED` adds a fixed effect for each seed in `seeds` ([n]) that two or more trials share."""
    try:
        import statsmodels.api as sm
    except ImportError:
        raise UserError("the generalization fit needs statsmodels, a dependency of rlfit: pip install statsmodels") from None

    if method not in METHODS:
        raise UserError(f"unknown generalization fit '{method}'; choose {' or '.join(METHODS)}")
    y, x_id, bits = (np.asarray(v, np.float64) for v in (ood, in_distribution, description_bits))
    labels = np.asarray([str(g) for g in groups])
    check_inputs(y, x_id, bits, labels)
    design = np.column_stack([np.ones_like(y), x_id, np.log2(bits)])
    codes = np.unique(labels, return_inverse=True)[1]
    count = int(codes.max()) + 1
    if method == VARIANT_MEANS:
        design = np.stack([design[codes == g].mean(axis=0) for g in range(count)])
        y = np.array([y[codes == g].mean() for g in range(count)])
        fit, df = sm.OLS(y, design).fit(), count - 3
    elif method == BLOCKED:
        fit = sm.OLS(y, np.column_stack([design, seed_columns(seeds if seeds is not None else range(y.size))])).fit()
        df = int(fit.df_resid)
    else:
        fit, df = sm.OLS(y, design).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True), count - 1
    intervals = fit.conf_int(alpha=1.0 - confidence)
    coefficients = {name: Coefficient(float(fit.params[i]), float(fit.bse[i]), float(intervals[i, 0]),
                                      float(intervals[i, 1]), float(fit.pvalues[i])) for i, name in enumerate(PREDICTORS)}
    return GeneralizationFit(coefficients, int(labels.size), count, df, float(fit.rsquared), METHODS[method])


def seed_columns(seeds: Sequence[int]) -> np.ndarray:
    """(n, S - 1) indicators of the seeds that two or more trials share, the first of them left out (the intercept
    holds it); (n, 0) when no seed is shared."""
    seeds = np.asarray(list(seeds))
    shared = [s for s in np.unique(seeds) if np.sum(seeds == s) >= 2]
    return np.column_stack([(seeds == s).astype(float) for s in shared[1:]] or [np.zeros((seeds.size, 0))])


def variant_means(ood: np.ndarray, in_distribution: np.ndarray, bits: np.ndarray,
                  labels: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(variant names, design (G, 3) of [1, mean in-distribution, mean log2 bits], mean ood (G,)) as the means fit
    sees them, variants in sorted order."""
    names, codes = np.unique(labels, return_inverse=True)
    design = np.column_stack([np.ones_like(ood), in_distribution, np.log2(bits)])
    return ([str(n) for n in names], np.stack([design[codes == g].mean(axis=0) for g in range(names.size)]),
            np.array([ood[codes == g].mean() for g in range(names.size)]))


def check_inputs(y: np.ndarray, x_id: np.ndarray, bits: np.ndarray, labels: np.ndarray) -> None:
    """One-line UserErrors for what the fit cannot take: unequal lengths, non-finite values, a description length
    that is not positive (its log is undefined), fewer than MIN_GROUPS variants or no spread in a predictor."""
    if not y.size == x_id.size == bits.size == labels.size:
        raise UserError(f"the generalization fit needs one value of each per trial; got {y.size} OOD, {x_id.size} "
                        f"in-distribution, {bits.size} description lengths and {labels.size} variants")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(x_id)) and np.all(np.isfinite(bits))):
        raise UserError("the generalization fit got a missing or non-finite value; re-evaluate the trials' suites")
    if np.any(bits <= 0):
        raise UserError(f"the generalization fit takes log2 of the description length, which must be > 0 bits; got "
                        f"{bits.min():.3g}")
    if len(set(labels.tolist())) < MIN_GROUPS:
        raise UserError(f"the generalization fit clusters by variant and needs {MIN_GROUPS} or more variants, got "
                        f"{len(set(labels.tolist()))}")
    if np.ptp(x_id) == 0 or np.ptp(np.log2(bits)) == 0:
        raise UserError("the generalization fit needs in-distribution values and description lengths that vary")


def fit_entry(results: Sequence[Any], ood: str, in_distribution: str, description: str,
              confidence: float = 0.95) -> dict[str, Any]:
    """A report entry for the trials (`rlfit.study.trials.TrialResult`) that recorded all three measures: both fits
    (`METHODS`) as numbers, or {'refused': reason} when they cannot be made."""
    rows = [(r.values.get(ood), r.values.get(in_distribution), r.values.get(description), r.trial.variant,
             r.trial.seed) for r in results]
    rows = [row for row in rows if all(v is not None and np.isfinite(v) for v in row[:3])]
    entry: dict[str, Any] = {"ood": ood, "in_distribution": in_distribution, "description": description,
                             "n": len(rows), "fits": {}}
    columns = list(zip(*rows)) if rows else [[], [], [], [], []]
    for method in METHODS:
        try:
            fit = fit_generalization(*columns[:4], method=method, confidence=confidence, seeds=columns[4])
        except UserError as error:
            return {**entry, "refused": str(error)}
        entry["groups"] = fit.groups
        entry["fits"][method] = {"method": fit.method, "degrees_of_freedom": fit.degrees_of_freedom,
                                 "r_squared": fit.r_squared,
                                 "coefficients": {k: c._asdict() for k, c in fit.coefficients.items()}}
    return {**entry, **means_fit_checks(*(np.asarray(c, float) for c in columns[:3]), np.asarray(columns[3], str),
                                        np.asarray(columns[4]), confidence)}


def means_fit_checks(ood: np.ndarray, in_distribution: np.ndarray, bits: np.ndarray, labels: np.ndarray,
                     seeds: np.ndarray, confidence: float = 0.95) -> dict[str, Any]:
    """The means fit's checks for a report entry: `influence` (`rlfit.study.influence`), `step`
    (`rlfit.study.dose_response`), `noise` (`rlfit.study.fit_noise`), and the `headline` fit (VARIANT_MEANS, or
    BLOCKED when the means fit is tighter than the noise) with the reason."""
    import statsmodels.api as sm

    from rlfit.study.dose_response import step_against_graded
    from rlfit.study.fit_noise import noise_check
    from rlfit.study.influence import influence_check

    names, design, means = variant_means(ood, in_distribution, bits, labels)
    fit = sm.OLS(means, design).fit()
    noise = noise_check(float(fit.scale), int(fit.df_resid), ood, labels, seeds)
    checks: dict[str, Any] = {"influence": influence_check(design, means, names, column=2, confidence=confidence),
                              "step": step_against_graded(design[:, :2], design[:, 2], means, names, confidence),
                              "noise": noise, "headline": VARIANT_MEANS}
    if noise.get("too_tight"):
        checks["headline"] = BLOCKED
        checks["headline_influence"] = blocked_influence(ood, in_distribution, bits, labels, seeds, confidence)
        checks["headline_reason"] = (
            f"the means fit's residual SD ({noise['residual_sd']:.2g}) is below the seeds' noise of a variant mean "
            f"({noise['expected_sd']:.2g}; F = {noise['f']:.2f}, lower-tail p = {noise['p_lower']:.2g}), so its "
            "interval is narrower than the noise allows; the trial-level fit with seeds as blocks carries that noise")
    return checks


def blocked_influence(ood: np.ndarray, in_distribution: np.ndarray, bits: np.ndarray, labels: np.ndarray,
                      seeds: np.ndarray, confidence: float = 0.95) -> dict[str, Any]:
    """The BLOCKED fit's c (all [n] inputs) again without each variant's trials: `full`, `without` (variant -> its
    estimate, interval, p and degrees of freedom; a variant whose removal leaves too few for the fit is skipped) and
    the variants whose removal puts the interval on another side of 0 (`rlfit.study.influence.verdict_changes`)."""
    from rlfit.study.influence import verdict_changes

    def c_of(keep: np.ndarray) -> dict[str, float]:
        fit = fit_generalization(ood[keep], in_distribution[keep], bits[keep], labels[keep], method=BLOCKED,
                                 confidence=confidence, seeds=seeds[keep])
        return {**fit.coefficients[PREDICTORS[2]]._asdict(), "degrees_of_freedom": fit.degrees_of_freedom}

    full, without = c_of(np.ones(labels.size, bool)), {}
    for name in sorted(set(labels.tolist())):
        try:
            without[name] = c_of(labels != name)
        except UserError:
            continue
    return {"full": full, "without": without, **verdict_changes(full, without)}


def adjust_headlines(entries: list[dict[str, Any]], correction: str = "holm") -> None:
    """Adds to each fitted report entry (`fit_entry`) `headline_p`, the p of c in its headline fit, and
    `headline_p_adjusted`, that p adjusted over every fitted entry of the report (`rlfit.study.corrections`: the
    report makes one headline test of c per entry, a family) with `headline_family` its size; in place."""
    from rlfit.study.corrections import adjust

    fitted = [e for e in entries if "refused" not in e and e.get("fits")]
    p_values = [e["fits"][e.get("headline", VARIANT_MEANS)]["coefficients"]["log2_description_bits"]["p_value"]
                for e in fitted]
    for entry, p, adjusted in zip(fitted, p_values, adjust(p_values, correction)):
        entry.update(headline_p=p, headline_p_adjusted=adjusted, headline_family=len(fitted),
                     headline_correction=correction)
