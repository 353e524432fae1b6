"""A declared comparison's report (issue 62): reads a protocol (benchmarks/protocols/*.yaml), takes from the result
files it names only the runs at its seeds and environments for each side, and writes
benchmarks/results/<protocol name>_report.json with the table it prints.

Per comparison and environment: each side's seeds used, finals and mean, and the difference of means with a 95%
percentile bootstrap interval (seeds resampled within each side). The headline as rliable defines it: scores / 1000,
the IQM of all runs of a side pooled across environments with a stratified bootstrap interval (runs resampled within
each environment), the IQM difference's interval, and the probability of improvement (per environment U / (n m),
ties one half, averaged) with its interval (rlfit.study.stratified). Then each comparison's decision by the
protocol's rule, the runs used (file, environment, side, seed, commit), the runs in those files outside the
protocol (shown apart, never in a headline) and the declared runs that are missing.

    .venv/bin/python benchmarks/protocol_report.py                   # benchmarks/protocols/quick_preset_2026_12.yaml
    .venv/bin/python benchmarks/protocol_report.py PROTOCOL.yaml
    .venv/bin/python benchmarks/protocol_report.py --quick           # 1,000 resamples, written under results/tmp/

The decision rule of `preset_change` (its check (1), CartpoleBalance as `make quickstart` runs it) reads
--quickstart (default results/quickstart_gae_once_10_seeds.json, quickstart.py's record): "pending" while that file
or any of its seeds 0-9 is missing and the count could still go either way.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from common import REPO, TMP, finish_record, print_table, start_record
from protocol_decisions import amendment_checks, adoption_decision, difference_verdict
from protocol_runs import (ADOPTED, ADOPTION, Protocol, ProtocolError, Run, Selection, load_protocol, outside,
                           read_records, select)

from rlfit.study import stratified

DEFAULT_PROTOCOL = REPO / "benchmarks" / "protocols" / "quick_preset_2026_12.yaml"
DEFAULT_QUICKSTART = REPO / "benchmarks" / "results" / "quickstart_gae_once_10_seeds.json"
RESAMPLES, QUICK_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE = 10_000, 1_000, 0, 0.95
"""The protocol's bootstrap: 10,000 resamples, generator seed 0, 95% (--quick: 1,000)."""
SCALE = 1000.0
"""Headline scores are rewards / SCALE: every DM Control return lies in [0, 1000]."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad input in one line (no usage block) with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"protocol_report.py: error: {message} (--help lists the options)", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", nargs="?", type=Path, default=DEFAULT_PROTOCOL, help="the protocol YAML")
    parser.add_argument("--quickstart", type=Path, default=DEFAULT_QUICKSTART,
                        help="quickstart.py's 10-seed record for the preset_change rule's check (1)")
    parser.add_argument("--out", type=Path, help="the report JSON (default results/<name>_report.json)")
    parser.add_argument("--quick", action="store_true",
                        help="1,000 resamples, written under results/tmp/: a check of the script, not a report")
    return parser.parse_args(argv)


def side_cells(runs: list[Run]) -> dict[str, Any]:
    """One side in one environment: seeds used, finals, their mean (None without runs)."""
    finals = [run.final for run in runs]
    return {"seeds": [run.seed for run in runs], "finals": finals,
            "mean": float(np.mean(finals)) if finals else None}


def interval_dict(interval: stratified.Interval, scale: float = 1.0) -> dict[str, float]:
    return {"point": interval.point / scale, "low": interval.low / scale, "high": interval.high / scale}


def per_environment(a: dict[str, list[Run]], b: dict[str, list[Run]], envs: tuple[str, ...],
                    reps: int) -> dict[str, Any]:
    """Per environment: both sides' cells and the difference of means a - b with its percentile interval."""
    table = {}
    for env in envs:
        x, y = np.array([r.final for r in a[env]]), np.array([r.final for r in b[env]])
        difference = (interval_dict(stratified.mean_difference_interval(x, y, reps, BOOTSTRAP_SEED, CONFIDENCE))
                      if x.size and y.size else None)
        table[env] = {"a": side_cells(a[env]), "b": side_cells(b[env]), "difference_of_means": difference}
    return table


def matched(a: list[Run], b: list[Run]) -> tuple[list[Run], list[Run]]:
    """Both sides' runs at the seeds both have (the same seeds on both sides), in seed order."""
    common = {run.seed for run in a} & {run.seed for run in b}
    return ([run for run in sorted(a, key=lambda r: r.seed) if run.seed in common],
            [run for run in sorted(b, key=lambda r: r.seed) if run.seed in common])


