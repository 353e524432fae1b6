"""The decision rules of benchmarks/protocols/quick_preset_2026_12.yaml, applied to protocol_report.py's figures.

`preset_change` adopts its candidate (its first side) when both hold: (1) CartpoleBalance as `make quickstart`
runs it ends at least QUICKSTART_TARGET and at least QUICKSTART_RATIO of its best on at least QUICKSTART_NEEDED of
the QUICKSTART_SEEDS (quickstart.py's record); (2) no environment's 95% interval of candidate minus current lies
wholly below 0. A check that missing runs leave open is "pending", and so is the decision unless the other check
already failed. Comparisons without an adoption rule say whether the interval of the IQM difference covers 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUICKSTART_TARGET, QUICKSTART_RATIO = 900.0, 0.8
QUICKSTART_SEEDS, QUICKSTART_NEEDED = tuple(range(10)), 9
QUICKSTART_WALL_S = 600.0
"""An amendment's quickstart candidate must also train a seed in under this many seconds (median), as declared."""
QUICKSTART_SETTING = ("ppo.advantages", "gae_once")
"""The candidate's setting; a quickstart record whose command line (`settings`, quickstart.py) lacks it is warned of."""


def quickstart_check(path: Path) -> dict[str, Any]:
    """Check (1) from quickstart.py's record at `path`: per seed 0-9 its final, best and reliability (recomputed:
    final >= target and >= ratio x best; the record's own `reliable` beside it), the CPU models, and "pass",
    "fail" or "pending" (the file or some seeds missing, and the count could still go either way)."""
    check: dict[str, Any] = {"file": _shown(path), "rule": f"final >= {QUICKSTART_TARGET:g} and >= {QUICKSTART_RATIO} x "
                             f"best on at least {QUICKSTART_NEEDED} of seeds {QUICKSTART_SEEDS[0]}-{QUICKSTART_SEEDS[-1]}"}
    if not path.is_file():
        return check | {"status": "pending", "why": "no record yet: run benchmarks/quickstart.py --seeds 0 ... 9"}
    record = json.loads(path.read_text())
    settings = " ".join(record.get("settings") or [])
    key, value = QUICKSTART_SETTING
    if f"{key}={value}" not in settings:  # the preset may have been changed to it since: said, not refused
        check["warning"] = f"the record's command line ({settings}) sets no {key}={value}: check it ran the candidate"
    runs = {int(r["seed"]): r for r in record.get("runs", []) if r.get("final_eval_reward") is not None}
    seeds = []
    for seed in QUICKSTART_SEEDS:
        run = runs.get(seed)
        if run is not None:
            final, best = float(run["final_eval_reward"]), float(run["best_eval_reward"])
            seeds.append({"seed": seed, "final": final, "best": best, "reliable_record": run.get("reliable"),
                          "reliable": final >= QUICKSTART_TARGET and final >= QUICKSTART_RATIO * best,
                          "cpu_model": run.get("cpu_model")})
    reliable, absent = sum(s["reliable"] for s in seeds), len(QUICKSTART_SEEDS) - len(seeds)
    status = "pass" if reliable >= QUICKSTART_NEEDED else "fail" if reliable + absent < QUICKSTART_NEEDED else "pending"
    return check | {"status": status, "reliable": reliable, "seeds_present": len(seeds), "seeds": seeds,
                    "reliable_seeds_in_record": record.get("reliable_seeds"),
                    "cpu_models": sorted({str(s["cpu_model"]) for s in seeds})}


def amendment_checks(raw: dict[str, Any], repo: Path) -> list[dict[str, Any]]:
    """Each `amendment_N.quickstart_candidate` of the protocol file (`raw`, the YAML as read): check (1) on its own
    record, plus its rule's wall clock (the median seed's `total_wall_s` under QUICKSTART_WALL_S), in order."""
    checks = []
    for key in sorted(k for k in raw if k.startswith("amendment_")):
        candidate = (raw[key] or {}).get("quickstart_candidate")
        if not candidate:
            continue
        check = quickstart_check(repo / candidate["file"])
        check.pop("warning", None)  # the amendment names its own settings
        walls = _walls(repo / candidate["file"])
        median = sorted(walls)[len(walls) // 2] if walls else None
        wall_ok = median is not None and median < QUICKSTART_WALL_S
        if check["status"] == "pass" and not wall_ok:
            check["status"] = "fail"
        checks.append({"amendment": key, "what": candidate["what"], **check, "file": candidate["file"],
                       "median_wall_s": median,
                       "wall_rule": f"median seed under {QUICKSTART_WALL_S:g} s"})
    return checks


def _walls(path: Path) -> list[float]:
    """The seeds' whole wall clocks in quickstart.py's record at `path` ([] when there is none)."""
    if not path.is_file():
        return []
    return [float(r["total_wall_s"]) for r in json.loads(path.read_text()).get("runs", []) if r.get("total_wall_s")]


def interval_check(comparison: dict[str, Any]) -> dict[str, Any]:
    """Check (2): the environments whose interval of a - b lies wholly below 0; "pending" while runs are missing."""
    below = [env for env, row in comparison["per_env"].items()
             if row["difference_of_means"] is not None and row["difference_of_means"]["high"] < 0]
    complete = comparison["missing_runs"] == 0
    status = ("fail" if below else "pass") if complete else "pending"
    return {"rule": "no environment's 95% interval of candidate minus current wholly below 0", "status": status,
            "below_zero": below, "missing_runs": comparison["missing_runs"]}


def adoption_decision(comparison: dict[str, Any], quickstart: Path) -> dict[str, Any]:
    """Both checks and the decision: "adopt <a>" when both pass, "keep <b>" when either fails, else "pending"."""
    checks = {"quickstart": quickstart_check(quickstart), "no_environment_worse": interval_check(comparison)}
    statuses = {check["status"] for check in checks.values()}
    outcome = ("adopt" if statuses == {"pass"} else "keep" if "fail" in statuses else "pending")
    adopted = {"adopt": comparison["a"], "keep": comparison["b"], "pending": None}[outcome]
    text = {"adopt": f"adopt {comparison['a']}", "keep": f"keep {comparison['b']}",
            "pending": "pending: the checks above that are pending wait for their runs"}[outcome]
    return {"outcome": outcome, "adopted": adopted, "text": text, "checks": checks}


def difference_verdict(comparison: dict[str, Any]) -> dict[str, Any]:
    """No decision rides on it: "no difference shown" where the IQM difference's interval covers 0, else which side
    the interval favours; "partial" where declared runs are missing."""
    head = comparison["headline"]
    if "iqm_difference" not in head:
        return {"outcome": "no runs", "text": "no environment has runs on both sides"}
    d = head["iqm_difference"]
    text = ("no difference shown" if d["low"] <= 0 <= d["high"]
            else f"{comparison['a'] if d['low'] > 0 else comparison['b']} ahead (IQM difference interval excludes 0)")
    if comparison["missing_runs"]:
        text += f"; partial: {comparison['missing_runs']} declared runs missing"
    return {"outcome": text.split(";")[0], "text": text}


def _shown(path: Path) -> str:
    """`path` from the repository root where it lies inside it (the report must not depend on the checkout's place),
    else as given."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
