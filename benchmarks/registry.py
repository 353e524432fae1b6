"""The benchmark suite's registry: every runnable script under benchmarks/, what it measures, which part of the
documentation quotes its figures, where it runs, how long it takes, its results JSON and which reader
(benchmarks/figure_readers.py) reads the figures out of it. `python -m benchmarks` (benchmarks/__main__.py) lists and
runs the scripts and writes FIGURES.md from here.

Pure data: no JAX, no rlfit, nothing run at import. The scripts stay plain files run as `python benchmarks/NAME.py`;
this module does not import them. The types are in benchmarks/benchmark_types.py, the results files' look-up in
benchmarks/results_files.py.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.benchmark_types import Benchmark, Source
from benchmarks.figure_readers import (
    algo_compare_figures,
    cli_startup_figures,
    deploy_time_figures,
    brax_ppo_figures,
    brax_sac_figures,
    checkpoint_figures,
    cpu_compile_figures,
    encoder_parity_figures,
    encoders_figures,
    eval_compile_figures,
    first_step_figures,
    gc_thresholds_figures,
    gpu_figures,
    jax_versions_figures,
    kill9_figures,
    make_test_time_figures,
    memory_prediction_figures,
    plan_fit_check_figures,
    plan_time_figures,
    planner_sweep_figures,
    pointmass_figures,
    protocol_report_figures,
    quickstart_figures,
    render_figures,
    resume_compile_figures,
    scaling_figures,
    seeds_vmap_figures,
    suite_figures,
    throughput_figures,
    trace_bound_figures,
)


BENCH_DIR = Path(__file__).resolve().parent
BRAX_VENV = "benchmarks/.venv-brax"
"""Brax's own venv (jax 0.9), which brax_compare.py builds from brax-requirements.txt when missing."""

CATEGORIES = {
    "Brax parity": "rlfit against a reference implementation (Brax's trainers, torchvision, Hugging Face) at the "
                   "same settings",
    "learning": "how good: the reward a preset reaches, in how long, on how many seeds",
    "speed": "how fast: env steps, frames or updates a second, and what each part costs",
    "first step": "from the command to the first training step: imports, planning, compiling, caches",
    "planner accuracy": "the planner's predicted memory and choice of sizes against what was measured",
    "robustness": "kill -9, resume, checkpoints: what is lost and what stays whole",
    "GPU": "the figures only a GPU machine gives, from one prepared command",
}
"""Each category's one-line meaning, in the order `list` and FIGURES.md show them."""


LIBRARIES = {
    "results_files.py": "the newest results JSON a source names, and a record's provenance",
    "figure_readers.py": "the figures of each kind of results JSON, one reader per kind",
    "benchmark_types.py": "the registry's types: a benchmark, a results source, a figure, its provenance",
    "common.py": "shared helpers: machine context, JSON records, tables, timed subprocesses",
    "brax_child.py": "the Brax side of brax_compare.py, suite.py and first_step.py, run inside benchmarks/.venv-brax",
    "brax_iteration_reference.py": "brax_reference.py's whole-iteration fixture: Brax's `ppo.train` on the toy env",
    "brax_toy_env.py": "a pure-JAX toy environment both Brax's `ppo.train` and rlfit's VecEnv run (brax_ppo_iteration)",
    "suite_report.py": "suite.py's arithmetic and README table",
    "protocol_runs.py": "a comparison protocol read and checked, and the runs it declares taken from the suite's files",
    "protocol_decisions.py": "the protocol's decision rules applied to protocol_report.py's figures",
    "quoted_figures.py": "the check that every figure the documentation quotes still matches its results JSON",
    "reset_variant_train.py": "`rlfit` with the training resets changed, for pointmass_collapse.py's variants",
    "gpu_bundle.py": "the wheels and assets that travel to the GPU machine for gpu_check.py, and their install",
    "gpu_figures.py": "gpu_check.py's figures and the check of its record",
    "compile_stages.py": "a program's compile split into tracing, lowering and XLA's compile from JAX's log "
                         "(first_step.py, gpu_check.py)",
    "gpu_steps.py": "gpu_check.py's steps: each a child process in a time box of its own",
    "gpu_brax.py": "Brax's PPO at an rlfit preset's settings in rlfit's interpreter, for gpu_check.py's brax steps",
    "registry.py": "this registry",
    "figures_page.py": "FIGURES.md and the README's table, generated from the registry",
    "__main__.py": "the runner: python -m benchmarks list | run | figures",
    "__init__.py": "makes benchmarks/ a package for python -m benchmarks",
}
"""Modules under benchmarks/ that are not benchmarks: imported or run by the scripts, never run alone for figures."""


