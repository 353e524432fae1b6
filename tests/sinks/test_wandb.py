"""Weights & Biases: the mode chosen (environment, key, W&B's answer to an authenticated check), the fallback to
offline on real networks (a proxy or captive portal, a black hole, a refused port, a name that does not resolve, a
W&B whose online start fails or hangs) with a complete offline record read back from W&B's own record file, a
bounded start and exit, resume into the same W&B run, and W&B failures that never stop training. No network: every
service is a local stand-in on 127.0.0.1 (fake_services.py). The tests that need no wandb run without it."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlfit.config.schema import Config
from rlfit.errors import UserError
from rlfit.rundir.layout import RunDir
from rlfit.sinks import wandb as wandb_sink
from rlfit.sinks.wandb import WandbSink, check_wandb_available, choose_mode, decide_mode, open_wandb_sink
from tests.sinks.fake_services import (KEY, UNRESOLVABLE_URL, FakeWandb, Portal404, black_hole, http_service,
                                       no_dns_for_invalid, refused_url)

needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                                 reason="wandb is not installed (pip install 'rlfit[wandb]')")
SHORT = ("run.num_timesteps=5120",)
"""Two iterations of the toy run (2560 env steps each), evaluated and checkpointed at the end."""
BOUND_S = 2.0
HOLE_BOUND_S = 0.5
"""The bound where the network is a black hole: nothing ever answers there, so each such test waits out the whole
bound, and a short one is as good a test of it."""
MARGIN_S = 3.0
"""Slack on the bounds asserted, for a loaded machine: the failures guarded against take 10 s to 60 s."""
ROWS = [{"kind": "train", "iteration": 1, "env_steps": 100, "sps": 5.0, "loss/total": 0.5},
        {"kind": "eval", "iteration": 1, "env_steps": 100, "eval/episode_reward": 7.0},
        {"kind": "train", "iteration": 2, "env_steps": 200, "sps": 6.0, "loss/total": 0.25}]
"""Metrics rows as a run writes them (the sink takes the kind apart)."""


@pytest.fixture
def wandb_env(monkeypatch, tmp_path):
    """W&B kept inside tmp_path, quiet and lean, with no key, no mode and no proxy from the user's environment."""
    home = tmp_path / "wandb-home"
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_IDENTITY_TOKEN_FILE", "http_proxy",
                 "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    settings = {"WANDB_SILENT": "true", "WANDB_DIR": home, "WANDB_CONFIG_DIR": home / "config",
                "WANDB_CACHE_DIR": home / "cache", "WANDB_DATA_DIR": home / "data", "WANDB_ARTIFACT_DIR": home / "art",
                "NETRC": tmp_path / "no-netrc", "WANDB_DISABLE_GIT": "true", "WANDB_DISABLE_CODE": "true",
                "WANDB__DISABLE_STATS": "true", "WANDB__DISABLE_META": "true", "WANDB__SAVE_REQUIREMENTS": "false"}
    for name, value in settings.items():
        monkeypatch.setenv(name, str(value))
    return monkeypatch


def run_config(**keys) -> Config:
    return Config().replace(run=keys)


def train(tmp_path: Path, *overrides: str):
    import rlfit
    from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES

    return rlfit.train(TOY_ENV, "smoke", overrides=[*TOY_TRAIN_OVERRIDES, *SHORT, *overrides],
                       run_dir=tmp_path / "run", quiet=True)


def read_history(run_file: Path, wait_s: float = 10.0) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} from a .wandb file, once W&B's helper process has written its exit record (it
    writes after `finish` returns; waits at most `wait_s`)."""
    deadline = time.monotonic() + wait_s
    history, complete = parse_records(run_file)
    while not complete and time.monotonic() < deadline:
        time.sleep(0.1)
        history, complete = parse_records(run_file)
    return history


def parse_records(run_file: Path) -> tuple[dict[int, dict[str, float]], bool]:
    """(history, whether the exit record is there) from a .wandb file (a LevelDB-style log of wandb's own `Record`
    protos)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block, position, pending = run_file.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    history: dict[int, dict[str, float]] = {}
    complete = False
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header is padding
            position += block - position % block
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[position:position + 7])
        pending += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = Record()
            record.ParseFromString(pending)
            pending = b""
            complete |= record.WhichOneof("record_type") == "exit"
            if record.WhichOneof("record_type") == "history":
                items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
                history.setdefault(items.pop("_step"), {}).update(
                    {k: v for k, v in items.items() if not k.startswith("_")})
    return history, complete


