"""transfer_check.md: the transfer check's report (`rlfit.study.transfer_report`) as a short page for a person."""

from __future__ import annotations

from typing import Any

from rlfit.study.report_format import fmt_interval, fmt_number

TITLES = {"native_nominal": "native MuJoCo, nominal model", "native_randomized": "native MuJoCo, randomized models",
          "mjx_nominal": "MJX evaluation, nominal model", "mjx_randomized": "MJX evaluation, randomized models"}


def report_markdown(report: dict[str, Any]) -> str:
    """The page: what ran, a table of the conditions, the gaps, and where the per-episode records are."""
    perturbations = report["perturbations"]
    pushes = {True: "on", False: "off", None: "not defined by the environment"}[perturbations["pushes"]]
    noise = perturbations["observation_noise_level"]
    lines = [
        f"# Transfer check: {report['env']}", "",
        f"The exported policy ({report['onnx']}) through onnxruntime, in native MuJoCo at the control rate "
        f"({report['control_dt']:g} s per action), episodes of up to {report['max_steps']} steps (the run's: "
        f"{report['run_episode_steps']}). Seed {report['seed']}; randomized models: "
        f"{report['models'] if report['conditions'].get('native_randomized') else 'none'} "
        f"({report['randomization'].get('note') or 'no randomizer'}). Pushes: {pushes}; observation noise: "
        f"{'not defined by the environment' if noise is None else f'level {noise:g}'}.", "",
        "| condition | episodes | mean return [95%] | IQM return [95%] | mean length [95%] | length min / 25% / "
        "median / 75% / max | ended early [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, figures in report["conditions"].items():
        lines.append(row(TITLES.get(name, name), figures))
    if report.get("mjx_left_out"):
        lines += ["", f"The MJX evaluation is left out: {report['mjx_left_out']}."]
    lines += ["", "Gaps in mean return (95% interval):", ""]
    for gap in report["gaps"]:
        lines.append(f"- {TITLES[gap['a']]} minus {TITLES[gap['b']]}: "
                     f"{fmt_interval(gap['difference'], gap['low'], gap['high'], sign=True)} ({gap['method']})")
    if not report["gaps"]:
        lines.append("- none: the run recorded no evaluation and the environment has no randomizer")
    lines += ["", "Intervals of a mean are t-based below 30 units, BCa from 30 (rlfit.study.stats); "
              "early terminations are falls or other terminations before the step limit, with a Wilson interval. "
              "On randomized models the unit is the model, not the episode (episodes on one model are not "
              "independent): means and intervals are over the models' mean returns, the fall rate's interval counts "
              "models, and the randomized-minus-nominal gap is paired by model. "
              "The MJX figures are the run's last evaluation in training, recorded as mean and spread only. "
              "Every episode is listed in transfer_check.json (`episodes`).", ""]
    return "\n".join(lines)


def row(title: str, figures: dict[str, Any]) -> str:
    """One table row; n/a where the condition's source records no such figure."""
    ret = fmt_interval(figures["return_mean"], figures["return_low"], figures["return_high"])
    iqm = ("n/a" if figures["return_iqm"] is None else
           fmt_interval(figures["return_iqm"], figures["return_iqm_low"], figures["return_iqm_high"]))
    length = ("n/a" if figures["length_mean"] is None else
              fmt_interval(figures["length_mean"], figures["length_low"], figures["length_high"]))
    quartiles = ("n/a" if figures["length_quartiles"] is None else
                 " / ".join(fmt_number(q) for q in figures["length_quartiles"]))
    ended = ("n/a" if figures["terminated_rate"] is None else
             f"{figures['terminated']} of {figures['episodes']}: "
             + fmt_interval(figures["terminated_rate"], figures["terminated_low"], figures["terminated_high"]))
    return f"| {title} | {figures['episodes']} | {ret} | {iqm} | {length} | {quartiles} | {ended} |"