# --- extractors: one per kind of JSON, each a pure function of the record -----------------------------------------


# --- the registry ---------------------------------------------------------------------------------------------------

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("quickstart", "learning", "`rlfit train ENV --preset P` as a user runs it: final eval reward and wall "
              "clock against the issue targets (PPO, SAC, FastTD3, pixels)",
              ("README.md (first command)", "docs/algorithms/ppo.md", "docs/algorithms/sac.md",
               "docs/algorithms/fasttd3.md", "docs/pixels.md", "docs/configuration.md (preset for the device)"),
              "cpu", "PPO quick 1.5-1.8 a seed; SAC quick 3.4-3.7 a seed; FastTD3 quick 8.4-9.4 a seed (loaded); "
              "SAC pixels 46 a seed", "methods/quickstart.md",
              (Source("quickstart.json", quickstart_figures), Source("quickstart_sac.json", quickstart_figures),
               Source("quickstart_fasttd3.json", quickstart_figures),
               Source("quickstart_sac_pixels_lr5e-4.json", quickstart_figures))),
    Benchmark("throughput", "speed", "simulator against trainer env steps/s at one num_envs",
              ("docs/architecture.md",), "any", "not measured", "methods/throughput.md",
              (Source("throughput.json", throughput_figures),)),
    Benchmark("brax_compare", "Brax parity", "rlfit against Brax's `ppo.train` / `sac.train` at the same settings",
              ("docs/algorithms/ppo.md", "docs/algorithms/sac.md"), "cpu",
              "PPO 2.5 (one seed); SAC 29 an environment (3 seeds)", "methods/brax_compare.md",
              (Source("brax_compare.json", brax_ppo_figures), Source("brax_compare_sac_CartpoleBalance.json", brax_sac_figures),
               Source("brax_compare_sac_ReacherEasy.json", brax_sac_figures)), needs=BRAX_VENV),
    Benchmark("brax_reference", "Brax parity", "Brax's own PPO and SAC losses and updates on fixed inputs, and two "
              "whole iterations of its `ppo.train` on a toy environment, saved as the tests' fixtures "
              "(tests/algos/{ppo,sac}/fixtures)", ("docs/algorithms/ppo.md", "docs/algorithms/sac.md"),
              "cpu", "not measured", "methods/brax_reference.md", (), quick="",
              quick_exempt="writes the tests' fixtures in the Brax venv; the tests that read them are its check"),
    Benchmark("encoder_parity", "Brax parity", "rlfit's r3d18 and timesformer against torchvision and Hugging Face",
              ("docs/pixels.md",), "cpu", "not measured", "methods/encoder_parity.md",
              (Source("encoder_parity.json", encoder_parity_figures),), needs="torch"),
    Benchmark("suite", "Brax parity", "PPO's quick preset on the DM Control suite, rlfit seeds 0-2 and Brax seeds 0-1",
              ("docs/algorithms/ppo.md",), "cpu", "hours, in sittings (2.4-27 a run by environment, estimated)",
              "methods/suite.md", (Source("suite_8ep_brax.json", suite_figures),), quick="--quick --envs CartpoleBalance",
              needs=BRAX_VENV),
    Benchmark("protocol_report", "Brax parity", "a comparison declared before its runs (benchmarks/protocols/): "
              "only the runs at its seeds, per environment and as rliable's IQM and probability of improvement with "
              "stratified bootstrap intervals, its decisions, and the runs used, outside it and missing",
              ("docs/algorithms/ppo.md",), "cpu",
              "0.2 (13 s at load 8.9, FIGURES.md's refresh included; the runs are suite.py's)",
              "methods/protocol_report.md", (Source("quick_preset_2026_12_report.json", protocol_report_figures),)),
    Benchmark("jax_versions", "Brax parity", "the same physics step and update under rlfit's JAX and Brax's",
              ("docs/architecture.md",), "cpu", "7 (G1, 64 envs)", "methods/first_step.md",
              (Source("jax_versions_G1JoystickFlatTerrain_n64.json", jax_versions_figures),
               Source("jax_versions_CartpoleBalance_n512.json", jax_versions_figures)),
              one_off="how much of the rlfit-vs-Brax G1 speed gap is the JAX release (issue 29)", needs=BRAX_VENV),
    Benchmark("pointmass_collapse", "learning", "the quick preset per seed with its eval and value-loss curves: does "
              "PPO learn and then collapse?", ("docs/algorithms/ppo.md",), "cpu", "2.3-4.8 a run (82 iterations)",
              "methods/pointmass_collapse.md", (Source("pointmass_collapse.json", pointmass_figures),)),
    Benchmark("algo_compare", "learning", "FastTD3, SAC and PPO at equal wall clock, with the report's statistics",
              ("docs/algorithms/fasttd3.md",), "cpu", "48 (3 envs x 3 seeds, 4-minute budgets)", "methods/algo_compare.md",
              (Source("algo_compare_quiet.json", algo_compare_figures),)),
    Benchmark("first_step", "first step", "process start to the end of the first iteration, phase by phase: cold, warm, "
              "resumed, Brax beside it", ("docs/guarantees.md (fast restart)",), "cpu",
              "10 (CartpoleBalance quick, loaded); 48 (G1, 64 envs)", "methods/first_step.md",
              (Source("first_step_CartpoleBalance_quick_shapes.json", first_step_figures),
               Source("first_step_G1JoystickFlatTerrain_g1_n64.json", first_step_figures)), needs=BRAX_VENV),
    Benchmark("plan_time", "first step", "`rlfit plan` wall time and compiles; `--num-envs auto` against a plain train",
              ("docs/planning.md",), "cpu", "1.5 (CartpoleBalance quick: plan 18.1 + auto 37.5 + plain 36.7 s); "
              "17 (G1: 66.7 + 493.9 + 473.5 s)",
              "methods/plan_time.md",
              (Source("plan_time_G1JoystickFlatTerrain_g1_bound.json", plan_time_figures),
               Source("plan_time_G1JoystickFlatTerrain_g1_bound_auto_plain.json", plan_time_figures),
               Source("plan_time_CartpoleBalance_quick_bound_plan.json", plan_time_figures))),
    Benchmark("gc_thresholds", "first step", "CPU seconds to import, build and trace a training step under Python's "
              "garbage-collector thresholds and rlfit's", ("docs/architecture.md",), "cpu",
              "4 (CartpoleBalance and G1, 5 repeats)", "methods/gc_thresholds.md",
              (Source("gc_thresholds.json", gc_thresholds_figures),)),
    Benchmark("eval_compile", "first step", "the evaluation program's cold compile alone, per environment",
              ("docs/planning.md",), "cpu", "7 (3 envs, 2 repeats)", "methods/eval_compile.md",
              (Source("eval_compile_after.json", eval_compile_figures),),
              one_off="what the evaluation without a reset saves (issue 29, item 4)"),
    Benchmark("resume_compile", "first step", "compile_s of a first and a resumed session, fresh compile cache",
              ("docs/guarantees.md (fast restart)",), "cpu", "not measured", "methods/resume_compile.md",
              (Source("resume_compile.json", resume_compile_figures),)),
    Benchmark("memory_prediction", "planner accuracy", "predicted against measured peak memory of one iteration",
              ("docs/planning.md",), "any", "not measured on the CPU; over 9 on an H100 (cut at 560 s after one environment)",
              "methods/memory_prediction.md",
              (Source("memory_prediction_cpu.json", memory_prediction_figures),
               Source("memory_prediction_gpu.json", memory_prediction_figures))),
    Benchmark("plan_fit_check", "planner accuracy", "the planner's line from its probes against XLA and the line before",
              ("docs/planning.md",), "cpu", "6", "methods/plan_time.md",
              (Source("plan_fit_check.json", plan_fit_check_figures),),
              one_off="whether the cheaper probes' line chooses the sizes the line before chose (issue 29, item 3)"),
    Benchmark("planner_sweep", "planner accuracy", "the planner's choice per memory budget against a num_envs sweep",
              ("docs/planning.md",), "any", "not measured", "methods/planner_sweep.md",
              (Source("planner_sweep_cpu.json", planner_sweep_figures),)),
    Benchmark("trace_bound", "planner accuracy",
              "the planner's estimate and the bound read from the lowered step against XLA's analysis",
              ("docs/planning.md",), "any", "3 (6 cases)", "methods/trace_bound.md",
              (Source("trace_bound.json", trace_bound_figures), Source("trace_bound_sizes.json", trace_bound_figures))),
    Benchmark("kill9_stress", "robustness", "`kill -9` at random instants, then `rlfit resume`: work lost, files whole",
              ("docs/guarantees.md",), "cpu", "not measured", "methods/kill9_stress.md",
              (Source("kill9_stress.json", kill9_figures),)),
    Benchmark("checkpoint_save", "robustness", "seconds to save and load a whole training state, checksums' share",
              ("docs/devices.md",), "cpu", "not measured", "methods/checkpoint_save.md",
              (Source("checkpoint_save.json", checkpoint_figures),)),
    Benchmark("make_test_time", "speed", "`make test` in a fresh clone: wall and CPU time, seconds per test file",
              ("README.md (two commands)", "docs/getting-started.md"), "cpu", "about 30 (one `make test`)",
              "methods/make_test_time.md", (Source("make_test_time.json", make_test_time_figures),)),
    Benchmark("deploy_time", "speed", "`rlfit export` with its bundle, `rlfit sim2sim` and `--sweep` on a G1 smoke run",
              ("docs/deployment.md",), "cpu", "6 (3 commands, load 15-20)", "methods/deploy_time.md",
              (Source("deploy_time.json", deploy_time_figures),), quick="",
              quick_exempt="it times G1 commands (minutes); tests/deploy/controller and tests/run/test_g1.py run "
                           "each of them at small sizes"),
    Benchmark("cli_startup", "speed", "how long `rlfit --help`, `--version`, a bad option and a missing run directory "
              "take, against `python -c pass`", ("benchmarks/README.md",), "cpu",
              "0.3 (7 repeats, load 4); 2 on main before item 7 (5 repeats, load 4-6)",
              "methods/cli_startup.md", (Source("cli_startup_before.json", cli_startup_figures),
                                                Source("cli_startup.json", cli_startup_figures))),
    Benchmark("render_throughput", "speed", "frames/s of rlfit's JAX camera against `mujoco.Renderer`",
              ("docs/pixels.md",), "cpu", "not measured", "methods/render_throughput.md",
              (Source("render_throughput.json", render_figures),)),
    Benchmark("encoders", "speed", "video encoders: parameters, forward+backward time, XLA's memory plan",
              ("docs/pixels.md",), "cpu", "not measured", "methods/encoders.md", (Source("encoders.json", encoders_figures),)),
    Benchmark("cpu_compile_options", "speed", "XLA's default convolutions and options against rlfit's on a CPU",
              ("docs/pixels.md",), "cpu", "not measured", "methods/cpu_compile_options.md",
              (Source("cpu_compile_options.json", cpu_compile_figures),)),
    Benchmark("seeds_vmap", "speed", "8 seeds in one vmapped program against one after another",
              ("docs/experiments.md",), "cpu", "5.8 (8 seeds, 10 iterations, both ways)", "methods/seeds_vmap.md",
              (Source("seeds_vmap.json", seeds_vmap_figures),)),
    Benchmark("scaling", "speed", "one run split over 1, 2 and 4 devices: env steps/s, memory per device",
              ("docs/devices.md",), "any", "not measured", "methods/scaling.md", (Source("scaling.json", scaling_figures),)),
    Benchmark("gpu_check", "GPU", "on a GPU machine, one prepared command of at most 9 minutes a group: CheetahRun "
              "and G1 trained at Playground's settings; G1 in a T4's memory; Brax beside rlfit; the earlier steps",
              ("docs/devices.md", "docs/planning.md"), "gpu", "9 (its own deadline)", "methods/gpu_check.md",
              (Source("gpu/gpu_check.json", gpu_figures),), quick="",
              quick_exempt="GPU only; its CPU rehearsal (`--dry-run`) runs in tests/benchmarks/test_gpu_check.py"),
)
"""Every benchmark, in the order `list` shows them within a category."""