def offline_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def metrics_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def expected_history(rows: list[dict]) -> dict[int, dict[str, float]]:
    from rlfit.sinks.tensorboard import scalars

    expected: dict[int, dict[str, float]] = {}
    for row in rows:
        expected.setdefault(row["env_steps"], {}).update(scalars(row["kind"], row))
    return expected


@needs_wandb
def test_offline_run_logs_every_row_at_its_env_steps_and_resume_continues_the_same_run(wandb_env, tmp_path):
    from rlfit.run.resume import resume

    train(tmp_path, "run.wandb=offline")
    run_dir = tmp_path / "run"
    run_id = (run_dir / "wandb_id").read_text().strip()
    [first] = offline_runs(run_dir)
    assert first.name.endswith(f"-{run_id}")
    rows = metrics_rows(run_dir)
    assert {row["kind"] for row in rows} == {"train", "eval"} and (run_dir / "summary.json").exists()
    history = read_history(first / f"run-{run_id}.wandb")
    assert history == expected_history(rows)
    assert sorted(history) == [2560, 5120] and "train/sps" in history[5120] and "eval/episode_reward" in history[5120]

    resume(run_dir, timesteps=10240, quiet=True)
    assert (run_dir / "wandb_id").read_text().strip() == run_id
    later = [p for p in offline_runs(run_dir) if p != first]
    assert len(later) == 1 and later[0].name.endswith(f"-{run_id}")
    resumed_rows = [row for row in metrics_rows(run_dir) if row["env_steps"] > 5120]
    assert read_history(later[0] / f"run-{run_id}.wandb") == expected_history(resumed_rows)


# ---- the decision: no wandb needed ----

def test_auto_without_a_key_goes_offline_without_asking_the_service(wandb_env):
    wandb_env.setattr(wandb_sink, "check_service", lambda *args: pytest.fail("asked the service without a key"))
    assert decide_mode(run_config(wandb="auto").run) == ("offline", "no W&B API key: set WANDB_API_KEY or run "
                                                                    "`wandb login`")


def test_auto_goes_online_with_a_netrc_key_and_wandb_answering_for_it(wandb_env, tmp_path):
    with http_service(FakeWandb) as (url, server):
        host = url.removeprefix("http://")
        (tmp_path / "netrc").write_text(f"machine {host}\n  login user\n  password {KEY}\n")
        wandb_env.setenv("NETRC", str(tmp_path / "netrc"))
        wandb_env.setenv("WANDB_BASE_URL", url)
        assert decide_mode(run_config(wandb="auto", wandb_timeout_s=BOUND_S).run) == ("online", "")
    assert [request["path"] for request in server.requests] == ["/graphql"]


def fake_network(kind: str, monkeypatch):
    """A context manager giving the base URL of one of the networks a user meets."""
    from contextlib import contextmanager, nullcontext

    @contextmanager
    def first_of(service):
        with service as answer:
            yield answer[0]

    if kind == "refused":
        return nullcontext(refused_url())
    if kind == "unresolvable":
        no_dns_for_invalid(monkeypatch)
        return nullcontext(UNRESOLVABLE_URL)
    return black_hole() if kind == "black hole" else first_of(http_service(Portal404))


NETWORKS = {"portal 404": "HTTP 404 from {host} (a proxy or captive portal?)",
            "black hole": "no answer from {host} within {bound:g}s",
            "refused": "connection refused by {host}",
            "unresolvable": "DNS name rlfit-no-such-host.invalid not resolved"}
"""Each failing network, and the cause the user is told."""


def bound_for(network: str) -> float:
    """run.wandb_timeout_s for a test on `network`: HOLE_BOUND_S for the black hole, else BOUND_S (a stand-in that
    answers must answer within it on a loaded machine)."""
    return HOLE_BOUND_S if network == "black hole" else BOUND_S


@pytest.mark.parametrize("wanted", ["auto", "online"])
@pytest.mark.parametrize("network", NETWORKS)
def test_a_network_where_wandb_does_not_answer_as_itself_means_offline_within_the_bound(wandb_env, network, wanted):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    with fake_network(network, wandb_env) as url:
        wandb_env.setenv("WANDB_BASE_URL", url)
        start = time.monotonic()
        decision = decide_mode(run_config(wandb=wanted, wandb_timeout_s=bound_for(network)).run)
        took = time.monotonic() - start
    assert decision == ("offline", NETWORKS[network].format(host=url.removeprefix("http://"), bound=bound_for(network)))
    assert took < bound_for(network) + MARGIN_S


