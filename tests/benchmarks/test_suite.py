"""benchmarks/suite.py as a user drives it, without training: resuming, the budget, bad input, the cost estimate,
the suite's statistics and the README table (runs are replaced by made-up results)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
ENVS = ["CartpoleBalance", "PointMass", "HumanoidRun"]


@pytest.fixture
def suite(monkeypatch, tmp_path):
    """suite.py with made-up environments, settings and runs: each run returns final = 100 x (seed + 1) (rlfit)
    or 90 x (seed + 1) (Brax), best 1.1 x final, and is logged in `suite.calls`."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbours (common, brax_compare)
    module = importlib.import_module("suite")
    module.calls = []

    def fake_run(side, factor):
        def run(shared, seed, work):
            module.calls.append((shared["env"], side, seed))
            final = factor * (seed + 1)
            return {"seed": seed, "final_eval_reward": final, "best_eval_reward": 1.1 * final, "total_wall_s": 60.0}
        return run

    monkeypatch.setattr(module, "run_rlfit", fake_run("rlfit", 100.0))
    monkeypatch.setattr(module, "run_brax", fake_run("brax", 90.0))
    monkeypatch.setattr(module, "shared_settings", lambda env, preset, quick, overrides=(): {"env": env})
    monkeypatch.setattr(module, "ensure_brax_venv", lambda: {"created": False})
    monkeypatch.setattr(module, "dm_control_envs", lambda: ENVS)
    monkeypatch.setattr(module, "TMP", tmp_path / "tmp")
    return module


def costs(estimates: dict[str, float]) -> dict:
    return {"benchmark": "suite", "preset": "quick", "sessions": [], "runs": {}, "per_env": {}, "summary": {},
            "costs": {env: {"estimated_run_s": seconds} for env, seconds in estimates.items()}}


def test_a_second_sitting_runs_only_what_the_first_left(suite, tmp_path):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({"CartpoleBalance": 300.0, "PointMass": 200.0, "HumanoidRun": 3000.0})))
    suite.main(["--out", str(out), "--seeds", "0", "1", "--brax-seeds", "0"])
    # HumanoidRun (50 min) does not fit 12 minutes; the cheapest environment comes first
    assert suite.calls == [("PointMass", "rlfit", 0), ("PointMass", "rlfit", 1), ("PointMass", "brax", 0),
                           ("CartpoleBalance", "rlfit", 0), ("CartpoleBalance", "rlfit", 1),
                           ("CartpoleBalance", "brax", 0)]
    suite.calls.clear()
    suite.main(["--out", str(out), "--seeds", "0", "1", "2", "--brax-seeds", "0"])
    assert suite.calls == [("PointMass", "rlfit", 2), ("CartpoleBalance", "rlfit", 2)]
    record = json.loads(out.read_text())
    assert record["per_env"]["PointMass"]["rlfit"]["final"] == [100.0, 200.0, 300.0]
    assert len(record["sessions"]) == 2


def test_a_run_that_failed_is_run_again(suite, tmp_path):
    out = tmp_path / "suite.json"
    record = costs({"PointMass": 200.0})
    record["runs"] = {"PointMass": {"rlfit": {"0": {"seed": 0, "error": "exit code 1"}}, "brax": {}}}
    out.write_text(json.dumps(record))
    suite.main(["--out", str(out), "--seeds", "0", "--brax-seeds"])
    assert suite.calls == [("PointMass", "rlfit", 0)]


