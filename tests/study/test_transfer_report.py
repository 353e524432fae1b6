"""The transfer check's report: every figure recomputed from the per-episode records (numpy and scipy, not rlfit's
statistics), the MJX evaluation's figures from metrics.jsonl rows, the gaps by the tests they name."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from rlfit.deploy.transfer.check import TransferRun
from rlfit.deploy.transfer.episodes import EpisodeRecord
from rlfit.study.transfer_report import build_report, summary_line, write_report

EVAL_EPISODES = 16


def synthetic_run(nominal_returns, randomized_returns, lengths, terminated) -> TransferRun:
    records = [EpisodeRecord("nominal", -1, j, r, n, t)
               for j, (r, n, t) in enumerate(zip(nominal_returns, lengths[0], terminated[0]))]
    records += [EpisodeRecord("randomized", j // 2, j, r, n, t)
                for j, (r, n, t) in enumerate(zip(randomized_returns, lengths[1], terminated[1]))]
    return TransferRun("G1JoystickFlatTerrain", Path("policy.onnx"), records, 100, 1000, 0.02,
                       {"note": "domain randomization: Playground's randomizer"},
                       {"pushes": True, "observation_noise_level": 1.0}, EVAL_EPISODES)


METRICS_ROWS = [
    {"iteration": 1, "env_steps": 10, "train/loss": 1.0},
    {"iteration": 5, "env_steps": 50, "eval/episode_reward": 3.0, "eval/episode_reward_std": 1.0,
     "eval/episode_length": 40.0},
    {"iteration": 10, "env_steps": 100, "eval/episode_reward": 12.0, "eval/episode_reward_std": 2.5,
     "eval/episode_length": 90.0, "eval/randomized/episode_reward": 9.0,
     "eval/randomized/episode_reward_std": 4.0, "eval/randomized/episode_length": 70.0},
]


@pytest.fixture
def report():
    rng = np.random.default_rng(3)
    nominal = rng.normal(10.0, 2.0, 6)
    randomized = nominal - rng.normal(1.5, 1.0, 6)
    lengths = ([100, 100, 37, 100, 100, 64], [100, 12, 100, 55, 100, 80])
    terminated = ([False, False, True, False, False, True], [False, True, False, True, False, True])
    run = synthetic_run(nominal, randomized, lengths, terminated)
    return build_report(run, METRICS_ROWS, {"seed": 0, "models": 3, "episodes_per_model": 2})


def t_interval(values: np.ndarray) -> tuple[float, float]:
    return scipy.stats.t.interval(0.95, values.size - 1, loc=values.mean(), scale=values.std(ddof=1) / math.sqrt(values.size))


def wilson(k: int, n: int, z: float = scipy.stats.norm.ppf(0.975)) -> tuple[float, float]:
    """The Wilson score interval, written out."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_native_figures_recomputed_from_the_saved_records(report, tmp_path):
    json_path, md_path = write_report(tmp_path, report)
    saved = json.loads(json_path.read_text())
    assert md_path.read_text().startswith("# Transfer check: G1JoystickFlatTerrain")
    for name, condition in (("native_nominal", "nominal"), ("native_randomized", "randomized")):
        episodes = [e for e in saved["episodes"] if e["condition"] == condition]
        returns = np.array([e["episode_return"] for e in episodes])
        lengths = np.array([e["length"] for e in episodes], float)
        ended = sum(e["terminated"] for e in episodes)
        figures = saved["conditions"][name]
        assert figures["episodes"] == len(episodes) == 6
        assert figures["return_mean"] == pytest.approx(returns.mean())
        assert (figures["return_low"], figures["return_high"]) == pytest.approx(t_interval(returns))
        assert figures["return_sd"] == pytest.approx(returns.std(ddof=1))
        assert figures["return_iqm"] == pytest.approx(scipy.stats.trim_mean(returns, 0.25))
        assert figures["length_mean"] == pytest.approx(lengths.mean())
        assert (figures["length_low"], figures["length_high"]) == pytest.approx(t_interval(lengths))
        assert figures["length_quartiles"] == pytest.approx(
            [lengths.min(), np.percentile(lengths, 25), np.median(lengths), np.percentile(lengths, 75), lengths.max()])
        assert figures["terminated"] == ended and figures["terminated_rate"] == pytest.approx(ended / 6)
        assert (figures["terminated_low"], figures["terminated_high"]) == pytest.approx(wilson(ended, 6))


