"""A small pure-JAX gridworld with obstacles, for out-of-distribution studies (bigger grids, more obstacles, moved goals).

The walkable square is `size x size` cells; everything outside it is wall. Positions are (row, col) int32 in
[0, size) of the walkable square, row 0 at the top. Actions: 0 up (row - 1), 1 right (col + 1), 2 down (row + 1),
3 left (col - 1); a move into a wall or an obstacle leaves the agent in place.

Layouts (drawn at every reset): the agent's start and the goal are two distinct cells chosen first (see `GOAL_MODES`);
every other cell is an obstacle with probability `obstacle_density`. The goal must be reachable from the start:
a flood fill (4-neighbour dilation of the reached set, masked by free cells, repeated in a `lax.while_loop` until it
stops growing) checks it, and a `lax.while_loop` redraws the obstacles (start and goal kept) up to `MAX_TRIES` times;
if none is solvable, the obstacles are cleared. No Python control flow depends on traced values: `reset` and `step`
compile once whatever layout is drawn.

Observation [view_size * view_size * (3 + distractors)] float32 (or + 2 with `goal_offset`): an egocentric window
centred on the agent, shape [view_size, view_size, 3 + distractors] flattened in row-major order, channel last: 0 wall
(outside the walkable square), 1 obstacle, 2 goal, then `distractors` nuisance channels. Its length does not depend on
`size`, so a policy trained on 8x8 runs on 16x16.

Distractors (nuisance features, off by default): `distractors` extra channels of "coloured floor tiles", each cell of
the padded grid (walls included) lit with probability `distractor_density`, drawn once per episode from a key of their
own (`fold_in(reset key, DISTRACTOR_SALT)`), so they move with the view like the obstacles but are independent of the
layout, the start, the goal, the rewards and the dynamics: the same reset key gives the same layout, rewards and
episode whatever the distractor settings. A suite that changes only `distractor_density` is a shift of nuisance
features alone, which an agent that discards them is unaffected by.

`GridWorld.reference_returns` searches the shortest path from an episode's start to its goal (a breadth-first flood
fill), so an evaluation can score the episode against the optimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.envs.simple_state import SimpleState
from rlfit.errors import UserError, did_you_mean

GOAL_MODES = ("random", "corner", "far")
"""'random': start uniform, goal uniform on the other cells. 'corner': goal in one of the four corners, uniformly;
start uniform on the other cells. 'far': start uniform, goal in the corner farthest from the start's quadrant."""
MAX_TRIES = 16
"""Obstacle draws per reset before falling back to an empty layout."""
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], np.int32)
"""[4, 2] (d_row, d_col) of up, right, down, left."""
DISTRACTOR_SALT = 0xD157
"""Distractors are drawn from fold_in(reset key, DISTRACTOR_SALT): the layout's own draws are unchanged by them."""


class GridConfig(NamedTuple):
    """One gridworld's settings (frozen)."""

    size: int = 8
    """Side of the walkable square; the border outside it is wall."""
    obstacle_density: float = 0.15
    """Probability that each cell other than start and goal is an obstacle, drawn at every reset; in [0, 1)."""
    goal_reward: float = 1.0
    """Reward for reaching the goal (the step cost is still subtracted)."""
    step_cost: float = 0.01
    """Subtracted from the reward at every step, including the one that reaches the goal."""
    goal: str = "random"
    """Where the goal is drawn: one of `GOAL_MODES`."""
    view_size: int = 5
    """Odd side (>= 3) of the egocentric observation window."""
    obstacle_penalty: float = 0.0
    """Added to the reward when a move is blocked by a wall or obstacle (negative to punish; 0: just blocked)."""
    goal_offset: bool = False
    """Append the goal's (d_col, d_row) / size, clipped to [-1, 1], to the observation."""
    distractors: int = 0
    """Nuisance channels appended to every cell of the observation window (0: none): random tiles irrelevant to the
    task, drawn per episode."""
    distractor_density: float = 0.5
    """Probability that each cell of each distractor channel is lit; in [0, 1]. Changing it shifts only the nuisance
    features."""