def headline(a: dict[str, list[Run]], b: dict[str, list[Run]], envs: tuple[str, ...], reps: int) -> dict[str, Any]:
    """rliable's aggregates over the environments where both sides have runs (scores / SCALE), each environment at
    the seeds both sides have: once every declared run is made that is every declared seed; while runs are missing,
    a side's extra seeds in an environment stay in the per-environment table and out of the headline, so that no
    environment weighs more on one side than on the other."""
    pairs = {env: matched(a[env], b[env]) for env in envs}
    a = {env: pair[0] for env, pair in pairs.items()}
    b = {env: pair[1] for env, pair in pairs.items()}
    both = [env for env in envs if a[env] and b[env]]
    result: dict[str, Any] = {"environments": both, "left_out_no_runs": [env for env in envs if env not in both],
                              "scale": SCALE, "resamples": reps, "generator_seed": BOOTSTRAP_SEED,
                              "confidence": CONFIDENCE}
    if not both:
        return result
    x = [np.array([r.final for r in a[env]]) / SCALE for env in both]
    y = [np.array([r.final for r in b[env]]) / SCALE for env in both]
    result |= {"seeds": {env: [run.seed for run in a[env]] for env in both},
               "runs_a": sum(s.size for s in x), "runs_b": sum(s.size for s in y),
               "iqm_a": interval_dict(stratified.iqm_interval(x, reps, BOOTSTRAP_SEED, CONFIDENCE)),
               "iqm_b": interval_dict(stratified.iqm_interval(y, reps, BOOTSTRAP_SEED, CONFIDENCE)),
               "iqm_difference": interval_dict(stratified.iqm_difference_interval(x, y, reps, BOOTSTRAP_SEED,
                                                                                 CONFIDENCE)),
               "probability_of_improvement": interval_dict(stratified.improvement_interval(x, y, reps, BOOTSTRAP_SEED,
                                                                                           CONFIDENCE))}
    return result


def compare(sides: tuple[str, str], selections: dict[str, Selection], envs: tuple[str, ...],
            reps: int) -> dict[str, Any]:
    """One comparison's figures: sides a and b, per environment, the headline, and how many declared runs miss."""
    a, b = (selections[side].used for side in sides)
    missing = [m for side in sides for m in selections[side].missing if m["env"] in envs]
    return {"a": sides[0], "b": sides[1], "environments": list(envs), "per_env": per_environment(a, b, envs, reps),
            "headline": headline(a, b, envs, reps), "missing_runs": len(missing)}


def side_environments(protocol: Protocol) -> dict[str, tuple[str, ...]]:
    """Each named side's environments: those of every comparison naming it (`adopted` names both sides of the
    adoption comparison, since either may be adopted)."""
    adoption = protocol.comparisons.get(ADOPTION)
    envs: dict[str, list[str]] = {name: [] for name in protocol.sides}
    for spec in protocol.comparisons.values():
        for side in spec.sides:
            for name in (adoption.sides if side == ADOPTED and adoption else (side,)):
                envs[name] += [env for env in spec.environments if env not in envs[name]]
    return {name: tuple(listed) for name, listed in envs.items()}


def comparisons(protocol: Protocol, selections: dict[str, Selection], quickstart: Path,
                reps: int) -> dict[str, Any]:
    """Every comparison with its decision; one naming `adopted` while the adoption is pending is computed for each
    side that may be adopted, as `provisional`."""
    results: dict[str, Any] = {}
    adopted: str | None = None
    adoption = protocol.comparisons.get(ADOPTION)
    if adoption is not None:
        results[ADOPTION] = compare(adoption.sides, selections, adoption.environments, reps)
        results[ADOPTION]["decision"] = adoption_decision(results[ADOPTION], quickstart)
        adopted = results[ADOPTION]["decision"]["adopted"]
    for name, spec in protocol.comparisons.items():
        if name == ADOPTION:
            continue
        choices = [adopted] if adopted else list(adoption.sides) if adoption and ADOPTED in spec.sides else [None]
        variants = {}
        for choice in choices:
            sides = tuple(choice if side == ADOPTED else side for side in spec.sides)
            variants[choice] = compare((sides[0], sides[1]), selections, spec.environments, reps)
            variants[choice]["decision"] = difference_verdict(variants[choice])
        results[name] = (next(iter(variants.values())) if len(variants) == 1 else
                         {"adopted": "pending", "provisional": variants})
    return results


