"""A process that ends while a program is still compiling in a background thread ends with its own exit code.

Without care, the interpreter tears the daemon thread down inside XLA's C++ compile and the process aborts
("terminate called ... FATAL: exception not rethrown", SIGABRT), which is what a run stopped before its first
evaluation did. These start a compile of a few seconds and leave at once, in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SLOW_COMPILE = """
import jax, jax.numpy as jnp
from rlfit.hardware import compile_log

def chain(x):
    for i in range(400):
        x = jnp.sin(x) @ x + i
    return x

lowered = jax.jit(chain).lower(jnp.ones((64, 64)))
future = compile_log.in_background(lambda: lowered.compile())
"""


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600)


def test_a_python_process_waits_for_its_background_compile_at_exit():
    result = run_python(SLOW_COMPILE + "print('leaving', flush=True)\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "leaving"
    assert "terminate called" not in result.stderr


def test_the_command_line_leaves_with_its_exit_code_while_a_compile_runs():
    """`rlfit.cli.run` (the `rlfit` command) flushes its output and ends with main()'s code, compile or not."""
    code = SLOW_COMPILE + """
import rlfit.cli
rlfit.cli.main = lambda: (print("done", flush=False), 3)[1]
assert compile_log.compiling_in_background()
rlfit.cli.run()
"""
    result = run_python(code)
    assert result.returncode == 3, result.stderr[-2000:]
    assert result.stdout.strip() == "done"
    assert "terminate called" not in result.stderr