class GridInfo(NamedTuple):
    """The environment's own state; P = size + 2 * (view_size // 2) is the padded side."""

    obstacles: jax.Array
    """[P, P] bool obstacles, padded (False in the padding; walls are `GridWorld.walls`)."""
    agent: jax.Array
    """[2] int32 (row, col) of the agent in the walkable square."""
    goal: jax.Array
    """[2] int32 (row, col) of the goal in the walkable square."""
    steps: jax.Array
    """[] int32 steps since the reset."""
    distractors: jax.Array
    """[P, P, distractors] bool nuisance tiles of this episode ([P, P, 0] without distractors)."""


class GridWorld:
    """Reach the goal on a grid with obstacles; `reset` and `step` are pure, jit- and vmap-safe.

    There is no time limit and nothing special happens when stepping past the goal: `VecEnv` ends and resets episodes.
    """

    num_actions = 4
    success_on_termination = True
    """An episode ends in a terminal state only by reaching the goal (`rlfit.study.episodes` counts it a success)."""

    def __init__(self, config: GridConfig = GridConfig()):
        validate(config)
        self.config = config
        self.pad = config.view_size // 2
        self.channels = 3 + config.distractors
        self.observation_size = config.view_size**2 * self.channels + (2 if config.goal_offset else 0)
        inside = np.zeros((config.size + 2 * self.pad,) * 2, bool)
        inside[self.pad : self.pad + config.size, self.pad : self.pad + config.size] = True
        self.walls = ~inside  # [P, P] bool, True outside the walkable square

    def reset(self, key: jax.Array) -> SimpleState:
        """A fresh solvable layout; `key` is one PRNG key."""
        place_key, obstacle_key = jax.random.split(key)
        agent, goal = _place(place_key, self.config)
        obstacles = _solvable_obstacles(obstacle_key, agent, goal, self.config)
        size, side = self.config.size, self.config.size + 2 * self.pad
        distractors = jax.random.bernoulli(jax.random.fold_in(key, DISTRACTOR_SALT), self.config.distractor_density,
                                           (side, side, self.config.distractors))
        info = GridInfo(jnp.pad(obstacles, self.pad), _position(agent, size), _position(goal, size), jnp.int32(0),
                        distractors)
        zero = jnp.zeros((), jnp.float32)
        return SimpleState(self._observe(info), zero, zero, {"reached_goal": zero}, info)

    def step(self, state: SimpleState, action: jax.Array) -> SimpleState:
        """Moves the agent by `action` (int32 [] or [1]; floats are truncated); done = 1.0 on reaching the goal."""
        info, config = state.info, self.config
        move = jnp.asarray(MOVES)[jnp.clip(jnp.reshape(action, (-1,))[0].astype(jnp.int32), 0, 3)]
        target = info.agent + move
        row, col = target[0] + self.pad, target[1] + self.pad
        blocked = jnp.asarray(self.walls)[row, col] | info.obstacles[row, col]
        agent = jnp.where(blocked, info.agent, target)
        reached = jnp.all(agent == info.goal).astype(jnp.float32)
        reward = reached * config.goal_reward - config.step_cost + blocked.astype(jnp.float32) * config.obstacle_penalty
        info = info._replace(agent=agent, steps=info.steps + 1)
        return SimpleState(self._observe(info), reward.astype(jnp.float32), reached, {"reached_goal": reached}, info)

    def reference_returns(self, state: SimpleState, env_steps: int) -> tuple[jax.Array, jax.Array]:
        """(optimal, failing) returns [] of the episode that starts at `state` and lasts at most `env_steps` steps
        (the shortest path is searched here, not at every reset, so training does not pay for it)."""
        info, size, pad = state.info, self.config.size, self.pad
        free = ~info.obstacles[pad : pad + size, pad : pad + size]
        moves = path_length(free, info.agent[0] * size + info.agent[1], info.goal[0] * size + info.goal[1])
        return reference_returns(self.config, moves, env_steps)

    def _observe(self, info: GridInfo) -> jax.Array:
        """[observation_size] float32: the [view, view, 3] window around the agent, flattened (+ goal offset)."""
        view = self.config.view_size
        goal = jnp.zeros_like(info.obstacles).at[info.goal[0] + self.pad, info.goal[1] + self.pad].set(True)
        task = jnp.stack([jnp.asarray(self.walls), info.obstacles, goal], axis=-1)
        channels = jnp.concatenate([task, info.distractors], axis=-1).astype(jnp.float32)
        window = jax.lax.dynamic_slice(channels, (info.agent[0], info.agent[1], 0), (view, view, self.channels))
        window = window.reshape(-1)
        if not self.config.goal_offset:
            return window
        offset = (info.goal - info.agent)[::-1].astype(jnp.float32) / self.config.size
        return jnp.concatenate([window, jnp.clip(offset, -1.0, 1.0)])