def test_the_budget_starts_no_run_that_would_end_past_it(suite, tmp_path, monkeypatch):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({"CartpoleBalance": 300.0, "PointMass": 200.0})))
    clock = iter(range(0, 10_000, 100))  # every reading of the clock is 100 s after the one before
    monkeypatch.setattr(suite, "perf_counter", lambda: float(next(clock)))
    suite.main(["--out", str(out), "--seeds", "0", "--brax-seeds", "--budget-minutes", "10"])
    # started at 0; PointMass (200 s) checked at 100 s: ends by 300 <= 600; CartpoleBalance (300 s) at 200 s: 500
    assert suite.calls == [("PointMass", "rlfit", 0), ("CartpoleBalance", "rlfit", 0)]
    suite.calls.clear()
    out.write_text(json.dumps(costs({"CartpoleBalance": 300.0, "PointMass": 200.0})))
    clock2 = iter(range(0, 10_000, 400))
    monkeypatch.setattr(suite, "perf_counter", lambda: float(next(clock2)))
    suite.main(["--out", str(out), "--seeds", "0", "--brax-seeds", "--budget-minutes", "10"])
    assert suite.calls == [("PointMass", "rlfit", 0)]  # at 400 s: 400 + 200 <= 600; at 800 s: 800 + 300 > 600


def test_the_suite_needs_measured_costs_or_named_environments(suite, tmp_path, capsys):
    out = tmp_path / "suite.json"
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--out", str(out)])
    assert stopped.value.code == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "--time-envs" in message
    assert not out.exists() and suite.calls == []


@pytest.mark.parametrize("argv, expected", [
    (["--envs", "Nope"], "not DM Control environments: Nope"),
    (["--budget-minutes", "0"], "--budget-minutes must be a positive number"),
    (["--budget-minutes", "nan"], "--budget-minutes must be a positive number"),
    (["--max-run-minutes", "-1"], "--max-run-minutes must be a positive number"),
    (["--seeds", "0", "-2"], "seeds must be 0 or more"),
    (["--report", "--time-envs"], "not allowed with"),
])
def test_bad_input_is_one_line_and_exit_code_2(suite, tmp_path, capsys, argv, expected):
    with pytest.raises(SystemExit) as stopped:
        suite.main([*argv, "--out", str(tmp_path / "suite.json")])
    assert stopped.value.code == 2
    message = capsys.readouterr().err
    assert expected in message and message.count("\n") == 1
    assert not (tmp_path / "suite.json").exists()


def test_the_cost_of_a_whole_run_from_a_short_one(suite):
    measured = {"iteration_s": [9.0, 2.0, 4.0], "evals": 3, "eval_s": 6.0, "wall_s": 100.0}
    found = suite.estimate_run_s(measured, iterations=85, evals=17)
    # fixed: 100 - 15 - 6 = 79; per iteration: median(2, 4) = 3; per evaluation 2
    assert found == {"fixed_s": 79.0, "per_iteration_s": 3.0, "per_eval_s": 2.0,
                     "estimated_run_s": 79.0 + 85 * 3.0 + 17 * 2.0}


def test_the_suite_statistics_against_scipy(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    report = importlib.import_module("suite_report")
    rng = np.random.default_rng(0)
    rlfit_means, brax_means = rng.uniform(0, 1000, 8), rng.uniform(0, 1000, 8)
    per_env = {f"env{i}": {"rlfit": {"final_mean": float(r), "seeds": [0], "no_collapse": [True]},
                           "brax": {"final_mean": float(b), "seeds": [0], "no_collapse": [i != 3]}}
               for i, (r, b) in enumerate(zip(rlfit_means, brax_means, strict=True))}
    summary = report.suite_summary(per_env)
    for side, values in (("rlfit", rlfit_means), ("brax", brax_means), ("rlfit_minus_brax", rlfit_means - brax_means)):
        assert summary["final_reward"][side]["iqm"] == pytest.approx(scipy.stats.trim_mean(values, 0.25))
        assert summary["final_reward"][side]["mean"] == pytest.approx(values.mean())
        low, high = scipy.stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=scipy.stats.sem(values))
        assert summary["final_reward"][side]["mean_low"] == pytest.approx(low)
        assert summary["final_reward"][side]["mean_high"] == pytest.approx(high)
    assert summary["runs_collapsed"] == ["env3 brax seed 0"]
    assert summary["rlfit_iqm_at_least_brax"] == bool(scipy.stats.trim_mean(rlfit_means, 0.25)
                                                      >= scipy.stats.trim_mean(brax_means, 0.25))