def computed(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison computed, provisional ones included."""
    return [variant for result in results.values()
            for variant in (result["provisional"].values() if "provisional" in result else [result])]


def runs_used(results: dict[str, Any], selections: dict[str, Selection], protocol_date: str) -> list[dict[str, Any]]:
    """Each run a computed comparison used, once: side, file, side in the file, environment, seed, final, commit."""
    seen, rows = set(), []
    for comparison in computed(results):
        for side in (comparison["a"], comparison["b"]):
            for env in comparison["environments"]:
                for run in selections[side].used[env]:
                    if (side, run.env, run.seed) not in seen:
                        seen.add((side, run.env, run.seed))
                        rows.append({"side": side, "file": run.file, "file_side": run.file_side, "env": run.env,
                                     "seed": run.seed, "final": run.final, "commit": run.commit, "date": run.date,
                                     "env_steps": run.env_steps,
                                     "before_protocol": bool(protocol_date and run.date and run.date < protocol_date)})
    return rows


def missing_runs(results: dict[str, Any], selections: dict[str, Selection]) -> list[dict[str, Any]]:
    """Each declared run that a computed comparison lacks, once, with the reason."""
    seen, rows = set(), []
    for comparison in computed(results):
        for side in (comparison["a"], comparison["b"]):
            for row in selections[side].missing:
                if row["env"] in comparison["environments"] and (side, row["env"], row["seed"]) not in seen:
                    seen.add((side, row["env"], row["seed"]))
                    rows.append(row)
    return rows


def protocol_commit(path: Path) -> dict[str, str]:
    """The commit that added the protocol file and its date (git), or empty strings outside git."""
    done = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H %cI", "--", str(path)], cwd=REPO,
                          capture_output=True, text=True)
    lines = done.stdout.split()
    return {"commit": lines[-2], "date": lines[-1]} if done.returncode == 0 and len(lines) >= 2 else {"commit": "",
                                                                                                      "date": ""}


def build_report(protocol: Protocol, quickstart: Path, reps: int) -> dict[str, Any]:
    """The report's figures (without the record's context: command, date, machine)."""
    records = read_records(protocol)
    envs = side_environments(protocol)
    selections = {name: select(protocol, side, envs[name], records[side.file])
                  for name, side in protocol.sides.items()}
    results = comparisons(protocol, selections, quickstart, reps)
    committed = protocol_commit(protocol.path)
    used = runs_used(results, selections, committed["date"])
    used_keys = [Run(r["file"], r["file_side"], r["env"], r["seed"], r["final"], 0.0, "", "", None) for r in used]
    missing = missing_runs(results, selections)
    decided = results.get(ADOPTION, {}).get("decision", {})
    not_needed = [row for row in missing if decided.get("outcome") == "keep" and row["side"] != decided["adopted"]
                  and row["side"] in protocol.comparisons[ADOPTION].sides]
    missing = [row for row in missing if row not in not_needed]
    raw = yaml.safe_load(protocol.path.read_text())
    return {"amendments": amendment_checks(raw, REPO), "runs_not_needed": not_needed,
            "protocol": protocol.name, "protocol_file": _shown(protocol.path), "protocol_added": committed,
            "seeds": list(protocol.seeds),
            "sides": {name: side._asdict() for name, side in protocol.sides.items()},
"comparisons": results, "partial": bool(missing), "declared_runs": len(used) + len(missing),
            "runs_used": used, "runs_missing": missing, "runs_outside_protocol": outside(records, used_keys)}


def _shown(path: Path) -> str:
    return str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path)


def labelled(name: str, result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, comparison) for printing: a pending adoption's variants each labelled provisional."""
    if "provisional" not in result:
        return [(name, result)]
    return [(f"{name}, if {choice} is adopted (provisional: the adoption is pending)", variant)
            for choice, variant in result["provisional"].items()]


