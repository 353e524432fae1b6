"""What the nuisance shift costs each variant, and how that cost differs from beta 0's, with rlfit's own intervals.

    python examples/mdl_vs_ood/drops.py examples/mdl_vs_ood/results/results.json

Per trial the drop is (shifted suite) - (in-distribution suite) of the same measure and policy, a paired difference
that removes how well the trial learned. Per variant: the mean drop with its t interval; against beta 0: the
difference of mean drops with seeds as blocks (seed s of every variant met the same episodes, so the difference is
taken per seed: paired t interval and test, `rlfit.study.stats.compare(paired=True)`, the report's own function)
and P(variant's drop > beta 0's). Paired-t p-values are shown raw and Holm-adjusted over every comparison this
script prints (its own family, separate from the report's); Welch's p (unpaired) is shown beside them.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from rlfit.study.corrections import adjust
from rlfit.study.intervals import mean_t_interval
from rlfit.study.stats import compare

PAIRS = (("most likely action", "suite/nuisance-shift/success_rate", "suite/in-distribution/success_rate"),
         ("stochastic policy", "suite/nuisance-shift-sampled/success_rate", "suite/in-distribution-sampled/success_rate"),
         ("harder subset (most likely)", "suite/harder-subset-far-goal/success_rate", "suite/in-distribution/success_rate"),
         ("negative control (most likely)", "suite/control-changed-rewards/success_rate",
          "suite/in-distribution/success_rate"))


def drops(numbers: dict, shifted: str, own: str) -> dict[str, np.ndarray]:
    """variant -> per-seed (shifted - own), seeds paired by position in results.json's values (seed order: every
    variant finished seeds 0-4)."""
    a, b = numbers["measures"][shifted]["values"], numbers["measures"][own]["values"]
    return {v: np.asarray(a[v]) - np.asarray(b[v]) for v in a if v in b and len(a[v]) == len(b[v])}


def main(path: str) -> None:
    numbers = json.loads(open(path).read())
    blocks = []
    for title, shifted, own in PAIRS:
        per_variant = drops(numbers, shifted, own)
        base = next(iter(per_variant))
        rows = [(v, values, compare(v, values, base, per_variant[base], paired=True) if v != base else None)
                for v, values in per_variant.items()]
        blocks.append((title, shifted, own, base, rows))
    p_values = [c.paired_p for *_, rows in blocks for _, _, c in rows if c is not None]
    adjusted = iter(adjust(p_values, "holm"))
    for title, shifted, own, base, rows in blocks:
        print(f"\n{title}: {shifted} - {own}")
        for variant, values, c in rows:
            low, high = (float(x) for x in mean_t_interval(values))
            line = f"  {variant:24s} drop {values.mean():+.3f} [{low:+.3f}, {high:+.3f}]"
            if c is not None:
                line += (f"   minus {base} (paired by seed): {c.mean_diff:+.3f} [{c.mean_diff_low:+.3f}, "
                         f"{c.mean_diff_high:+.3f}]  P(better) {c.prob_improvement:.2f}  paired t p {c.paired_p:.2g} "
                         f"(Holm {next(adjusted):.2g})  Welch p {c.welch_p:.2g}")
            print(line)


if __name__ == "__main__":
    main(sys.argv[1])
