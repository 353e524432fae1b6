"""Weights & Biases: the mode chosen (environment, key, a service that does not answer), offline runs read back
from W&B's own record file, resume into the same W&B run, and W&B failures that never stop training. No network."""

from __future__ import annotations

import http.server
import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

wandb = pytest.importorskip("wandb")

from rlfit.config import Config  # noqa: E402
from rlfit.errors import UserError  # noqa: E402
from rlfit.rundir import RunDir  # noqa: E402
from rlfit.sinks import wandb as wandb_sink  # noqa: E402
from rlfit.sinks.wandb import WandbSink, check_wandb_available, choose_mode, open_wandb_sink  # noqa: E402

DUMMY_KEY = "0123456789abcdef0123456789abcdef01234567"
SHORT = ("run.num_timesteps=5120",)
"""Two iterations of the toy run (2560 env steps each), evaluated and checkpointed at the end."""


@pytest.fixture
def wandb_env(monkeypatch, tmp_path):
    """W&B kept inside tmp_path, quiet and lean, with no key, no mode and no proxy from the user's environment."""
    home = tmp_path / "wandb-home"
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_IDENTITY_TOKEN_FILE", "http_proxy",
                 "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
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


def read_history(run_file: Path) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} from a .wandb file (a LevelDB-style log of wandb's own `Record` protos)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block, position, pending = run_file.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    history: dict[int, dict[str, float]] = {}
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
            if record.WhichOneof("record_type") == "history":
                items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
                history.setdefault(items.pop("_step"), {}).update(
                    {k: v for k, v in items.items() if not k.startswith("_")})
    return history


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


def test_offline_run_logs_every_row_at_its_env_steps_and_resume_continues_the_same_run(wandb_env, tmp_path):
    from rlfit.resume import resume

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


class SilentServer:
    """A TCP port that accepts connections and never answers (a service that hangs)."""

    def __enter__(self) -> str:
        self.socket = socket.create_server(("127.0.0.1", 0))
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.socket.close()


def test_auto_with_a_key_and_a_service_that_does_not_answer_goes_offline_within_the_timeout(wandb_env, tmp_path,
                                                                                           capsys):
    wandb_env.setenv("WANDB_API_KEY", DUMMY_KEY)
    with SilentServer() as url:
        wandb_env.setenv("WANDB_BASE_URL", url)
        start = time.monotonic()
        assert choose_mode(run_config(wandb="auto", wandb_timeout_s=2).run) == "offline"
        assert 1.9 <= time.monotonic() - start < 3.0

        capsys.readouterr()
        result = train(tmp_path, "run.wandb=auto", "run.wandb_timeout_s=2")
    assert result.summary["iterations"] == 2 and (tmp_path / "run" / "summary.json").exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlfit: W&B")]
    [offline] = offline_runs(tmp_path / "run")
    assert lines == [f"rlfit: W&B offline ({url} did not answer within 2s): this session is in {offline}; "
                     f"upload it later with `wandb sync {tmp_path / 'run' / 'wandb'}`"]


def test_auto_with_a_closed_port_goes_offline_at_once(wandb_env):
    wandb_env.setenv("WANDB_API_KEY", DUMMY_KEY)
    with SilentServer() as url:
        pass  # closed again: connecting is refused
    wandb_env.setenv("WANDB_BASE_URL", url)
    start = time.monotonic()
    assert choose_mode(run_config(wandb="auto", wandb_timeout_s=5).run) == "offline"
    assert time.monotonic() - start < 1.0


def test_auto_without_a_key_goes_offline_without_asking_the_service(wandb_env):
    wandb_env.setattr(wandb_sink, "service_answers", lambda *args: pytest.fail("asked the service without a key"))
    start = time.monotonic()
    assert choose_mode(run_config(wandb="auto").run) == "offline"
    assert time.monotonic() - start < 0.5


class Answering(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:  # noqa: N802 - the name http.server calls
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_auto_goes_online_with_a_netrc_key_and_a_service_that_answers(wandb_env, tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{server.server_port}"
        (tmp_path / "netrc").write_text(f"machine {host}\n  login user\n  password {DUMMY_KEY}\n")
        wandb_env.setenv("NETRC", str(tmp_path / "netrc"))
        wandb_env.setenv("WANDB_BASE_URL", f"http://{host}")
        assert choose_mode(run_config(wandb="auto", wandb_timeout_s=5).run) == "online"
    finally:
        server.shutdown()


@pytest.mark.parametrize(("env_mode", "configured", "chosen"), [
    ("disabled", "online", "off"), ("disabled", "auto", "off"), ("offline", "online", "offline"),
    ("dryrun", "auto", "offline"), ("online", "offline", "online"), ("online", "off", "off")])
def test_wandb_mode_in_the_environment_wins_except_over_off(wandb_env, env_mode, configured, chosen):
    wandb_env.setenv("WANDB_MODE", env_mode)
    assert choose_mode(run_config(wandb=configured).run) == chosen


def test_a_failing_wandb_init_does_not_stop_the_run(wandb_env, tmp_path, capsys):
    def broken_init(**kwargs):
        raise RuntimeError("no service\nsecond line")

    wandb_env.setattr(wandb, "init", broken_init)
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
