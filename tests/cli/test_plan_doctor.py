"""`rlfit doctor`, `rlfit plan`, `--num-envs auto` and constraint errors, driven as a user drives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlfit.algos.ppo.sizes import check_batch_divisibility
from rlfit.hardware.units import parse_size
from tests.conftest import cli_in_process

REPO_ROOT = Path(__file__).resolve().parents[2]
TOY = "tests.toy_env:make"
XLA_MEMORY_VARIABLES = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                        "XLA_PYTHON_CLIENT_ALLOCATOR")


def rlfit(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m rlfit args...` with JAX's default memory settings and the repo on PYTHONPATH (for the toy env)."""
    env = {k: v for k, v in os.environ.items() if k not in XLA_MEMORY_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def plan_cli(capfd, monkeypatch, tmp_path):
    """`plan_cli(*args)`: `rlfit args...` by the CLI's main in this process (`tests.conftest.cli_in_process`: the
    code path of `python -m rlfit` without an interpreter start, and compiled programs cached across commands) with
    JAX's default memory settings, in tmp_path. The doctor's tests, which read a fresh process's XLA settings, run
    `rlfit` as a subprocess."""
    for name in XLA_MEMORY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return lambda *args: cli_in_process(capfd, *args, cwd=tmp_path)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def doctor(tmp_path_factory):
    """`rlfit doctor --json` and `rlfit doctor`, each run once as a subprocess (the doctor reads a fresh process's
    XLA settings) for the module's tests: (the --json run, the text run)."""
    cwd = tmp_path_factory.mktemp("doctor")
    return rlfit("doctor", "--json", cwd=cwd), rlfit("doctor", cwd=cwd)


def test_doctor_json(doctor):
    result = doctor[0]
    assert result.returncode == 0, result.stderr
    device = json.loads(result.stdout)["device"]
    assert device["platform"] in ("cpu", "gpu", "tpu")
    assert device["jax_backend"] in ("cpu", "gpu", "tpu") and device["jax_version"]
    assert device["xla_memory"]["mem_fraction"] == 0.75 and device["xla_memory"]["preallocate"] is True
    assert device["total_bytes"] > 0 and 0 < device["budget_bytes"] <= device["total_bytes"]
    assert isinstance(device["notes"], list)


def test_doctor_text_says_plainly_when_there_is_no_gpu(doctor):
    result = doctor[1]
    assert result.returncode == 0, result.stderr
    device = json.loads(doctor[0].stdout)["device"]
    if device["platform"] == "cpu":
        assert "no GPU found: JAX computes on the CPU" in result.stdout
    for label in ("device", "memory", "compute", "driver", "jax", "XLA memory"):
        assert any(line.startswith(label) for line in result.stdout.splitlines()), label


@pytest.mark.slow
def test_plan_for_an_8gib_gpu_as_json(plan_cli):
    """The toy environment in the default preset's proportions (32 minibatches, a batch half the environments), so
    the candidates run past what 8 GiB holds; a real environment's plan for a GPU (CartpoleBalance, same probes) is
    tests/planning/test_preset.py's."""
    result = plan_cli("plan", TOY, "--device-memory", "8GiB", "--json")
    assert result.returncode == 0, result.stderr
    planned = json.loads(result.stdout)
    budget = planned["budget_bytes"]
    assert budget == int(8 * 2**30 * 0.75)  # JAX's default pool on the target: 75% of 8 GiB
    assert planned["device"] and planned["candidates"]
    chosen = planned["chosen"]
    assert {"num_envs", "batch_size", "num_minibatches", "unroll_length", "predicted_bytes"} <= set(chosen)
    assert chosen["predicted_bytes"] <= budget
    check_batch_divisibility(chosen["num_envs"], chosen["batch_size"], chosen["num_minibatches"])
    fitting = [c["num_envs"] for c in planned["candidates"] if c["fits"]]
    assert chosen["num_envs"] == max(fitting) and not all(c["fits"] for c in planned["candidates"])
    predicted = [c["predicted_bytes"] for c in planned["candidates"]]
    assert predicted == sorted(predicted)
    assert any("cpu backend for a gpu run" in reason for reason in planned["reasons"]) or \
        planned["memory_model"]["backend"] == "gpu"


@pytest.mark.slow
def test_plan_json_stays_json_where_playground_prints_about_a_missing_randomizer(plan_cli, monkeypatch):
    """An environment with a MuJoCo model and no Playground randomizer makes Playground print a line to standard
    output (its own code, as for Op3Joystick, whose assets are not here: the toy environment stands in, given a
    model): `--json` still prints one JSON object."""
    from mujoco_playground import registry
    from mujoco_playground._src import locomotion

    monkeypatch.setattr(registry, "get_domain_randomizer", lambda name: locomotion.get_domain_randomizer("Op3Joystick"))
    monkeypatch.setattr("rlfit.envs.randomization.mjx_model_of", lambda env: object())
    result = plan_cli("plan", TOY, "--device-memory", "8GiB", "--json")
    assert result.returncode == 0, result.stderr
    planned = json.loads(result.stdout)
    assert "does not have a domain randomizer" in result.stderr
    assert planned["randomization"]["note"].startswith("domain randomization: off")


def test_plan_table_and_more_memory_never_fewer_envs(plan_cli):
    small = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", "4MiB", "--target", "cpu")
    assert small.returncode == 0, small.stderr
    header = next(line for line in small.stdout.splitlines() if line.startswith("num_envs"))
    assert header.split() == ["num_envs", "batch_size", "num_minibatches", "unroll_length", "predicted", "fits"]
    assert "<- chosen" in small.stdout and "reasons:" in small.stdout
    chosen_line = next(line for line in small.stdout.splitlines() if line.startswith("chosen:"))
    chosen = {"4MiB": int(chosen_line.split("num_envs=")[1].split()[0])}
    for size in ("2MiB", "16MiB"):
        result = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", size, "--target", "cpu", "--json")
        assert result.returncode == 0, result.stderr
        chosen[size] = json.loads(result.stdout)["chosen"]["num_envs"]
    assert chosen["2MiB"] <= chosen["4MiB"] <= chosen["16MiB"] and chosen["2MiB"] < chosen["16MiB"]


@pytest.mark.slow
def test_plan_for_several_device_sizes_matches_one_size_at_a_time(plan_cli):
    sizes = ["2MiB", "4MiB", "16MiB"]
    several = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", *sizes, "--json")
    assert several.returncode == 0, several.stderr
    plans = json.loads(several.stdout)["plans"]
    assert [p["budget_bytes"] for p in plans] == [int(parse_size(s) * 0.75) for s in sizes]
    assert all(p["memory_model"] == plans[0]["memory_model"] for p in plans)  # fitted once
    chosen = [p["chosen"]["num_envs"] for p in plans]
    assert chosen == sorted(chosen) and chosen[0] < chosen[-1]
    one = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", "4MiB", "--json")
    assert json.loads(one.stdout)["chosen"] == plans[1]["chosen"]

    table = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", "1kB", "4MiB")
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines() if line.strip().endswith(("fits", "KiB", "MiB"))]
    assert rows[0][-2:] == ["nothing", "fits"] and int(rows[1][4]) == plans[1]["chosen"]["num_envs"]
    nothing = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", "1kB", "2kB")
    assert nothing.returncode == 2 and nothing.stderr.count("\n") == 1 and "no configuration fits" in nothing.stderr


