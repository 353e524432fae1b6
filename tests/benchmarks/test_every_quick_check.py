"""Every benchmark's `--quick` check, run as a user runs it (`python -m benchmarks run NAME --quick`): it ends with
exit code 0, writes its JSON under benchmarks/results/tmp/ (which git ignores) and leaves every committed result as
it was. The checks compile into the test session's cache (tests/conftest.py), so one finds the programs an earlier
one compiled (plan_fit_check.py's probes are memory_prediction.py's; the toy environment's smoke programs that
quickstart.py's check compiles are throughput.py's, kill9_stress.py's, pointmass_collapse.py's and seeds_vmap.py's,
whose quick modes keep the cache RLFIT_CACHE_DIR names: benchmarks/common.py's `quick_cache`); those that measure a
cold compile make a fresh cache of their own, as their full runs do. Those needing Brax's venv or torch skip without
them; the others take seconds to a minute or two each on 2 cores (benchmarks/registry.py's QUICK_MEASURED), so this
file starts first in `make test` (tests/conftest.py's SCHEDULED_FIRST)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from benchmarks import registry
from tests.conftest import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results"


def committed_results() -> dict[str, bytes]:
    """Every file under benchmarks/results/ but its git-ignored tmp/, by path: its bytes."""
    return {path.relative_to(RESULTS).as_posix(): path.read_bytes() for path in RESULTS.rglob("*")
            if path.is_file() and "tmp" not in path.relative_to(RESULTS).parts}


@pytest.mark.parametrize("name", [b.name for b in registry.BENCHMARKS if b.quick])
def test_the_quick_check_runs_and_writes_only_under_results_tmp(name):
    needs = registry.by_name()[name].needs
    if needs == "torch":
        pytest.importorskip("torch", reason="encoder_parity.py compares with torchvision and transformers")
    elif needs and not (REPO_ROOT / needs).exists():
        pytest.skip(f"{needs} is missing (python benchmarks/brax_compare.py --quick builds it, about 15 minutes)")
    before = committed_results()
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", name, "--quick"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = re.findall(r"^wrote (\S+\.json)$", done.stdout, flags=re.M)
    assert written and all(path.startswith("benchmarks/results/tmp/") for path in written), done.stdout[-3000:]
    assert all((REPO_ROOT / path).is_file() for path in written)
    assert committed_results() == before
