"""The benchmark suite's registry: every runnable script under benchmarks/, what it measures, which part of the
documentation quotes its figures, where it runs, how long it takes, its results JSON and how to read the figures out
of it. `python -m benchmarks` (benchmarks/__main__.py) lists and runs the scripts and writes FIGURES.md from here.

Pure data and pure functions of JSON records: no JAX, no rlfit, nothing run at import. The scripts stay plain
files run as `python benchmarks/NAME.py`; this module does not import them.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
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


class Figure(NamedTuple):
    """One figure a JSON backs: what is claimed, its value (as the README writes it) and its unit."""

    claim: str
    value: str
    unit: str
    origin: dict | None = None
    """The part of the record this figure comes from where it has its own command and date (one run of several)."""


class Provenance(NamedTuple):
    """Where a figure comes from: the JSON's command, date, commit, the machine it ran on and its load."""

    command: str
    date: str
    commit: str
    device: str
    load: str


class Source(NamedTuple):
    """A results JSON (a path under results/, or a glob whose newest file by `date` counts) and its extractor."""

    pattern: str
    extract: Callable[[dict], list[Figure]]


class Benchmark(NamedTuple):
    """One runnable script: `python benchmarks/{name}.py` (`python -m benchmarks run {name}`)."""

    name: str
    category: str
    measures: str
    backs: tuple[str, ...]
    """The documentation that quotes its figures: docs pages (and sections), README sections."""
    device: str
    """cpu, gpu or any."""
    minutes: str
    """A full run on the 2-core CPU, from the README's measured figures, or "not measured"."""
    section: str
    """The benchmarks README's method section (its anchor)."""
    sources: tuple[Source, ...] = ()
    quick: str = "--quick"
    """The arguments of its short check, or "" where it has none (`quick_exempt` says why)."""
    quick_exempt: str = ""
    quick_seconds: str = "not measured"
    """One run of the short check on the 2-core CPU, measured (`/usr/bin/time`), with the load it ran at."""
    one_off: str = ""
    """Set for a one-off investigation: the question it answered (it stays runnable for its decision record)."""
    needs: str = ""
    """What it needs beyond rlfit's environment: "torch", or a path such as benchmarks/.venv-brax (Brax's venv)."""


LIBRARIES = {
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
    "gpu_steps.py": "gpu_check.py's steps: each a child process in a time box of its own",
    "gpu_brax.py": "Brax's PPO at an rlfit preset's settings in rlfit's interpreter, for gpu_check.py's brax steps",
    "registry.py": "this registry",
    "figures_page.py": "FIGURES.md and the README's table, generated from the registry",
    "__main__.py": "the runner: python -m benchmarks list | run | figures",
    "__init__.py": "makes benchmarks/ a package for python -m benchmarks",
}
"""Modules under benchmarks/ that are not benchmarks: imported or run by the scripts, never run alone for figures."""