@pytest.mark.slow
def test_plan_with_room_on_a_cpu_shows_bounds_and_fit_line_shows_the_line(plan_cli):
    """Where the CPU's cap fits, `rlfit plan` bounds that size alone and labels its figures bounds ("at most", in
    the table and the choice); `--fit-line` fits the line through two sizes and chooses the same. Several CPU sizes
    where only a later one needs the line are all planned from the line."""
    once = plan_cli("plan", TOY, "--preset", "smoke")
    line = plan_cli("plan", TOY, "--preset", "smoke", "--fit-line")
    assert once.returncode == 0 and line.returncode == 0, once.stderr + line.stderr
    headers = [next(row.split() for row in r.stdout.splitlines() if row.startswith("num_envs")) for r in (once, line)]
    assert headers[0][-3:] == ["at", "most", "fits"] and headers[1][-2:] == ["predicted", "fits"]
    chosen = [next(row for row in r.stdout.splitlines() if row.startswith("chosen:")) for r in (once, line)]
    assert chosen[0].split("(")[0] == chosen[1].split("(")[0]
    assert "(at most " in chosen[0] and "(predicted " in chosen[1]
    several = plan_cli("plan", TOY, "--preset", "smoke", "--device-memory", "16MiB", "2MiB", "--target", "cpu",
                       "--json")
    assert several.returncode == 0, several.stderr
    plans = json.loads(several.stdout)["plans"]
    assert all(p["memory_model"] == plans[0]["memory_model"] for p in plans)
    assert len(plans[0]["memory_model"]["points"]) == 2 and not plans[0]["memory_model"]["measured_once"]
    assert plans[1]["chosen"]["num_envs"] < plans[0]["chosen"]["num_envs"]


