"""Seeds as blocks: comparing two variants whose trials share their seeds.

rlfit draws a trial's initial keys and its evaluation episodes from its seed (training from the seed; suites from
fold_in(PRNGKey(seed ^ SUITE_SEED_SALT), suite index), `rlfit.study.suites`), so seed 3 of one variant meets the same
episodes as seed 3 of every other. Whatever a seed's episodes make easy or hard is then shared across variants: a
block. The paired form takes it out by testing the per-seed differences a[s] - b[s]:

- the mean difference's interval: Student's t on the differences below BCA_MIN_SEEDS seeds, BCa from there on;
- the paired t test (scipy.stats.ttest_rel) and, as a check that does not assume normal differences, the Wilcoxon
  signed-rank test (scipy.stats.wilcoxon, exact on few seeds; zero differences dropped).

    blocks = shared_seeds(seeds_a, seeds_b)    # the seeds both variants finished, or () when not the same set
    test = paired_test(a, b)                   # a, b: (n,), aligned by seed
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import scipy.stats

from rlfit.study.intervals import bca_interval, mean_t_interval, method_for

PAIRED_REASON = ("trials of different variants with the same seed share their initial keys and evaluation episodes "
                 "(rlfit draws both from the seed), so seeds are blocks: comparisons test the per-seed differences "
                 "(paired t, Wilcoxon signed-rank)")
"""Why a report pairs seeds, in its own words."""
UNPAIRED_REASON = "the two variants did not finish the same seeds, so their seeds cannot be paired"


class PairedTest(NamedTuple):
    """a - b over seeds paired by position: the mean difference's interval and both tests' two-sided p-values."""

    mean_diff: float
    low: float
    high: float
    t: float
    df: int
    p: float
    wilcoxon_w: float
    wilcoxon_p: float


def shared_seeds(seeds_a: Sequence[int], seeds_b: Sequence[int]) -> tuple[int, ...]:
    """The seeds in sorted order when both variants finished the same 2 or more seeds, else () (compare unpaired)."""
    a, b = sorted(set(seeds_a)), sorted(set(seeds_b))
    return tuple(a) if a == b and len(a) >= 2 else ()


def paired_test(scores_a: np.ndarray, scores_b: np.ndarray, method: str = "auto", confidence: float = 0.95,
                reps: int = 2000, seed: int = 0) -> PairedTest:
    """Paired comparison of (n,) and (n,) scores aligned by seed, n >= 2 (see the module docstring)."""
    a, b = np.asarray(scores_a, float), np.asarray(scores_b, float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"a paired test needs two equal-length score arrays of 2 or more seeds, got {a.shape} and {b.shape}")
    differences = a - b
    if method_for(differences.size, method) == "t":
        low, high = (float(v) for v in mean_t_interval(differences, confidence))
    else:
        low, high = (float(v) for v in bca_interval(differences, "mean", confidence, reps, seed))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # equal differences: t is infinite or undefined
        test = scipy.stats.ttest_rel(a, b)
    return PairedTest(float(differences.mean()), low, high, float(test.statistic), int(differences.size - 1),
                      float(test.pvalue), *_wilcoxon(differences))


def _wilcoxon(differences: np.ndarray) -> tuple[float, float]:
    """(W, two-sided p) of the signed-rank test; NaN when every difference is 0."""
    if not np.any(differences != 0):
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ties or zeros: scipy switches to the normal approximation and says so
        result = scipy.stats.wilcoxon(differences)
    return float(result.statistic), float(result.pvalue)
