"""One run trained by two processes through `jax.distributed` on this machine's CPU (gloo collectives), as on
two hosts: process 0 alone writes, the checkpoint resumes in one process, a SIGTERM to either stops both.

One two-process run serves every test: its programs run out of memory above 32 environments (injected), so it
backs off from 128 to 32 before it trains, and it is resumed last. The runs over two processes are real processes;
the one-process runs (the reference run and the resume in one process) are the CLI's main in the test's process
(`tests.conftest.cli_in_process`: the code path of `python -m rlfit` without an interpreter start), whose JAX is one
process with one CPU device."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES, cli_environment, cli_in_process

RUN = [*TOY_TRAIN_OVERRIDES, "run.eval_every=2", "run.save_interval=2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_processes(run_dir, overrides, cwd, command: tuple[str, ...] = (),
                    interpreter: tuple[str, ...] = ("-m", "rlfit")) -> list[subprocess.Popen]:
    """Two processes of `rlfit train` (or `command`, e.g. `resume RUN_DIR`) joined through jax.distributed;
    `interpreter` is what `python` runs with the command's arguments (the CLI, or a script that calls it)."""
    port = free_port()
    sets = [arg for o in overrides for arg in ("--set", o)]
    command = command or ("train", TOY_ENV, "--preset", "smoke", *sets, "--run-dir", str(run_dir))
    return [subprocess.Popen([sys.executable, *interpreter, *command, "--quiet", "--distributed", "--coordinator",
                              f"localhost:{port}", "--num-processes", "2", "--process-id", str(index)],
                             cwd=cwd, env=cli_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
            for index in (0, 1)]


def finish(processes, timeout: float = 600) -> list[tuple[int, str]]:
    out = []
    for process in processes:
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in processes:
                p.kill()
            raise
        out.append((process.returncode, stderr))
    return out


def train_iterations(run_dir) -> list[int]:
    """The iterations of metrics.jsonl's training rows (a line still being written left out)."""
    text = (run_dir / "metrics.jsonl").read_text()
    return [row["iteration"] for row in map(json.loads, text[:text.rfind("\n") + 1].splitlines()) if "sps" in row]


BACKED_OFF = [o for o in RUN if not o.startswith(("ppo.num_envs", "ppo.batch_size"))] + [
    "ppo.num_envs=128", "ppo.batch_size=128", "run.num_timesteps=12800"]
"""RUN with 4 times the environments: memory runs out above 32 (`tests.parallel.out_of_memory`), so the run backs off
twice, 128 -> 64 -> 32, to RUN's sizes: 5 iterations of 2560 env steps."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run trained by two processes whose programs run out of memory above 32 environments (the BACKED_OFF
    overrides): (its run dir, what it held when they finished: summary, plan, metrics.jsonl's rows, checkpoints,
    files of the last checkpoint's state). The SIGTERM test resumes this run dir; the snapshot is what the other
    tests read."""
    root = tmp_path_factory.mktemp("distributed")
    run_dir = root / "run"
    results = finish(start_processes(run_dir, BACKED_OFF, root, interpreter=("-m", "tests.parallel.out_of_memory")))
    assert [code for code, _ in results] == [0, 0], [err[-2000:] for _, err in results]
    return run_dir, {
        "summary": json.loads((run_dir / "summary.json").read_text()),
        "plan": json.loads((run_dir / "plan.json").read_text()),
        "rows": [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()],
        "iterations": train_iterations(run_dir),
        "checkpoints": sorted(p.name for p in (run_dir / "checkpoints").iterdir()),
        "state_files": {p.name for p in (run_dir / "checkpoints" / "00000005" / "state").iterdir()}}


def test_two_processes_train_one_run_written_once_that_learns_what_one_process_learns(trained, tmp_path, capfd,
                                                                                       monkeypatch):
    """The reference: the same overrides trained by one process on one device (the CLI's main in this process,
    its programs running out of memory above 32 environments too, so it backs off as the two processes did)."""
    from rlfit.run.trainer import Trainer
    from tests.parallel.out_of_memory import running_out_above_most_envs

    _, written = trained
    summary = written["summary"]
    assert summary["devices"]["processes"] == 2 and summary["devices"]["devices"] == 2
    assert summary["iterations"] == 5
    assert written["iterations"] == [1, 2, 3, 4, 5]  # one set of metrics, not one per process
    assert written["checkpoints"] == ["00000002", "00000004", "00000005"], written["checkpoints"]
    # each process wrote its own shards of the arrays (Orbax's OCDBT keeps one folder per process)
    assert {"ocdbt.process_0", "ocdbt.process_1"} <= written["state_files"], written["state_files"]
    # one device per process and the same global sizes: the run learns what one process on one device learns
    monkeypatch.setattr(Trainer, "compile", running_out_above_most_envs(Trainer.compile))
    single = tmp_path / "single"
    done = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", *[a for o in BACKED_OFF for a in ("--set", o)],
                          "--run-dir", str(single), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reference = json.loads((single / "summary.json").read_text())
    assert reference["sizes"]["num_envs"] == 32 and reference["iterations"] == 5
    assert summary["final_eval_reward"] == pytest.approx(reference["final_eval_reward"], rel=1e-4)


def test_two_processes_out_of_memory_together_back_off_together_from_the_checkpoint_and_finish(trained):
    """Both processes hit RESOURCE_EXHAUSTED compiling at more than 32 environments (injected, as a program too
    large for every device would): they agree, back off twice (128 -> 64 -> 32) reading the starting checkpoint
    each time, and finish; process 0 alone records the back-offs."""
    _, written = trained
    summary = written["summary"]
    assert [(e["from"]["num_envs"], e["to"]["num_envs"]) for e in summary["events"]] == [(128, 64), (64, 32)]
    assert summary["sizes"]["num_envs"] == 32 and summary["devices"]["processes"] == 2
    assert written["plan"]["sizes"]["num_envs"] == 32
    assert [r["to"]["num_envs"] for r in written["rows"] if r["kind"] == "event"] == [64, 32]  # written once
    assert written["iterations"] == list(range(1, summary["iterations"] + 1))


def test_a_run_resumed_on_two_processes_stops_on_both_after_a_sigterm_to_either_with_a_checkpoint_and_resumes_in_one(
        trained, tmp_path, capfd):
    """The two processes' run resumed by two processes (`rlfit resume RUN_DIR --distributed ...`) until a SIGTERM
    to the process that does not write stops both after the same iteration, with a checkpoint; then plain `rlfit
    resume` (the CLI's main, in this process) continues it in one process."""
    run_dir, _ = trained
    processes = start_processes(run_dir, [], tmp_path, ("resume", str(run_dir), "--iterations", "10000"))
    deadline = time.monotonic() + 300
    while train_iterations(run_dir)[-1] <= 5:
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), "the resume never trained"
        time.sleep(0.2)
    processes[1].send_signal(signal.SIGTERM)  # the process that does not write
    (code0, err0), (code1, err1) = finish(processes, timeout=300)
    assert code1 == 128 + signal.SIGTERM, err1[-2000:]
    assert code0 == 0, err0[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "a stop on another process" and summary["devices"]["processes"] == 2
    newest = max(int(p.name) for p in (run_dir / "checkpoints").iterdir())
    assert 5 < newest == summary["iterations"] == train_iterations(run_dir)[-1] < 10000
    assert train_iterations(run_dir) == list(range(1, newest + 1))  # continued from the checkpoint, written once
    resumed = cli_in_process(capfd, "resume", str(run_dir), "--iterations", str(newest + 2), "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["iterations"] == newest + 2 and summary["devices"]["processes"] == 1
    assert train_iterations(run_dir) == list(range(1, newest + 3))
