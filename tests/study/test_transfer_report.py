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


def synthetic_run(nominal_returns, randomized_returns, lengths, terminated, max_steps=1000,
                  per_model=2) -> TransferRun:
    """A check's run: the randomized episodes `per_model` to a model (model j // per_model), episodes of up to
    `max_steps` of the run's 1000."""
    records = [EpisodeRecord("nominal", -1, j, r, n, t)
               for j, (r, n, t) in enumerate(zip(nominal_returns, lengths[0], terminated[0]))]
    records += [EpisodeRecord("randomized", j // per_model, j, r, n, t)
                for j, (r, n, t) in enumerate(zip(randomized_returns, lengths[1], terminated[1]))]
    return TransferRun("G1JoystickFlatTerrain", Path("policy.onnx"), records, max_steps, 1000, 0.02,
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


def model_means(episodes: list[dict], key: str) -> np.ndarray:
    """The mean of `key` per model (models in order), from transfer_check.json's episodes."""
    models = sorted({e["model_index"] for e in episodes})
    return np.array([np.mean([float(e[key]) for e in episodes if e["model_index"] == m]) for m in models])


def test_native_figures_recomputed_from_the_saved_records(report, tmp_path):
    """Nominal: the episode is the unit. Randomized: the model is (3 models of 2 episodes)."""
    json_path, md_path = write_report(tmp_path, report)
    saved = json.loads(json_path.read_text())
    assert md_path.read_text().startswith("# Transfer check: G1JoystickFlatTerrain")
    for name, condition in (("native_nominal", "nominal"), ("native_randomized", "randomized")):
        episodes = [e for e in saved["episodes"] if e["condition"] == condition]
        by_model = condition == "randomized"
        returns = model_means(episodes, "episode_return") if by_model else np.array([e["episode_return"] for e in episodes])
        lengths = model_means(episodes, "length") if by_model else np.array([e["length"] for e in episodes], float)
        falls = (model_means(episodes, "terminated") if by_model else np.array([e["terminated"] for e in episodes], float))
        all_lengths = np.array([e["length"] for e in episodes], float)
        figures = saved["conditions"][name]
        assert figures["episodes"] == len(episodes) == 6
        assert (figures["unit"], figures["units"]) == (("model", 3) if by_model else ("episode", 6))
        assert figures["return_mean"] == pytest.approx(returns.mean())
        assert (figures["return_low"], figures["return_high"]) == pytest.approx(t_interval(returns))
        assert figures["return_sd"] == pytest.approx(returns.std(ddof=1))
        assert figures["return_iqm"] == pytest.approx(scipy.stats.trim_mean(returns, 0.25))
        assert figures["length_mean"] == pytest.approx(lengths.mean())
        assert (figures["length_low"], figures["length_high"]) == pytest.approx(t_interval(lengths))
        assert figures["length_quartiles"] == pytest.approx([all_lengths.min(), np.percentile(all_lengths, 25),
                                                             np.median(all_lengths), np.percentile(all_lengths, 75),
                                                             all_lengths.max()])
        assert figures["terminated"] == sum(e["terminated"] for e in episodes)
        assert figures["terminated_rate"] == pytest.approx(falls.mean())
        assert (figures["terminated_low"], figures["terminated_high"]) == pytest.approx(wilson(falls.sum(), falls.size))


def test_intervals_on_randomized_models_take_the_model_as_the_unit():
    """Two models, five episodes each, returns near 10 on one and 20 on the other: ten episodes would give a narrow
    interval, but there are two independent draws of a model, and the interval is Student's t over the two means."""
    rng = np.random.default_rng(0)
    randomized = np.concatenate([10 + 0.01 * rng.standard_normal(5), 20 + 0.01 * rng.standard_normal(5)])
    nominal = 15 + 0.01 * rng.standard_normal(10)
    run = synthetic_run(nominal, randomized, ([1000] * 10, [1000] * 10), ([False] * 10, [False] * 10), per_model=5)
    figures = build_report(run, [], {"seed": 0, "models": 2, "episodes_per_model": 5})["conditions"]
    means = np.array([randomized[:5].mean(), randomized[5:].mean()])
    got = (figures["native_randomized"]["return_low"], figures["native_randomized"]["return_high"])
    assert got == pytest.approx(t_interval(means))
    episode_low, episode_high = t_interval(randomized)
    assert got[1] - got[0] > 10 * (episode_high - episode_low)  # the episodes' interval would claim far more
    assert figures["native_nominal"]["unit"] == "episode" and figures["native_randomized"]["units"] == 2


def test_truncated_episodes_are_not_compared_with_the_runs_whole_mjx_episodes(tmp_path):
    rng = np.random.default_rng(3)
    run = synthetic_run(rng.normal(10, 2, 4), rng.normal(9, 2, 4), ([100] * 4, [100] * 4), ([False] * 4,) * 2,
                        max_steps=100)
    report = build_report(run, METRICS_ROWS, {"seed": 0, "models": 2, "episodes_per_model": 2})
    assert set(report["conditions"]) == {"native_nominal", "native_randomized"}
    assert [(g["a"], g["b"]) for g in report["gaps"]] == [("native_randomized", "native_nominal")]
    assert report["mjx_left_out"].startswith("the check's episodes stop at 100 policy steps (--max-steps) and the "
                                             "run's MJX evaluation ran whole episodes of 1000")
    _, md_path = write_report(tmp_path, report)
    assert "The MJX evaluation is left out: the check's episodes stop at 100" in md_path.read_text()
    whole = build_report(run._replace(max_steps=1000), METRICS_ROWS, {"seed": 0, "models": 2, "episodes_per_model": 2})
    assert whole["mjx_left_out"] is None and "mjx_nominal" in whole["conditions"]


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
            shifted = scipy.stats.ttest_ind_from_stats(a["return_mean"] - end, a["return_sd"], a["units"],
                                                       b["return_mean"], b["return_sd"], b["units"],
                                                       equal_var=False)
            assert shifted.pvalue == pytest.approx(0.05)
    episodes = report["episodes"]
    randomized = model_means([e for e in episodes if e["condition"] == "randomized"], "episode_return")
    nominal_by_episode = {e["episode"]: e["episode_return"] for e in episodes if e["condition"] == "nominal"}
    # Model i's nominal partner: the nominal episodes from the same reset keys (episode indices) as its own.
    nominal = np.array([np.mean([nominal_by_episode[e["episode"]] for e in episodes
                                 if e["condition"] == "randomized" and e["model_index"] == m]) for m in range(3)])
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
