"""PNG figures of an experiment: learning curves, interval estimates, per-suite estimates and a fitted scatter.
Every axis names its unit; a variable that spans two decades or more is drawn on a log scale (`axis_scale`).

Each function draws on its own `matplotlib.figure.Figure` (no pyplot, no global state), renders it to PNG in
memory and writes the file atomically (a temporary sibling renamed into place); it returns the path written.
Variants keep one colour each, in the order they are given.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
from matplotlib.figure import Figure

from rlfit.rundir.atomic import write_atomic
from rlfit.study.intervals import bca_interval, iqm, iqm_t_interval, method_for
from rlfit.study.stats import Correlation, Estimate

_COLOURS = [f"C{i}" for i in range(10)]


def learning_curves(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    path: Path | str,
    title: str,
    ylabel: str = "evaluation return (sum of rewards per episode)",
    reps: int = 1000,
    seed: int = 0,
    clock: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    method: str = "auto",
) -> Path:
    """Per variant, the IQM across seeds at each evaluation as a line with its 95% CI band, against env steps
    and (with `clock`) in a second panel against training wall-clock seconds.

    `curves[name]` is (env steps (T,), rewards (num_seeds, T)); `clock[name]` is (seconds (T,), rewards) alike.
    The band at each step is the interval `method` gives the IQM there (`rlfit.study.intervals`); one seed has none.
    """
    return _save(learning_curves_figure(curves, title, ylabel, reps, seed, clock, method), path)


def learning_curves_figure(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], title: str, ylabel: str, reps: int,
                           seed: int, clock: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
                           method: str) -> Figure:
    """The figure `learning_curves` writes."""
    if not curves:
        raise ValueError("no variants: curves is empty")
    panels = [(curves, "env steps")] + ([(clock, "training wall-clock (s)")] if clock else [])
    figure = Figure(figsize=(7 * len(panels), 4.5), layout="constrained")
    for axes, (series, xlabel) in zip(figure.subplots(1, len(panels), squeeze=False)[0], panels):
        for index, (name, (x, rewards)) in enumerate(series.items()):
            x, rewards = _curve(name, x, rewards)
            colour = _COLOURS[index % len(_COLOURS)]
            axes.plot(x, iqm(rewards.T), color=colour, label=f"{name} (n={rewards.shape[0]})")
            if rewards.shape[0] > 1:
                low, high = _iqm_band(rewards, method, reps, seed)
                axes.fill_between(x, low, high, color=colour, alpha=0.2, linewidth=0)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(f"{ylabel}\nIQM over seeds, 95% CI band")
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    return figure


def _iqm_band(rewards: np.ndarray, method: str, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(num_seeds, T) -> low (T,), high (T,): the IQM's interval at each step."""
    if method_for(rewards.shape[0], method) == "t":
        return iqm_t_interval(rewards.T)
    return bca_interval(rewards.T, "iqm", reps=reps, seed=seed)


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
            if not (math.isnan(low) or math.isnan(high)):  # one seed: the point alone
                axes.hlines(row, low, high, color=colour, linewidth=8, alpha=0.5)
            axes.plot([point], [row], marker="|", markersize=14, color="black")
        axes.set_title(f"{label} over seeds (95% CI)")
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


def suite_plot(per_suite: Mapping[str, Mapping[str, Estimate]], path: Path | str, title: str,
               ylabel: str = "return (sum of rewards per episode)") -> Path:
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
        errors = np.nan_to_num(np.array([[estimate.iqm - estimate.iqm_low for _, estimate in columns],
                                         [estimate.iqm_high - estimate.iqm for _, estimate in columns]]))
        axes.errorbar(x, iqm, yerr=errors, fmt="o", capsize=4, color=_COLOURS[index % len(_COLOURS)], label=name)
    axes.set_xticks(range(len(suites)), suites)
    axes.set_xlabel("evaluation suite")
    axes.set_ylabel(f"{ylabel}, IQM over seeds (95% CI)")
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


def axis_scale(values: np.ndarray) -> str:
    """'log' when the values are positive and span two decades or more, 'symlog' when they do so among the positive
    ones but include 0, else 'linear'."""
    values = np.asarray(values, dtype=float)
    positive = values[values > 0]
    if positive.size < 2 or np.any(values < 0) or positive.max() / positive.min() < 100:
        return "linear"
    return "log" if positive.size == values.size else "symlog"


def scatter_fit(x: np.ndarray, y: np.ndarray, corr: Correlation, path: Path | str, xlabel: str, ylabel: str, title: str,
                labels: Sequence[str] | None = None) -> Path:
    """`scatter_figure` written to `path` as PNG."""
    return _save(scatter_figure(x, y, corr, xlabel, ylabel, title, labels), path)