@pytest.mark.slow
def test_rlfit_plan_on_a_terminal_says_what_it_estimates_and_prints_only_the_plan(monkeypatch, tmp_path):
    """With standard error on a terminal (a pseudo-terminal here) `rlfit plan` names the size it estimates there and
    that it compiled nothing; standard output is the plan alone (`--json` parses). Piped, as every other test runs
    it, it says nothing. The CLI's main runs in this process (as `tests.conftest.cli_in_process` does) with
    `sys.stderr` the terminal: the command asks `sys.stderr.isatty()`, and needs no fresh interpreter."""
    import contextlib
    import io
    import pty

    from rlfit.cli import main

    for name in XLA_MEMORY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    leader, follower = pty.openpty()
    out = io.StringIO()
    with open(follower, "w", encoding="utf-8") as terminal, contextlib.chdir(tmp_path), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(terminal):
        code = main(["plan", TOY, "--preset", "smoke", "--json"])
    err = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        err += chunk
    os.close(leader)
    assert code == 0, err.decode(errors="replace")
    lines = err.decode().splitlines()
    assert lines[0].startswith("planning: estimating the training step's memory at num_envs=512 from its lowered")
    assert "without compiling: it fits the budget" in lines[1] and len(lines) == 2
    assert json.loads(out.getvalue())["chosen"]["num_envs"] == 512


@pytest.mark.slow
def test_train_num_envs_auto_says_what_the_planner_compiles_and_records_the_plan(plan_cli, tmp_path):
    """Without --quiet the planner's work is lines on standard error before training's: the size estimated first and
    why it compiles after all (the estimate does not fit 4 MiB), the size measured, what XLA's analysis gave, and why
    a second size compiles (the cap's size does not fit either). The run's plan.json records the planner's choice."""
    from rlfit.hardware.cpu_envs import cpu_max_num_envs
    from rlfit.hardware.probe import usable_cores

    cap = cpu_max_num_envs(usable_cores())
    result = plan_cli("train", TOY, "--preset", "smoke", "--num-envs", "auto", "--device-memory", "4MiB",
                      "--timesteps", "64", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    planning = [line for line in result.stderr.splitlines() if line.startswith("planning: ")]
    assert planning[0].startswith(f"planning: estimating the training step's memory at num_envs={cap} from its")
    assert planning[1].startswith(f"planning: the estimate at num_envs={cap}, ")
    assert planning[1].endswith("does not fit the budget of 3.0 MiB: compiling for XLA's analysis")
    assert planning[2].startswith(f"planning: compiling the training step at num_envs={cap} for XLA's memory "
                                  "analysis (as training compiles it")
    assert planning[3].startswith(f"planning: num_envs={cap} compiled in ") and planning[3].endswith("analysis")
    assert planning[4].startswith(f"planning: num_envs={cap} does not fit the budget of 3.0 MiB: compiling")
    assert planning[5].startswith(f"planning: compiling the training step at num_envs={cap * 3 // 8} ")
    lines = result.stderr.splitlines()
    assert lines.index(planning[-1]) < next(i for i, line in enumerate(lines) if line.startswith("compiling 1 of"))

    plan = json.loads((tmp_path / "run" / "plan.json").read_text())  # the run records the plan
    assert plan["reasons"][0].startswith("num_envs auto")
    assert plan["predicted_bytes"] <= plan["extra"]["budget_bytes"] == int(4 * 2**20 * 0.75)
    assert plan["sizes"]["num_envs"] != 8  # not the smoke preset's 8: the planner's choice


@pytest.mark.parametrize("command", ["train", "plan"])
def test_constraint_error_offers_the_nearest_valid_values(plan_cli, tmp_path, command):
    run_dir = tmp_path / "run"
    extra = ["--run-dir", str(run_dir)] if command == "train" else []
    result = plan_cli(command, TOY, "--set", "ppo.num_envs=512", "--set", "ppo.batch_size=128",
                      "--set", "ppo.num_minibatches=2", *extra)
    line = one_line_error(result)
    assert "ppo.batch_size * ppo.num_minibatches" in line and "num_minibatches=4" in line
    assert not run_dir.exists()


@pytest.mark.parametrize("args", [
    ("plan", TOY, "--device-memory", "16XB"),
    ("train", TOY, "--num-envs", "auto", "--device-memory", "lots"),
    ("plan", TOY, "--target", "gpu"),
])
def test_bad_sizes_are_one_line_errors(plan_cli, tmp_path, args):
    line = one_line_error(plan_cli(*args))
    assert line.startswith("rlfit: error:") and ("--device-memory" in line)
    assert list(tmp_path.iterdir()) == []
