"""PNG figures of an experiment: learning curves, interval estimates, per-suite estimates and a fitted scatter.

Each function draws on its own `matplotlib.figure.Figure` (no pyplot, no global state), renders it to PNG in
memory and writes the file atomically (a temporary sibling renamed into place); it returns the path written.
Variants keep one colour each, in the order they are given.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.stats
from matplotlib.figure import Figure
from rliable import library as rly

from rlfit.rundir.atomic import write_atomic
from rlfit.study.stats import Correlation, Estimate, seeded_global_rng

_COLOURS = [f"C{i}" for i in range(10)]


def learning_curves(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    path: Path | str,
    title: str,
    ylabel: str = "eval reward",
    reps: int = 1000,
    seed: int = 0,
) -> Path:
    """Per variant, the IQM across seeds at each step as a line with a 95% CI band.

    `curves[name]` is (steps (T,), rewards (num_seeds, T)). The band is rliable's stratified bootstrap with each
    step as its own stratum (as rliable does for sample-efficiency curves); a single seed gets no band.
    """
    if not curves:
        raise ValueError("no variants: curves is empty")
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for index, (name, (steps, rewards)) in enumerate(curves.items()):
        steps, rewards = _curve(name, steps, rewards)
        colour = _COLOURS[index % len(_COLOURS)]
        iqm = scipy.stats.trim_mean(rewards, 0.25, axis=0)
        axes.plot(steps, iqm, color=colour, label=f"{name} (n={rewards.shape[0]})")
        if rewards.shape[0] > 1:
            with seeded_global_rng(seed):
                _, intervals = rly.get_interval_estimates({name: rewards}, func=_iqm_per_step, reps=reps)
            axes.fill_between(steps, intervals[name][0], intervals[name][1], color=colour, alpha=0.2, linewidth=0)
    axes.set_xlabel("env steps")
    axes.set_ylabel(f"{ylabel} (IQM, 95% CI)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def interval_plot(estimates: Mapping[str, Estimate], path: Path | str, title: str, xlabel: str) -> Path:
    """Two panels, IQM and mean, each a horizontal 95% CI and point per variant (top to bottom in given order)."""
    if not estimates:
        raise ValueError("no variants: estimates is empty")
    names = list(estimates)
    rows = np.arange(len(names))[::-1]
    figure = Figure(figsize=(8, 1.2 + 0.45 * len(names)), layout="constrained")
    panels = figure.subplots(1, 2, sharey=True)
    panel_fields = (("IQM", ("iqm", "iqm_low", "iqm_high")), ("Mean", ("mean", "mean_low", "mean_high")))
    for axes, (label, fields) in zip(panels, panel_fields):
        for index, (row, name) in enumerate(zip(rows, names)):
            point, low, high = (getattr(estimates[name], field) for field in fields)
            colour = _COLOURS[index % len(_COLOURS)]
            axes.hlines(row, low, high, color=colour, linewidth=8, alpha=0.5)
            axes.plot([point], [row], marker="|", markersize=14, color="black")
        axes.set_title(label)
        axes.set_xlabel(xlabel)
        axes.grid(axis="x", alpha=0.3)
    panels[0].set_yticks(rows, [f"{name} (n={estimates[name].n})" for name in names])
    panels[0].set_ylim(-0.6, len(names) - 0.4)
    figure.suptitle(title)
    return _save(figure, path)


def profile_plot(profiles: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]], taus: np.ndarray,
                 path: Path | str, title: str, xlabel: str) -> Path:
    """Performance profiles: per variant the fraction of seeds scoring above each threshold `taus` (T,), with
    its 95% CI band (`stats.performance_profile`'s (profile, low, high), each (T,))."""
    if not profiles:
        raise ValueError("no variants: profiles is empty")
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.subplots()
    for index, (name, (profile, low, high)) in enumerate(profiles.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        axes.plot(taus, profile, color=colour, label=name)
        axes.fill_between(taus, low, high, color=colour, alpha=0.2)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("fraction of seeds with score > threshold")
    axes.set_ylim(-0.02, 1.02)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.suptitle(title)
    return _save(figure, path)


def suite_plot(per_suite: Mapping[str, Mapping[str, Estimate]], path: Path | str, title: str) -> Path:
    """IQM and 95% CI per variant, grouped by evaluation suite: `per_suite[suite][variant] -> Estimate`."""
    if not per_suite or not any(per_suite.values()):
        raise ValueError("no suites or no variants: per_suite is empty")
    suites = list(per_suite)
    variants = list(dict.fromkeys(name for estimates in per_suite.values() for name in estimates))
    width = 0.8 / len(variants)
    figure = Figure(figsize=(max(6.0, 1.2 * len(suites) * max(1, len(variants)) ** 0.5 + 2), 4.5), layout="constrained")
    axes = figure.add_subplot()
    for index, name in enumerate(variants):
        columns = [(position, per_suite[suite][name]) for position, suite in enumerate(suites) if name in per_suite[suite]]
        x = np.array([position for position, _ in columns]) - 0.4 + width * (index + 0.5)
        iqm = np.array([estimate.iqm for _, estimate in columns])
        errors = np.array([[estimate.iqm - estimate.iqm_low for _, estimate in columns],
                           [estimate.iqm_high - estimate.iqm for _, estimate in columns]])
        axes.errorbar(x, iqm, yerr=errors, fmt="o", capsize=4, color=_COLOURS[index % len(_COLOURS)], label=name)
    axes.set_xticks(range(len(suites)), suites)
    axes.set_xlabel("evaluation suite")
    axes.set_ylabel("IQM (95% CI)")
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def scatter_fit(
    x: np.ndarray, y: np.ndarray, corr: Correlation, path: Path | str, xlabel: str, ylabel: str, title: str
) -> Path:
    """Points of shape (n,), the least-squares line and its 95% confidence band, with r and its CI in the legend.

    The band is the t interval of the fitted mean, b0 + b1 x +- t(0.975, n - 2) s sqrt(1/n + (x - mean x)^2 / Sxx);
    the line needs n >= 3 and x not constant, otherwise only the points are drawn.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise ValueError(f"scatter_fit needs 1-D x and y of the same length, got shapes {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("scatter_fit: x or y contains NaN or infinite values")
    figure = Figure(figsize=(6, 4.5), layout="constrained")
    axes = figure.add_subplot()
    axes.scatter(x, y, color="C0", alpha=0.8, zorder=3, label=f"trials (n={x.size})")
    if x.size >= 3 and np.ptp(x) > 0:
        fit = scipy.stats.linregress(x, y)
        grid = np.linspace(x.min(), x.max(), 100)
        line = fit.intercept + fit.slope * grid
        residual_sd = math.sqrt(np.sum((y - fit.intercept - fit.slope * x) ** 2) / (x.size - 2))
        spread = np.sqrt(1.0 / x.size + (grid - x.mean()) ** 2 / np.sum((x - x.mean()) ** 2))
        half_width = scipy.stats.t.ppf(0.975, x.size - 2) * residual_sd * spread
        axes.plot(grid, line, color="C1", label=_fit_label(corr))
        axes.fill_between(grid, line - half_width, line + half_width, color="C1", alpha=0.2, linewidth=0, label="95% CI of fit")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def _fit_label(corr: Correlation) -> str:
    """Legend text: least squares, r and its 95% CI where there is one."""
    if math.isnan(corr.pearson_low):
        return f"least squares, r={corr.pearson_r:.2f}"
    return f"least squares, r={corr.pearson_r:.2f} [{corr.pearson_low:.2f}, {corr.pearson_high:.2f}]"


def _iqm_per_step(rewards: np.ndarray) -> np.ndarray:
    """(num_seeds, T) -> (T,): the 25% trimmed mean across seeds at each step."""
    return scipy.stats.trim_mean(rewards, 0.25, axis=0)


def _curve(name: str, steps: np.ndarray, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated (steps (T,), rewards (num_seeds, T)) as float arrays, or a one-line ValueError."""
    steps, rewards = np.asarray(steps, dtype=float), np.asarray(rewards, dtype=float)
    if steps.ndim != 1 or rewards.ndim != 2 or rewards.shape[1] != steps.size or steps.size == 0:
        raise ValueError(f"{name}: expected steps (T,) and rewards (num_seeds, T), got {steps.shape} and {rewards.shape}")
    if not (np.all(np.isfinite(steps)) and np.all(np.isfinite(rewards))):
        raise ValueError(f"{name}: steps or rewards contain NaN or infinite values")
    return steps, rewards


def _save(figure: Figure, path: Path | str) -> Path:
    """Renders `figure` to PNG and writes it to `path` atomically."""
    path = Path(path)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    write_atomic(path, buffer.getvalue())
    return path
