"""The command line answers what needs no JAX without importing it (issue 64, item 7): building the parser, `--help`,
`--version`, an argument error and a run directory that does not exist (resume, export, play, transfer-check). Each
case runs in a new interpreter, which then reports which of the heavy libraries `sys.modules` holds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlfit.versions import __version__

HEAVY = ("jax", "jaxlib", "flax", "optax", "mujoco", "mujoco_playground", "brax")
"""What only training, evaluation, export and play need (seconds to import on 2 cores)."""
MISSING = "no-such-run-dir"

PROBE = """
import contextlib, io, json, sys
argv = json.loads(sys.argv[1])
out, err, code = io.StringIO(), io.StringIO(), None
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    if argv is None:
        from rlfit.cli import build_parser
        build_parser()
    elif argv == "control":
        import rlfit.run.loop
    else:
        from rlfit.cli import main
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "heavy": sorted(name for name in json.loads(sys.argv[2]) if name in sys.modules)}))
"""


def probe(argv: list[str] | str | None, cwd) -> dict:
    """Runs `rlfit.cli.main(argv)` (None: only `build_parser()`) in a new interpreter; its exit code, output and
    which of HEAVY it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_probe_sees_jax_where_a_module_imports_it(tmp_path):
    assert "jax" in probe("control", tmp_path)["heavy"]  # else the checks below could not fail


def test_building_the_parser_imports_no_jax(tmp_path):
    assert probe(None, tmp_path)["heavy"] == []


@pytest.mark.parametrize(("argv", "code", "says"), [
    (["--help"], 0, "usage: rlfit"),
    (["--version"], 0, f"rlfit {__version__}"),
    (["train", "--help"], 0, "usage: rlfit train"),
    (["train", "CartpoleBalance", "--formt", "x"], 2, "unrecognized arguments: --formt"),
    (["export", MISSING, "--format", "pdf"], 2, "invalid choice: 'pdf'"),
    (["resume", MISSING], 2, f"{MISSING} is not an rlfit run directory"),
    (["export", MISSING], 2, f"run directory {MISSING} does not exist"),
    (["play", MISSING], 2, f"run directory {MISSING} does not exist"),
    (["transfer-check", MISSING], 2, f"run directory {MISSING} does not exist"),
])
def test_parsing_and_path_checks_answer_without_jax(tmp_path, argv, code, says):
    result = probe(argv, tmp_path)
    assert (result["code"] or 0) == code, result
    assert says in result["out"] + result["err"], result
    assert result["heavy"] == [], f"`rlfit {' '.join(argv)}` imported {result['heavy']}"
    assert list(tmp_path.iterdir()) == []  # an error writes nothing