QUICK_MEASURED = {
    "algo_compare": "32 s, load 7.3-8.0",
    "brax_compare": "173 s, load 5.9-7.4",
    "checkpoint_save": "12 s, load 9.6-9.8",
    "cli_startup": "106 s, load 18.2-21.9 (2026-12-06: 15 processes of about 0.4 CPU s each)",
    "cpu_compile_options": "25 s, load 8.8-9.2",
    "encoders": "14 s, load 6.1-6.2",
    "eval_compile": "7 s, load 10.4-10.2",
    "first_step": "142 s, load 7.4-7.2",
    "jax_versions": "125 s, load 6.8-6.8",
    "kill9_stress": "8 s, load 5.4-5.4",
    "make_test_time": "1 s, load 10.1-10.1",
    "memory_prediction": "18 s, load 7.9-8.8",
    "plan_fit_check": "18 s, load 9.0-10.0",
    "plan_time": "28 s, load 10.5-13.1",
    "planner_sweep": "11 s, load 0.5",
    "pointmass_collapse": "7 s, load 3.7",
    "protocol_report": "8 s, load 9.1-9.3",
    "quickstart": "26 s, load 10.8-9.6",
    "render_throughput": "30 s, load 6.7-6.4",
    "resume_compile": "31 s, load 10.3-9.9",
    "scaling": "16 s, load 6.7-6.4",
    "seeds_vmap": "39 s, load 7.7-7.8",
    "suite": "270 s, load 7.2-7.9",
    "throughput": "21 s, load 6.4-6.7",
    "trace_bound": "13 s, load 10.2-10.3",
}
"""Each quick check timed once on the 2-core CPU (`/usr/bin/time`, wall seconds, a fresh compile cache), with the
1-minute load at its start and end: on 2026-11-28 after issue 48 (item 5) made them cheaper, on 2026-11-27 for those
needing Brax's venv (brax_compare, first_step, jax_versions, suite); algo_compare, cpu_compile_options,
kill9_stress, memory_prediction and plan_fit_check again on 2026-11-28 after item 6 cut their quick checks (in
tests/benchmarks/test_every_quick_check.py: the test's seconds, the load from the script's record; of these only
plan_fit_check reads the test session's compile cache, memory_prediction's probes); kill9_stress and pointmass_collapse
again in that test on 2026-11-28 after they moved to the smoke preset's programs, which quickstart's check compiles
into the test session's cache and they read (load 4-5); planner_sweep again on 2026-11-28 at 20:07 UTC after its
planner's run became the sweep's point (one training process instead of two; quiet, its default cache warm).
Other engineers' jobs and a long benchmark shared the two cores throughout, so a quiet machine takes less."""
BENCHMARKS = tuple(benchmark._replace(quick_seconds=QUICK_MEASURED.get(benchmark.name, benchmark.quick_seconds))
                   for benchmark in BENCHMARKS)


def by_name() -> dict[str, Benchmark]:
    """The registry keyed by script name (no `.py`)."""
    return {benchmark.name: benchmark for benchmark in BENCHMARKS}