@pytest.mark.parametrize(("env_mode", "configured", "chosen"), [
    ("disabled", "online", "off"), ("disabled", "auto", "off"), ("offline", "online", "offline"),
    ("dryrun", "auto", "offline"), ("online", "offline", "online"), ("online", "off", "off")])
def test_wandb_mode_in_the_environment_wins_except_over_off(wandb_env, env_mode, configured, chosen):
    wandb_env.setenv("WANDB_MODE", env_mode)
    wandb_env.setenv("WANDB_API_KEY", KEY)
    with http_service(FakeWandb) as (url, _):
        wandb_env.setenv("WANDB_BASE_URL", url)
        assert choose_mode(run_config(wandb=configured).run) == chosen


@pytest.mark.parametrize(("env_mode", "asked_by"), [("", "run.wandb=online"), ("online", "WANDB_MODE=online")])
def test_online_without_any_key_is_refused_in_one_line(wandb_env, env_mode, asked_by):
    wandb_env.setattr(wandb_sink, "wandb_installed", lambda: True)
    wandb_env.setenv("WANDB_MODE", env_mode)
    with pytest.raises(UserError) as refused:
        check_wandb_available(run_config(wandb="online"))
    assert str(refused.value) == (f"{asked_by} needs a W&B API key: set WANDB_API_KEY or run `wandb login` (or use "
                                  "run.wandb=auto, which logs offline without one)")
    wandb_env.setenv("WANDB_API_KEY", KEY)
    check_wandb_available(run_config(wandb="online"))