def test_the_collapse_check_per_run(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    report = importlib.import_module("suite_report")
    runs = {"rlfit": {"1": {"seed": 1, "final_eval_reward": 79.0, "best_eval_reward": 100.0},
                      "0": {"seed": 0, "final_eval_reward": 80.0, "best_eval_reward": 100.0},
                      "2": {"seed": 2, "error": "exit code 1"}}}
    found = report.env_summary(runs)
    assert found["rlfit"]["seeds"] == [0, 1] and found["rlfit"]["no_collapse"] == [True, False]
    assert found["brax"]["final_mean"] is None


def test_report_writes_the_table_between_the_markers(suite, tmp_path, monkeypatch):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({"CartpoleBalance": 300.0, "PointMass": 200.0, "HumanoidRun": 3000.0})))
    suite.main(["--out", str(out), "--seeds", "0", "1", "--brax-seeds", "0", "1"])
    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- suite-table:start -->\nold\n<!-- suite-table:end -->\nafter\n")
    monkeypatch.setattr(suite, "README", readme)
    suite.main(["--report", "--out", str(out)])
    text = readme.read_text()
    assert text.startswith("before\n<!-- suite-table:start -->\n| environment") and text.endswith("end -->\nafter\n")
    assert "old" not in text
    assert "| PointMass | 3.3 | 100.0 / 200.0 | 110.0 / 220.0 | yes / yes | 90.0 / 180.0 | 99.0 / 198.0 | +15.0 |" \
        in text
    assert "HumanoidRun (50 min)" in text
    assert "Not timed yet: " not in text  # every environment of the (made-up) registry has its cost


def test_report_names_what_is_not_run_or_not_timed(suite, tmp_path, monkeypatch):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({"CartpoleBalance": 300.0, "PointMass": 200.0})))
    suite.main(["--out", str(out), "--envs", "PointMass", "--seeds", "0", "--brax-seeds", "0"])
    readme = tmp_path / "README.md"
    readme.write_text("<!-- suite-table:start -->\n<!-- suite-table:end -->\n")
    monkeypatch.setattr(suite, "README", readme)
    suite.main(["--report", "--out", str(out)])
    text = readme.read_text()
    assert "Fit, not run yet (estimated minutes): CartpoleBalance (5.0)." in text
    assert "Not timed yet: HumanoidRun." in text


def test_report_without_markers_is_one_line_exit_2(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({})))
    monkeypatch.setattr(suite, "README", tmp_path / "README.md")
    suite.README.write_text("no markers\n")
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--report", "--out", str(out)])
    assert stopped.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    assert suite.README.read_text() == "no markers\n"


def test_an_override_reaches_both_sides(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("suite")
    shared = module.shared_settings("PointMass", "quick", False, ["ppo.num_updates_per_batch=2"])
    assert shared["ppo"]["num_updates_per_batch"] == 2  # what Brax's spec is built from
    assert shared["rlfit_ppo"]["num_updates_per_batch"] == 2  # and what the record keeps of rlfit's settings
    argv = module.rlfit_argv(shared, 0, tmp_path)
    assert argv[argv.index("ppo.num_updates_per_batch=2") - 1] == "--set"
    plain = module.shared_settings("PointMass", "quick", False)
    assert plain["ppo"]["num_updates_per_batch"] == 8 and "ppo.num_updates_per_batch=2" not in module.rlfit_argv(
        plain, 0, tmp_path)


def test_a_json_of_other_settings_is_refused(suite, tmp_path, capsys):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({"PointMass": 200.0})))
    before = out.read_text()
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--out", str(out), "--set", "ppo.num_updates_per_batch=8"])
    assert stopped.value.code == 2 and "pass another --out" in capsys.readouterr().err
    assert out.read_text() == before and suite.calls == []


