"""A process of a multi-process run that ends while a program compiles in the background (`rlfit.cli.run` leaves
with `os._exit`, skipping JAX's exit handler) leaves the distributed run first, so the other process's shutdown is
not left waiting for its heartbeat until it aborts. Two real processes on this machine; the heartbeat timeout is
shortened so that the failure this guards against shows in seconds (exit -6 of process 0), not minutes."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

from tests.hardware.test_background_exit import SLOW_COMPILE

JOIN = """
import jax
jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id={process_id},
                           heartbeat_timeout_seconds=8, shutdown_timeout_seconds=60)
assert len(jax.devices()) == 2  # both processes start their backend together (it exchanges the devices)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_process_ending_during_a_background_compile_leaves_the_run_so_the_other_ends_cleanly():
    port = free_port()
    first = JOIN.format(port=port, process_id=0) + "print('process 0 done', flush=True)\n"
    second = JOIN.format(port=port, process_id=1) + SLOW_COMPILE + """
import rlfit.cli
rlfit.cli.main = lambda: 143
assert compile_log.compiling_in_background()
rlfit.cli.run()
"""
    processes = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for code in (first, second)]
    (out0, err0), (_, err1) = (process.communicate(timeout=240) for process in processes)
    assert processes[1].returncode == 143, err1[-2000:]
    assert processes[0].returncode == 0, err0[-2000:]  # before the fix: -6, "Task 1 heartbeat timeout"
    assert out0.strip() == "process 0 done"