def test_rlfit_train_online_without_a_key_is_one_line_exit_2_and_writes_nothing(wandb_env, tmp_path, capsys):
    from rlfit.cli import main

    wandb_env.setattr(wandb_sink, "wandb_installed", lambda: True)
    code = main(["train", "tests.toy_env:make", "--preset", "smoke", "--set", "run.wandb=online", "--run-dir",
                 str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and not (tmp_path / "run").exists()
    assert err.splitlines() == ["rlfit: error: run.wandb=online needs a W&B API key: set WANDB_API_KEY or run "
                                "`wandb login` (or use run.wandb=auto, which logs offline without one)"]


# ---- the fallback, with wandb: a complete offline record, one line naming the cause ----

def open_and_log(config: Config, run_dir: Path, lines: list[str]) -> tuple[WandbSink, float]:
    """Opens the W&B sink (timed), logs ROWS through it, closes it."""
    run_dir.mkdir(exist_ok=True)
    start = time.monotonic()
    sink = open_wandb_sink(config, RunDir(run_dir), warn=lines.append)
    took = time.monotonic() - start
    for row in ROWS:
        sink.write(row["kind"], row)
    sink.close()
    return sink, took


def assert_offline_record(run_dir: Path, lines: list[str], cause: str, online: bool = False) -> None:
    """One line naming `cause`, and one offline session holding every row, ready for `wandb sync`."""
    run_id = (run_dir / "wandb_id").read_text().strip()
    [session] = offline_runs(run_dir)
    asked = " although run.wandb=online" if online else ""
    assert lines == [f"rlfit: W&B offline{asked} ({cause}): this session is in {session}; upload it later with "
                     f"`wandb sync {run_dir / 'wandb'}`"]
    assert read_history(session / f"run-{run_id}.wandb") == expected_history(ROWS)


@needs_wandb
@pytest.mark.parametrize("network", NETWORKS)
def test_auto_on_a_failing_network_keeps_a_complete_offline_record(wandb_env, tmp_path, network):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    lines: list[str] = []
    with fake_network(network, wandb_env) as url:
        wandb_env.setenv("WANDB_BASE_URL", url)
        sink, _ = open_and_log(run_config(wandb="auto", wandb_timeout_s=bound_for(network)), tmp_path / "run", lines)
    assert sink.run_mode == "offline"
    assert_offline_record(tmp_path / "run", lines, NETWORKS[network].format(host=url.removeprefix("http://"),
                                                                            bound=bound_for(network)))


@needs_wandb
def test_online_against_a_black_hole_logs_offline_instead_of_blocking(wandb_env, tmp_path):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    lines: list[str] = []
    with black_hole() as url:
        wandb_env.setenv("WANDB_BASE_URL", url)
        sink, took = open_and_log(run_config(wandb="online", wandb_timeout_s=HOLE_BOUND_S), tmp_path / "run", lines)
    assert sink.run_mode == "offline"
    assert_offline_record(tmp_path / "run", lines, f"no answer from {url.removeprefix('http://')} within 0.5s",
                          online=True)
    assert took < HOLE_BOUND_S + 15  # the check, then wandb's local start; before: 60 s, then W&B off and no record


@needs_wandb
def test_a_failed_online_start_after_the_check_passed_keeps_an_offline_record(wandb_env, tmp_path):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    lines: list[str] = []
    with http_service(FakeWandb) as (url, server):  # answers the viewer query, 404 to what wandb.init asks next
        wandb_env.setenv("WANDB_BASE_URL", url)
        sink, _ = open_and_log(run_config(wandb="auto", wandb_timeout_s=10), tmp_path / "run", lines)
    assert sink.run_mode == "offline" and len(server.requests) >= 2
    [line] = lines
    cause = line[line.index("(") + 1:line.index("): this session")]
    assert cause.startswith("online start failed: ") and "404" in cause  # not "run ID ... is in use"
    assert_offline_record(tmp_path / "run", lines, cause)


class HangingWandb(FakeWandb):
    """Answers rlfit's viewer query as W&B does, then never answers wandb's own requests (within 10 s)."""

    def respond(self, request: dict) -> None:
        if b"query Viewer { viewer" in request["body"]:
            return super().respond(request)
        self.server.stopping.wait(10)  # until the test is done with the server


@needs_wandb
def test_an_online_start_that_hangs_gets_only_what_is_left_of_the_bound(wandb_env, tmp_path):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    lines: list[str] = []
    with http_service(HangingWandb) as (url, _):
        wandb_env.setenv("WANDB_BASE_URL", url)
        sink, took = open_and_log(run_config(wandb="auto", wandb_timeout_s=BOUND_S), tmp_path / "run", lines)
    assert sink.run_mode == "offline"
    [line] = lines
    assert "W&B's online start took longer than the " in line and "s left of run.wandb_timeout_s" in line
    assert_offline_record(tmp_path / "run", lines, line[line.index("(") + 1:line.index("): this session")])
    assert took < BOUND_S + 15  # the bound, then stopping wandb's helper process and its local start (was 60 s)


EXIT_SCRIPT = """
import sys, time
from pathlib import Path
from rlfit.config.schema import Config
from rlfit.rundir.layout import RunDir
from rlfit.sinks.wandb import open_wandb_sink

sink = open_wandb_sink(Config().replace(run={"wandb": "auto", "wandb_timeout_s": 1}), RunDir(Path(sys.argv[1])))
sink.write("train", {"iteration": 1, "env_steps": 100, "sps": 1.0})
sink.close()
print("closed", sink.run_mode, time.time(), flush=True)
"""


@needs_wandb
def test_exit_after_a_fallback_adds_at_most_two_seconds(wandb_env, tmp_path):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    (tmp_path / "run").mkdir()
    with black_hole() as url:
        wandb_env.setenv("WANDB_BASE_URL", url)
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path / "run")], capture_output=True,
                              text=True, timeout=120, env=dict(os.environ))
        exited = time.time()
    [closed] = [line.split() for line in done.stdout.splitlines() if line.startswith("closed")]
    assert done.returncode == 0 and closed[1] == "offline"
    [session] = offline_runs(tmp_path / "run")
    [record] = session.glob("run-*.wandb")
    assert parse_records(record) == ({100: {"train/sps": 1.0}}, True)  # complete once the process is gone
    assert exited - float(closed[2]) < 2.0 + MARGIN_S  # before: W&B's own telemetry waited 10 s on the black hole


@needs_wandb
def test_auto_behind_a_portal_trains_and_keeps_the_offline_record_of_every_row(wandb_env, tmp_path, capsys):
    wandb_env.setenv("WANDB_API_KEY", KEY)
    with http_service(Portal404) as (url, _):
        wandb_env.setenv("WANDB_BASE_URL", url)
        result = train(tmp_path, "run.wandb=auto", f"run.wandb_timeout_s={BOUND_S}")
    run_dir = tmp_path / "run"
    assert result.summary["iterations"] == 2 and (run_dir / "summary.json").exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlfit: W&B")]
    [session] = offline_runs(run_dir)
    assert lines == [f"rlfit: W&B offline (HTTP 404 from {url.removeprefix('http://')} (a proxy or captive portal?)): "
                     f"this session is in {session}; upload it later with `wandb sync {run_dir / 'wandb'}`"]
    run_id = (run_dir / "wandb_id").read_text().strip()
    assert read_history(session / f"run-{run_id}.wandb") == expected_history(metrics_rows(run_dir))
    sync = subprocess.run([sys.executable, "-m", "wandb", "sync", "--dry-run", str(run_dir / "wandb")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), cwd=tmp_path)
    assert "Would sync 1 run(s)" in sync.stderr + sync.stdout and f"run-{run_id}.wandb" in sync.stderr + sync.stdout


