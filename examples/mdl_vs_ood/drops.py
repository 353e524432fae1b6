"""What the nuisance shift costs each variant, and how that cost differs from beta 0's, with rlfit's own intervals.

    python examples/mdl_vs_ood/drops.py examples/mdl_vs_ood/results/results.json

Per trial the drop is (shifted suite) - (in-distribution suite) of the same measure and policy, a paired difference
that removes how well the trial learned. Per variant: the mean drop with its t interval; against beta 0: the
difference of mean drops with Welch's interval and P(variant's drop > beta 0's), from `rlfit.study.stats` (the
report's own functions; raw p-values, not part of the report's Holm family).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from rlfit.study.intervals import mean_t_interval
from rlfit.study.stats import compare

PAIRS = (("most likely action", "suite/nuisance-shift/success_rate", "suite/in-distribution/success_rate"),
         ("stochastic policy", "suite/nuisance-shift-sampled/success_rate", "suite/in-distribution-sampled/success_rate"),
         ("harder subset (most likely)", "suite/harder-subset-far-goal/success_rate", "suite/in-distribution/success_rate"),
         ("negative control (most likely)", "suite/control-changed-rewards/success_rate",
          "suite/in-distribution/success_rate"))


def drops(numbers: dict, shifted: str, own: str) -> dict[str, np.ndarray]:
    """variant -> per-seed (shifted - own), seeds paired by position in results.json's values."""
    a, b = numbers["measures"][shifted]["values"], numbers["measures"][own]["values"]
    return {v: np.asarray(a[v]) - np.asarray(b[v]) for v in a if v in b and len(a[v]) == len(b[v])}


def main(path: str) -> None:
    numbers = json.loads(open(path).read())
    for title, shifted, own in PAIRS:
        print(f"\n{title}: {shifted} - {own}")
        per_variant = drops(numbers, shifted, own)
        base_name = next(iter(per_variant))
        for variant, values in per_variant.items():
            low, high = (float(x) for x in mean_t_interval(values))
            line = f"  {variant:24s} drop {values.mean():+.3f} [{low:+.3f}, {high:+.3f}]"
            if variant != base_name:
                c = compare(variant, values, base_name, per_variant[base_name])
                line += (f"   minus {base_name}: {c.mean_diff:+.3f} [{c.mean_diff_low:+.3f}, {c.mean_diff_high:+.3f}]"
                         f"  P(better) {c.prob_improvement:.2f}  Welch p {c.welch_p:.2g}")
            print(line)


if __name__ == "__main__":
    main(sys.argv[1])
