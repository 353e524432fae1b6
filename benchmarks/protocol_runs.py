"""A comparison protocol (benchmarks/protocols/*.yaml) read and checked, and the runs it declares taken from the
suite's result files (suite.py's format: runs[env][rlfit|brax][seed]): the runs used, the runs in those files that
lie outside the protocol, and the declared runs that are missing. No statistics here (protocol_report.py).

Bad input (a missing or malformed protocol, a result file it names that does not exist) raises ProtocolError: one
line naming the problem and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import yaml

REPO = Path(__file__).resolve().parent.parent
ADOPTED = "adopted"
"""A comparison side that names no file: the side its protocol's adoption comparison (ADOPTION) decides."""
ADOPTION = "preset_change"
"""The comparison whose decision says which of its two sides is adopted (its first when adopted, else its second)."""
FILE_SIDES = ("rlfit", "brax")


class ProtocolError(Exception):
    """Bad input: the message is one line naming the problem and the fix."""


class Side(NamedTuple):
    """One side of a comparison: the runs of `file_side` ("rlfit" or "brax") in `file`, at `settings`."""

    name: str
    file: str
    file_side: str
    settings: tuple[str, ...]
    """`--set` overrides (`ppo.KEY=VALUE`) the runs must have been made with (read from each environment's
    shared_settings.rlfit_ppo, the settings rlfit resolved)."""


class ComparisonSpec(NamedTuple):
    """Two sides (a minus b) over environments."""

    name: str
    sides: tuple[str, str]
    environments: tuple[str, ...]


class Protocol(NamedTuple):
    """A protocol file as declared: its seeds, sides and comparisons."""

    name: str
    path: Path
    seeds: tuple[int, ...]
    sides: dict[str, Side]
    comparisons: dict[str, ComparisonSpec]


class Run(NamedTuple):
    """One finished run in a result file."""

    file: str
    file_side: str
    env: str
    seed: int
    final: float
    best: float
    commit: str
    date: str
    env_steps: int | None


