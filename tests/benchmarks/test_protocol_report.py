"""benchmarks/protocol_report.py on made-up suite files: only the declared seeds enter, the rest is shown apart,
missing runs are named, the figures match hand computations, and each decision rule goes each way."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
ENVS, LOCOMOTION, SEEDS = ["Alpha", "Beta"], ["Gamma"], [0, 1, 2]
CANDIDATE = {"Alpha": [900.0, 950.0, 870.0, 10.0], "Beta": [400.0, 500.0, 450.0]}
"""The candidate's finals by seed (seed 3 lies outside the protocol's seeds 0-2)."""
CURRENT = {"Alpha": [600.0, 990.0, 610.0], "Beta": [450.0, 400.0, 500.0], "Gamma": [300.0, 320.0, 310.0]}
BRAX = {"Alpha": [580.0, 999.0, 700.0], "Beta": [300.0, 350.0, 420.0], "Gamma": [200.0, 250.0, 330.0]}


@pytest.fixture
def report(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("protocol_report")


def runs(finals: dict[str, list[float]], side: str) -> dict[str, dict]:
    return {env: {side: {str(seed): {"seed": seed, "final_eval_reward": final, "best_eval_reward": final,
                                     "git": {"head": f"{side}{env}{seed}"}, "date": "2026-11-28T10:00:00+00:00",
                                     "env_steps": 1000} for seed, final in enumerate(values)}}
            for env, values in finals.items()}


def suite_file(path: Path, advantages: str, **sides: dict[str, list[float]]) -> Path:
    record: dict = {"runs": {}}
    for side, finals in sides.items():
        for env, by_side in runs(finals, side).items():
            entry = record["runs"].setdefault(env, {"shared_settings": {"rlfit_ppo": {
                "num_updates_per_batch": 8, "advantages": advantages}}, "rlfit": {}, "brax": {}})
            entry.update(by_side)
    path.write_text(json.dumps(record))
    return path


def protocol(tmp_path: Path, candidate=CANDIDATE, current=CURRENT, brax=BRAX) -> Path:
    gae = suite_file(tmp_path / "gae.json", "gae_once", rlfit=candidate)
    brax_file = suite_file(tmp_path / "brax.json", "brax", rlfit=current, brax=brax)
    spec = {"name": "made_up", "environments": ENVS, "locomotion": LOCOMOTION, "seeds": SEEDS,
            "sides": {"candidate": {"file": str(gae), "side": "rlfit",
                                    "set": ["ppo.num_updates_per_batch=8", "ppo.advantages=gae_once"]},
                      "current": {"file": str(brax_file), "side": "rlfit", "set": ["ppo.advantages=brax"]},
                      "brax": {"file": str(brax_file), "side": "brax", "set": ["ppo.num_updates_per_batch=8"]}},
            "comparisons": {"preset_change": {"sides": ["candidate", "current"], "environments": "environments"},
                            "rlfit_vs_brax": {"sides": ["adopted", "brax"], "environments": "environments+locomotion"}}}
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def quickstart(tmp_path: Path, finals: list[float], bests: list[float] | None = None) -> Path:
    bests = bests or finals
    path = tmp_path / "quickstart.json"
    path.write_text(json.dumps({"settings": ["rlfit", "train", "--set", "ppo.advantages=gae_once"], "runs": [
        {"seed": seed, "final_eval_reward": f, "best_eval_reward": b, "cpu_model": "made-up CPU"}
        for seed, (f, b) in enumerate(zip(finals, bests, strict=True))]}))
    return path


def build(report, tmp_path, quickstart_path=None, **files):
    loaded = report.load_protocol(protocol(tmp_path, **files))
    return report.build_report(loaded, quickstart_path or tmp_path / "none.json", reps=500)


def plain_iqm(values):
    ordered = sorted(values)
    cut = len(ordered) // 4
    return sum(ordered[cut:len(ordered) - cut]) / (len(ordered) - 2 * cut)


def test_only_the_declared_seeds_enter_and_the_others_are_shown_apart(report, tmp_path):
    result = build(report, tmp_path, quickstart(tmp_path, [990.0] * 10))
    used = {(r["side"], r["env"], r["seed"]) for r in result["runs_used"]}
    assert ("candidate", "Alpha", 3) not in used
    assert {"file": str(tmp_path / "gae.json"), "file_side": "rlfit", "env": "Alpha", "seed": 3,
            "final": 10.0} in result["runs_outside_protocol"]
    change = result["comparisons"]["preset_change"]
    assert change["per_env"]["Alpha"]["a"] == {"seeds": [0, 1, 2], "finals": [900.0, 950.0, 870.0],
                                               "mean": pytest.approx(906.6667)}
    assert {r["commit"] for r in result["runs_used"] if r["side"] == "brax" and r["env"] == "Gamma"} == {
        "braxGamma0", "braxGamma1", "braxGamma2"}


def test_the_figures_match_a_hand_computation(report, tmp_path):
    change = build(report, tmp_path)["comparisons"]["preset_change"]
    head = change["headline"]
    candidate = [v / 1000 for env in ENVS for v in CANDIDATE[env][:3]]
    current = [v / 1000 for env in ENVS for v in CURRENT[env][:3]]  # the seeds both sides have: 0-2
    assert head["seeds"] == {env: [0, 1, 2] for env in ENVS}
    assert head["runs_b"] == len(current)
    assert head["iqm_a"]["point"] == pytest.approx(plain_iqm(candidate))
    assert head["iqm_difference"]["point"] == pytest.approx(plain_iqm(candidate) - plain_iqm(current))
    wins = [np.mean([1.0 if x > y else 0.5 if x == y else 0.0 for x in CANDIDATE[env][:3] for y in CURRENT[env][:3]])
            for env in ENVS]
    assert head["probability_of_improvement"]["point"] == pytest.approx(np.mean(wins))
    assert change["per_env"]["Beta"]["difference_of_means"]["point"] == pytest.approx(
        np.mean(CANDIDATE["Beta"][:3]) - np.mean(CURRENT["Beta"]))  # the table keeps every declared seed
    for value in (head["iqm_a"], head["iqm_difference"], head["probability_of_improvement"]):
        assert value["low"] <= value["point"] <= value["high"]


def test_without_the_quickstart_record_the_adoption_waits_and_both_sides_are_shown_provisionally(report, tmp_path):
    result = build(report, tmp_path)
    decision = result["comparisons"]["preset_change"]["decision"]
    assert decision["outcome"] == "pending" and decision["checks"]["quickstart"]["status"] == "pending"
    assert decision["checks"]["no_environment_worse"]["status"] == "pass"
    versus = result["comparisons"]["rlfit_vs_brax"]
    assert versus["adopted"] == "pending" and set(versus["provisional"]) == {"candidate", "current"}
    # the candidate has no Gamma runs: missing, named, and Gamma left out of that variant's headline
    assert versus["provisional"]["candidate"]["headline"]["left_out_no_runs"] == ["Gamma"]
    assert {(m["side"], m["env"], m["seed"]) for m in result["runs_missing"]} == {
        ("candidate", "Gamma", seed) for seed in SEEDS}
    assert result["partial"] is True


def test_ten_reliable_quickstart_seeds_and_no_worse_environment_adopt_the_candidate(report, tmp_path):
    result = build(report, tmp_path, quickstart(tmp_path, [990.0] * 9 + [500.0]))
    assert result["comparisons"]["preset_change"]["decision"]["outcome"] == "adopt"
    versus = result["comparisons"]["rlfit_vs_brax"]
    assert "provisional" not in versus and versus["a"] == "candidate"
    assert versus["decision"]["text"].startswith("no difference shown; partial: 3 declared runs missing")


@pytest.mark.parametrize(("finals", "bests"), [
    ([990.0] * 8 + [899.0, 850.0], None),           # two seeds below 900
    ([990.0] * 8 + [950.0, 950.0], [990.0] * 8 + [1200.0, 1200.0]),  # two seeds below 0.8 of their best
])
def test_two_unreliable_quickstart_seeds_keep_the_current_preset(report, tmp_path, finals, bests):
    result = build(report, tmp_path, quickstart(tmp_path, finals, bests))
    decision = result["comparisons"]["preset_change"]["decision"]
    assert decision["checks"]["quickstart"]["status"] == "fail" and decision["outcome"] == "keep"
    assert result["comparisons"]["rlfit_vs_brax"]["a"] == "current"


def test_an_environment_wholly_worse_keeps_the_current_preset(report, tmp_path):
    worse = {"Alpha": [100.0, 110.0, 120.0], "Beta": CANDIDATE["Beta"]}
    decision = build(report, tmp_path, quickstart(tmp_path, [990.0] * 10), candidate=worse)[
        "comparisons"]["preset_change"]["decision"]
    assert decision["checks"]["no_environment_worse"] == {
        "rule": "no environment's 95% interval of candidate minus current wholly below 0", "status": "fail",
        "below_zero": ["Alpha"], "missing_runs": 0}
    assert decision["outcome"] == "keep"


def test_a_missing_seed_leaves_the_interval_check_pending(report, tmp_path):
    short = {"Alpha": [900.0, 950.0], "Beta": CANDIDATE["Beta"]}
    result = build(report, tmp_path, quickstart(tmp_path, [990.0] * 10), candidate=short)
    decision = result["comparisons"]["preset_change"]["decision"]
    assert decision["checks"]["no_environment_worse"]["status"] == "pending" and decision["outcome"] == "pending"
    assert {"side": "candidate", "file": str(tmp_path / "gae.json"), "file_side": "rlfit", "env": "Alpha", "seed": 2,
            "reason": "not in the file"} in result["runs_missing"]


def test_runs_made_at_other_settings_are_not_used(report, tmp_path):
    path = protocol(tmp_path)
    record = json.loads((tmp_path / "gae.json").read_text())
    record["runs"]["Beta"]["shared_settings"]["rlfit_ppo"]["advantages"] = "brax"
    (tmp_path / "gae.json").write_text(json.dumps(record))
    result = report.build_report(report.load_protocol(path), tmp_path / "none.json", reps=200)
    assert result["comparisons"]["preset_change"]["per_env"]["Beta"]["a"]["seeds"] == []
    reasons = {m["reason"] for m in result["runs_missing"] if m["env"] == "Beta" and m["side"] == "candidate"}
    assert reasons == {"the file's runs ran other settings: ppo.advantages: gae_once declared, brax in the file"}
    assert sum(r["env"] == "Beta" and r["file"].endswith("gae.json") for r in result["runs_outside_protocol"]) == 3


def test_the_command_line_prints_the_table_and_writes_the_report(report, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert report.main([str(protocol(tmp_path)), "--quickstart", str(tmp_path / "none.json"), "--out", str(out),
                        "--quick"]) == 0
    printed = capsys.readouterr().out
    assert "== preset_change: candidate minus current" in printed and "decision: pending" in printed
    assert "runs outside the protocol (never in a headline): 1" in printed
    written = json.loads(out.read_text())
    assert written["protocol"] == "made_up" and set(written["comparisons"]) == {"preset_change", "rlfit_vs_brax"}


@pytest.mark.parametrize(("change", "message"), [
    (lambda path: path.unlink(), "cannot read the protocol"),
    (lambda path: path.write_text(path.read_text().replace("gae.json", "gone.json")), "gone.json, which does not exist"),
    (lambda path: path.write_text("name: x\n"), "has no seeds, sides, comparisons"),
    (lambda path: path.write_text(path.read_text().replace("environments+locomotion", "environments+legs")),
     "'legs', which is not a list"),
])
def test_bad_input_is_one_line_and_exit_code_2(report, tmp_path, capsys, change, message):
    path = protocol(tmp_path)
    change(path)
    assert report.main([str(path), "--out", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


def test_the_committed_report_is_current_with_the_files_it_reads(report):
    """A result file that gains or loses a run, or a quickstart record that appears, makes the committed report
    stale: rerun `.venv/bin/python benchmarks/protocol_report.py` and commit its JSON."""
    committed = json.loads((BENCHMARKS / "results" / "quick_preset_2026_12_report.json").read_text())
    fresh = report.build_report(report.load_protocol(report.DEFAULT_PROTOCOL), report.DEFAULT_QUICKSTART,
                                report.RESAMPLES)
    for record in (fresh, committed):  # git's date of the protocol: absent from a shallow clone, not a figure
        record["runs_used"] = [{k: v for k, v in run.items() if k != "before_protocol"} for run in record["runs_used"]]
    for key in ("comparisons", "runs_used", "runs_missing", "runs_outside_protocol", "partial"):
        assert json.loads(json.dumps(fresh[key])) == committed[key], (
            f"results/quick_preset_2026_12_report.json's {key} is stale: run .venv/bin/python "
            "benchmarks/protocol_report.py")


def test_an_unknown_option_is_one_line_and_exit_code_2(report, capsys):
    with pytest.raises(SystemExit) as stop:
        report.main(["--frobnicate"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "unrecognized arguments: --frobnicate" in err and err.count("\n") == 1


def quickstart_record(path: Path, finals_bests_walls: list[tuple[float, float, float]]) -> None:
    """quickstart.py's record with seeds 0.. in order, each (final, best, total_wall_s)."""
    runs = [{"seed": seed, "final_eval_reward": final, "best_eval_reward": best, "total_wall_s": wall}
            for seed, (final, best, wall) in enumerate(finals_bests_walls)]
    path.write_text(json.dumps({"settings": ["rlfit", "train"], "runs": runs}))


