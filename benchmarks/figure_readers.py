"""The figures of each kind of results JSON: one reader per kind (`*_figures`), each a pure function of the record
that returns the claims it backs, with their values written as the pages write them. benchmarks/registry.py names
which reader reads which JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.benchmark_types import Figure


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
    measured = [case for case in record["cases"] if case.get("xla")]
    ratios = [case["bound_bytes"] / case["xla"]["total_bytes"] for case in measured]
    figures = [Figure(f"bound from the lowered step over XLA's analysis ({len(ratios)} cases)",
                      f"{min(ratios):.2f}-{max(ratios):.2f}", "ratio"),
               Figure("never below XLA's analysis", str(record.get("never_below_xla")), "")]
    errors = [case["estimate_bytes"] / case["xla"]["total_bytes"] - 1 for case in measured if "estimate_bytes" in case]
    if errors:
        figures.append(Figure(f"the planner's estimate from the lowered step against XLA's analysis ({len(errors)} "
                              "cases)", f"{min(errors):+.1%} to {max(errors):+.1%}", ""))
    return figures


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


def make_test_time_figures(record: dict) -> list[Figure]:
    timed = record["make_test"]
    figures = [Figure(f"`make test` in a fresh clone (goal {record['goal_minutes']:g} min), install included",
                      _num(timed["minutes"]), "min"),
               Figure("CPU's share of the two cores while it ran", _num(timed["cpu_share"], 2), "share")]
    if record.get("slowest_files"):
        slowest = record["slowest_files"][0]
        figures.append(Figure(f"slowest test file: {slowest['file']}", _num(slowest["seconds"]), "s"))
    return figures


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


def deploy_time_figures(record: dict) -> list[Figure]:
    return [Figure(f"`{c['command']}` (G1 smoke run)", f"{_num(c['wall_s'])} / {_num(c['cpu_s'])}", "s wall / CPU")
            for c in record["commands"]]


def cli_startup_figures(record: dict) -> list[Figure]:
    when = "now" if not record.get("src_commit") else f"src at {record['src_commit'][:7]}"
    when = f"before issue 64 item 7, {when}" if record["benchmark"].endswith("_before") else when
    return [Figure(f"`{name}` ({when}): median wall time, {case['min_s']:.2f}-{case['max_s']:.2f} s over "
                   f"{len(case['wall_s'])} runs, median CPU {case['median_cpu_s']:.2f} s"
                   f"{', imports JAX' if case['imports_jax'] else ''}", _num(case["median_s"], 2), "s")
            for name, case in record["cases"].items()]


def gc_thresholds_figures(record: dict) -> list[Figure]:
    figures = []
    for case, result in record["cases"].items():
        python, rlfit = result["settings"]["python"], result["settings"]["rlfit"]
        figures.append(Figure(
            f"`{case}`: CPU seconds to import, build and trace the training step, Python's collector thresholds -> "
            f"rlfit's (median of {record['repeats']}; peak {_num(python['median_peak_rss_mib'], 0)} -> "
            f"{_num(rlfit['median_peak_rss_mib'], 0)} MiB)",
            f"{_num(python['median_total_s'], 2)} -> {_num(rlfit['median_total_s'], 2)}", "s"))
    return figures
