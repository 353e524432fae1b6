"""summary.json as typed records: `RunSummary` (what every session's summary holds), `SessionSummary` (a run's
own, `rlfit.run.loop`) and `LaneSummary` (a lane of a seed group, `rlfit.study.group_runner`).

Written with `to_json` and read with `from_json` (`rlfit.rundir.records`: unknown keys ignored, missing fields
None), so a summary of an older or newer rlfit still reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from rlfit.rundir.records import JsonRecord


@dataclass(frozen=True)
class RunSummary(JsonRecord):
    """What a training session ran, how fast, and where it ended."""

    env: str
    """The environment's name (`env.name`)."""
    final_eval_reward: float | None
    """Mean return of the last evaluation; null when the session evaluated nothing."""
    best_eval_reward: float | None
    """The best mean return of any evaluation of the run (resumed sessions included)."""
    final_eval_reward_randomized: float | None
    """The last evaluation's mean return on freshly drawn models (domain randomization); null without it."""
    randomization: dict[str, Any]
    """The domain randomization that ran (`setting`, `source`, `fields`, `bytes_per_env`, `note`)."""
    observation_set: dict[str, Any] | None
    """With `env.observation_set: robot`, what the policy observes (`ObservationSet.to_dict()`: `name`,
    `policy_key`, `full_size`, `dropped` and `kept` indices into the environment's own policy observation,
    `dropped_because`); null for `full` (the environment's own observation)."""
    final_description_length_bits: float | None
    """The policy's mean description length of an observation at the last evaluation (an information
    bottleneck's rate, in bits); null where the policy does not define one."""
    iterations: int
    """Training iterations of the run at the session's end (earlier sessions included)."""
    env_steps: int
    """Simulator steps of the run at the session's end (earlier sessions included)."""
    session_env_steps: int
    """Simulator steps this session made."""
    train_wall_s: float
    """Seconds of training after compilation, evaluation included."""
    compile_s: float
    """The seconds of the session's compiled programs, added up (they may overlap)."""
    compile_reused: bool
    """True when the session reused programs an earlier session of this process compiled (an experiment's next
    seed)."""
    compile_wait_s: float
    """Seconds the session waited for programs compiling in the background once it needed them."""
    programs: list[dict[str, Any]]
    """Each compiled program (`rlfit.hardware.compile_log.ProgramCompile`: `name`, `compile_s`, `from_cache`,
    `from_store`); empty when the programs of an earlier session were reused."""
    time_to_first_step_s: float | None
    """Seconds from the process's start (a later trial's start in the same process) to the end of the session's
    first training iteration; null when it trained none."""
    init_s: float
    """Seconds building the starting state, its program's compile or cache read included; 0 on resume."""
    eval_s: float
    """Seconds spent evaluating (inside `train_wall_s`)."""
    sps_mean: float | None
    """Simulator steps per second of this session (`session_env_steps / train_wall_s`); null for no time."""
    device: str
    """The device the run compiled for, 'platform:kind' (the plan's)."""
    backend: str
    """JAX's backend ('cpu', 'gpu', 'tpu')."""
    impl: str
    """MJX's implementation that stepped the environments ('jax' or 'warp')."""
    sizes: dict[str, int]
    """The algorithm's sizes the session ran at (`num_envs`, ...; after any out-of-memory back-off)."""
    preset: str | None
    """The preset the config was built from; null where the config came from elsewhere (the API, a trial)."""
    predicted_bytes: int | None
    """The planner's predicted device bytes of an iteration; null when it predicted none."""
    devices: dict[str, Any]
    """The devices the run was split over (`axis`, `devices`, `processes`, `kinds`, `ids`)."""
    device_peak_bytes: int | None
    """JAX's `peak_bytes_in_use` of the busiest local device; null where the device keeps no statistics (a CPU)."""
    device_peak_bytes_per_device: list[int] | None
    """The same figure of each local device; null where none keeps statistics."""
    events: list[dict[str, Any]]
    """What happened to the run on the way (out-of-memory back-offs), in order."""
    stopped_by: str | None
    """Why the session ended early: a signal ('SIGTERM', 'SIGINT') or a stopping rule ('time_budget',
    'target_reward', 'early_stop'); null at the plan's end."""
    versions: dict[str, str]
    """The versions of rlfit and the packages it trains with."""
    params_digest: str | None
    """sha256 of the final parameters' bytes (`rlfit.run.summary.params_digest`): equal digests, equal results;
    null when the session ended without a state."""


@dataclass(frozen=True)
class SessionSummary(RunSummary):
    """summary.json of a run trained on its own (`rlfit train`, the API, an experiment's trial)."""

    stop_grace: dict[str, Any] | None = None
    """The stop grace kept while the session ran (`grace_s`, `host_copies`, `copy_s_max`:
    `rlfit.run.stop_grace`); null without one."""


@dataclass(frozen=True)
class LaneSummary(RunSummary):
    """summary.json of one lane of a seed group (seeds trained together in one program)."""

    seed_group: dict[str, Any] | None = None
    """The group the lane trained in (its `seeds`, size and reason, as plan.json's `extra.seed_group`) and
    `group_sps_mean`, the simulator steps per second of all its lanes together."""


SummaryT = TypeVar("SummaryT", bound=RunSummary)


def extended(summary: RunSummary, record: type[SummaryT], **more: Any) -> SummaryT:
    """`summary`'s fields in a `record` that adds `more` (its own fields) after them."""
    return record(**{field.name: getattr(summary, field.name) for field in dataclasses.fields(summary)}, **more)
