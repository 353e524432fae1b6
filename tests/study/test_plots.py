"""Experiment plots: each writes one non-blank PNG atomically (no temporary file left beside it)."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

from rlfit.study.plots import interval_plot, learning_curves, profile_plot, scatter_fit, suite_plot
from rlfit.study.stats import Estimate, correlation, performance_profile

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
    estimates = {"baseline": estimate(1.0), "wide": estimate(2.0), "single": Estimate(3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 1)}
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