@pytest.mark.parametrize(("rows", "status"), [
    ([(990.0, 999.0, 300.0)] * 9 + [(500.0, 900.0, 300.0)], "pass"),  # 9 of 10 reliable, median 300 s
    ([(990.0, 999.0, 700.0)] * 10, "fail"),  # every seed reliable but the median seed over 600 s
    # two of six unreliable (600 < 900; 950 < 0.8 x 1200): 9 of 10 can no longer be reached
    ([(990.0, 999.0, 300.0)] * 4 + [(600.0, 990.0, 300.0), (950.0, 1200.0, 300.0)], "fail"),
    ([(990.0, 999.0, 300.0)] * 5, "pending"),  # 5 of 10 seeds so far, all reliable
])
def test_an_amendments_quickstart_candidate_is_judged_by_its_own_record_and_wall_rule(report, tmp_path, rows, status):
    decisions = importlib.import_module("protocol_decisions")
    quickstart_record(tmp_path / "q.json", rows)
    raw = {"amendment_1": {"quickstart_candidate": {"what": "a run", "file": "q.json"}}, "name": "x"}
    [check] = decisions.amendment_checks(raw, tmp_path)
    reliable = sum(final >= 900 and final >= 0.8 * best for final, best, _ in rows)
    assert (check["status"], check["reliable"], check["seeds_present"]) == (status, reliable, len(rows))
    assert check["median_wall_s"] == sorted(wall for _, _, wall in rows)[len(rows) // 2]


def test_a_partial_headline_takes_each_environment_at_the_seeds_both_sides_have(report, tmp_path):
    """Brax lacks Alpha's seed 2: Alpha enters the headline at seeds 0-1 on both sides (no environment weighs more
    on one side than on the other), while the per-environment table keeps the current side's three seeds."""
    brax = {**BRAX, "Alpha": BRAX["Alpha"][:2]}
    loaded = report.load_protocol(protocol(tmp_path, brax=brax))
    kept = quickstart(tmp_path, [500.0] * 10)  # the candidate fails its check: current against brax
    versus = report.build_report(loaded, kept, reps=500)["comparisons"]["rlfit_vs_brax"]
    head = versus["headline"]
    assert head["seeds"] == {"Alpha": [0, 1], "Beta": [0, 1, 2], "Gamma": [0, 1, 2]}
    current = [v / 1000 for v in CURRENT["Alpha"][:2] + CURRENT["Beta"] + CURRENT["Gamma"]]
    theirs = [v / 1000 for v in brax["Alpha"] + brax["Beta"] + brax["Gamma"]]
    assert (head["runs_a"], head["runs_b"]) == (8, 8)
    assert head["iqm_difference"]["point"] == pytest.approx(plain_iqm(current) - plain_iqm(theirs))
    assert versus["per_env"]["Alpha"]["a"]["seeds"] == [0, 1, 2]
    assert versus["per_env"]["Alpha"]["b"]["seeds"] == [0, 1]
