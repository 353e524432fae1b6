"""The algorithm contract: what the runner, checkpoints, resume, planner, policy file, play and export see.

An algorithm is an `Algorithm` (static facts: its config section, presets, sizes and their rules, the
back-off) whose `build` returns a `Learner` for one config and plan: a NamedTuple of pure functions in the
style of Optax's `(init, update)`. The generic code never looks inside the training state beyond three
fields every state has: `params` (hashed for `params_digest`), `env_state` (replaced after a back-off) and
`key`. Acting is Brax-style and shared: `policy_logits(policy params, normalized obs) -> [..., logits_size]`
read as the environment's action distribution (`rlfit.networks.distribution_for(action_space)`: a tanh-squashed
Gaussian over A continuous dimensions, logits_size 2 * A, or a categorical over K discrete actions, logits_size
K) by rollout, evaluation (its mode), the policy file, play and export.

Adding an algorithm: a folder `rlfit/algos/<name>/` with `config.py` (SECTION, PRESETS, published, check)
and `algorithm.py` (ALGORITHM), plus one line in `rlfit.config.algorithms.ALGORITHMS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax


class PolicySpec(NamedTuple):
    """The acting network as the policy file records it (an MLP whose output is the action distribution's logits)."""

    hidden: tuple[int, ...]
    activation: str
    obs_key: str
    """For dict observations: the entry the policy reads."""
    encoder: dict[str, Any] | None = None
    """With camera frames: the encoder in front of the MLP (`EncoderSpec.to_dict()`); None for vectors."""


class Learner(NamedTuple):
    """One algorithm built for a config, a plan and its environments."""

    init: Callable[[int], Any]
    """seed -> a fresh training state (a pytree of arrays: `params`, `env_state`, `key`, ...), ready to train."""
    step: Callable[[Any], tuple[Any, Any]]
    """state -> (state, metrics): one iteration (collect and update), pure; the runner compiles it once with
    the state donated. `metrics` is a NamedTuple of scalars with `all_finite`, `episodes_finished`,
    `episode_return_sum` and `episode_length_sum`."""
    metrics_row: Callable[[Any], dict[str, Any]]
    """host metrics -> the algorithm's own fields of a metrics.jsonl row (losses, ...)."""
    acting: Callable[[Any], tuple[Any, Any]]
    """state -> (policy params, observation RunningStats): what evaluation and the policy file read."""
    policy_logits: Callable[[Any, Any], jax.Array]
    """(policy params, normalized observation [..]) -> [..., logits_size] (see the module docstring)."""
    policy: PolicySpec
    resize: Callable[[Any, jax.Array], Any]
    """(a state of this algorithm at other sizes, key) -> the state to continue from at this Learner's sizes,
    with fresh environments from `key` (after an out-of-memory back-off); parameters and optimizer kept."""
    stored_rows: Callable[[Any], list[int | None]] | None = None
    """state -> per leaf, how many leading rows hold data (None: all), so a checkpoint writes only those (an
    unfilled replay buffer); None: every leaf whole."""
    env_axes: Callable[[Any], Any] | None = None
    """state (or its shapes) -> the same tree with, per leaf, the axis that indexes environments (split over the
    run's devices) or `rlfit.parallel.mesh.REPLICATED`; None: axis 0 of `env_state`'s leaves, the rest replicated."""
    policy_rate: Callable[[Any, Any], jax.Array] | None = None
    """(policy params, normalized observation [..]) -> [...] the policy's description length of each observation
    in bits (an information bottleneck's rate), averaged over evaluation states and logged; None: not defined."""
    deployable: Callable[[Any], Any] | None = None
    """policy params -> the params of the network the policy file stores, when they differ (a bottleneck folded
    into a plain MLP at z = mean); None: the params themselves."""
    refill: Callable[[Any], Any] | None = None
    """state restored from a checkpoint that left out what `stored_rows` trims (`run.checkpoint_replay: false`;
    those rows come back as zeros) -> the state with that experience emptied and collected again as at the start."""
    ynn_fusions: bool = True
    """Whether XLA's CPU backend may compile `step` with its YNNPACK fusions (`rlfit.hardware.jax_setup.CPU_COMPILER_OPTIONS`);
    False where the step ran faster without them. Programs with convolutions always compile without them."""


@dataclass(frozen=True)
class Candidate:
    """One configuration the planner considered."""

    sizes: Any
    """The algorithm's sizes NamedTuple."""
    estimate_bytes: int
    """Fitted device bytes of one iteration."""
    predicted_bytes: int
    """`estimate_bytes` times the safety margin; what is compared with the budget."""
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.sizes._asdict(), "estimate_bytes": self.estimate_bytes, "predicted_bytes": self.predicted_bytes,
                "fits": self.fits}


class Choice(NamedTuple):
    """What an algorithm's rules (`MemoryRules.choose`) make of the candidates."""

    candidates: tuple[Candidate, ...]
    """The candidates worth showing, smallest first."""
    chosen: Candidate | None
    reasons: tuple[str, ...]
    smallest: Candidate
    """The smallest configuration the rules allow (named when nothing fits)."""
    fix: str
    """What to change when nothing fits."""


class MemoryRules(NamedTuple):
    """How the memory planner (`rlfit.planning`) models and sizes an algorithm. Pure Python (no JAX).

    The planner fits `bytes = intercept + per_env * num_envs + per_transition * stored_transitions(sizes)` to
    XLA's compile-time analysis of the step at `measured_sizes(config)`, then asks `choose` for the sizes.
    """

    columns: tuple[str, ...]
    """The size fields `rlfit plan` shows per candidate."""
    measured_sizes: Callable[[Any], tuple[Any, ...]]
    """config -> the sizes whose compiled step is analysed: two or more `num_envs` (and, where the state
    stores transitions, two or more capacities)."""
    stored_transitions: Callable[[Any], int]
    """sizes -> transitions the training state stores (a replay buffer's capacity; 0 without one)."""
    choose: Callable[[Any, Callable[[Any], Any], int], Any]
    """(config, judge: sizes -> `Candidate`, most environments worth running or None) ->
    `Choice`: the candidates to show, the chosen one (None if nothing fits), why."""


class Algorithm(NamedTuple):
    """What an algorithm declares once; `build` makes its Learner. (Its config section, presets, rules and
    Playground's published settings live in its pure-Python `config` module: see `rlfit.config.algorithms`.)"""

    name: str
    """'ppo', 'sac': the value of the config's `algo` and the name of its config section."""
    sizes_type: type
    """A NamedTuple of the sizes that shape the compiled step (with `num_envs` and `steps_per_iteration`)."""
    config_sizes: Callable[[Any], Any]
    """Config -> its sizes."""
    smaller_sizes: Callable[[Any, str], Any]
    """(sizes, where) -> the next smaller configuration for the out-of-memory back-off, or None; `where` is
    'init' (creating the starting state ran out) or 'step' (compiling or running an iteration did)."""
    build: Callable[[Any, Any, Any, Any], Learner]
    """(config, plan, train VecEnv, one observation example) -> Learner."""
    memory: MemoryRules
    non_finite_hint: str = "lower the learning rate"