@needs_wandb
def test_a_failing_wandb_init_does_not_stop_the_run(wandb_env, tmp_path, capsys):
    def broken_init(**kwargs):
        raise RuntimeError("no service\nsecond line")

    wandb_env.setattr(importlib.import_module("wandb"), "init", broken_init)
    result = train(tmp_path, "run.wandb=offline")
    run_dir = tmp_path / "run"
    assert result.summary["iterations"] == 2 and (run_dir / "summary.json").exists()
    assert [row["iteration"] for row in metrics_rows(run_dir) if row["kind"] == "train"] == [1, 2]
    lines = [line for line in capsys.readouterr().err.splitlines() if "W&B" in line]
    assert lines == ["rlfit: W&B disabled: no service second line; training continues"]


class FakeRun:
    def __init__(self, fail_at_step: int | None = None):
        self.logged: list[tuple[dict, int | None]] = []
        self.fail_at_step = fail_at_step
        self.finished = False

    def log(self, values: dict, step: int | None = None) -> None:
        if step == self.fail_at_step:
            raise ConnectionError("lost")
        self.logged.append((values, step))

    def finish(self, exit_code: int | None = None) -> None:
        self.finished = True


def test_rows_are_logged_as_numbers_named_like_tensorboard_and_steps_only_move_forward():
    sink = WandbSink(warn=lambda text: pytest.fail(text))
    sink.run = run = FakeRun()
    sink.write("train", {"iteration": 1, "env_steps": 100, "sps": 5.0, "loss/total": 0.5, "note": "x", "flag": True,
                         "time": 1.0})
    sink.write("eval", {"iteration": 1, "env_steps": 100, "eval/episode_reward": 7.0})
    sink.write("train", {"iteration": 2, "env_steps": 200, "sps": 6.0})
    sink.write("train", {"iteration": 2, "env_steps": 150, "sps": 9.0})  # after a rewind: not sent again
    sink.close()
    assert run.logged == [({"train/sps": 5.0, "loss/total": 0.5}, 100), ({"eval/episode_reward": 7.0}, 100),
                          ({"train/sps": 6.0}, 200)]
    assert run.finished and sink.run is None


def test_an_error_while_logging_disables_the_sink_in_one_line():
    lines: list[str] = []
    sink = WandbSink(warn=lines.append)
    sink.run = run = FakeRun(fail_at_step=200)
    for step in (100, 200, 300):
        sink.write("train", {"iteration": step // 100, "env_steps": step, "sps": 1.0})
    sink.close()
    assert run.logged == [({"train/sps": 1.0}, 100)] and run.finished
    assert lines == ["rlfit: W&B disabled: lost; training continues"]


def test_without_wandb_installed_online_is_a_user_error_and_auto_is_skipped(wandb_env, tmp_path, capsys):
    wandb_env.setitem(sys.modules, "wandb", None)
    with pytest.raises(UserError, match=r"^run.wandb=online needs W&B: pip install 'rlfit\[wandb\]'$"):
        check_wandb_available(run_config(wandb="online"))
    assert open_wandb_sink(run_config(wandb="auto"), RunDir(tmp_path)) is None
    assert "W&B is not installed" in capsys.readouterr().err
    assert open_wandb_sink(run_config(wandb="off"), RunDir(tmp_path)) is None
    wandb_env.setenv("WANDB_MODE", "disabled")
    check_wandb_available(run_config(wandb="offline"))  # W&B turned off in the environment: nothing needed
    assert not (tmp_path / "wandb_id").exists()


def test_without_wandb_installed_a_run_asking_for_it_is_refused_before_writing(wandb_env, tmp_path):
    wandb_env.setitem(sys.modules, "wandb", None)
    with pytest.raises(UserError, match="pip install"):
        train(tmp_path, "run.wandb=offline")
    assert not (tmp_path / "run").exists()
