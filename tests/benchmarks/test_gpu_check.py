"""benchmarks/gpu_check.py: its figures, its time boxes and deadline, the check of its record, and its dry run."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"


@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbours
    return importlib.import_module("gpu_check")


@pytest.fixture
def gpu_figures(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_figures")


def train_rows() -> list[dict]:
    """Four iterations of 1,000 env steps (the first slow: it waited for a compile) and an evaluation between."""
    return [
        {"kind": "train", "iteration": 1, "env_steps": 1000, "sps": 100.0, "wall_s": 10.0},
        {"kind": "train", "iteration": 2, "env_steps": 2000, "sps": 1000.0, "wall_s": 11.0},
        {"kind": "eval", "iteration": 2, "eval/episode_reward": 3.0},
        {"kind": "train", "iteration": 3, "env_steps": 3000, "sps": 500.0, "wall_s": 14.0},
        {"kind": "train", "iteration": 4, "env_steps": 4000, "sps": 800.0, "wall_s": 16.0},
    ]


def test_training_rates_leave_out_the_first_iteration_and_count_evaluations_in_the_minute(gpu_figures):
    rates = gpu_figures.training_rates(train_rows())
    assert rates["env_steps_per_s_median"] == 800.0  # median of 1000, 500, 800; the first (100) left out
    assert rates["iterations_per_min"] == pytest.approx(60 * 3 / 6)  # iterations 1 -> 4 in 10 s -> 16 s
    assert rates["iterations"] == 4 and rates["env_steps"] == 4000
    assert rates["first_iteration_env_steps_per_s"] == 100.0  # the one left out of the median, kept apart
    one = gpu_figures.training_rates(train_rows()[:1])
    assert one["env_steps_per_s_median"] is None and one["iterations_per_min"] is None
    assert one["first_iteration_env_steps_per_s"] == 100.0
    assert gpu_figures.training_rates([])["first_iteration_env_steps_per_s"] is None


def test_headline_takes_g1_rates_from_the_warm_step_and_falls_back_to_the_cold_one(gpu_figures):
    def step(name: str, status: str, median: float | None) -> dict:
        return {"name": name, "kind": "train", "status": status,
                "figures": {"env_steps_per_s_median": median, "first_iteration_env_steps_per_s": 7.0}}

    both = {"steps": [step("g1_ppo_cold", "ok", 1.0), step("g1_ppo_warm", "ok", 2.0)]}
    assert gpu_figures.headline(both)["g1_env_steps_per_s"] == 2.0
    assert gpu_figures.headline(both)["g1_first_iteration_env_steps_per_s"] == 7.0
    warm_failed = {"steps": [step("g1_ppo_cold", "ok", 1.0), step("g1_ppo_warm", "failed", 2.0)]}
    assert gpu_figures.headline(warm_failed)["g1_env_steps_per_s"] == 1.0
    neither = {"steps": [step("g1_ppo_cold", "ok", None), step("g1_ppo_warm", "ok", None)]}
    assert gpu_figures.headline(neither)["g1_env_steps_per_s"] is None


def write_run(folder: Path, summary: dict | None) -> None:
    folder.mkdir(parents=True)
    plan = {"sizes": {"num_envs": 4096}, "predicted_bytes": 900, "impl": "warp", "precision": "fp32",
            "backend": "gpu", "device": "gpu:H100", "reasons": ["chose 4096"],
            "extra": {"budget_bytes": 5000, "memory_model": {"source": "lowered"}}}
    (folder / "plan.json").write_text(json.dumps(plan))
    lines = [json.dumps(row) for row in train_rows()] + ['{"kind": "train", "iteration": 5, "env_st']  # cut off
    (folder / "metrics.jsonl").write_text("\n".join(lines))
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))


def test_run_figures_give_the_plan_and_the_prediction_against_the_peak(gpu_figures, tmp_path):
    write_run(tmp_path / "run", {"time_to_first_step_s": 42.0, "device_peak_bytes": 1000, "predicted_bytes": 900,
                                 "programs": [{"name": "training step"}], "versions": {"jax": "0.11.2"}})
    figures = gpu_figures.run_figures(tmp_path / "run")
    assert figures["predicted_over_peak_minus_1"] == pytest.approx(-0.1)  # the peak was 11% above the prediction
    assert figures["plan"]["bound_source"] == "lowered" and figures["plan"]["impl"] == "warp"
    assert figures["plan"]["sizes"] == {"num_envs": 4096} and figures["plan"]["budget_bytes"] == 5000
    assert figures["time_to_first_step_s"] == 42.0 and figures["iterations"] == 4  # the cut-off row left out


def test_a_run_cut_off_before_its_summary_has_no_first_step(gpu_figures, tmp_path):
    write_run(tmp_path / "run", None)
    figures = gpu_figures.run_figures(tmp_path / "run")
    assert "time_to_first_step_s" not in figures and figures["predicted_over_peak_minus_1"] is None
    assert figures["plan"]["predicted_bytes"] == 900


def whole_record() -> dict:
    figures = {key: 1.0 for key in ("time_to_first_step_s", "init_s", "compile_s", "compile_wait_s",
                                     "env_steps_per_s_median", "first_iteration_env_steps_per_s",
                                     "iterations_per_min", "sps_mean",
                                     "predicted_over_peak_minus_1", "final_eval_reward", "xla_compile_s_total")}
    figures.update(programs=[], iterations=3, env_steps=300, device_peak_bytes=None, predicted_bytes=10,
                   stopped_by="time_budget", versions={}, xla_compiles_over_1s=[],
                   plan={"sizes": {}, "predicted_bytes": 10, "impl": "jax", "precision": "fp32", "backend": "gpu",
                         "device": "gpu", "bound_source": "lowered", "budget_bytes": 100, "reasons": []})
    step = {"name": "g1_ppo_cold", "kind": "train", "measures": "G1", "status": "ok", "box_s": 240, "wall_s": 100.0,
            "figures": figures, "note": None}
    later = {**step, "name": "g1_ppo_warm", "status": "not reached", "figures": {}, "wall_s": None}
    return {"benchmark": "gpu_check", "dry_run": True, "deadline_s": 510, "steps": [step, later], "transfer": None,
            "install": None, "targets": {}, "reference": {}, "headline": {}}


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r["steps"][0]["figures"].pop("time_to_first_step_s"), "step 1 (g1_ppo_cold): no time_to_first_step_s"),
    (lambda r: r["steps"][0]["figures"].update(iterations="3"), "step 1 (g1_ppo_cold): iterations is str, not int"),
    (lambda r: r["steps"][0]["figures"].update(sps_mean=True), "step 1 (g1_ppo_cold): sps_mean is bool"),
    (lambda r: r["steps"][0]["figures"]["plan"].pop("impl"), "step 1 (g1_ppo_cold) plan: no impl"),
    (lambda r: r["steps"][1].update(status="done"), "step 2 (g1_ppo_warm): status 'done' is none of"),
    (lambda r: r["steps"][1].update(figures={"x": 1}), "step 2 (g1_ppo_warm): not reached, yet it has figures"),
    (lambda r: r.pop("headline"), "record: no headline"),
])
def test_the_record_check_names_each_missing_or_mistyped_field(gpu_figures, change, expected):
    assert gpu_figures.check_record(whole_record()) == []
    record = whole_record()
    change(record)
    problems = gpu_figures.check_record(record)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_time_box_sends_sigterm_then_sigkill_to_a_child_that_ignores_it(gpu_check, tmp_path):
    obeys = [sys.executable, "-c", "import time; time.sleep(60)"]
    boxed = gpu_check.run_boxed(obeys, dict(os.environ), box_s=0.5, grace_s=5, log=tmp_path / "a.log")
    assert boxed.timed_out and boxed.exit_code == -15 and boxed.wall_s < 5  # SIGTERM ended it
    ignores = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
               "print('ready', flush=True); time.sleep(60)"]
    started = time.perf_counter()
    boxed = gpu_check.run_boxed(ignores, dict(os.environ), box_s=1.0, grace_s=0.5, log=tmp_path / "b.log")
    assert boxed.timed_out and boxed.exit_code is None and time.perf_counter() - started < 10
    done = gpu_check.run_boxed([sys.executable, "-c", "print('x')"], dict(os.environ), 30, 1, tmp_path / "c.log")
    assert done == (0, done.wall_s, False) and (tmp_path / "c.log").read_text() == "x\n"


def test_steps_run_in_order_within_the_deadline_and_a_failing_step_costs_only_itself(gpu_check, tmp_path):
    setup = gpu_check.dry_setup("toy")._replace(deadline_s=2.5, min_start_s=1.0, grace_s=0.5,
                                                 boxes={"quick": 10, "slow": 10})
    ran = []

    def quick(ctx, name, box):
        ran.append((name, box))
        return {"status": "ok", "figures": {"x": 1}, "wall_s": 0.0}

    def broken(ctx, name, box):
        ran.append((name, box))
        raise KeyError("summary.json")

    def slow(ctx, name, box):
        ran.append((name, box))
        time.sleep(1.2)
        return {"status": "ok", "figures": {}, "wall_s": 1.2}

    order = [gpu_check.Step(name, "other", "m", key, run) for name, key, run in (
        ("a", "quick", quick), ("b", "quick", broken), ("c", "slow", slow), ("d", "quick", quick))]
    record = {"steps": [{"name": s.name, "kind": s.kind, "status": "not reached", "figures": {}} for s in order]}
    ctx = gpu_check.Context(setup, sys.executable, {}, tmp_path, tmp_path, time.perf_counter())
    gpu_check.run_steps(ctx, record, order)

    assert [name for name, _ in ran] == ["a", "b", "c"]  # d: 2.5 - 1.2 s left, less the grace, is under 1 s
    assert all(box <= 2.5 - 0.5 for _, box in ran)  # each box ends before the deadline, grace included
    assert [s["status"] for s in record["steps"]] == ["ok", "failed", "ok", "not reached"]
    assert "KeyError" in record["steps"][1]["note"] and "not started" in record["steps"][3]["note"]
    assert json.loads((tmp_path / "gpu_check.json").read_text())["steps"][2]["status"] == "ok"


def test_the_dry_run_measures_in_order_and_writes_a_whole_record(tmp_path):
    """The script end to end on this CPU (toy environment), its first two steps only (`--steps`; the steps after
    them ran until the 50 s deadline cut them, whatever the load let them do, and nothing here looked at them):
    those measure, the others are not reached, and the script's own check of its JSON passes (exit 0)."""
    out = tmp_path / "gpu"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--dry-run", "--deadline", "50",
                           "--steps", "doctor", "g1_ppo_cold", "--out", str(out)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "RLFIT_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.perf_counter() - started < 50 + 15
    record = json.loads((out / "gpu_check.json").read_text())
    steps = {step["name"]: step for step in record["steps"]}
    assert [step["name"] for step in record["steps"]][:4] == ["doctor", "g1_ppo_cold", "g1_ppo_warm",
                                                              "cartpole_ppo_playground"]
    assert steps["doctor"]["status"] == "ok" and steps["doctor"]["figures"]["device"]["platform"] == "cpu"
    cold = steps["g1_ppo_cold"]
    assert cold["status"] == "ok", cold["note"]
    assert cold["figures"]["plan"]["impl"] == "jax" and cold["figures"]["time_to_first_step_s"] > 0
    assert json.loads((out / "runs" / "g1_ppo_cold" / "summary.json").read_text())["time_to_first_step_s"] == \
        cold["figures"]["time_to_first_step_s"]
    assert (out / "runs" / "g1_ppo_cold" / "plan.json").is_file() and (out / "logs" / "g1_ppo_cold.log").is_file()
    assert steps["g1_randomization_off"]["status"] in ("not reached", "not available")
    assert steps["g1_ppo_warm"]["status"] == "not reached" and steps["g1_ppo_warm"]["note"] == "left out by --steps"
    assert record["transfer"]["working_tree_bytes"] > 0 and record["headline"]["g1_cold_time_to_first_step_s"] == \
        cold["figures"]["time_to_first_step_s"]


