"""Weights & Biases: each metrics row logged to a W&B run, online or offline, never at the cost of training.

`run.wandb` chooses: off, online, offline, or auto (online when an API key is found and the service answers
within `run.wandb_timeout_s`, else offline). `WANDB_MODE` in the environment overrides it for a run that uses
W&B (it never turns on W&B for a run with `run.wandb=off`). The W&B files live in `<run dir>/wandb/`; the W&B
run's id is kept in `<run dir>/wandb_id`, so `rlfit resume` continues the same W&B run.

metrics.jsonl stays the record; W&B is a view of it. Any error from W&B prints one line and turns this sink off;
the run goes on. W&B steps are env steps and only move forward: rows repeated after a rewind (out-of-memory
back-off) or a resume from an earlier checkpoint are not sent again, so W&B keeps the values first logged there.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import string
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from rlfit.atomic_files import write_atomic
from rlfit.config import Config, RunConfig
from rlfit.errors import UserError
from rlfit.rundir import RunDir
from rlfit.sinks.tensorboard import scalars

DEFAULT_BASE_URL = "https://api.wandb.ai"
ENV_MODES = {"online": "online", "run": "online", "shared": "online", "offline": "offline", "dryrun": "offline",
             "disabled": "off"}
"""What each `WANDB_MODE` value means here."""
INIT_TIMEOUT_S = 60.0
"""The longest `wandb.init` may take before W&B is turned off for the run."""
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
    """(mode, why offline when `auto` chose it, else ''); the check never takes much longer than the timeout."""
    if run_config.wandb == "off":
        return "off", ""
    forced = mode_from_env()
    if forced is not None:
        return forced, f"WANDB_MODE={os.environ['WANDB_MODE']}"
    if run_config.wandb != "auto":
        return run_config.wandb, ""
    url = base_url()
    if not has_api_key(url):
        return "offline", "no W&B API key: set WANDB_API_KEY or run `wandb login`"
    if not service_answers(url, run_config.wandb_timeout_s):
        return "offline", f"{url} did not answer within {run_config.wandb_timeout_s:g}s"
    return "online", ""


def mode_from_env() -> str | None:
    """The mode `WANDB_MODE` asks for, or None when it is unset or not a W&B mode."""
    return ENV_MODES.get(os.environ.get("WANDB_MODE", "").strip().lower())


def base_url() -> str:
    return (os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def has_api_key(url: str) -> bool:
    """True when W&B would find credentials without asking: the environment, or .netrc (read locally)."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk.lib.wbauth import read_netrc_auth
    except ImportError:  # another wandb version: read .netrc as W&B does (the machine is the URL's host)
        return _netrc_has_key(url)
    try:
        return bool(read_netrc_auth(host=url))
    except Exception:  # a malformed key or URL: W&B could not use it either
        return False


def _netrc_has_key(url: str) -> bool:
    import netrc
    from urllib.parse import urlsplit

    try:
        entry = netrc.netrc(os.environ.get("NETRC") or None).authenticators(urlsplit(url).netloc)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def service_answers(url: str, timeout_s: float) -> bool:
    """True when an HTTP request to `url` gets a response below 500 within `timeout_s` (DNS included)."""
    answers: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
            answers.append(True)
        except urllib.error.HTTPError as error:
            answers.append(error.code < 500)
        except Exception:
            answers.append(False)

    thread = threading.Thread(target=probe, name="rlfit-wandb-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)  # a name lookup or a proxy that hangs is left behind, not waited for
    return bool(answers and answers[0])


def wandb_installed() -> bool:
    return importlib.util.find_spec("wandb") is not None


def check_wandb_available(config: Config) -> None:
    """Raises a UserError when the run asks for W&B (online or offline) and wandb is not installed."""
    asked = config.run.wandb
    if asked in ("online", "offline") and mode_from_env() != "off" and not wandb_installed():
        raise UserError(f"run.wandb={asked} needs W&B: {INSTALL_HINT}")


def open_wandb_sink(config: Config, run_dir: RunDir, warn: Warn | None = None) -> WandbSink | None:
    """The W&B sink of a run, or None when W&B is off (or not installed and `run.wandb=auto`).

    Raises a UserError when `run.wandb` is online or offline and wandb is not installed. Failing to start W&B
    prints one line and returns a sink that does nothing.
    """
    warn = warn or print_line
    check_wandb_available(config)
    if config.run.wandb == "auto" and mode_from_env() != "off" and not wandb_installed():
        warn(f"rlfit: run.wandb=auto but W&B is not installed; metrics are not sent to W&B ({INSTALL_HINT})")
        return None
    mode, offline_reason = decide_mode(config.run)
    if mode == "off":
        return None
    sink = WandbSink(warn)
    sink.start(config, run_dir, mode, fallback=config.run.wandb == "auto" and mode == "online")
    if sink.run is not None and sink.run_mode == "offline" and config.run.wandb == "auto":
        sink.warn(f"rlfit: W&B offline ({offline_reason or sink.online_error}): this session is in "
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

    def start(self, config: Config, run_dir: RunDir, mode: str, fallback: bool = False) -> None:
        """Starts (or resumes) the run dir's W&B run; with `fallback`, an online start that fails goes offline."""
        try:
            self.run, self.run_mode = start_run(config, run_dir, mode), mode
        except Exception as error:
            if not fallback:
                self.disable(error)
                return
            self.online_error = f"online start failed: {describe(error)}"
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


def start_run(config: Config, run_dir: RunDir, mode: str) -> Any:
    """`wandb.init` for the run directory: its name, its stored id (resumed when it exists), its config."""
    import wandb

    settings = wandb.Settings(**known_settings(wandb.Settings, {
        "init_timeout": INIT_TIMEOUT_S, "finish_timeout": FINISH_TIMEOUT_S, "console": "off",
        "allow_val_change": True, "quiet": True}))
    run = config.run
    return wandb.init(project=run.wandb_project, entity=run.wandb_entity or None, group=run.wandb_group or None,
                      name=run_dir.path.name, dir=str(run_dir.path), config=config.to_dict(), mode=mode,
                      id=run_id(run_dir), resume="allow", settings=settings)


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
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."