def _variant(preset_overrides: list[str], finals: dict[str, list[float]], brax: dict[str, list[float]]) -> dict:
    """A suite record with these rlfit finals per environment (best = final, except a 0.0 final whose best is 10:
    a collapse) and these Brax finals."""
    def runs(values):
        return {str(seed): {"seed": seed, "final_eval_reward": v, "best_eval_reward": v or 10.0}
                for seed, v in enumerate(values)}

    record = {"preset": "quick", "overrides": preset_overrides, "runs": {}}
    for env in finals:
        record["runs"][env] = {"rlfit": runs(finals[env]), "brax": runs(brax.get(env, []))}
    return record


def test_compare_writes_rlfit_s_settings_side_by_side_with_the_difference_against_scipy(suite, tmp_path, monkeypatch):
    report = importlib.import_module("suite_report")
    base = _variant([], {"A": [100.0, 300.0], "B": [10.0, 0.0], "C": [50.0, 70.0]}, {"A": [90.0], "B": [5.0]})
    other = _variant(["ppo.num_updates_per_batch=8"], {"A": [200.0, 400.0], "B": [40.0, 20.0]},
                     {"A": [120.0]})
    paths = []
    for name, record in (("suite.json", base), ("eight.json", other)):
        record["per_env"] = {env: report.env_summary(runs) for env, runs in record["runs"].items()}
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(record))
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- suite-variants:start -->\nold\n<!-- suite-variants:end -->\nb\n")
    monkeypatch.setattr(suite, "README", readme)
    suite.main(["--out", str(paths[0]), "--compare", str(paths[1])])
    text = readme.read_text()
    assert text.startswith("a\n<!-- suite-variants:start -->\n| environment") and "old" not in text
    assert ("| A | 100.0 / 300.0 (200.0) [2/2] | 200.0 / 400.0 (300.0) [2/2] | 90.0 (quick); "
            "120.0 (quick + ppo.num_updates_per_batch=8) |") in text
    assert "| B | 10.0 / 0.0 (5.0) [1/2] | 40.0 / 20.0 (30.0) [2/2] | 5.0 (quick) |" in text
    assert "| C | 50.0 / 70.0 (60.0) [2/2] | - | - |" in text
    differences = np.array([300.0 - 200.0, 30.0 - 5.0])  # the environments both finished: A and B
    low, high = scipy.stats.t.interval(0.95, 1, loc=differences.mean(), scale=scipy.stats.sem(differences))
    assert (f"- quick + ppo.num_updates_per_batch=8 minus quick (rlfit, per-environment means): IQM "
            f"{scipy.stats.trim_mean(differences, 0.25):.1f} [") in text
    assert f"mean {differences.mean():.1f} [{low:.1f}, {high:.1f}] over 2 environments" in text
    assert "- quick: 1 of 6 rlfit runs end below 0.8 x their best (B seed 1)" in text
    assert "- quick + ppo.num_updates_per_batch=8: 0 of 4 rlfit runs end below 0.8 x their best" in text


