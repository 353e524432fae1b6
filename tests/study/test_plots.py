"""Experiment plots: each writes one non-blank PNG atomically (no temporary file left beside it)."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest
import scipy.stats

from rlfit.study.intervals import iqm_t_interval
from rlfit.study.plots import (axis_scale, interval_plot, learning_curves, learning_curves_figure, profile_plot, scatter_fit,
                               scatter_figure, suite_plot)
from rlfit.study.stats import Estimate, correlation, interval_estimates, performance_profile

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_one_nonblank_png(written, expected):
    assert written == expected
    assert sorted(path.name for path in expected.parent.iterdir()) == [expected.name]
    assert expected.read_bytes().startswith(PNG_SIGNATURE)
    assert matplotlib.image.imread(expected).std() > 0


def estimate(centre: float, n: int = 5) -> Estimate:
    return Estimate(centre, centre - 0.5, centre + 0.4, centre + 0.1, centre - 0.3, centre + 0.6, n)


def test_learning_curves(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.linspace(0, 1e6, 25)
    curves = {
        "baseline": (steps, np.cumsum(rng.normal(1.0, 1.0, size=(5, 25)), axis=1)),
        "variant": (steps, np.cumsum(rng.normal(1.5, 1.0, size=(5, 25)), axis=1)),
        "one seed": (steps, np.cumsum(rng.normal(0.5, 1.0, size=(1, 25)), axis=1)),
    }
    path = tmp_path / "curves.png"
    assert_one_nonblank_png(learning_curves(curves, path, "learning curves", reps=200), path)


def test_learning_curves_replaces_an_existing_file(tmp_path):
    path = tmp_path / "curves.png"
    path.write_bytes(b"old")
    steps = np.arange(5.0)
    learning_curves({"v": (steps, np.vstack([steps, 2 * steps]))}, str(path), "t", reps=50)
    assert_one_nonblank_png(path, path)


def test_interval_plot(tmp_path):
    path = tmp_path / "intervals.png"
    estimates = {"baseline": estimate(1.0), "wide": estimate(2.0), **interval_estimates({"single": np.array([3.0])})}
    assert_one_nonblank_png(interval_plot(estimates, path, "final reward", "eval reward"), path)


def test_profile_plot(tmp_path):
    scores = {"a": np.array([1.0, 2.0, 3.0, 4.0]), "b": np.array([0.5, 1.5, 2.5, 2.6])}
    taus = np.linspace(0.0, 4.0, 9)
    profiles = performance_profile(scores, taus, reps=100)
    for name, values in scores.items():  # the profile is the fraction of seeds above each threshold
        assert profiles[name][0] == pytest.approx([(values > t).mean() for t in taus])
    path = tmp_path / "profile.png"
    assert_one_nonblank_png(profile_plot(profiles, taus, path, "profile", "reward"), path)


def test_suite_plot(tmp_path):
    path = tmp_path / "suites.png"
    per_suite = {
        "nominal": {"baseline": estimate(1.0), "variant": estimate(1.5)},
        "pushes": {"baseline": estimate(0.5), "variant": estimate(1.2)},
        "friction": {"variant": estimate(0.8)},
    }
    assert_one_nonblank_png(suite_plot(per_suite, path, "robustness"), path)


def test_scatter_fit(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(1e-4, 1e-3, size=20)
    y = 3000 * x + rng.normal(size=20)
    path = tmp_path / "scatter.png"
    written = scatter_fit(x, y, correlation(x, y, reps=100), path, "learning rate", "final reward", "lr vs reward")
    assert_one_nonblank_png(written, path)


def test_the_learning_curves_show_env_steps_and_wall_clock_with_the_iqm_interval_as_band():
    rng = np.random.default_rng(2)
    steps, rewards = np.linspace(0, 1e6, 6), rng.normal(size=(5, 6)).cumsum(axis=1)
    figure = learning_curves_figure({"v": (steps, rewards)}, "t", "return", 100, 0, {"v": (steps / 1e3, rewards)}, "auto")
    by_steps, by_clock = figure.axes
    assert by_steps.get_xlabel() == "env steps" and by_clock.get_xlabel() == "training wall-clock (s)"
    assert by_steps.get_ylabel() == "return\nIQM over seeds, 95% CI band"
    [band] = by_steps.collections
    low, high = iqm_t_interval(rewards.T)  # Yuen's interval at each step (5 seeds: t-based)
    top = band.get_paths()[0].vertices[:, 1]
    assert np.isclose(top.max(), high.max()) and np.isclose(top.min(), low.min())


@pytest.mark.parametrize("values, scale", [
    ([1e-4, 1e-3, 1e-2], "log"), ([0.0, 1e-3, 1e-2, 0.1], "symlog"), ([1e-3, 3e-4], "linear"), ([-1.0, 10.0, 1000.0], "linear"),
])
def test_a_variable_that_spans_two_decades_gets_a_log_axis(values, scale):
    assert axis_scale(np.array(values)) == scale


def test_the_scatter_is_coloured_by_variant_and_its_line_is_straight_on_a_log_axis():
    x = np.array([1e-4, 1e-4, 1e-3, 1e-3, 1e-2, 1e-2])
    y = 2.0 * np.log10(x) + np.array([0.1, -0.1, 0.2, -0.2, 0.1, -0.1])
    labels = ["a", "a", "b", "b", "c", "c"]
    figure = scatter_figure(x, y, correlation(np.log10(x), y, reps=100), "beta", "bits", "t", labels=labels)
    [axes] = figure.axes
    assert axes.get_xscale() == "log" and axes.get_xlabel() == "beta (log scale)"
    points = axes.collections[:3]
    assert [len(p.get_offsets()) for p in points] == [2, 2, 2]
    assert len({tuple(p.get_facecolor()[0]) for p in points}) == 3
    line_x, line_y = axes.lines[0].get_data()
    slope = np.diff(line_y) / np.diff(np.log10(line_x))
    assert np.allclose(slope, scipy.stats.linregress(np.log10(x), y).slope)


def test_a_power_law_is_a_straight_line_on_log_log_axes_and_a_zero_on_a_log_range_gets_no_line():
    x = np.array([1e-4, 1e-3, 1e-2, 1e-1])
    y = 5.0 / x * np.array([1.1, 0.9, 1.05, 0.95])  # 50 to 50000: three decades
    figure = scatter_figure(x, y, correlation(np.log10(x), np.log10(y), reps=100), "beta", "bits", "t")
    [axes] = figure.axes
    assert (axes.get_xscale(), axes.get_yscale()) == ("log", "log")
    line_x, line_y = axes.lines[0].get_data()
    slope = np.diff(np.log10(line_y)) / np.diff(np.log10(line_x))
    assert np.allclose(slope, scipy.stats.linregress(np.log10(x), np.log10(y)).slope)
    assert "least squares on log10 y against log10 x" in axes.lines[0].get_label()
    with_zero = scatter_figure(np.array([0.0, 1e-3, 1e-2, 1e-1]), np.array([1.0, 2.0, 3.0, 5.0]),
                               correlation(np.arange(4.0), np.array([1.0, 2.0, 3.0, 5.0]), reps=100), "beta", "y", "t")
    [axes] = with_zero.axes
    assert axes.get_xscale() == "symlog" and len(axes.lines) == 0


def test_scatter_fit_with_too_few_points_draws_only_the_points(tmp_path):
    x, y = np.array([1.0, 2.0]), np.array([0.5, 0.7])
    path = tmp_path / "scatter.png"
    assert_one_nonblank_png(scatter_fit(x, y, correlation(x, y), path, "x", "y", "two trials"), path)


@pytest.mark.parametrize(
    "call",
    [
        lambda path: learning_curves({}, path, "t"),
        lambda path: learning_curves({"v": (np.arange(3.0), np.ones((2, 4)))}, path, "t"),
        lambda path: learning_curves({"v": (np.arange(3.0), np.array([[1.0, np.nan, 2.0]]))}, path, "t"),
        lambda path: interval_plot({}, path, "t", "x"),
        lambda path: suite_plot({}, path, "t"),
        lambda path: scatter_fit(np.ones(3), np.ones(4), None, path, "x", "y", "t"),
    ],
)
def test_bad_input_raises_value_error_and_writes_nothing(tmp_path, call):
    with pytest.raises(ValueError):
        call(tmp_path / "plot.png")
    assert list(tmp_path.iterdir()) == []
