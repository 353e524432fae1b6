"""rlfit.cli.gc_thresholds: an `rlfit` process runs Python's young collection every YOUNG_THRESHOLD allocations,
set before the command imports anything heavy; a higher threshold, or a disabled collector, is left as it is."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

import rlfit.cli
from rlfit.cli.gc_thresholds import YOUNG_THRESHOLD, collect_less_often


@pytest.fixture
def thresholds():
    """Python's default thresholds during the test; the test process's own afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_the_young_threshold_is_raised_and_the_older_ones_kept(thresholds):
    gc.set_threshold(700, 7, 9)
    assert collect_less_often() == (YOUNG_THRESHOLD, 7, 9) == gc.get_threshold()
    assert YOUNG_THRESHOLD > 700


@pytest.mark.parametrize("young", [0, YOUNG_THRESHOLD, 5 * YOUNG_THRESHOLD])
def test_a_disabled_young_generation_or_a_higher_threshold_is_left_alone(thresholds, young):
    gc.set_threshold(young, 10, 10)
    assert collect_less_often() == (young, 10, 10)


def test_the_command_sets_the_thresholds_before_its_main_runs(thresholds, monkeypatch):
    seen = []
    monkeypatch.setattr(rlfit.cli, "main", lambda: seen.append(gc.get_threshold()) or 0)
    with pytest.raises(SystemExit) as exited:
        rlfit.cli.run()
    assert exited.value.code == 0 and seen == [(YOUNG_THRESHOLD, 10, 10)]


def test_python_dash_m_rlfit_collects_at_rlfits_thresholds(tmp_path):
    """The thresholds of a real `python -m rlfit` process, read at its exit (an `atexit` hook a `sitecustomize`
    on its path installs: the command's own code is untouched)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, gc, json, os\n"
        "atexit.register(lambda: open(os.environ['THRESHOLDS_OUT'], 'w').write(json.dumps(gc.get_threshold())))\n")
    out = tmp_path / "thresholds.json"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "THRESHOLDS_OUT": str(out)}
    done = subprocess.run([sys.executable, "-m", "rlfit", "--version"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuple(json.loads(out.read_text())) == (YOUNG_THRESHOLD, 10, 10)
