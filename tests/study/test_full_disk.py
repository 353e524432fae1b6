"""A full disk during `rlfit experiment` or `rlfit report` is one line and exit code 4; the trials, the report
and the zip written before stay as they were, and `rlfit experiment resume` finishes once there is room.

A real size-limited tmpfs where the machine allows it (root), and the error injected at each write (report.md,
plots, the zip, a trial's checkpoint) everywhere."""

from __future__ import annotations

import json
import logging
import zipfile

import pytest
import yaml

from tests.conftest import TOY_ENV, cli_in_process
from tests.full_disk import disk_full, grow, small_tmpfs

MANIFEST = {
    "name": "disk", "env": TOY_ENV, "preset": "smoke", "seeds": 1, "seeds_per_program": 1,
    "set": ["env.episode_length=50", "run.num_timesteps=640", "run.save_interval=2", "run.eval_every=5"],
}
"""One trial of 10 iterations of 64 env steps, saved every 2."""
HAND_MADE = {"name": "made", "env": TOY_ENV, "preset": "smoke", "seeds": 3,
             "variants": [{"name": "a", "set": {"ppo.learning_rate": 1e-3}},
                          {"name": "b", "set": {"ppo.learning_rate": 1e-4}}]}


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    from rlfit.study import report

    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def experiment_dir(root):
    [path] = [p for p in (root / "out").iterdir() if p.is_dir()]
    return path


def assert_resume_finishes(capfd, experiment, cwd) -> None:
    resumed = cli_in_process(capfd, "experiment", "resume", str(experiment), cwd=cwd)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((experiment / "trials" / "base" / "seed-0" / "summary.json").read_text())
    assert summary["iterations"] == 10 and summary["stopped_by"] is None
    assert (experiment / "report" / "report.md").is_file() and (experiment / "disk.zip").is_file()


def test_experiment_on_a_real_full_disk_stops_in_one_line_and_resumes_once_there_is_room(tmp_path, capfd):
    from tests.checkpoints.conftest import rlfit

    manifest = tmp_path / "disk.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST))
    with small_tmpfs("280k") as disk:
        # A real process: Orbax's threads and event loops, and the interpreter's exit, are part of what is checked.
        result = rlfit(tmp_path, "experiment", str(manifest), "--dir", str(disk / "out"))
        experiment = experiment_dir(disk)
        assert result.returncode == 4, result.stderr
        line = one_line(result.stderr)
        assert "No space left on device" in line and f"`rlfit experiment resume {experiment}`" in line
        grow(disk, "16m")
        assert_resume_finishes(capfd, experiment, tmp_path)


def test_a_trials_checkpoint_refused_inside_orbax_stops_the_experiment(tmp_path, capfd, monkeypatch):
    import rlfit.checkpoints.format as checkpoint

    real = checkpoint._orbax
    calls = []
    message = "RESOURCE_EXHAUSTED: Error writing: No space left on device [os_error_code='28']"

    class FillsUp:
        def save(self, path, item):
            calls.append(path)
            if len(calls) == 2:
                logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", message)
                raise ValueError(message)
            return real().save(path, item)

    monkeypatch.setattr(checkpoint, "_orbax", FillsUp)
    manifest = tmp_path / "disk.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST))
    result = cli_in_process(capfd, "experiment", str(manifest), "--dir", str(tmp_path / "out"), cwd=tmp_path)
    experiment = experiment_dir(tmp_path)
    assert result.returncode == 4
    line = one_line(result.stderr)
    trial = experiment / "trials" / "base" / "seed-0"
    assert line == (f"rlfit: error: trial base/seed-0: cannot write checkpoint for iteration 2 in {trial / 'checkpoints'}: "
                    f"No space left on device; earlier checkpoints are intact; free space, then "
                    f"`rlfit experiment resume {experiment}`")
    assert sorted(p.name for p in (trial / "checkpoints").iterdir()) == ["00000000"]
    monkeypatch.undo()
    assert_resume_finishes(capfd, experiment, tmp_path)


