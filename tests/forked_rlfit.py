"""`python -m rlfit ARGS` as real processes (to signal, kill -9 or race) without an interpreter start and rlfit's
imports each: a server process imports what every command imports, once, and forks a child per command, which runs
`rlfit` as `python -m rlfit` does (its own process, pid, signal handlers, exit status and atexit; stdout and stderr
in files). It forks with one thread and before JAX has a backend (checked), so each child starts JAX afresh. Not
for a test of a fresh interpreter's import state: the child starts with the server's modules imported.

`ForkServer.start(args, cwd)` returns a `Forked`, which answers `pid`, `poll`, `send_signal`, `communicate` and
`returncode` as the `subprocess.Popen` of `python -m rlfit ARGS` would."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = r'''
import json, os, select, sys, threading
import rlfit.cli, rlfit.run.loop, rlfit.run.session, rlfit.run.resume, orbax.checkpoint, tensorboardX
import rlfit.algos.ppo.algorithm, rlfit.algos.sac.algorithm, rlfit.algos.fasttd3.algorithm  # what commands import
from jax._src import xla_bridge
assert threading.active_count() == 1 and not xla_bridge._backends, "forking is safe only single-threaded"
requests, replies = sys.stdin.buffer, os.fdopen(1, "w", buffering=1)
print("ready", file=replies)
children, pending = set(), b""
while True:
    ready, _, _ = select.select([requests], [], [], 0.05 if children else None)
    if ready:
        data = os.read(requests.fileno(), 65536)
        if not data:
            break
        pending += data
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: `python -m rlfit ARGS` in request["cwd"]
            os.chdir(request["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            sys.stdin, sys.stdout, sys.stderr = (  # as Python opens them: stderr line-buffered
                open(0, closefd=False), open(1, "w", closefd=False),
                open(2, "w", buffering=1, errors="backslashreplace", closefd=False))
            sys.argv = ["rlfit", *request["args"]]
            import runpy
            runpy.run_module("rlfit", run_name="__main__", alter_sys=True)
            sys.exit(0)
        children.add(pid)
        print("started", pid, file=replies)
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            print("exited", pid, os.waitstatus_to_exitcode(status), file=replies)
'''


class ForkServer:
    """The server process; `start` forks a `python -m rlfit ARGS` from it. Close it with `close`."""

    def __init__(self, env: dict[str, str]):
        self.folder = Path(tempfile.mkdtemp(prefix="rlfit-forked-"))
        self.server_err = self.folder / "server.err"
        with self.server_err.open("wb") as err:
            self.process = subprocess.Popen([sys.executable, "-c", SERVER], env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err)
        self.exited: dict[int, int] = {}
        self.started = 0
        self._pending = b""
        assert self._line(timeout=300) == ["ready"], self.server_err.read_text()

    def _line(self, timeout: float) -> list[str] | None:
        """The server's next reply (exits are recorded), or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                return None
            data = os.read(self.process.stdout.fileno(), 65536)
            assert data, f"the fork server ended: {self.server_err.read_text()}"
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        words = line.decode().split()
        if words[0] == "exited":
            self.exited[int(words[1])] = int(words[2])
        return words

    def collect(self, timeout: float = 0.0) -> None:
        """Records the exits the server has reported (waiting up to `timeout` for the first)."""
        while self._line(timeout) is not None:
            timeout = 0.0

    def start(self, args: list[str], cwd: Path) -> Forked:
        self.started += 1
        out, err = self.folder / f"{self.started}.out", self.folder / f"{self.started}.err"
        request = {"args": list(args), "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        while (words := self._line(timeout=60)) is not None and words[0] != "started":
            pass
        assert words is not None, "the fork server did not start the command"
        return Forked(self, int(words[1]), out, err)

    def close(self) -> None:
        """Ends the server (a command still running goes on, as a `subprocess.Popen`'s would)."""
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class Forked:
    """A forked `python -m rlfit ARGS`, answering as its `subprocess.Popen` (text output) would."""

    def __init__(self, server: ForkServer, pid: int, out: Path, err: Path):
        self.server, self.pid, self.out, self.err = server, pid, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        self.server.collect()
        self.returncode = self.server.exited.get(self.pid)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(["rlfit"], timeout or 0)
            self.server.collect(timeout=min(left, 1.0))
        return self.out.read_text(), self.err.read_text()
