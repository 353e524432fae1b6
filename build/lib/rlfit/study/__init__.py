"""Experiments: many trials (variants x seeds), their statistics, plots and report."""
