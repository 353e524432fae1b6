"""The algorithm contract: what the runner, checkpoints, resume, planner, policy file, play and export see.

An algorithm is an `Algorithm` (static facts: its config section, presets, sizes and their rules, the
back-off) whose `build` returns a `Learner` for one config and plan: a NamedTuple of pure functions in the
style of Optax's `(init, update)`. The generic code never looks inside the training state beyond three
fields every state has (`TrainState`): `params` (hashed for `params_digest`), `env_state` (replaced after a
back-off) and `key`; and inside an iteration's metrics beyond `StepMetrics`' four.

Acting is data, as Brax's `Policy` protocol: `policy_logits(policy params, normalized obs) -> [..., size]` is
the acting network's raw output, and `PolicySpec.head` names how it becomes an action
(`rlfit.networks.heads`: tanh_gaussian 2 * A outputs, deterministic_tanh A, categorical K logits, q_argmax K
action values). Evaluation, the policy file (which records the head), play and export read the head; none of
them guesses from output sizes or knows which algorithm trained the policy.

Adding an algorithm: a package with `config.py` (`AlgorithmConfig`: SECTION, PRESETS, published, check) and
`algorithm.py` (ALGORITHM, an `Algorithm`), made known by `rlfit.algos.registry.register_algorithm(name,
package)`, an entry point in the group `rlfit.algorithms`, or one line in `rlfit.config.algorithms.ALGORITHMS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

from rlfit.config.algorithms import AlgorithmConfig  # noqa: F401 - part of the contract, defined beside the names

if TYPE_CHECKING:
    import jax
    import numpy as np
    import numpy.typing as npt

    from rlfit.config.schema import Config
    from rlfit.envs.vec_env import VecEnv
    from rlfit.algos.common.normalizer import RunningStats

Leaf: TypeAlias = (
    "jax.Array | npt.NDArray[np.generic] | np.generic | jax.ShapeDtypeStruct | jax.sharding.Sharding | float | None")
"""A pytree's leaf: an array (on a device or the host), its shape and dtype (an abstract state), its sharding (a
state's layout), a Python number or an empty entry."""
PyTree: TypeAlias = "Leaf | tuple[PyTree, ...] | list[PyTree] | Mapping[str, PyTree]"
"""Nested NamedTuples (tuples), dicts and lists of leaves (jax's pytrees); the contract never looks inside one."""
Variables: TypeAlias = "Mapping[str, Mapping[str, PyTree]]"
"""A Flax network's variables: per collection ('params', 'batch_stats', ...), its tree of arrays."""
Observation: TypeAlias = "jax.Array | Mapping[str, jax.Array]"
"""One observation as the environment gives it (possibly batched): an array or a dict of arrays."""
JsonValue: TypeAlias = "str | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
"""A value of a JSON record (a metrics row, summary.json's entries)."""


TreeT = TypeVar("TreeT")
"""A pytree (a `PyTree`, a training state, metrics) that a function gives back with the structure and type it was
given."""


class RunPlan(Protocol):
    """What an algorithm's `build` reads of the run's plan (`rlfit.planning.plan.Plan`, which the planner makes
    above the algorithms)."""

    @property
    def sizes(self) -> Sizes:
        """The sizes this run compiles for."""

    @property
    def precision(self) -> str:
        """'fp32', 'bf16' or 'fp16': the networks' compute dtype."""

    @property
    def backend(self) -> str:
        """JAX's backend the run compiles for ('cpu', 'gpu', 'tpu')."""

    @property
    def num_iterations(self) -> int:
        """Iterations from the run's start to `run.num_timesteps` (a step-size schedule's length)."""


class TrainState(Protocol):
    """What generic code reads of an algorithm's training state (a NamedTuple or flax struct of arrays)."""

    @property
    def params(self) -> PyTree:
        """Every trained parameter (hashed for `params_digest`)."""

    @property
    def env_state(self) -> PyTree:
        """The training environments' `rlfit.envs.vec_env.EnvState`, batched over `num_envs`."""

    @property
    def key(self) -> jax.Array:
        """[2] uint32 PRNG key of the state (fresh environments after a back-off are drawn from it)."""