def _num(value: float | None, digits: int = 1) -> str:
    """A figure as the README writes it: thousands separated, `digits` decimals; '-' for None."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _per_seed(values: Sequence[float | None], digits: int = 1) -> str:
    return " / ".join(_num(v, digits) for v in values)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# --- extractors: one per kind of JSON, each a pure function of the record -----------------------------------------

def quickstart_figures(record: dict) -> list[Figure]:
    runs = record["runs"]
    target = record.get("target") or {}
    argv = runs[0].get("argv", [])
    option = {flag: argv[argv.index(flag) + 1] for flag in ("--algo", "--preset") if flag in argv[:-1]}
    what = f"{argv[2] if len(argv) > 2 else ''} {option.get('--algo', 'ppo')} {option.get('--preset', '')}".strip()
    seeds = ", ".join(str(run["seed"]) for run in runs)
    figures = [Figure(f"{what}: final eval reward, seeds {seeds}", _per_seed([run.get("final_eval_reward") for run in runs]),
                      "reward"),
               Figure(f"{what}: wall clock per seed, compile included",
                      _per_seed([run.get("total_wall_s") for run in runs]), "s")]
    if target.get("final_eval_reward_at_least") is not None:
        met = sum((run.get("final_eval_reward") or 0) >= target["final_eval_reward_at_least"]
                  and run.get("total_wall_s", 0) < target.get("total_wall_s_below", float("inf")) for run in runs)
        figures.append(Figure(f"{what}: seeds at >= {target['final_eval_reward_at_least']:g} within "
                              f"{target.get('total_wall_s_below', 0):g} s", f"{met} of {len(runs)}", "seeds"))
    return figures


def throughput_figures(record: dict) -> list[Figure]:
    results, ratios = record["results"], record["ratios"]
    return [Figure(f"{name} env steps/s at {record['num_envs']} envs (median call)", _num(results[name]["sps_median"]),
                   "env steps/s") for name in ("raw", "vec_env", "train") if name in results] + [
        Figure("trainer over simulator (train / vec_env)", _num(ratios["train_over_vec_env"], 3), "ratio")]


def brax_ppo_figures(record: dict) -> list[Figure]:
    brax, rlfit = record["brax"], record["rlfit"]
    env = (brax.get("spec") or {}).get("env", "")
    return [Figure(f"{env} PPO: final eval reward, Brax / rlfit (one seed)",
                   f"{_num(brax.get('final_eval_reward'))} / {_num(rlfit.get('final_eval_reward'))}", "reward"),
            Figure(f"{env} PPO: wall clock, whole process, Brax / rlfit", f"{_num(brax['total_wall_s'])} / "
                   f"{_num(rlfit['total_wall_s'])}", "s"),
            Figure(f"{env} PPO: honest env steps/s after compile, training only, Brax / rlfit",
                   f"{_num(brax.get('honest_train_only_sps_after_compile'))} / "
                   f"{_num(rlfit.get('honest_train_only_sps_after_compile'))}", "env steps/s")]


def brax_sac_figures(record: dict) -> list[Figure]:
    summary = record["summary"]
    verdict = summary["verdict"]
    env = record["shared_settings"].get("env", "")
    brax, rlfit = summary["brax"]["final_eval_reward"], summary["rlfit"]["final_eval_reward"]
    return [Figure(f"{env}: final eval reward, Brax / rlfit (mean +- std, seeds {summary['seeds']})",
                   f"{_num(brax['mean'])} +- {_num(brax['std'])} / {_num(rlfit['mean'])} +- {_num(rlfit['std'])}",
                   "reward"),
            Figure(f"{env}: rlfit env steps/s over Brax's, evaluations included (target "
                   f"{verdict['sps_ratio_target']:g})", _num(verdict["sps_ratio"], 2), "ratio")]


def first_step_figures(record: dict) -> list[Figure]:
    verdict = record["verdict"]
    env = record.get("settings", {}).get("env") or record["benchmark"].removeprefix("first_step_")
    figures = [Figure(f"{env}: warm cache, process start to first step end", _num(verdict.get("warm_time_to_first_step_s"), 2),
                      "s"),
               Figure(f"{env}: resumed compile over cold compile", _num(verdict.get("resume_compile_over_cold"), 3),
                      "ratio")]
    if verdict.get("rlfit_cold_over_brax") is not None:
        figures.append(Figure(f"{env}: rlfit cold over Brax, time to first step", _num(verdict["rlfit_cold_over_brax"], 2),
                              "ratio"))
    return figures


def jax_versions_figures(record: dict) -> list[Figure]:
    ratios = record["ratios_rlfit_jax_over_brax_jax"]
    settings = record.get("settings", {})
    where = f"{settings.get('env', '')}, {settings.get('num_envs', '')} envs"
    return [Figure(f"{where}: physics step time, rlfit's JAX over Brax's", _num(ratios["physics"], 2), "ratio"),
            Figure(f"{where}: PPO-sized update time, rlfit's JAX over Brax's", _num(ratios["update"], 2), "ratio")]


def plan_time_figures(record: dict) -> list[Figure]:
    cases = record["cases"]
    where = f"{record['env']} {record['preset']}"
    figures = []
    if "plan" in cases:
        plan = cases["plan"]
        figures.append(Figure(f"{where}: `rlfit plan` wall time ({plan.get('step_compiles')} step compiles)",
                              _num(plan.get("wall_s")), "s"))
    if "auto" in cases and "plain" in cases:
        figures.append(Figure(f"{where}: time to first step, `--num-envs auto` / plain `train`",
                              f"{_num(cases['auto'].get('time_to_first_step_s'))} / "
                              f"{_num(cases['plain'].get('time_to_first_step_s'))}", "s"))
    return figures


def plan_fit_check_figures(record: dict) -> list[Figure]:
    figures = []
    for result in record["results"]:
        errors = [row["now_cpu_probes_vs_xla"] for row in result.get("rows", [])
                  if row.get("now_cpu_probes_vs_xla") is not None]
        if errors:
            figures.append(Figure(f"{result['env']}: CPU probes' line against XLA, worst error",
                                  f"{max(errors, key=abs) * 100:+.2f}", "%"))
        same = result.get("same_choices")
        if same is not None:
            figures.append(Figure(f"{result['env']}: choices the same as the line before's",
                                  f"{same} of {result.get('choices_compared', '?')}", "budgets"))
    return figures


def memory_prediction_figures(record: dict) -> list[Figure]:
    figures = []
    for result in record["results"]:
        errors = [row["line_error"] for row in result.get("rows", []) if row.get("line_error") is not None]
        if errors:
            figures.append(Figure(f"{result['env']} on {record.get('device') or record.get('backend')}: planner's line "
                                  f"against the measured peak ({len(errors)} sizes)",
                                  f"{min(errors) * 100:+.1f} to {max(errors) * 100:+.1f}", "%"))
    return figures


def planner_sweep_figures(record: dict) -> list[Figure]:
    figures = []
    for budget in record["budgets"]:
        ratio = budget.get("ratio_to_best")
        if ratio is None and budget.get("planner_run") and budget.get("best"):
            ratio = budget["planner_run"].get("sps_median", 0) / budget["best"]["sps_median"]
        figures.append(Figure(f"budget {budget['budget']} GiB: planner's choice "
                              f"({budget['chosen']['num_envs']} envs) over the sweep's best env steps/s",
                              _num(ratio, 3), "ratio"))
    return figures


def trace_bound_figures(record: dict) -> list[Figure]:
    ratios = [case["bound_bytes"] / case["xla"]["total_bytes"] for case in record["cases"]]
    return [Figure(f"bound from the lowered step over XLA's analysis ({len(ratios)} cases)",
                   f"{min(ratios):.2f}-{max(ratios):.2f}", "ratio"),
            Figure("never below XLA's analysis", str(record.get("never_below_xla")), "")]


def eval_compile_figures(record: dict) -> list[Figure]:
    return [Figure(f"{env}: cold compile of the evaluation (median)", _num(entry.get("median_compile_s"), 2), "s")
            for env, entry in record["envs"].items()]


def suite_figures(record: dict) -> list[Figure]:
    figures = []
    for env, sides in record.get("per_env", {}).items():
        figures.append(Figure(f"{env}: final eval reward, rlfit (seeds {sides['rlfit']['seeds']}) / Brax "
                              f"(seeds {sides['brax']['seeds']}), means",
                              f"{_num(sides['rlfit'].get('final_mean'))} / {_num(sides['brax'].get('final_mean'))}",
                              "reward"))
    final = record.get("summary", {}).get("final_reward", {})
    if "rlfit_minus_brax" in final:
        envs = record["summary"].get("environments_compared", [])
        figures.append(Figure(f"IQM of rlfit minus Brax over {len(envs)} environments both finished",
                              _num(final["rlfit_minus_brax"].get("iqm")), "reward"))
    return figures


def protocol_report_figures(record: dict) -> list[Figure]:
    """Per comparison (each provisional variant while an adoption is pending): the headline IQMs, their difference
    and the probability of improvement with intervals (scores / 1000), and the decision; then the runs counted."""
    def interval(value: dict) -> str:
        return f"{value['point']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"

    figures = []
    for name, result in record["comparisons"].items():
        variants = result["provisional"].items() if "provisional" in result else [("", result)]
        for choice, c in variants:
            label = f"{name}, if {choice} is adopted (provisional)" if choice else name
            head = c["headline"]
            if "iqm_a" in head:
                where = (f"scores / 1000, {head['runs_a']} / {head['runs_b']} runs over {len(head['environments'])} "
                         "environments")
                figures += [Figure(f"{label}: IQM, {c['a']} / {c['b']} ({where})",
                                   f"{interval(head['iqm_a'])} / {interval(head['iqm_b'])}", ""),
                            Figure(f"{label}: IQM of {c['a']} minus IQM of {c['b']}", interval(head["iqm_difference"]),
                                   ""),
                            Figure(f"{label}: P({c['a']} > {c['b']})", interval(head["probability_of_improvement"]),
                                   "")]
            figures.append(Figure(f"{label}: decision", c["decision"]["text"], ""))
    figures.append(Figure("declared runs: used / missing (outside the protocol, shown apart)",
                          f"{len(record['runs_used'])} / {len(record['runs_missing'])} "
                          f"({len(record['runs_outside_protocol'])})", "runs"))
    return figures


def pointmass_figures(record: dict) -> list[Figure]:
    by_label: dict[str, list[dict]] = {}
    for run in record["runs"].values():
        by_label.setdefault(f"{run['label']} on {run['env']}", []).append(run)
    return [Figure(f"{label}: final / best eval, seeds {[run['seed'] for run in runs]}",
                   ", ".join(f"{_num(run['final_eval_reward'])} / {_num(run['best_eval_reward'])}" for run in runs),
                   "reward", max(runs, key=lambda run: run.get("date", ""))) for label, runs in by_label.items()]


def algo_compare_figures(record: dict) -> list[Figure]:
    figures = []
    for env, stats in record["statistics"].items():
        if not isinstance(stats, dict) or "estimates" not in stats:
            continue
        iqms = {algo: estimate["iqm"] for algo, estimate in stats["estimates"].items()}
        figures.append(Figure(f"{env}: final-policy IQM, " + " / ".join(iqms), " / ".join(_num(v) for v in iqms.values()),
                              "return"))
    target = record.get("target", {})
    if "met" in target:
        figures.append(Figure("FastTD3's IQM at least SAC's on two of three environments", str(target["met"]), ""))
    return figures


def kill9_figures(record: dict) -> list[Figure]:
    resumed = record["repeats"] if record["all_resumed"] else "not all"
    return [Figure("rounds resumed after kill -9", f"{resumed} of {record['repeats']}", "rounds"),
            Figure("most iterations lost by one kill (save interval "f"{record['save_interval']})",
                   str(record["max_lost_iterations"]), "iterations")]


def resume_compile_figures(record: dict) -> list[Figure]:
    return [Figure("compile_s, first session / resumed", f"{_num(record['first_session_compile_s'])} / "
                   f"{_num(record['resumed_session_compile_s'])}", "s"),
            Figure("resumed over first", _num(record["ratio"], 2), "ratio")]


def deploy_time_figures(record: dict) -> list[Figure]:
    return [Figure(f"`{c['command']}` (G1 smoke run)", f"{_num(c['wall_s'])} / {_num(c['cpu_s'])}", "s wall / CPU")
            for c in record["commands"]]


def make_test_time_figures(record: dict) -> list[Figure]:
    timed = record["make_test"]
    figures = [Figure(f"`make test` in a fresh clone (goal {record['goal_minutes']:g} min), install included",
                      _num(timed["minutes"]), "min"),
               Figure("CPU's share of the two cores while it ran", _num(timed["cpu_share"], 2), "share")]
    if record.get("slowest_files"):
        slowest = record["slowest_files"][0]
        figures.append(Figure(f"slowest test file: {slowest['file']}", _num(slowest["seconds"]), "s"))
    return figures


def cli_startup_figures(record: dict) -> list[Figure]:
    when = "now" if not record.get("src_commit") else f"src at {record['src_commit'][:7]}"
    when = f"before issue 64 item 7, {when}" if record["benchmark"].endswith("_before") else when
    return [Figure(f"`{name}` ({when}): median wall time, {case['min_s']:.2f}-{case['max_s']:.2f} s over "
                   f"{len(case['wall_s'])} runs, median CPU {case['median_cpu_s']:.2f} s"
                   f"{', imports JAX' if case['imports_jax'] else ''}", _num(case["median_s"], 2), "s")
            for name, case in record["cases"].items()]


def checkpoint_figures(record: dict) -> list[Figure]:
    return [Figure(f"{case['algo']} {case['preset']}: save / load ({case['state_bytes'] / 2**20:,.1f} MiB state)",
                   f"{case['save_s']:.3g} / {case['load_s']:.3g}", "s") for case in record["cases"]]


def render_figures(record: dict) -> list[Figure]:
    best = max(record["results"], key=lambda row: row.get("jax_chunked_frames_per_s") or 0)
    return [Figure(f"JAX camera, `render_batch`, best over N ({best['num_envs']} envs)",
                   _num(best.get("jax_chunked_frames_per_s")), "frames/s"),
            Figure(f"`mujoco.Renderer` one by one at {best['num_envs']} envs", _num(best.get("native_frames_per_s")),
                   "frames/s")]


def encoders_figures(record: dict) -> list[Figure]:
    figures = []
    for case in record["cases"]:
        timing = case.get("timing") or {}
        if timing.get("ms_per_clip") is not None:
            figures.append(Figure(f"{case['encoder']}: forward+backward a clip (batch {timing.get('batch')})",
                                  _num(timing["ms_per_clip"]), "ms"))
    return figures


def cpu_compile_figures(record: dict) -> list[Figure]:
    figures = []
    for name, both in record["iterations"].items():
        figures.append(Figure(f"{name}: XLA's default / YNNPACK fusions off (median)",
                              f"{both['xla_default']['median_s']:.3f} / {both['rlfit']['median_s']:.3f}", "s"))
    return figures


def encoder_parity_figures(record: dict) -> list[Figure]:
    return [Figure(f"{case['encoder']} against {case['model']}: max |difference|", f"{case['max_abs_diff']:.2e}", "")
            for case in record["cases"]]


def seeds_vmap_figures(record: dict) -> list[Figure]:
    return [Figure(f"{len(record['seeds'])} seeds in one program over one after another (speed-up)",
                   _num(record["speedup"], 2), "x")]


def scaling_figures(record: dict) -> list[Figure]:
    return [Figure(f"{row['devices']} {row.get('device_kind', '')} device(s): env steps/s (efficiency)",
                   f"{_num(row['sps'])} ({row['efficiency']:.3g})", "env steps/s") for row in record["rows"]]


def gpu_figures(record: dict) -> list[Figure]:
    def written(value: Any) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return _num(value, 3 if abs(value) < 10 else 1)
        return f"{value:,}" if isinstance(value, int) else str(value)

    # A figure the check did not measure (None) is left out: the record's steps say why.
    return [Figure(str(key), written(value), "") for key, value in (record.get("headline") or {}).items()
            if value is not None and not isinstance(value, (dict, list))]


# --- the registry ---------------------------------------------------------------------------------------------------

BENCHMARKS = (
    Benchmark("quickstart", "learning", "`rlfit train ENV --preset P` as a user runs it: final eval reward and wall "
              "clock against the issue targets (PPO, SAC, FastTD3, pixels)",
              ("README.md (first command)", "docs/algorithms/ppo.md", "docs/algorithms/sac.md",
               "docs/algorithms/fasttd3.md", "docs/pixels.md", "docs/configuration.md (preset for the device)"),
              "cpu", "PPO quick 1.5-1.8 a seed; SAC quick 3.4-3.7 a seed; FastTD3 quick 8.4-9.4 a seed (loaded); "
              "SAC pixels 46 a seed", "quickstartpy",
              (Source("quickstart.json", quickstart_figures), Source("quickstart_sac.json", quickstart_figures),
               Source("quickstart_fasttd3.json", quickstart_figures),
               Source("quickstart_sac_pixels_lr5e-4.json", quickstart_figures))),
    Benchmark("throughput", "speed", "simulator against trainer env steps/s at one num_envs",
              ("docs/architecture.md",), "any", "not measured", "throughputpy",
              (Source("throughput.json", throughput_figures),)),
    Benchmark("brax_compare", "Brax parity", "rlfit against Brax's `ppo.train` / `sac.train` at the same settings",
              ("docs/algorithms/ppo.md", "docs/algorithms/sac.md"), "cpu",
              "PPO 2.5 (one seed); SAC 29 an environment (3 seeds)", "brax_comparepy",
              (Source("brax_compare.json", brax_ppo_figures), Source("brax_compare_sac_CartpoleBalance.json", brax_sac_figures),
               Source("brax_compare_sac_ReacherEasy.json", brax_sac_figures)), needs=BRAX_VENV),
    Benchmark("brax_reference", "Brax parity", "Brax's own PPO and SAC losses and updates on fixed inputs, and two "
              "whole iterations of its `ppo.train` on a toy environment, saved as the tests' fixtures "
              "(tests/algos/{ppo,sac}/fixtures)", ("docs/algorithms/ppo.md", "docs/algorithms/sac.md"),
              "cpu", "not measured", "brax_referencepy", (), quick="",
              quick_exempt="writes the tests' fixtures in the Brax venv; the tests that read them are its check"),
    Benchmark("encoder_parity", "Brax parity", "rlfit's r3d18 and timesformer against torchvision and Hugging Face",
              ("docs/pixels.md",), "cpu", "not measured", "encoder_paritypy",
              (Source("encoder_parity.json", encoder_parity_figures),), needs="torch"),
    Benchmark("suite", "Brax parity", "PPO's quick preset on the DM Control suite, rlfit seeds 0-2 and Brax seeds 0-1",
              ("docs/algorithms/ppo.md",), "cpu", "hours, in sittings (2.4-27 a run by environment, estimated)",
              "suitepy-issue-28", (Source("suite_8ep_brax.json", suite_figures),), quick="--quick --envs CartpoleBalance",
              needs=BRAX_VENV),
    Benchmark("protocol_report", "Brax parity", "a comparison declared before its runs (benchmarks/protocols/): "
              "only the runs at its seeds, per environment and as rliable's IQM and probability of improvement with "
              "stratified bootstrap intervals, its decisions, and the runs used, outside it and missing",
              ("docs/algorithms/ppo.md",), "cpu",
              "0.2 (13 s at load 8.9, FIGURES.md's refresh included; the runs are suite.py's)",
              "protocol_reportpy-issue-62", (Source("quick_preset_2026_12_report.json", protocol_report_figures),)),
    Benchmark("jax_versions", "Brax parity", "the same physics step and update under rlfit's JAX and Brax's",
              ("docs/architecture.md",), "cpu", "7 (G1, 64 envs)", "first_steppy-issue-29",
              (Source("jax_versions_G1JoystickFlatTerrain_n64.json", jax_versions_figures),
               Source("jax_versions_CartpoleBalance_n512.json", jax_versions_figures)),
              one_off="how much of the rlfit-vs-Brax G1 speed gap is the JAX release (issue 29)", needs=BRAX_VENV),
    Benchmark("pointmass_collapse", "learning", "the quick preset per seed with its eval and value-loss curves: does "
              "PPO learn and then collapse?", ("docs/algorithms/ppo.md",), "cpu", "2.3-4.8 a run (82 iterations)",
              "pointmass_collapsepy-issue-44", (Source("pointmass_collapse.json", pointmass_figures),)),
    Benchmark("algo_compare", "learning", "FastTD3, SAC and PPO at equal wall clock, with the report's statistics",
              ("docs/algorithms/fasttd3.md",), "cpu", "48 (3 envs x 3 seeds, 4-minute budgets)", "algo_comparepy-issue-32",
              (Source("algo_compare_quiet.json", algo_compare_figures),)),
    Benchmark("first_step", "first step", "process start to the end of the first iteration, phase by phase: cold, warm, "
              "resumed, Brax beside it", ("docs/guarantees.md (fast restart)",), "cpu",
              "10 (CartpoleBalance quick, loaded); 48 (G1, 64 envs)", "first_steppy-issue-29",
              (Source("first_step_CartpoleBalance_quick_shapes.json", first_step_figures),
               Source("first_step_G1JoystickFlatTerrain_g1_n64.json", first_step_figures)), needs=BRAX_VENV),
    Benchmark("plan_time", "first step", "`rlfit plan` wall time and compiles; `--num-envs auto` against a plain train",
              ("docs/planning.md",), "cpu", "1.5 (CartpoleBalance quick: plan 18.1 + auto 37.5 + plain 36.7 s); "
              "17 (G1: 66.7 + 493.9 + 473.5 s)",
              "plan_timepy-and-plan_fit_checkpy-issue-29-item-3",
              (Source("plan_time_G1JoystickFlatTerrain_g1_bound.json", plan_time_figures),
               Source("plan_time_G1JoystickFlatTerrain_g1_bound_auto_plain.json", plan_time_figures),
               Source("plan_time_CartpoleBalance_quick_bound_plan.json", plan_time_figures))),
    Benchmark("eval_compile", "first step", "the evaluation program's cold compile alone, per environment",
              ("docs/planning.md",), "cpu", "7 (3 envs, 2 repeats)", "eval_compilepy-issue-29-item-4",
              (Source("eval_compile_after.json", eval_compile_figures),),
              one_off="what the evaluation without a reset saves (issue 29, item 4)"),
    Benchmark("resume_compile", "first step", "compile_s of a first and a resumed session, fresh compile cache",
              ("docs/guarantees.md (fast restart)",), "cpu", "not measured", "resume_compilepy",
              (Source("resume_compile.json", resume_compile_figures),)),
    Benchmark("memory_prediction", "planner accuracy", "predicted against measured peak memory of one iteration",
              ("docs/planning.md",), "any", "not measured on the CPU; over 9 on an H100 (cut at 560 s after one environment)",
              "memory_predictionpy",
              (Source("memory_prediction_cpu.json", memory_prediction_figures),
               Source("memory_prediction_gpu.json", memory_prediction_figures))),
    Benchmark("plan_fit_check", "planner accuracy", "the planner's line from its probes against XLA and the line before",
              ("docs/planning.md",), "cpu", "6", "plan_timepy-and-plan_fit_checkpy-issue-29-item-3",
              (Source("plan_fit_check.json", plan_fit_check_figures),),
              one_off="whether the cheaper probes' line chooses the sizes the line before chose (issue 29, item 3)"),
    Benchmark("planner_sweep", "planner accuracy", "the planner's choice per memory budget against a num_envs sweep",
              ("docs/planning.md",), "any", "not measured", "planner_sweeppy",
              (Source("planner_sweep_cpu.json", planner_sweep_figures),)),
    Benchmark("trace_bound", "planner accuracy", "the bound read from the lowered step against XLA's analysis",
              ("docs/planning.md",), "any", "3 (6 cases)", "trace_boundpy-issue-29-item-3",
              (Source("trace_bound.json", trace_bound_figures),)),
    Benchmark("kill9_stress", "robustness", "`kill -9` at random instants, then `rlfit resume`: work lost, files whole",
              ("docs/guarantees.md",), "cpu", "not measured", "kill9_stresspy",
              (Source("kill9_stress.json", kill9_figures),)),
    Benchmark("checkpoint_save", "robustness", "seconds to save and load a whole training state, checksums' share",
              ("docs/devices.md",), "cpu", "not measured", "checkpoint_savepy-issue-13",
              (Source("checkpoint_save.json", checkpoint_figures),)),
    Benchmark("make_test_time", "speed", "`make test` in a fresh clone: wall and CPU time, seconds per test file",
              ("README.md (two commands)", "docs/getting-started.md"), "cpu", "about 30 (one `make test`)",
              "make_test_timepy-issue-48-item-6", (Source("make_test_time.json", make_test_time_figures),)),
    Benchmark("deploy_time", "speed", "`rlfit export` with its bundle, `rlfit sim2sim` and `--sweep` on a G1 smoke run",
              ("docs/deployment.md",), "cpu", "6 (3 commands, load 15-20)", "deploy_timepy-issue-63",
              (Source("deploy_time.json", deploy_time_figures),), quick="",
              quick_exempt="it times G1 commands (minutes); tests/deploy/controller and tests/run/test_g1.py run "
                           "each of them at small sizes"),
    Benchmark("cli_startup", "speed", "how long `rlfit --help`, `--version`, a bad option and a missing run directory "
              "take, against `python -c pass`", ("benchmarks/README.md",), "cpu",
              "0.3 (7 repeats, load 4); 2 on main before item 7 (5 repeats, load 4-6)",
              "cli_startuppy-issue-64-item-7", (Source("cli_startup_before.json", cli_startup_figures),
                                                Source("cli_startup.json", cli_startup_figures))),
    Benchmark("render_throughput", "speed", "frames/s of rlfit's JAX camera against `mujoco.Renderer`",
              ("docs/pixels.md",), "cpu", "not measured", "render_throughputpy",
              (Source("render_throughput.json", render_figures),)),
    Benchmark("encoders", "speed", "video encoders: parameters, forward+backward time, XLA's memory plan",
              ("docs/pixels.md",), "cpu", "not measured", "encoderspy", (Source("encoders.json", encoders_figures),)),
    Benchmark("cpu_compile_options", "speed", "XLA's default convolutions and options against rlfit's on a CPU",
              ("docs/pixels.md",), "cpu", "not measured", "cpu_compile_optionspy",
              (Source("cpu_compile_options.json", cpu_compile_figures),)),
    Benchmark("seeds_vmap", "speed", "8 seeds in one vmapped program against one after another",
              ("docs/experiments.md",), "cpu", "5.8 (8 seeds, 10 iterations, both ways)", "seeds_vmappy-issue-11",
              (Source("seeds_vmap.json", seeds_vmap_figures),)),
    Benchmark("scaling", "speed", "one run split over 1, 2 and 4 devices: env steps/s, memory per device",
              ("docs/devices.md",), "any", "not measured", "scalingpy-issue-13", (Source("scaling.json", scaling_figures),)),
    Benchmark("gpu_check", "GPU", "on a GPU machine, one prepared command of at most 9 minutes a group: CheetahRun "
              "and G1 trained at Playground's settings; G1 in a T4's memory; Brax beside rlfit; the earlier steps",
              ("docs/devices.md", "docs/planning.md"), "gpu", "9 (its own deadline)", "the-one-command-gpu_checkpy",
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


def newest(pattern: str, results: Path | None = None) -> Path | None:
    """The JSON under `results` (default results/) that `pattern` names, or of several the one with the latest
    `date`; None if none."""
    paths = [Path(path) for path in glob.glob(str((results or RESULTS) / pattern))]
    if not paths:
        return None
    return max(paths, key=lambda path: (str(provenance(json.loads(path.read_text())).date), path.name))


def provenance(record: dict[str, Any]) -> Provenance:
    """The command, date, commit, machine and load of a results record (a sitting-by-sitting record such as
    suite.json: its latest sitting; a record of runs such as pointmass_collapse.json: its latest run)."""
    latest = record
    if "command" not in record:
        sittings = record.get("sessions") or sorted(
            (run for run in (record.get("runs") or {}).values() if isinstance(run, dict) and "date" in run),
            key=lambda run: run["date"])
        latest = sittings[-1] if sittings else record
    git = latest.get("git") or {}
    commit = (git.get("head") or "")[:7]
    if git.get("src_uncommitted_files"):
        commit += f" (+{git['src_uncommitted_files']} uncommitted in src/)"
    device = record.get("device") if isinstance(record.get("device"), str) else ""
    if not device or device.startswith("cpu"):
        cores = latest.get("nproc") or record.get("nproc")
        device = f"{cores}-core CPU" if cores else "CPU"
    start, end = latest.get("loadavg_1min_start", latest.get("loadavg_1min_before")), latest.get("loadavg_1min_end")
    load = "-" if start is None else (f"{start}" if end is None else f"{start}-{end}")
    return Provenance(str(latest.get("command", "-")), str(latest.get("date", "-"))[:16].replace("T", " "),
                      commit or "-", device, load)