def test_compare_with_a_missing_json_is_one_line_exit_2(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "suite.json"
    out.write_text(json.dumps(costs({})))
    monkeypatch.setattr(suite, "README", tmp_path / "README.md")
    suite.README.write_text("<!-- suite-variants:start -->\n<!-- suite-variants:end -->\n")
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--out", str(out), "--compare", str(tmp_path / "nope.json")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "nope.json does not exist" in err and err.count("\n") == 1
    assert suite.README.read_text() == "<!-- suite-variants:start -->\n<!-- suite-variants:end -->\n"


def test_settings_changed_names_what_differs_from_the_runs_already_there(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("suite")
    stored = {"env": "PointMass", "seed": 0, "iterations": 85, "ppo": {"num_updates_per_batch": 4},
              "rlfit_ppo": {"num_updates_per_batch": 4, "advantages": "gae_once"}}
    same = {**stored, "seed": 1}  # the seed is not a setting of the environment's runs
    assert module.settings_changed(stored, same) == []
    new = {"env": "PointMass", "seed": 0, "iterations": 90, "ppo": {"num_updates_per_batch": 8},
           "rlfit_ppo": {"num_updates_per_batch": 8, "advantages": "brax"}}
    assert module.settings_changed(stored, new) == ["iterations", "ppo.advantages", "ppo.num_updates_per_batch"]
    older = {key: value for key, value in stored.items() if key != "rlfit_ppo"}  # a record from before rlfit_ppo
    assert module.settings_changed(older, new) == ["iterations", "ppo.num_updates_per_batch"]


def test_runs_of_settings_a_preset_no_longer_has_are_not_resumed(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "suite.json"
    record = costs({"PointMass": 200.0})
    record["runs"] = {"PointMass": {"shared_settings": {"env": "PointMass", "rlfit_ppo": {"advantages": "gae_once"}},
                                    "rlfit": {"0": {"seed": 0, "final_eval_reward": 5.0, "best_eval_reward": 5.0,
                                                          "total_wall_s": 60.0}},
                                    "brax": {}}}
    out.write_text(json.dumps(record))
    before = out.read_text()
    monkeypatch.setattr(suite, "shared_settings",
                        lambda env, preset, quick, overrides=(): {"env": env, "rlfit_ppo": {"advantages": "brax"}})
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--out", str(out), "--envs", "PointMass", "--seeds", "0", "1", "--brax-seeds"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "PointMass" in err and "ppo.advantages" in err and "pass another --out" in err
    assert out.read_text() == before and suite.calls == []
    monkeypatch.setattr(suite, "shared_settings",
                        lambda env, preset, quick, overrides=(): {"env": env, "rlfit_ppo": {"advantages": "gae_once"}})
    suite.main(["--out", str(out), "--envs", "PointMass", "--seeds", "0", "1", "--brax-seeds"])
    assert suite.calls == [("PointMass", "rlfit", 1)]  # the same settings: resumed


def test_a_record_of_a_preset_since_changed_is_named_by_its_label(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    report = importlib.import_module("suite_report")
    old = _variant([], {"A": [100.0]}, {})
    assert report.variant_label(old) == "quick"
    old["label"] = "quick before 0017 (4 epochs, gae_once)"
    new = _variant(["ppo.learning_rate=3e-4"], {"A": [200.0]}, {})
    for record in (old, new):
        record["per_env"] = {env: report.env_summary(runs) for env, runs in record["runs"].items()}
    text = report.variants_table([old, new])
    assert "| environment | rlfit, quick before 0017 (4 epochs, gae_once): finals" in text
    assert "- quick + ppo.learning_rate=3e-4 minus quick before 0017 (4 epochs, gae_once) (rlfit" in text


def test_print_shows_the_tables_and_leaves_the_readme_alone(suite, tmp_path, monkeypatch, capsys):
    report = importlib.import_module("suite_report")
    base = _variant([], {"A": [100.0, 300.0]}, {"A": [90.0]})
    other = _variant(["ppo.num_updates_per_batch=2"], {"A": [200.0, 400.0]}, {})
    paths = []
    for name, record in (("suite.json", base), ("two.json", other)):
        record["per_env"] = {env: report.env_summary(runs) for env, runs in record["runs"].items()}
        record["summary"] = report.suite_summary(record["per_env"])
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(record))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- suite-variants:start -->\nold\n<!-- suite-variants:end -->\n"
                      "<!-- suite-table:start -->\nold\n<!-- suite-table:end -->\n")
    before = readme.read_text()
    monkeypatch.setattr(suite, "README", readme)
    capsys.readouterr()
    suite.main(["--out", str(paths[0]), "--compare", str(paths[1]), "--print"])
    printed = capsys.readouterr().out
    assert "| A | 100.0 / 300.0 (200.0) [2/2] | 200.0 / 400.0 (300.0) [2/2] | 90.0 (quick) |" in printed
    suite.main(["--out", str(paths[0]), "--report", "--print"])
    assert "| A | - | 100.0 / 300.0 | 100.0 / 300.0 | yes / yes | 90.0 | 90.0 | +110.0 |" in capsys.readouterr().out
    assert readme.read_text() == before