@pytest.fixture
def finished(tmp_path):
    """A hand-made experiment whose every trial finished (nothing trained), its report and zip written once."""
    experiment = tmp_path / "made"
    trials = []
    for variant, base in (("a", 10.0), ("b", 40.0)):
        for seed in range(3):
            run_dir = experiment / "trials" / variant / f"seed-{seed}"
            run_dir.mkdir(parents=True)
            (run_dir / "summary.json").write_text(json.dumps({"stopped_by": None, "final_eval_reward": base + seed,
                                                              "iterations": 10}))
            (run_dir / "config.yaml").write_text(yaml.safe_dump({"ppo": {"learning_rate": 1e-3}}))
            trials.append(f"{variant}/seed-{seed}")
    (experiment / "manifest.yaml").write_text(yaml.safe_dump(HAND_MADE))
    (experiment / "experiment.json").write_text(json.dumps({"name": "made", "stage": None, "set": [],
                                                            "trials": trials}))
    return experiment


def written(experiment) -> dict[str, bytes]:
    """The report's files and the zip, with their bytes."""
    files = [p for p in sorted(experiment.rglob("*")) if p.is_file() and "trials" not in p.parts]
    return {str(p.relative_to(experiment)): p.read_bytes() for p in files}


def report_refused(capfd, experiment, monkeypatch, module, name: str = "write_atomic") -> str:
    """`rlfit report --zip` once, then `rlfit report` with `module.name` (a write) refusing: exit 4 and one line
    (returned), and the report and zip as the first run left them."""
    first = cli_in_process(capfd, "report", str(experiment), "--zip", cwd=experiment.parent)
    assert first.returncode == 0, first.stderr
    before = written(experiment)

    def refuses(path, *args, **kwargs):
        raise disk_full(path)

    monkeypatch.setattr(module, name, refuses)
    result = cli_in_process(capfd, "report", str(experiment), cwd=experiment.parent)
    assert result.returncode == 4
    line = one_line(result.stderr)
    assert "No space left on device" in line and "free space, then run `rlfit report` again" in line
    assert written(experiment) == before
    return line


def test_report_md_refused_is_one_line_and_keeps_the_report(finished, capfd, monkeypatch):
    from rlfit.study import report

    line = report_refused(capfd, finished, monkeypatch, report)
    assert f"cannot write {finished / 'report' / 'report.md'}" in line


def test_a_plot_refused_is_one_line_and_keeps_the_report(finished, capfd, monkeypatch):
    from rlfit.study import plots

    line = report_refused(capfd, finished, monkeypatch, plots)
    assert f"cannot write {finished / 'report'}/" in line and ".png" in line


def test_the_zip_refused_is_one_line_and_keeps_the_zip(finished, capfd, monkeypatch):
    real = zipfile.ZipFile.write
    calls = []

    def fills_up(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # part of the way through
            raise disk_full()
        return real(self, *args, **kwargs)

    first = cli_in_process(capfd, "report", str(finished), "--zip", cwd=finished.parent)
    assert first.returncode == 0, first.stderr
    before = written(finished)
    monkeypatch.setattr(zipfile.ZipFile, "write", fills_up)
    result = cli_in_process(capfd, "report", str(finished), "--zip", cwd=finished.parent)
    assert result.returncode == 4
    assert (f"cannot write {finished / 'made.zip'}: No space left on device; free space, then run `rlfit report` "
            "again") in one_line(result.stderr)
    assert written(finished) == before  # the previous zip, and no partial one beside it
    assert zipfile.ZipFile(finished / "made.zip").testzip() is None


def test_report_on_a_real_full_disk_keeps_the_report_and_the_zip(finished, capfd):
    import os
    import shutil

    with small_tmpfs("2m") as disk:
        experiment = disk / "made"
        shutil.copytree(finished, experiment)
        first = cli_in_process(capfd, "report", str(experiment), "--zip", cwd=disk)
        assert first.returncode == 0, first.stderr
        before = written(experiment)
        stat = os.statvfs(disk)
        (disk / "filler").write_bytes(bytes(stat.f_bavail * stat.f_frsize - 8192))  # 8 KiB left: no plot fits
        result = cli_in_process(capfd, "report", str(experiment), "--zip", cwd=disk)
        assert result.returncode == 4
        line = one_line(result.stderr)
        assert f"cannot write {experiment}/" in line and "No space left on device" in line
        assert written(experiment) == before  # every file as it was, no temporary one beside them