def _position(index: jax.Array, size: int) -> jax.Array:
    """[2] int32 (row, col) of the flat cell `index` []."""
    return jnp.stack([index // size, index % size]).astype(jnp.int32)


def _other_cell(key: jax.Array, taken: jax.Array, cells: int) -> jax.Array:
    """[] int32 flat index uniform on the `cells` cells other than `taken` []."""
    index = jax.random.randint(key, (), 0, cells - 1)
    return index + (index >= taken)


def _place(key: jax.Array, config: GridConfig) -> tuple[jax.Array, jax.Array]:
    """Distinct flat indices [] (agent, goal) of the start and the goal, drawn as `config.goal` says."""
    size, cells = config.size, config.size**2
    first_key, second_key = jax.random.split(key)
    corners = jnp.array([0, size - 1, cells - size, cells - 1], jnp.int32)
    if config.goal == "corner":
        goal = corners[jax.random.randint(first_key, (), 0, 4)]
        return _other_cell(second_key, goal, cells), goal
    agent = jax.random.randint(first_key, (), 0, cells)
    if config.goal == "random":
        return agent, _other_cell(second_key, agent, cells)
    row = jnp.where(2 * (agent // size) < size - 1, size - 1, 0)
    col = jnp.where(2 * (agent % size) < size - 1, size - 1, 0)
    return agent, row * size + col


def reachable(free: jax.Array, start: jax.Array) -> jax.Array:
    """[S, S] bool cells reachable from flat index `start` [] through the [S, S] bool `free` cells (4-neighbour)."""
    seed = jnp.zeros(free.size, bool).at[start].set(True).reshape(free.shape)

    def grow(carry):
        reached, _ = carry
        p = jnp.pad(reached, 1)
        grown = (reached | p[:-2, 1:-1] | p[2:, 1:-1] | p[1:-1, :-2] | p[1:-1, 2:]) & free
        return grown, jnp.any(grown != reached)

    return jax.lax.while_loop(lambda carry: carry[1], grow, (seed, jnp.array(True)))[0]


def path_length(free: jax.Array, start: jax.Array, goal: jax.Array) -> jax.Array:
    """[] int32 moves of a shortest 4-neighbour path from flat index `start` to `goal` through the [S, S] bool `free`
    cells (breadth-first: the reached set grows by one move per iteration); -1 if the goal is unreachable."""
    seed = jnp.zeros(free.size, bool).at[start].set(True).reshape(free.shape)

    def grow(carry):
        reached, moves, _ = carry
        p = jnp.pad(reached, 1)
        grown = (reached | p[:-2, 1:-1] | p[2:, 1:-1] | p[1:-1, :-2] | p[1:-1, 2:]) & free
        return grown, moves + 1, jnp.any(grown != reached)

    def searching(carry):
        reached, _, growing = carry
        return growing & ~reached.reshape(-1)[goal]

    reached, moves, _ = jax.lax.while_loop(searching, grow, (seed, jnp.int32(0), jnp.array(True)))
    return jnp.where(reached.reshape(-1)[goal], moves, -1).astype(jnp.int32)


def reference_returns(config: GridConfig, shortest_path: jax.Array, episode_length: int) -> tuple[jax.Array, jax.Array]:
    """(optimal, failing) returns [...] of episodes whose shortest paths are `shortest_path` [...] moves: optimal
    walks a shortest path (goal_reward - step_cost * moves), failing never reaches the goal in `episode_length` steps
    and never bumps (-step_cost * episode_length). Without an obstacle penalty every return lies between them."""
    optimal = config.goal_reward - config.step_cost * shortest_path.astype(jnp.float32)
    return optimal, jnp.full_like(optimal, -config.step_cost * episode_length)


def _solvable_obstacles(key: jax.Array, agent: jax.Array, goal: jax.Array, config: GridConfig) -> jax.Array:
    """[size, size] bool obstacles (never on the start or goal) through which the goal is reachable."""
    shape, cells = (config.size, config.size), config.size**2
    keep_clear = jnp.zeros(cells, bool).at[agent].set(True).at[goal].set(True).reshape(shape)

    def draw(carry):
        tries, key, _, _ = carry
        key, draw_key = jax.random.split(key)
        obstacles = jax.random.bernoulli(draw_key, config.obstacle_density, shape) & ~keep_clear
        solved = reachable(~obstacles, agent).reshape(-1)[goal]
        return tries + 1, key, obstacles, solved

    start = (jnp.int32(0), key, jnp.zeros(shape, bool), jnp.array(False))
    _, _, obstacles, solved = jax.lax.while_loop(lambda c: (c[0] < MAX_TRIES) & ~c[3], draw, start)
    return obstacles & solved


VARIANTS: dict[str, GridConfig] = {
    "Obstacles-8x8": GridConfig(size=8, obstacle_density=0.15),
    "Obstacles-16x16": GridConfig(size=16, obstacle_density=0.15),
    "Dense-8x8": GridConfig(size=8, obstacle_density=0.3),
    "Empty-8x8": GridConfig(size=8, obstacle_density=0.0),
    "Empty-5x5": GridConfig(size=5, obstacle_density=0.0),
}
"""Named gridworlds; `load` starts from one and applies overrides."""
NAMES = tuple(sorted(VARIANTS))


def load(variant: str, overrides: Mapping[str, Any] | None = None) -> GridWorld:
    """The gridworld `variant` (a `VARIANTS` name) with `overrides` (any `GridConfig` field) applied."""
    if variant not in VARIANTS:
        raise UserError(f"unknown gridworld '{variant}'{did_you_mean(variant, VARIANTS)}; "
                        f"choose one of {', '.join(NAMES)}")
    overrides = dict(overrides or {})
    for name in overrides:
        if name not in GridConfig._fields:
            raise UserError(f"gridworld override '{name}' is not a setting{did_you_mean(name, GridConfig._fields)}; "
                            f"valid ones: {', '.join(GridConfig._fields)}")
    return GridWorld(VARIANTS[variant]._replace(**overrides))


def validate(config: GridConfig) -> None:
    """Raises a one-line UserError naming the first bad field of `config` and how to fix it."""
    if isinstance(config.size, bool) or not isinstance(config.size, int) or config.size < 2:
        raise UserError(f"gridworld size must be an integer >= 2, got {config.size!r}")
    if not isinstance(config.obstacle_density, (int, float)) or not 0 <= config.obstacle_density < 1:
        raise UserError(f"gridworld obstacle_density must be in [0, 1), got {config.obstacle_density!r}")
    for name in ("goal_reward", "step_cost", "obstacle_penalty"):
        if isinstance(getattr(config, name), bool) or not isinstance(getattr(config, name), (int, float)):
            raise UserError(f"gridworld {name} must be a number, got {getattr(config, name)!r}")
    if config.goal not in GOAL_MODES:
        raise UserError(f"gridworld goal must be one of {', '.join(GOAL_MODES)}, got {config.goal!r}"
                        f"{did_you_mean(str(config.goal), GOAL_MODES)}")
    view = config.view_size
    if isinstance(view, bool) or not isinstance(view, int) or view < 3 or view % 2 == 0:
        raise UserError(f"gridworld view_size must be an odd integer >= 3 (e.g. 5), got {view!r}")
    if not isinstance(config.goal_offset, bool):
        raise UserError(f"gridworld goal_offset must be true or false, got {config.goal_offset!r}")
    count = config.distractors
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise UserError(f"gridworld distractors must be an integer >= 0 (nuisance channels, e.g. 3), got {count!r}")
    density = config.distractor_density
    if isinstance(density, bool) or not isinstance(density, (int, float)) or not 0 <= density <= 1:
        raise UserError(f"gridworld distractor_density must be a number in [0, 1], got {density!r}")
