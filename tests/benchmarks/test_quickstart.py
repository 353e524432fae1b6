"""benchmarks/quickstart.py's resumable record: a record of another command line is refused, not overwritten."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_a_record_of_another_command_line_is_one_line_exit_2_and_left_as_it_was(tmp_path):
    record = tmp_path / "quickstart.json"
    record.write_text(json.dumps({"settings": ["rlfit", "train", "Other"], "runs": [{"seed": 0, "exit_code": 0}]}))
    before = record.read_text()
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "quickstart.py"), "--quick", "--seeds", "1",
                           "--out", str(record)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"quickstart.py: error: {record} holds runs of another command line (rlfit train Other); pass another --out "
        "or --name"]
    assert record.read_text() == before
