"""suite.py's arithmetic and tables: per-environment summaries, the suite's IQMs with intervals, the tables of
its method page (benchmarks/methods/suite.md).

No training here: every function reads the suite's JSON record (or part of it) and returns or prints figures.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, NoReturn

from common import print_table

COLLAPSE_RATIO = 0.8
"""A run collapsed when its final eval reward is below this fraction of its own best."""
TABLE_START, TABLE_END = "<!-- suite-table:start -->", "<!-- suite-table:end -->"
"""The method page's lines between which `write_readme_table` writes (both lines kept)."""
VARIANTS_START, VARIANTS_END = "<!-- suite-variants:start -->", "<!-- suite-variants:end -->"
"""The method page's lines between which `write_variants_table` writes (`suite.py --compare`)."""


def user_error(message: str) -> NoReturn:
    """Bad input: one line naming the problem and the fix, exit code 2, nothing written."""
    print(f"suite.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def env_summary(runs: dict[str, Any]) -> dict[str, Any]:
    """Per side (rlfit, brax): the seeds that finished, their final and best eval rewards, the collapse check
    (final >= COLLAPSE_RATIO x best) and the mean final. `runs` is one environment's {side: {seed: result}}."""
    summary: dict[str, Any] = {}
    for side in ("rlfit", "brax"):
        done = sorted((r for r in runs.get(side, {}).values() if r.get("final_eval_reward") is not None),
                      key=lambda r: r["seed"])
        finals = [r["final_eval_reward"] for r in done]
        summary[side] = {
            "seeds": [r["seed"] for r in done],
            "final": finals,
            "best": [r["best_eval_reward"] for r in done],
            "no_collapse": [r["final_eval_reward"] >= COLLAPSE_RATIO * r["best_eval_reward"] for r in done],
            "final_mean": sum(finals) / len(finals) if finals else None,
        }
    return summary


def suite_summary(per_env: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Over the environments both sides finished (each scored by its mean final): IQM and mean with 95% intervals
    per side and of rlfit minus Brax per environment (`interval_estimates`), compare()'s unpaired difference of
    IQMs, and the rlfit runs that collapsed."""
    import numpy as np

    from rlfit.study.stats import compare, interval_estimates

    both = [env for env, s in per_env.items()
            if s["rlfit"]["final_mean"] is not None and s["brax"]["final_mean"] is not None]
    summary: dict[str, Any] = {
        "collapse_ratio": COLLAPSE_RATIO,
        "runs_collapsed": [f"{env} {side} seed {seed}" for env, s in per_env.items() for side in ("rlfit", "brax")
                           for seed, ok in zip(s[side]["seeds"], s[side]["no_collapse"], strict=True) if not ok],
        "environments_compared": both,
    }
    if not both:
        return summary
    rlfit, brax = (np.array([per_env[env][side]["final_mean"] for env in both]) for side in ("rlfit", "brax"))
    estimates = interval_estimates({"rlfit": rlfit, "brax": brax, "rlfit_minus_brax": rlfit - brax})
    summary["final_reward"] = {name: _finite(est._asdict()) for name, est in estimates.items()}
    summary["rlfit_iqm_at_least_brax"] = bool(estimates["rlfit"].iqm >= estimates["brax"].iqm)
    if len(both) >= 2:
        comparison = compare("rlfit", rlfit, "brax", brax)
        summary["unpaired_comparison"] = _finite({key: getattr(comparison, key) for key in (
            "iqm_diff", "iqm_diff_low", "iqm_diff_high", "mean_diff", "mean_diff_low", "mean_diff_high", "method")})
    return summary


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """NaN (no interval from one environment) as None: the JSON stays standard."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in values.items()}


def print_costs(costs: dict[str, dict[str, Any]], max_run_minutes: float) -> None:
    """One row per timed environment: its probe and the whole run it predicts."""
    rows = [[env, c.get("fixed_s"), c.get("per_iteration_s"), c.get("per_eval_s"),
             _minutes(c.get("estimated_run_s")), c.get("fits"), c.get("loadavg_1min_before"), c.get("error", "")]
            for env, c in sorted(costs.items(), key=lambda item: item[1].get("estimated_run_s") or math.inf)]
    print_table(rows, ["env", "fixed s", "s/iteration", "s/eval", "run min",
                       f"fits {max_run_minutes:g} min", "load", "error"])


def print_summary(record: dict[str, Any]) -> None:
    """One row per environment, then the suite's IQMs."""
    print_table([[env, _cells(s["rlfit"]["final"]), _cells(s["rlfit"]["best"]), s["rlfit"]["no_collapse"],
                  _cells(s["brax"]["final"]), _cells(s["brax"]["best"])] for env, s in record["per_env"].items()],
                ["env", "rlfit final", "rlfit best", f"final >= {COLLAPSE_RATIO} best", "brax final", "brax best"])
    for name, est in record["summary"].get("final_reward", {}).items():
        print(f"{name}: {_estimate(est)}")


def readme_table(record: dict[str, Any], known_envs: list[str] | None = None) -> str:
    """The suite's figures as Markdown: per environment, then the environments left out, timed but not run and
    not timed (of `known_envs`), then the suite."""
    lines = ["| environment | run (min, estimated) | rlfit final (seeds 0, 1, 2, ...) | rlfit best | "
             "final >= 0.8 best | Brax final | Brax best | rlfit - Brax (means) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    costs = record.get("costs", {})
    for env, s in record.get("per_env", {}).items():
        r, b = s["rlfit"], s["brax"]
        difference = (f"{r['final_mean'] - b['final_mean']:+.1f}"
                      if r["final_mean"] is not None and b["final_mean"] is not None else "-")
        checks = " / ".join("yes" if ok else "**no**" for ok in r["no_collapse"]) or "-"
        lines.append(f"| {env} | {_minutes(costs.get(env, {}).get('estimated_run_s'))} | {_cells(r['final'])} | "
                     f"{_cells(r['best'])} | {checks} | {_cells(b['final'])} | {_cells(b['best'])} | {difference} |")
    limit = record.get("max_run_minutes")
    left_out = sorted(((env, c["estimated_run_s"]) for env, c in costs.items()
                       if c.get("estimated_run_s") is not None and limit and c["estimated_run_s"] > limit * 60),
                      key=lambda item: item[1])
    failed = [env for env, c in costs.items() if c.get("estimated_run_s") is None]
    waiting = sorted(((env, c["estimated_run_s"]) for env, c in costs.items() if c.get("estimated_run_s") is not None
                      and (not limit or c["estimated_run_s"] <= limit * 60) and env not in record.get("per_env", {})),
                     key=lambda item: item[1])
    untimed = [env for env in known_envs or [] if env not in costs]
    lines.append("")
    if waiting:
        lines.append("Fit, not run yet (estimated minutes): "
                     + ", ".join(f"{env} ({seconds / 60:.1f})" for env, seconds in waiting) + ".")
    if left_out:
        lines.append(f"Left out (estimated quick run over {limit:g} minutes on this machine): "
                     + ", ".join(f"{env} ({seconds / 60:.0f} min)" for env, seconds in left_out) + ".")
    if failed:
        lines.append(f"The probe failed: {', '.join(failed)}.")
    if untimed:
        lines.append(f"Not timed yet: {', '.join(untimed)}.")
    summary = record.get("summary", {})
    for name, est in summary.get("final_reward", {}).items():
        lines.append(f"- {name.replace('_', ' ')}: {_estimate(est)}")
    if "unpaired_comparison" in summary:
        c = summary["unpaired_comparison"]
        lines.append(f"- rlfit IQM - Brax IQM (unpaired, {c['method']}): {c['iqm_diff']:.1f} "
                     f"[{c['iqm_diff_low']:.1f}, {c['iqm_diff_high']:.1f}]")
    if summary.get("runs_collapsed"):
        lines.append(f"- runs with final < {COLLAPSE_RATIO} x best: {', '.join(summary['runs_collapsed'])}")
    return "\n".join(lines)


def write_readme_table(record: dict[str, Any], readme: Path, known_envs: list[str] | None = None) -> None:
    """Replaces what stands between the table markers of `readme` with `readme_table(record)`."""
    text = readme.read_text()
    if TABLE_START not in text or TABLE_END not in text:
        user_error(f"{readme} has no {TABLE_START} ... {TABLE_END} lines; add them where "
                         "the table goes")
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    readme.write_text(f"{head}{TABLE_START}\n{readme_table(record, known_envs)}\n{TABLE_END}{tail}")


def variant_label(record: dict[str, Any]) -> str:
    """A suite record's name in tables: its `label` where it has one (a record of a preset since changed names the
    settings it ran), else its preset and `--set` overrides (`quick`, `quick + ppo.advantages=brax`)."""
    return record.get("label") or " + ".join([record.get("preset", "?"), *record.get("overrides", [])])


def variants_table(records: list[dict[str, Any]]) -> str:
    """rlfit's settings against each other on the environments of the first record (the base): per environment
    each record's rlfit finals (seeds in order) with their mean, and the collapse checks passed; Brax's mean final
    at each record's settings where it ran. Then, per later record, its per-environment mean minus the base's over
    the environments both finished (IQM and mean with 95% intervals, `interval_estimates`), and its runs that
    failed the collapse check."""
    import numpy as np

    from rlfit.study.stats import interval_estimates

    base = records[0]
    labels = [variant_label(record) for record in records]
    header = ["environment", *(f"rlfit, {label}: finals (mean) [final >= {COLLAPSE_RATIO} best]" for label in labels),
              "Brax mean final (settings)"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for env in base.get("per_env", {}):
        cells, brax = [], {}
        for label, record in zip(labels, records, strict=True):
            s = record.get("per_env", {}).get(env)
            if s is None or s["rlfit"]["final_mean"] is None:
                cells.append("-")
            else:
                r = s["rlfit"]
                cells.append(f"{_cells(r['final'])} ({r['final_mean']:.1f}) [{sum(r['no_collapse'])}/"
                             f"{len(r['no_collapse'])}]")
            if s is not None and s["brax"]["final_mean"] is not None:  # the same runs (copied) are named once
                brax.setdefault(tuple(s["brax"]["final"]), (label, s["brax"]["final_mean"]))
        cells.append("; ".join(f"{mean:.1f} ({label})" for label, mean in brax.values()) or "-")
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    lines.append("")
    for label, record in zip(labels, records, strict=True):
        both = [env for env, s in base.get("per_env", {}).items() if s["rlfit"]["final_mean"] is not None
                and record.get("per_env", {}).get(env, {}).get("rlfit", {}).get("final_mean") is not None]
        if record is not base and both:
            diff = np.array([record["per_env"][env]["rlfit"]["final_mean"] - base["per_env"][env]["rlfit"]["final_mean"]
                             for env in both])
            est = _finite(interval_estimates({"d": diff})["d"]._asdict())
            lines.append(f"- {label} minus {labels[0]} (rlfit, per-environment means): {_estimate(est)}")
        collapsed = [f"{env} seed {seed}" for env, s in record.get("per_env", {}).items()
                     for seed, ok in zip(s["rlfit"]["seeds"], s["rlfit"]["no_collapse"], strict=True) if not ok]
        runs = sum(len(s["rlfit"]["seeds"]) for s in record.get("per_env", {}).values())
        lines.append(f"- {label}: {len(collapsed)} of {runs} rlfit runs end below {COLLAPSE_RATIO} x their best"
                     + (f" ({', '.join(collapsed)})" if collapsed else ""))
    return "\n".join(lines)


def write_variants_table(records: list[dict[str, Any]], readme: Path) -> None:
    """Replaces what stands between the variants markers of `readme` with `variants_table(records)`."""
    text = readme.read_text()
    if VARIANTS_START not in text or VARIANTS_END not in text:
        user_error(f"{readme} has no {VARIANTS_START} ... {VARIANTS_END} lines; add them where the table goes")
    head, rest = text.split(VARIANTS_START, 1)
    _, tail = rest.split(VARIANTS_END, 1)
    readme.write_text(f"{head}{VARIANTS_START}\n{variants_table(records)}\n{VARIANTS_END}{tail}")


def _estimate(est: dict[str, Any]) -> str:
    def interval(low: float | None, high: float | None) -> str:
        return "" if low is None or high is None else f" [{low:.1f}, {high:.1f}]"

    return (f"IQM {est['iqm']:.1f}{interval(est['iqm_low'], est['iqm_high'])}, mean {est['mean']:.1f}"
            f"{interval(est['mean_low'], est['mean_high'])} over {est['n']} environments")


def _cells(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values) or "-"


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f}"