def test_mjx_figures_are_the_last_evaluation_with_a_t_interval_from_its_spread(report):
    nominal, randomized = report["conditions"]["mjx_nominal"], report["conditions"]["mjx_randomized"]
    assert (nominal["return_mean"], nominal["length_mean"], nominal["episodes"]) == (12.0, 90.0, EVAL_EPISODES)
    assert (randomized["return_mean"], randomized["length_mean"]) == (9.0, 70.0)
    sd = 2.5 * math.sqrt(EVAL_EPISODES / (EVAL_EPISODES - 1))  # the evaluation records the ddof-0 spread
    half = scipy.stats.t.ppf(0.975, EVAL_EPISODES - 1) * sd / math.sqrt(EVAL_EPISODES)
    assert (nominal["return_low"], nominal["return_high"]) == pytest.approx((12.0 - half, 12.0 + half))
    assert nominal["terminated_rate"] is None and nominal["length_quartiles"] is None
    assert "iteration 10" in nominal["source"]


def test_gaps_follow_the_tests_they_name(report):
    gaps = {(g["a"], g["b"]): g for g in report["gaps"]}
    conditions = report["conditions"]
    for native, mjx in (("native_nominal", "mjx_nominal"), ("native_randomized", "mjx_randomized")):
        gap, a, b = gaps[(native, mjx)], conditions[native], conditions[mjx]
        assert gap["difference"] == pytest.approx(a["return_mean"] - b["return_mean"])
        for end in (gap["low"], gap["high"]):  # Welch's test of a shifted by an end against b: p = 0.05 exactly
            shifted = scipy.stats.ttest_ind_from_stats(a["return_mean"] - end, a["return_sd"], a["episodes"],
                                                       b["return_mean"], b["return_sd"], b["episodes"],
                                                       equal_var=False)
            assert shifted.pvalue == pytest.approx(0.05)
    episodes = report["episodes"]
    randomized = np.array([e["episode_return"] for e in episodes if e["condition"] == "randomized"])
    nominal = np.array([e["episode_return"] for e in episodes if e["condition"] == "nominal"])
    paired = scipy.stats.ttest_rel(randomized, nominal).confidence_interval(0.95)
    gap = gaps[("native_randomized", "native_nominal")]
    assert (gap["low"], gap["high"]) == pytest.approx((paired.low, paired.high))
    assert gap["difference"] == pytest.approx(randomized.mean() - nominal.mean())


def test_without_an_evaluation_or_randomized_models_only_the_nominal_condition_is_reported():
    run = synthetic_run([1.0], [], ([5], []), ([True], []))
    report = build_report(run, [], {"seed": 0, "models": 3, "episodes_per_model": 1})
    assert list(report["conditions"]) == ["native_nominal"] and report["gaps"] == []
    one = report["conditions"]["native_nominal"]
    assert one["return_mean"] == 1.0 and one["return_low"] is None and one["terminated_rate"] == 1.0


def test_the_console_line_names_each_condition_with_its_interval_and_falls(report):
    line = summary_line(report)
    nominal = report["conditions"]["native_nominal"]
    assert line.startswith("mean return [95% interval]: native_nominal ")
    assert f"[{nominal['return_low']:.1f}, {nominal['return_high']:.1f}] (33% ended early)" in line  # 3 digits
    assert "mjx_nominal 12.0 [" in line and "mjx_randomized 9.0" in line