def load_protocol(path: Path) -> Protocol:
    """The protocol at `path`, checked: seeds, sides with their files (which must exist), comparisons whose
    environments are '+'-joined names of the file's top-level lists."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ProtocolError(f"cannot read the protocol {path}: {error.strerror}; pass an existing protocol "
                            "file (benchmarks/protocols/)") from None
    except yaml.YAMLError as error:
        raise ProtocolError(f"{path} is not valid YAML ({str(error).splitlines()[0]}); fix the file") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"{path} holds no mapping; a protocol needs name, seeds, sides and comparisons")
    missing = [key for key in ("name", "seeds", "sides", "comparisons") if key not in raw]
    if missing:
        raise ProtocolError(f"{path} has no {', '.join(missing)}; declare them (see "
                            "benchmarks/protocols/quick_preset_2026_12.yaml)")
    sides = {name: _side(path, name, spec) for name, spec in raw["sides"].items()}
    comparisons = {name: _comparison(path, raw, sides, name, spec) for name, spec in raw["comparisons"].items()}
    return Protocol(str(raw["name"]), path, tuple(int(seed) for seed in raw["seeds"]), sides, comparisons)


def _side(path: Path, name: str, spec: Any) -> Side:
    if not isinstance(spec, dict) or not {"file", "side"} <= set(spec):
        raise ProtocolError(f"{path}: side {name!r} needs a file and a side (rlfit or brax)")
    if spec["side"] not in FILE_SIDES:
        raise ProtocolError(f"{path}: side {name!r} has side {spec['side']!r}; choose one of {', '.join(FILE_SIDES)}")
    if not (REPO / spec["file"]).is_file():
        raise ProtocolError(f"{path}: side {name!r} names {spec['file']}, which does not exist; fix the path or run "
                            "the suite first (benchmarks/suite.py --out ...)")
    return Side(name, str(spec["file"]), str(spec["side"]), tuple(str(item) for item in spec.get("set") or ()))


def _comparison(path: Path, raw: dict, sides: dict[str, Side], name: str, spec: Any) -> ComparisonSpec:
    pair = tuple(spec.get("sides") or ()) if isinstance(spec, dict) else ()
    if len(pair) != 2 or any(side not in sides and side != ADOPTED for side in pair):
        raise ProtocolError(f"{path}: comparison {name!r} needs two sides among {', '.join(sides)} (or "
                            f"{ADOPTED!r}), got {list(pair)}")
    if ADOPTED in pair and ADOPTION not in raw["comparisons"]:
        raise ProtocolError(f"{path}: comparison {name!r} names {ADOPTED!r} but no {ADOPTION!r} comparison decides it")
    environments: list[str] = []
    for part in str(spec.get("environments", "")).split("+"):
        listed = raw.get(part.strip())
        if not isinstance(listed, list):
            raise ProtocolError(f"{path}: comparison {name!r} takes its environments from {part.strip()!r}, which is "
                                "not a list in the file; name top-level lists joined by '+'")
        environments += [str(env) for env in listed]
    return ComparisonSpec(name, (str(pair[0]), str(pair[1])), tuple(environments))


def read_records(protocol: Protocol) -> dict[str, dict]:
    """Each result file the sides name, read once: {path as declared: record}."""
    records = {}
    for side in protocol.sides.values():
        if side.file not in records:
            try:
                records[side.file] = json.loads((REPO / side.file).read_text())
            except json.JSONDecodeError as error:
                raise ProtocolError(f"{side.file} is not valid JSON ({error.msg}, line {error.lineno}); restore it "
                                    "from git") from None
    return records


def finished_runs(file: str, record: dict) -> list[Run]:
    """Every run of `record` (suite.py's format) with a final eval reward, in file order."""
    runs = []
    for env, sides in (record.get("runs") or {}).items():
        for file_side in FILE_SIDES:
            for seed, run in (sides.get(file_side) or {}).items():
                if isinstance(run, dict) and run.get("final_eval_reward") is not None:
                    runs.append(Run(file, file_side, env, int(seed), float(run["final_eval_reward"]),
                                    float(run["best_eval_reward"]), (run.get("git") or {}).get("head", ""),
                                    str(run.get("date", "")), run.get("env_steps")))
    return runs


def settings_differences(side: Side, record: dict, env: str) -> list[str]:
    """The side's declared `--set` items that `env`'s runs in `record` were not made with ('ppo.advantages: brax
    declared, gae_once in the file'); [] where they all hold or the environment has no runs."""
    resolved = ((record.get("runs") or {}).get(env) or {}).get("shared_settings", {}).get("rlfit_ppo")
    if resolved is None:
        return []
    differences = []
    for item in side.settings:
        key, _, value = item.partition("=")
        section, _, name = key.partition(".")
        have = resolved.get(name) if section == "ppo" else None
        if have != yaml.safe_load(value):
            differences.append(f"{key}: {value} declared, {have} in the file")
    return differences


class Selection(NamedTuple):
    """The runs of one side at the protocol's seeds per environment, and what is missing or left out."""

    used: dict[str, list[Run]]
    """Environment -> the runs used, by seed."""
    missing: list[dict[str, Any]]
    """Declared (environment, seed) pairs without a usable run, each with the reason."""


def select(protocol: Protocol, side: Side, environments: tuple[str, ...], record: dict) -> Selection:
    """`side`'s runs at the protocol's seeds on `environments`; environments whose runs ran other settings give
    no runs (their seeds are missing, the reason says why)."""
    by_key = {(run.env, run.seed): run for run in finished_runs(side.file, record) if run.file_side == side.file_side}
    used: dict[str, list[Run]] = {}
    missing: list[dict[str, Any]] = []
    for env in environments:
        differences = settings_differences(side, record, env)
        used[env] = [] if differences else [by_key[(env, s)] for s in protocol.seeds if (env, s) in by_key]
        for seed in protocol.seeds:
            if differences or (env, seed) not in by_key:
                reason = ("the file's runs ran other settings: " + "; ".join(differences) if differences
                          else "not in the file" if seed not in _seeds_in(record, env, side.file_side)
                          else "in the file without a final eval reward (failed or unfinished)")
                missing.append({"side": side.name, "file": side.file, "file_side": side.file_side, "env": env,
                                "seed": seed, "reason": reason})
    return Selection(used, missing)


def _seeds_in(record: dict, env: str, file_side: str) -> set[int]:
    return {int(seed) for seed in (((record.get("runs") or {}).get(env) or {}).get(file_side) or {})}


def outside(records: dict[str, dict], used: list[Run]) -> list[dict[str, Any]]:
    """Every finished run in the named files that no side used: file, side in the file, environment, seed, final."""
    taken = {(run.file, run.file_side, run.env, run.seed) for run in used}
    return [{"file": run.file, "file_side": run.file_side, "env": run.env, "seed": run.seed, "final": run.final}
            for file, record in records.items() for run in finished_runs(file, record)
            if (run.file, run.file_side, run.env, run.seed) not in taken]
