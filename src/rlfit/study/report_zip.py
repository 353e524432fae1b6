"""The report's zip: report, plots, manifest, record and each trial's files in one archive, written aside and renamed
into place so that a failed write leaves the previous zip and no partial one."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from rlfit.errors import UserError
from rlfit.rundir.write_failures import naming
from rlfit.study.experiment import SUITES_FILE, Experiment


TRIAL_FILES_IN_ZIP = ("config.yaml", "plan.json", "summary.json", "metrics.jsonl", SUITES_FILE, "policy/policy.json",
                      "policy/weights.npz", "policy/latent.npz")
"""Each trial's files in the zip: enough to re-read every number and, with the final policy (and a bottleneck's
unfolded params), to evaluate it again."""


def check_report_paths(experiment: Experiment, zip_path: Path | None) -> None:
    """UserError, before anything is written, when EXP_DIR/report is a file or the zip's path is a directory."""
    if experiment.report_dir.exists() and not experiment.report_dir.is_dir():
        raise UserError(f"{experiment.report_dir} is a file, not a directory; move it aside so the report can be "
                        "written there")
    if zip_path is not None:
        for path in (zip_path, zip_staging(zip_path)):
            if path.is_dir():
                raise UserError(f"{path} is a directory; move it aside so the zip can be written there")


def write_zip(experiment: Experiment, zip_path: Path, with_checkpoints: bool) -> Path:
    """One archive of the report, manifest, record and each trial's config, plan, summary, metrics and suite
    results (checkpoints only `with_checkpoints`), written aside and renamed into place."""
    root = experiment.path
    files = [p for p in sorted(experiment.report_dir.rglob("*")) if p.is_file()]
    files += [root / name for name in ("manifest.yaml", "experiment.json")]
    for trial in experiment.manifest.trials():
        run_dir = experiment.trial_dir(trial)
        files += [run_dir / name for name in TRIAL_FILES_IN_ZIP if (run_dir / name).is_file()]
        if with_checkpoints and (run_dir / "checkpoints").is_dir():
            files += [p for p in sorted((run_dir / "checkpoints").rglob("*")) if p.is_file()]
    staging = zip_staging(zip_path)
    try:
        with naming(zip_path, staging), zipfile.ZipFile(staging, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, Path(root.name) / path.relative_to(root))
        os.replace(staging, zip_path)
    except BaseException:
        staging.unlink(missing_ok=True)  # a failed write (a full disk) leaves the previous zip and no partial one
        raise
    return zip_path


def zip_staging(zip_path: Path) -> Path:
    """Where the zip is written before it is renamed into place."""
    return zip_path.with_name(f".{zip_path.name}.partial")