def print_comparison(label: str, c: dict[str, Any]) -> None:
    """Per environment, the headline and the decision of one comparison."""
    print(f"\n== {label}: {c['a']} minus {c['b']}")
    rows = []
    for env, row in c["per_env"].items():
        d = row["difference_of_means"]
        rows.append([env, _seeds(row["a"]["seeds"]), _values(row["a"]["finals"]), _values([row["a"]["mean"]]),
                     _seeds(row["b"]["seeds"]), _values(row["b"]["finals"]), _values([row["b"]["mean"]]),
                     "-" if d is None else f"{d['point']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"])
    print_table(rows, ["env", f"{c['a']} seeds", "finals", "mean", f"{c['b']} seeds", "finals", "mean",
                       "difference of means [95%]"])
    h = c["headline"]
    if "iqm_a" in h:
        print(f"headline over {len(h['environments'])} environments (scores / {h['scale']:g}, {h['resamples']:,} "
              f"stratified resamples): IQM {c['a']} {_interval(h['iqm_a'])} ({h['runs_a']} runs), {c['b']} "
              f"{_interval(h['iqm_b'])} ({h['runs_b']} runs); difference {_interval(h['iqm_difference'])}; "
              f"P({c['a']} > {c['b']}) {_interval(h['probability_of_improvement'])}")
    if h["left_out_no_runs"]:
        print(f"left out of the headline (a side has no runs): {', '.join(h['left_out_no_runs'])}")
    decision = c["decision"]
    for name, check in decision.get("checks", {}).items():
        print(f"check {name}: {check['status']} ({check['rule']})" + "".join(
            f"; {key} {check[key]}" for key in ("reliable", "seeds_present", "below_zero", "why", "warning")
            if key in check))
    print(f"decision: {decision['text']}")


def print_report(report: dict[str, Any]) -> None:
    """The comparisons, then the runs used, outside the protocol and missing."""
    added = report["protocol_added"]
    print(f"protocol {report['protocol']} ({report['protocol_file']}, added in {added['commit'][:7] or '?'} at "
          f"{added['date'] or '?'}); seeds {_seeds(report['seeds'])}")
    for name, result in report["comparisons"].items():
        for label, comparison in labelled(name, result):
            print_comparison(label, comparison)
    used = report["runs_used"]
    print(f"\nruns used: {len(used)} of {report['declared_runs']} declared "
          f"({sum(r['before_protocol'] for r in used)} made before the protocol's commit, reused as it declares)")
    for (side, file), seeds in _grouped(used, ("side", "file")).items():
        commits = sorted({r["commit"][:7] for r in used if (r["side"], r["file"]) == (side, file)})
        print(f"  {side} from {file} ({len(commits)} commits, each run's in the JSON): {seeds}")
    print(f"runs outside the protocol (never in a headline): {len(report['runs_outside_protocol'])}")
    for (file, side, env), seeds in _grouped(report["runs_outside_protocol"], ("file", "file_side", "env")).items():
        print(f"  {file} {side} {env}: seeds {seeds}")
    print(f"declared runs missing: {len(report['runs_missing'])}" + (" (the report is partial)" if report["partial"]
                                                                     else ""))
    for (side, env, reason), seeds in _grouped(report["runs_missing"], ("side", "env", "reason")).items():
        print(f"  {side} {env}: seeds {seeds} ({reason})")
    if report["runs_not_needed"]:
        print(f"declared runs not made: {len(report['runs_not_needed'])} (the side was not adopted, so no decision "
              "waits for them)")
    for check in report["amendments"]:
        print(f"\n{check['amendment']}: {check['what']}\n  {check['status']}: {check.get('reliable', 0)} of "
              f"{check.get('seeds_present', 0)} seeds reliable ({check['rule']}); median seed "
              f"{check['median_wall_s'] or '-'} s ({check['wall_rule']}); {check['file']}")


def _grouped(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[tuple, str]:
    """Rows grouped by `keys`, each group's seeds as one string (per environment where env is not a key)."""
    groups: dict[tuple, dict[str, list[str]]] = {}
    for row in rows:
        by_env = groups.setdefault(tuple(row[key] for key in keys), {})
        by_env.setdefault("" if "env" in keys else row["env"], []).append(str(row["seed"]))
    return {key: "; ".join(f"{env} {' '.join(seeds)}".strip() for env, seeds in by_env.items())
            for key, by_env in groups.items()}


def _interval(value: dict[str, float]) -> str:
    return f"{value['point']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def _seeds(seeds: list[int]) -> str:
    return " ".join(str(seed) for seed in seeds) or "-"


def _values(values: list[float | None]) -> str:
    return " / ".join(f"{v:.1f}" for v in values if v is not None) or "-"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        protocol = load_protocol(args.protocol)
        figures = build_report(protocol, args.quickstart, QUICK_RESAMPLES if args.quick else RESAMPLES)
    except ProtocolError as error:
        print(f"protocol_report.py: error: {error}", file=sys.stderr)
        return 2
    name = f"{protocol.name}_report" + ("_quick" if args.quick else "")
    record = start_record(name) | figures
    print_report(record)
    finish_record(record, args.out or (TMP if args.quick else REPO / "benchmarks" / "results") / f"{name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
