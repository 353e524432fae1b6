"""Weights & Biases: each metrics row logged to a W&B run, online or offline, never at the cost of training.

`run.wandb` chooses: off, online, offline, or auto. auto and online ask W&B's API, with the API key, who the key
belongs to (`wandb_check`), within `run.wandb_timeout_s`; only W&B's own answer means online. On any failure the
run logs offline, in one line naming the cause, and keeps a complete record for `wandb sync`; online without any
key is refused before the run starts. `WANDB_MODE` in the environment overrides `run.wandb` for a run that uses
W&B (it never turns on W&B for a run with `run.wandb=off`). The W&B files live in `<run dir>/wandb/`; the W&B
run's id is kept in `<run dir>/wandb_id`, so `rlfit resume` continues the same W&B run.

metrics.jsonl stays the record; W&B is a view of it. Any later error from W&B prints one line and turns this sink
off; the run goes on. W&B steps are env steps and only move forward: rows repeated after a rewind (out-of-memory
back-off) or a resume from an earlier checkpoint are not sent again, so W&B keeps the values first logged there.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import string
import sys
import time
from collections.abc import Callable
from typing import Any

from rlfit.rundir.atomic import write_atomic
from rlfit.config.schema import Config, RunConfig
from rlfit.errors import UserError
from rlfit.rundir.layout import RunDir
from rlfit.sinks.tensorboard import scalars
from rlfit.sinks.wandb_check import NO_KEY, api_key, base_url, check_service, has_identity_token, short

ENV_MODES = {"online": "online", "run": "online", "shared": "online", "offline": "offline", "dryrun": "offline",
             "disabled": "off"}
"""What each `WANDB_MODE` value means here."""
LOCAL_INIT_TIMEOUT_S = 60.0
"""The longest an offline `wandb.init` (local: it starts W&B's helper process) may take."""
MIN_ONLINE_INIT_S = 1.0
"""The least time an online `wandb.init` gets, when the check used up nearly all of `run.wandb_timeout_s`."""
FINISH_TIMEOUT_S = 120.0
"""The longest closing may wait for uploads; what is left stays on disk for `wandb sync`."""
ID_FILE = "wandb_id"
INSTALL_HINT = "pip install 'rlfit[wandb]'"

Warn = Callable[[str], None]


def print_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def choose_mode(run_config: RunConfig) -> str:
    """'off', 'online' or 'offline' for this run (see `decide_mode`)."""
    return decide_mode(run_config)[0]


def decide_mode(run_config: RunConfig) -> tuple[str, str]:
    """(mode, why offline when online was wanted, else ''); takes at most about `run.wandb_timeout_s`."""
    if run_config.wandb == "off":
        return "off", ""
    forced = mode_from_env()
    if forced in ("off", "offline"):
        return forced, f"WANDB_MODE={os.environ['WANDB_MODE']}"
    if (forced or run_config.wandb) == "offline":
        return "offline", ""
    url = base_url()
    key = api_key(url)
    if key is None and not has_identity_token():
        return "offline", NO_KEY
    check = check_service(url, key, run_config.wandb_timeout_s)
    return ("online", "") if check.online else ("offline", check.cause)


def wanted_mode(run_config: RunConfig) -> str:
    """The mode the user asked for: `WANDB_MODE` when it is set to a W&B mode (and W&B is on), else `run.wandb`."""
    if run_config.wandb == "off":
        return "off"
    return mode_from_env() or run_config.wandb


def online_asked_by() -> str:
    """Who asked for online: `WANDB_MODE=online` or `run.wandb=online`."""
    return "WANDB_MODE=online" if mode_from_env() == "online" else "run.wandb=online"


def mode_from_env() -> str | None:
    """The mode `WANDB_MODE` asks for, or None when it is unset or not a W&B mode."""
    return ENV_MODES.get(os.environ.get("WANDB_MODE", "").strip().lower())


def wandb_installed() -> bool:
    return importlib.util.find_spec("wandb") is not None


def check_wandb_available(config: Config) -> None:
    """Raises a UserError when the run asks for W&B (online or offline) and wandb is not installed, or asks for
    online (`run.wandb` or `WANDB_MODE`) without any W&B credentials: wandb would ask for a key at the terminal."""
    asked = config.run.wandb
    if asked in ("online", "offline") and mode_from_env() != "off" and not wandb_installed():
        raise UserError(f"run.wandb={asked} needs W&B: {INSTALL_HINT}")
    if wanted_mode(config.run) == "online" and api_key(base_url()) is None and not has_identity_token():
        raise UserError(f"{online_asked_by()} needs a W&B API key: set WANDB_API_KEY or run `wandb login` (or use "
                        "run.wandb=auto, which logs offline without one)")


def open_wandb_sink(config: Config, run_dir: RunDir, warn: Warn | None = None) -> WandbSink | None:
    """The W&B sink of a run, or None when W&B is off (or not installed and `run.wandb=auto`).

    Raises a UserError when `run.wandb` is online or offline and wandb is not installed, or online without a key.
    When online was wanted (auto or online) and W&B does not answer as itself within `run.wandb_timeout_s`, or its
    online start fails in what is left of that time, the run logs offline and one line says why and how to upload
    it later. Failing to start W&B at all prints one line and returns a sink that does nothing.
    """
    warn = warn or print_line
    check_wandb_available(config)
    if config.run.wandb == "auto" and mode_from_env() != "off" and not wandb_installed():
        warn(f"rlfit: run.wandb=auto but W&B is not installed; metrics are not sent to W&B ({INSTALL_HINT})")
        return None
    deadline = time.monotonic() + config.run.wandb_timeout_s
    mode, offline_reason = decide_mode(config.run)
    if mode == "off":
        return None
    sink = WandbSink(warn)
    online_budget = max(deadline - time.monotonic(), MIN_ONLINE_INIT_S)
    sink.start(config, run_dir, mode, online_budget if mode == "online" else None)
    wanted = wanted_mode(config.run)
    if sink.run is not None and sink.run_mode == "offline" and (wanted == "online" or config.run.wandb == "auto"):
        asked = f" although {online_asked_by()}" if wanted == "online" else ""
        sink.warn(f"rlfit: W&B offline{asked} ({offline_reason or sink.online_error}): this session is in "
                  f"{sink.sync_dir}; upload it later with `wandb sync {run_dir.path / 'wandb'}`")
    return sink


class WandbSink:
    """Logs each row's numbers (named as in TensorBoard) to a W&B run, at step = the row's env steps."""

    def __init__(self, warn: Warn | None = None):
        self.warn = warn or print_line
        self.run: Any = None
        self.run_mode = "off"
        self.online_error = ""
        self.last_step = -1

    def start(self, config: Config, run_dir: RunDir, mode: str, online_budget_s: float | None = None) -> None:
        """Starts (or resumes) the run dir's W&B run. Online, the start may take `online_budget_s`; when it fails,
        W&B's helper process is stopped (it still holds the run id) and the run starts offline instead."""
        started = time.monotonic()
        try:
            self.run, self.run_mode = start_run(config, run_dir, mode, online_budget_s), mode
        except Exception as error:
            if mode != "online":
                self.disable(error)
                return
            took = time.monotonic() - started
            self.online_error = (f"W&B's online start took longer than the {online_budget_s:.1f}s "
                                 "left of run.wandb_timeout_s" if online_budget_s and took >= online_budget_s
                                 else f"online start failed: {describe(error)}")
            stop_wandb()
            self.start(config, run_dir, "offline")

    @property
    def sync_dir(self) -> str:
        """Where this session's W&B files are (what `wandb sync` uploads)."""
        return str(getattr(self.run.settings, "sync_dir", "") or self.run.dir)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        if self.run is None:
            return
        values = dict(scalars(kind, row))
        step = row.get("env_steps")
        if not values or (step is not None and int(step) < self.last_step):
            return
        try:
            if step is None:
                self.run.log(values)
            else:
                self.run.log(values, step=int(step))
                self.last_step = int(step)
        except Exception as error:
            self.disable(error)

    def close(self) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        try:
            run.finish()
        except Exception as error:
            self.warn(f"rlfit: W&B could not finish: {describe(error)}; what it holds is in {run.dir}; upload it "
                      "with `wandb sync`")

    def disable(self, error: BaseException) -> None:
        """Turns this sink off after an error from W&B, in one line; the run goes on."""
        run, self.run = self.run, None
        self.warn(f"rlfit: W&B disabled: {describe(error)}; training continues")
        if run is not None:
            try:
                run.finish(exit_code=1)
            except Exception:
                pass


def start_run(config: Config, run_dir: RunDir, mode: str, online_budget_s: float | None = None) -> Any:
    """`wandb.init` for the run directory: its name, its stored id (resumed when it exists), its config."""
    import wandb

    mute_wandb_telemetry()
    init_timeout = online_budget_s if mode == "online" and online_budget_s else LOCAL_INIT_TIMEOUT_S
    settings = wandb.Settings(**known_settings(wandb.Settings, {
        "base_url": base_url(), "init_timeout": init_timeout, "finish_timeout": FINISH_TIMEOUT_S, "console": "off",
        "allow_val_change": True, "quiet": True}))
    run = config.run
    return wandb.init(project=run.wandb_project, entity=run.wandb_entity or None, group=run.wandb_group or None,
                      name=run_dir.path.name, dir=str(run_dir.path), config=config.to_dict(), mode=mode,
                      id=run_id(run_dir), resume="allow", settings=settings)


def mute_wandb_telemetry() -> None:
    """Turns off the wandb library's own usage telemetry in this process (never the run's metrics).

    At exit it contacts the W&B server again, and waits up to 10 s there when the network failed (a proxy, a
    black hole): exit must stay prompt after falling back to offline. A wandb without this telemetry is left as is.
    """
    try:
        from wandb.analytics.opentelemetry.opentelemetry_proxy import disable
    except ImportError:
        return
    disable()


def stop_wandb() -> None:
    """Stops wandb's helper process after a failed online start; it would refuse the same run id offline."""
    import wandb

    try:
        wandb.teardown()
    except Exception:  # nothing left to stop, or it is gone already
        pass


def known_settings(settings_type: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` without the settings the installed wandb does not know (older versions lack some)."""
    fields = getattr(settings_type, "model_fields", None)
    return {key: value for key, value in values.items() if fields is None or key in fields}


def run_id(run_dir: RunDir) -> str:
    """The W&B run id stored in the run directory; a new one is written the first time."""
    path = run_dir.path / ID_FILE
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored
    new = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
    write_atomic(path, new + "\n")
    return new


def describe(error: BaseException) -> str:
    """An exception as one short line."""
    return short(error)