class StepMetrics(Protocol):
    """What the runner reads of an iteration's metrics (a NamedTuple of scalars [])."""

    @property
    def all_finite(self) -> jax.Array:
        """[] bool: no NaN or infinity in the parameters, losses and statistics."""

    @property
    def episodes_finished(self) -> jax.Array:
        """[] episodes that ended during the iteration."""

    @property
    def episode_return_sum(self) -> jax.Array:
        """[] sum of their returns."""

    @property
    def episode_length_sum(self) -> jax.Array:
        """[] sum of their lengths (policy steps)."""


class Sizes(Protocol):
    """The sizes that shape an algorithm's compiled step (a NamedTuple; more fields where the algorithm has them)."""

    @property
    def num_envs(self) -> int:
        """Parallel training environments (the total over the run's devices)."""

    @property
    def steps_per_iteration(self) -> int:
        """Policy steps of all environments together per iteration."""

    def _asdict(self) -> dict[str, int]: ...


StateT = TypeVar("StateT", bound=TrainState)
MetricsT = TypeVar("MetricsT", bound=StepMetrics)
PolicyParamsT = TypeVar("PolicyParamsT")
SizesT = TypeVar("SizesT", bound=Sizes)


class PolicySpec(NamedTuple):
    """The acting network as the policy file records it: an MLP (behind an encoder of camera frames, with
    `encoder`) whose output the action head `head` reads."""

    hidden: tuple[int, ...]
    activation: str
    obs_key: str
    """For dict observations: the entry the policy reads."""
    encoder: dict[str, JsonValue] | None = None
    """With camera frames: the encoder in front of the MLP (`EncoderSpec.to_dict()`); None for vectors."""
    head: str | None = None
    """The action head (`rlfit.networks.heads`: 'tanh_gaussian', 'deterministic_tanh', 'categorical',
    'q_argmax'); the MLP's last layer has `head.output_size(action size)` units. None: the action space's
    stochastic policy (tanh_gaussian or categorical), what every policy was before heads were named."""


class Learner(NamedTuple, Generic[StateT, MetricsT, PolicyParamsT]):
    """One algorithm built for a config, a plan and its environments (pure functions; the runner compiles them)."""

    init: Callable[[int], StateT]
    """seed -> a fresh training state (a pytree of arrays with `TrainState`'s fields), ready to train."""
    step: Callable[[StateT], tuple[StateT, MetricsT]]
    """state -> (state, metrics): one iteration (collect and update), pure; the runner compiles it once with
    the state donated. `metrics` has `StepMetrics`' fields."""
    metrics_row: Callable[[MetricsT], dict[str, float | int]]
    """host metrics -> the algorithm's own fields of a metrics.jsonl row (losses, ...; an `updates` count
    also gives `updates_per_s`)."""
    acting: Callable[[StateT], tuple[PolicyParamsT, RunningStats]]
    """state -> (policy params, observation RunningStats): what evaluation and the policy file read."""
    policy_logits: Callable[[PolicyParamsT, Observation], jax.Array]
    """(policy params, normalized observation [..]) -> [..., head.output_size(action size)]: the acting
    network's output, which `policy.head` turns into the action."""
    policy: PolicySpec
    resize: Callable[[StateT, jax.Array], StateT]
    """(a state of this algorithm at other sizes, key) -> the state to continue from at this Learner's sizes,
    with fresh environments from `key` (after an out-of-memory back-off); parameters and optimizer kept."""
    stored_rows: Callable[[StateT], list[int | None]] | None = None
    """state -> per leaf, how many leading rows hold data (None: all), so a checkpoint writes only those (an
    unfilled replay buffer); None: every leaf whole."""
    env_axes: Callable[[StateT], PyTree] | None = None
    """state (or its shapes) -> the same tree with, per leaf, the axis that indexes environments (split over the
    run's devices) or `rlfit.parallel.mesh.REPLICATED`; None: axis 0 of `env_state`'s leaves, the rest replicated."""
    policy_rate: Callable[[PolicyParamsT, Observation], jax.Array] | None = None
    """(policy params, normalized observation [..]) -> [...] the policy's description length of each observation
    in bits (an information bottleneck's rate), averaged over evaluation states and logged; None: not defined."""
    deployable: Callable[[PolicyParamsT], PyTree] | None = None
    """policy params -> the params of the network the policy file stores, when they differ (a bottleneck folded
    into a plain MLP at z = mean); None: the params themselves."""
    refill: Callable[[StateT], StateT] | None = None
    """state restored from a checkpoint that left out what `stored_rows` trims (`run.checkpoint_replay: false`;
    those rows come back as zeros) -> the state with that experience emptied and collected again as at the start."""
    ynn_fusions: bool = True
    """Whether XLA's CPU backend may compile `step` with its YNNPACK fusions (`rlfit.hardware.jax_setup.CPU_COMPILER_OPTIONS`);
    False where the step ran faster without them. Programs with convolutions always compile without them."""


