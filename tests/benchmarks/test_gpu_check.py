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
def gpu_steps(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_steps")


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


def test_headline_takes_g1_rates_from_the_learning_step_and_falls_back_to_the_warm_one(gpu_figures):
    def step(name: str, status: str, median: float | None) -> dict:
        return {"name": name, "kind": "train", "status": status,
                "figures": {"env_steps_per_s_median": median, "first_iteration_env_steps_per_s": 7.0}}

    both = {"steps": [step("learn_g1", "ok", 1.0), step("g1_ppo_warm", "ok", 2.0)]}
    assert gpu_figures.headline(both)["g1_env_steps_per_s"] == 1.0
    assert gpu_figures.headline(both)["g1_first_iteration_env_steps_per_s"] == 7.0
    learn_failed = {"steps": [step("learn_g1", "failed", 1.0), step("g1_ppo_warm", "ok", 2.0)]}
    assert gpu_figures.headline(learn_failed)["g1_env_steps_per_s"] == 2.0
    neither = {"steps": [step("learn_g1", "ok", None), step("g1_ppo_warm", "ok", None)]}
    assert gpu_figures.headline(neither)["g1_env_steps_per_s"] is None


def test_headline_puts_rlfit_beside_brax_only_where_both_measured(gpu_figures):
    def step(name: str, kind: str, status: str, figures: dict) -> dict:
        return {"name": name, "kind": kind, "status": status, "figures": figures}

    record = {"steps": [step("cartpole_ppo_playground", "train", "ok", {"env_steps_per_s_median": 600.0}),
                        step("brax_cartpole", "brax", "ok", {"brax_sps_median": 400.0}),
                        step("learn_g1", "learn", "ok", {"env_steps_per_s_median": 80.0}),
                        step("brax_g1", "brax", "not available", {})]}
    found = gpu_figures.headline(record)
    assert found["rlfit_over_brax_cartpole"] == 1.5 and found["rlfit_over_brax_g1"] is None
    assert found["brax_status"] == {"brax_cartpole": "ok", "brax_g1": "not available"}
    assert found["cartpole_over_playground_a100"] == pytest.approx(600 / 718_626)
    assert found["learn_published_reward"] is None  # never a number unless one is found and cited


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
    """The script end to end on this CPU (toy environment), two steps only (`--steps`): those measure, the others
    are not reached, and the script's own check of its JSON passes (exit 0)."""
    out = tmp_path / "gpu"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--dry-run", "--deadline", "75",
                           "--steps", "doctor", "learn_g1", "--out", str(out)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "RLFIT_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.perf_counter() - started < 75 + 15
    record = json.loads((out / "gpu_check.json").read_text())
    steps = {step["name"]: step for step in record["steps"]}
    assert [step["name"] for step in record["steps"]][:5] == ["doctor", "learn_cheetah_run", "learn_g1",
                                                              "t4_g1_plan", "t4_g1_1024"]
    assert steps["doctor"]["status"] == "ok" and steps["doctor"]["figures"]["device"]["platform"] == "cpu"
    g1 = steps["learn_g1"]
    assert g1["status"] == "ok", g1["note"]
    assert g1["figures"]["plan"]["impl"] == "jax" and g1["figures"]["time_to_first_step_s"] > 0
    assert json.loads((out / "runs" / "learn_g1" / "summary.json").read_text())["time_to_first_step_s"] == \
        g1["figures"]["time_to_first_step_s"]
    assert g1["figures"]["eval_curve"][-1]["reward"] == g1["figures"]["final_eval_reward"]  # an evaluation each iteration
    starting = g1["figures"]["starting_state"]  # the starting state's program, its compile split (compile_stages.py)
    assert starting["xla_compile_count"] == 1 and starting["tracing_count"] >= 1 and starting["lowering_count"] >= 1
    assert starting["program_compile_s"] >= starting["xla_compile_s"] > 0
    assert (out / "runs" / "learn_g1" / "plan.json").is_file() and (out / "logs" / "learn_g1.log").is_file()
    assert steps["learn_cheetah_run"]["status"] == "not reached"
    assert steps["learn_cheetah_run"]["note"] == "left out by --steps"
    assert record["transfer"]["working_tree_bytes"] > 0 and record["headline"]["g1_cold_time_to_first_step_s"] == \
        g1["figures"]["time_to_first_step_s"]


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
    assert ("no step 'g1_ppo_hot': choose from 'learning', 't4', 't4_1024', 'brax', 'line', 'earlier', 'doctor'"
            in done.stderr)
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
def test_the_randomization_steps_pass_settings_rlfit_accepts(gpu_check, gpu_steps, monkeypatch, on, setting):
    """The G1 steps with and without randomization ask for `env.randomization` values the config accepts."""
    from types import SimpleNamespace

    from rlfit.config.schema import resolve

    taken = {}
    monkeypatch.setattr(gpu_steps, "has_config_key", lambda ctx, section, key: True)
    monkeypatch.setattr(gpu_steps, "train", lambda ctx, name, box_s, argv, cache: taken.setdefault("argv", argv) and {})
    ctx = SimpleNamespace(setup=gpu_check.GPU)
    gpu_steps.randomization(ctx, "g1_randomization", 60.0, on)
    argv = taken["argv"]
    assert argv[-2:] == ["--set", f"env.randomization={setting}"]
    overrides = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    config = resolve("CartpoleBalance", "g1", overrides=overrides)  # the g1 preset at Playground's G1 sizes
    assert config.env.randomization == setting and config.ppo.num_envs == 8192 and config.ppo.batch_size == 256


def test_steps_named_by_group_by_prefix_or_by_default(gpu_check):
    order = gpu_check.steps(gpu_check.GPU)
    default, unknown = gpu_check.chosen(order, None)
    assert unknown == [] and {"doctor", "learn_cheetah_run", "learn_g1", "t4_g1_plan", "brax_g1"} <= default
    assert not default & {"g1_ppo_warm", "memory_prediction", "fasttd3_g1", "g1_randomization_on"}
    assert not any(name.startswith("trace_bound") for name in default)  # measured once: only when named
    t4, _ = gpu_check.chosen(order, ["t4"])
    assert t4 == {"doctor", "t4_g1_plan"}
    traced, unknown = gpu_check.chosen(order, ["trace_bound", "g1_ppo_hot"])
    assert len(traced) == 3 and all(name.startswith("trace_bound ") for name in traced) and unknown == ["g1_ppo_hot"]
    lines, _ = gpu_check.chosen(order, ["line"])
    assert lines == {"doctor", "line learn_cheetah_run", "line learn_g1", "line t4_g1_1024",
                     "line cartpole_ppo_playground"}
    assert not any(name.startswith("line ") for name in default)  # only when named


def test_the_line_headline_sets_each_estimate_beside_its_steps_peak(gpu_figures):
    """Made-up figures: 110 B estimated against a 100 B peak in the same record is +10%; a step whose run is in an
    earlier call's record takes its peak from there; a run not measured gives no error."""
    def step(name, kind, figures, status="ok"):
        return {"name": name, "kind": kind, "status": status, "figures": figures}

    record = {"steps": [step("learn_g1", "learn", {"device_peak_bytes": 100}),
                        step("line learn_g1", "line", {"against_step": "learn_g1", "estimate_bytes": 110}),
                        step("line t4_g1_1024", "line", {"against_step": "t4_g1_1024", "estimate_bytes": 180}),
                        step("line cartpole_ppo_playground", "line",
                             {"against_step": "cartpole_ppo_playground", "estimate_bytes": 7})]}
    earlier = {"steps": [step("t4_g1_1024", "t4", {"device_peak_bytes": 200})]}
    found = gpu_figures.line_headline(record, earlier)
    assert found["learn_g1"]["estimate_over_peak_minus_1"] == pytest.approx(0.10)
    assert found["t4_g1_1024"] == {"estimate_bytes": 180, "device_peak_bytes": 200,
                                   "estimate_over_peak_minus_1": pytest.approx(-0.10)}
    assert found["cartpole_ppo_playground"]["estimate_over_peak_minus_1"] is None


def test_each_group_starts_its_steps_within_one_call(gpu_check):
    """Every step of a group starts before the GPU deadline, each at its full box or, the last, what is left (at
    least half its box): one call of 490 s reaches every step of it."""
    setup, order = gpu_check.GPU, gpu_check.steps(gpu_check.GPU)
    for group in ("learning", "t4", "t4_1024", "brax", "line"):
        members = gpu_check.chosen(order, [group])[0]  # a group's member may name several steps (`line`)
        boxes = [setup.boxes[step.box] for step in order if step.name in members]
        before_last = sum(boxes[:-1]) + setup.grace_s
        assert setup.deadline_s - before_last >= boxes[-1] / 2, (group, boxes)


def test_learning_figures_give_the_curve_and_the_share_of_playgrounds_steps(gpu_figures, tmp_path):
    rows = train_rows() + [{"kind": "eval", "iteration": 4, "env_steps": 4000, "eval/episode_reward": 5.0,
                            "eval/episode_reward_std": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    found = gpu_figures.learn_figures(tmp_path, "cheetah_run")
    assert [(point["env_steps"], point["reward"]) for point in found["eval_curve"]] == [(2000, 3.0), (4000, 5.0)]
    assert found["share_of_published_timesteps"] == pytest.approx(4000 / 60_000_000)
    assert found["published_reward"] is None and gpu_figures.REFERENCE["g1"]["published_curve"] is None


def test_the_t4_cap_makes_rlfit_budget_what_jax_leaves_a_process_on_a_t4(gpu_steps, gpu_figures):
    """Under the cap, rlfit's own GPU budget on the H200 of the first run is the T4's pool: 0.75 of 15 GiB."""
    from rlfit.hardware.xla_memory import gpu_budget, read_xla_memory_settings

    h200 = 150_754_820_096
    variables = gpu_steps.t4_variables(h200)
    budget, _ = gpu_budget(h200, None, read_xla_memory_settings(variables))
    assert budget == pytest.approx(0.75 * 15 * 2**30, rel=1e-5)
    assert gpu_steps.t4_variables(None) == {}  # a CPU: no pool to cap
    assert gpu_steps.t4_variables(8 * 2**30) == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.000000"}


@pytest.mark.parametrize(("peak", "backend", "out_of_memory", "fits", "in_effect"), [
    (6 * 2**30, "gpu", False, True, True), (12 * 2**30, "gpu", False, False, True), (None, "gpu", True, False, True),
    (None, "cpu", False, None, False), (2**20, "cpu", False, True, False)])
def test_t4_figures_say_whether_the_run_fit_the_pool(gpu_figures, peak, backend, out_of_memory, fits, in_effect):
    figures = {"device_peak_bytes": peak, "plan": {"backend": backend}}
    found = gpu_figures.t4_figures(figures, 150_754_820_096, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.080127"},
                                   out_of_memory)
    assert found["fits"] is fits and found["cap_in_effect"] is in_effect and found["mem_fraction"] == 0.080127
    assert found["peak_over_pool"] == (None if peak is None else peak / (0.75 * 15 * 2**30))


def brax_callbacks() -> list[dict]:
    """The evaluation before training, a first epoch that compiled, then two steady epochs of 1,000 steps."""
    return [{"t_s": 5.0, "step": 0, "eval_reward": 1.0, "brax_training_sps": None},
            {"t_s": 65.0, "step": 1000, "eval_reward": 2.0, "brax_training_sps": 20.0},
            {"t_s": 67.0, "step": 2000, "eval_reward": 3.0, "brax_training_sps": 600.0},
            {"t_s": 70.0, "step": 3000, "eval_reward": 4.0, "brax_training_sps": 400.0}]


def test_brax_figures_leave_out_the_first_epoch_and_count_the_wall_clock_after_it(gpu_figures):
    found = gpu_figures.brax_figures({"callbacks": brax_callbacks(), "shim": "restored",
                                      "settings": {"env": "CartpoleBalance", "ppo": {"num_envs": 2048},
                                                   "steps_per_iteration": 1000, "eval_every": 1}})
    assert found["brax_sps_median"] == 500.0  # median of 600 and 400; the compiling epoch (20) left out
    assert found["wall_env_steps_per_s"] == pytest.approx(2000 / 5.0)  # steps 1000 -> 3000 in 65 s -> 70 s
    assert found["env_steps"] == 3000 and found["final_eval_reward"] == 4.0 and found["callbacks"] == 4
    assert found["time_to_first_training_progress_s"] == 65.0 and found["shim"] == "restored"
    early = gpu_figures.brax_figures({"callbacks": brax_callbacks()[:2]})
    assert early["brax_sps_median"] is None and early["wall_env_steps_per_s"] is None


def test_a_brax_that_cannot_run_here_is_not_available_with_its_reason(gpu_steps, gpu_check, tmp_path, monkeypatch):
    def child(argv, env, box_s, grace_s, log, stdout=None):
        log.write_text("")
        Path(argv[4]).write_text(json.dumps({"available": False, "callbacks": [], "reason":
                                             "AttributeError: module 'jax' has no attribute 'device_put_replicated'"}))
        return gpu_steps.Boxed(0, 1.0, False)

    monkeypatch.setattr(gpu_steps, "run_boxed", child)
    setup = gpu_check.dry_setup(gpu_check.TOY_ENV)
    ctx = gpu_check.Context(setup, sys.executable, {}, tmp_path, tmp_path, time.perf_counter())
    entry = gpu_steps.brax(ctx, "brax_g1", 30.0)
    assert entry["status"] == "not available" and "device_put_replicated" in entry["note"]
    assert entry["argv"][-1] == "--no-shim"  # the dry run leaves this JAX as it is


def test_gpu_brax_restores_device_put_replicated_for_one_device_and_knows_what_is_not_available(monkeypatch):
    import jax

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    gpu_brax = importlib.import_module("gpu_brax")
    assert gpu_brax.not_available(ImportError("no module named brax"))
    assert gpu_brax.not_available(AttributeError("module 'jax' has no attribute 'device_put_replicated'"))
    assert not gpu_brax.not_available(AttributeError("'NoneType' object has no attribute 'shape'"))
    if hasattr(jax, "device_put_replicated"):
        pytest.skip("this JAX still has device_put_replicated")
    try:
        assert gpu_brax.restore_device_put_replicated() == gpu_brax.SHIM_NOTE
        placed = jax.device_put_replicated({"w": jax.numpy.arange(3.0)}, jax.local_devices()[:1])
        assert placed["w"].shape == (1, 3)
        assert jax.pmap(lambda tree: tree["w"] * 2)(placed).tolist() == [[0.0, 2.0, 4.0]]  # as Brax's pmap uses it
    finally:
        delattr(jax, "device_put_replicated")  # the shim stays out of the other tests


@pytest.mark.parametrize(("env_field", "argv_field", "suite"), [
    ("learn_env", "learn_argv", "dm_control_suite_params"), ("g1", "g1_learn_argv", "locomotion_params")])
def test_the_learning_steps_train_at_playgrounds_published_settings(gpu_check, env_field, argv_field, suite):
    """What the GPU's learning steps run, resolved as rlfit resolves it, against Playground's own brax_ppo_config."""
    from rlfit.config.schema import resolve

    env, argv = getattr(gpu_check.GPU, env_field), list(getattr(gpu_check.GPU, argv_field))
    published = importlib.import_module(f"mujoco_playground.config.{suite}").brax_ppo_config(env)
    preset = argv[argv.index("--preset") + 1]
    config = resolve(env, preset, overrides=[argv[i + 1] for i, word in enumerate(argv) if word == "--set"])
    for key in ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_updates_per_batch",
                "learning_rate", "entropy_cost", "discounting", "reward_scaling"):
        assert getattr(config.ppo, key) == published[key], key
    assert config.run.num_timesteps == published.num_timesteps
    assert gpu_check.REFERENCE[{"learn_env": "cheetah_run", "g1": "g1"}[env_field]]["published_num_timesteps"] == \
        published.num_timesteps
    assert config.run.eval_every == gpu_check.EVAL_EVERY  # the one change: evaluations often enough for a curve