def scatter_figure(x: np.ndarray, y: np.ndarray, corr: Correlation, xlabel: str, ylabel: str, title: str,
                   labels: Sequence[str] | None = None) -> Figure:
    """Points of shape (n,) coloured by `labels` (each trial's variant), the least-squares line and its 95% band.

    Each axis is on the scale `axis_scale` gives it, and the line is fitted on those scales (log10 of a log axis),
    so it is straight where it is drawn. On a symlog axis (a variable spanning decades that includes 0) no straight
    line exists: only the points are drawn. The band is the t interval of the fitted mean, b0 + b1 u +- t(0.975,
    n - 2) s sqrt(1/n + (u - mean u)^2 / Suu); the line needs n >= 3 and u not constant. `corr` is the
    correlation on the same scales (its r is in the legend).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise ValueError(f"scatter_fit needs 1-D x and y of the same length, got shapes {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("scatter_fit: x or y contains NaN or infinite values")
    labels = list(labels) if labels is not None else ["trials"] * x.size
    figure = Figure(figsize=(6.5, 4.5), layout="constrained")
    axes = figure.add_subplot()
    _scatter_variants(axes, x, y, labels)
    x_scale, y_scale = axis_scale(x), axis_scale(y)
    u, v = on_scale(x, x_scale), on_scale(y, y_scale)
    if x.size >= 3 and np.ptp(u) > 0 and "symlog" not in (x_scale, y_scale):
        fit = scipy.stats.linregress(u, v)
        grid = np.linspace(u.min(), u.max(), 200)
        line = fit.intercept + fit.slope * grid
        residual_sd = math.sqrt(np.sum((v - fit.intercept - fit.slope * u) ** 2) / (x.size - 2))
        spread = np.sqrt(1.0 / x.size + (grid - u.mean()) ** 2 / np.sum((u - u.mean()) ** 2))
        half_width = scipy.stats.t.ppf(0.975, x.size - 2) * residual_sd * spread
        drawn = _off_scale(grid, x_scale)
        axes.plot(drawn, _off_scale(line, y_scale), color="black", label=_fit_label(corr, x_scale, y_scale))
        axes.fill_between(drawn, _off_scale(line - half_width, y_scale), _off_scale(line + half_width, y_scale),
                          color="grey", alpha=0.2, linewidth=0, label="95% CI of fit")
    for setter, scale, values in ((axes.set_xscale, x_scale, x), (axes.set_yscale, y_scale, y)):
        setter(scale, **({"linthresh": float(values[values > 0].min())} if scale == "symlog" else {}))
    axes.set_xlabel(xlabel + (" (log scale)" if x_scale != "linear" else ""))
    axes.set_ylabel(ylabel + (" (log scale)" if y_scale != "linear" else ""))
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return figure


def on_scale(values: np.ndarray, scale: str) -> np.ndarray:
    """log10(values) on a log axis, else the values: what a fit or a correlation on that axis uses."""
    return np.log10(values) if scale == "log" else np.asarray(values, dtype=float)


def _off_scale(values: np.ndarray, scale: str) -> np.ndarray:
    """The inverse of `on_scale`: fitted values back in the variable's own units."""
    return 10.0 ** values if scale == "log" else values


def _fit_label(corr: Correlation, x_scale: str = "linear", y_scale: str = "linear") -> str:
    """Legend text: least squares (on log10 of a log axis), r and its 95% CI where there is one."""
    what = ("least squares on " + ("log10 y" if y_scale == "log" else "y") + " against "
            + ("log10 x" if x_scale == "log" else "x"))
    if math.isnan(corr.pearson_low):
        return f"{what}, r={corr.pearson_r:.2f}"
    return f"{what}, r={corr.pearson_r:.2f} [{corr.pearson_low:.2f}, {corr.pearson_high:.2f}]"


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


def _scatter_variants(axes: Any, x: np.ndarray, y: np.ndarray, labels: Sequence[str]) -> None:
    """Points (x, y) of shape (n,) on `axes`, one colour per variant in `labels` (first-seen order), each labelled
    with its count."""
    for index, name in enumerate(dict.fromkeys(labels)):
        chosen = np.array([label == name for label in labels])
        axes.scatter(x[chosen], y[chosen], color=_COLOURS[index % len(_COLOURS)], alpha=0.8, zorder=3,
                     label=f"{name} (n={int(chosen.sum())})")


def scatter_by_variant(x: np.ndarray, y: np.ndarray, labels: Sequence[str], path: Path | str, xlabel: str, ylabel: str,
                       title: str) -> Path:
    """Points of shape (n,) coloured by `labels` (each trial's variant) with the line y = x dashed: a point below it
    kept less out of distribution than it earned in distribution. Written to `path` as PNG."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    figure = Figure(figsize=(6.5, 4.5), layout="constrained")
    axes = figure.add_subplot()
    _scatter_variants(axes, x, y, labels)
    low, high = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    axes.plot([low, high], [low, high], color="black", linestyle="--", linewidth=1, label="y = x")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=9)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    return _save(figure, path)
