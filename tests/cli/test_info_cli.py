"""`rlfit envs` and `rlfit keys` in a pipe whose reader stops early (`| head`): no traceback."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import cli_environment


def test_a_reader_that_goes_away_ends_the_listing_quietly(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "rlfit", "keys"], cwd=tmp_path, env=cli_environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader goes away before anything is written (as `| head` does, a little later)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 141, stderr
    assert stderr == ""