@dataclass(frozen=True)
class Candidate:
    """One configuration the planner considered."""

    sizes: Sizes
    """The algorithm's sizes NamedTuple."""
    estimate_bytes: int
    """Fitted device bytes of one iteration."""
    predicted_bytes: int
    """`estimate_bytes` times the safety margin; what is compared with the budget."""
    fits: bool

    def to_dict(self) -> dict[str, int | bool]:
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


class MemoryRules(NamedTuple, Generic[SizesT]):
    """How the memory planner (`rlfit.planning`) models and sizes an algorithm. Pure Python (no JAX).

    The planner fits `bytes = intercept + per_env * num_envs + per_transition * stored_transitions(sizes)` to
    XLA's compile-time analysis of the step at `measured_sizes(config, cap)`, then asks `choose` for the sizes.
    """

    columns: tuple[str, ...]
    """The size fields `rlfit plan` shows per candidate."""
    measured_sizes: Callable[[Config, int | None], tuple[SizesT, ...]]
    """(config, most environments worth running or None) -> the sizes whose compiled step is analysed: two or
    more `num_envs` (and, where the state stores transitions, two or more capacities). Where the rules know the
    sizes training will most likely run (what `choose` picks when memory does not limit: PPO's largest candidate
    within a CPU's cap, SAC's config), those come first: `train --num-envs auto` compiles that probe as training
    compiles its step, so training reuses it when chosen (`rlfit.planning.measure`). Every other probe is a size
    `choose` never picks, so training never compiles it again."""
    stored_transitions: Callable[[SizesT], int]
    """sizes -> transitions the training state stores (a replay buffer's capacity; 0 without one)."""
    choose: Callable[[Config, Callable[[SizesT], Candidate], int | None], Choice]
    """(config, judge: sizes -> `Candidate`, most environments worth running or None) ->
    `Choice`: the candidates to show, the chosen one (None if nothing fits), why."""


class Algorithm(NamedTuple, Generic[SizesT, StateT, MetricsT, PolicyParamsT]):
    """What an algorithm declares once; `build` makes its Learner. (Its config section, presets, rules and
    Playground's published settings live in its pure-Python `config` module, an `AlgorithmConfig`.)"""

    name: str
    """'ppo', 'sac': the value of the config's `algo` and the name of its config section."""
    sizes_type: type[SizesT]
    """A NamedTuple of the sizes that shape the compiled step (`Sizes`: `num_envs`, `steps_per_iteration`, ...)."""
    config_sizes: Callable[[Config], SizesT]
    """Config -> its sizes."""
    smaller_sizes: Callable[[SizesT, str], SizesT | None]
    """(sizes, where) -> the next smaller configuration for the out-of-memory back-off, or None; `where` is
    'init' (creating the starting state ran out) or 'step' (compiling or running an iteration did)."""
    build: Callable[[Config, RunPlan, VecEnv, Observation], Learner[StateT, MetricsT, PolicyParamsT]]
    """(config, plan, train VecEnv, one unbatched observation example) -> Learner of the algorithm's own state,
    metrics and policy params types."""
    memory: MemoryRules[SizesT]
    non_finite_hint: str = "lower the learning rate"


SomeLearner: TypeAlias = Learner[TrainState, StepMetrics, PyTree]
"""A Learner as code that serves every algorithm sees it (the registry, the runner): its own state, metrics and
policy params types erased to what the contract promises of them (`TrainState`, `StepMetrics`, a pytree)."""
SomeAlgorithm: TypeAlias = Algorithm[Sizes, TrainState, StepMetrics, PyTree]
"""An algorithm picked by name at run time (`rlfit.algos.registry.algorithm`), its types erased as `SomeLearner`'s."""