def test_a_missing_bundle_is_one_line_exit_2_and_nothing_written(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--bundle", str(tmp_path / "none"),
                           "--out", str(tmp_path / "gpu")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "gpu_bundle.py prepare" in done.stderr
    assert not (tmp_path / "gpu").exists()


def test_an_unknown_step_is_one_line_exit_2_naming_the_steps(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--dry-run", "--steps", "doctor",
                           "g1_ppo_hot", "--out", str(tmp_path / "gpu")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "no step 'g1_ppo_hot': choose from 'doctor', 'g1_ppo_cold'" in done.stderr  # doctor was known
    assert not (tmp_path / "gpu").exists()


def test_a_stopped_check_takes_its_step_process_with_it(tmp_path):
    """SIGTERM to the script (the device tool's time limit, a test's timeout) ends the step under way, which runs
    in a session of its own and would otherwise run on."""
    pid_file = tmp_path / "child.pid"
    step = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    (tmp_path / "check.py").write_text(
        "import os, pathlib, signal, sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "import gpu_check\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
        f"gpu_check.run_boxed([sys.executable, '-c', {step!r}], dict(os.environ), 60, 5, "
        f"pathlib.Path({str(tmp_path / 'log')!r}))\n")
    check = subprocess.Popen([sys.executable, str(tmp_path / "check.py")])
    deadline = time.time() + 30
    while not (pid_file.is_file() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    check.terminate()
    assert check.wait(timeout=10) == 143
    time.sleep(0.5)
    state = Path(f"/proc/{child}/stat").read_text().split()[2] if Path(f"/proc/{child}").exists() else "gone"
    assert state in ("gone", "Z"), state  # killed (a zombie until the orphan is reaped)


@pytest.mark.parametrize(("on", "setting"), [(True, "auto"), (False, "off")])
def test_the_randomization_steps_pass_settings_rlfit_accepts(gpu_check, monkeypatch, on, setting):
    """The G1 steps with and without randomization ask for `env.randomization` values the config accepts."""
    from types import SimpleNamespace

    from rlfit.config.schema import resolve

    taken = {}
    monkeypatch.setattr(gpu_check, "has_config_key", lambda ctx, section, key: True)
    monkeypatch.setattr(gpu_check, "train", lambda ctx, name, box_s, argv, cache, timesteps: taken.setdefault("argv", argv))
    ctx = SimpleNamespace(setup=gpu_check.GPU)
    gpu_check.randomization(ctx, "g1_randomization", 60.0, on)
    argv = taken["argv"]
    assert argv[-2:] == ["--set", f"env.randomization={setting}"]
    overrides = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    config = resolve("CartpoleBalance", "g1", overrides=overrides)  # the g1 preset at Playground's G1 sizes
    assert config.env.randomization == setting and config.ppo.num_envs == 8192 and config.ppo.batch_size == 256
