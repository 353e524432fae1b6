"""Ray casting for the JAX camera: nearest hit and surface normal per pixel ray, pure and jittable.

Shapes: P = pixels (rays), G = drawable geoms (primitives first, in type groups, then meshes),
Gp = primitive geoms, T = mesh triangles. Primitives use `mjx.ray`'s own intersection functions
(`ray_geom`: planes, spheres, capsules, ellipsoids, boxes), meshes a Moller-Trumbore test per triangle
that also gives the triangle's normal (mjx.ray returns no face). All work is in each geom's local frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:
    from mujoco.mjx._src.types import GeomType


class Hits(NamedTuple):
    """Nearest hit of each ray."""

    dist: jax.Array
    """[P] float32 distance along the (unit) ray to the hit; inf where the ray hits nothing."""
    slot: jax.Array
    """[P] int32 index of the hit geom among the drawable geoms (0..G-1); -1 where nothing is hit."""
    column: jax.Array
    """[P] int32 which candidate won: < Gp a primitive slot, else Gp + triangle index."""
    local_pnt: jax.Array
    """[G, 3] ray origin in each geom's frame."""
    local_vec: jax.Array
    """[P, G, 3] ray direction in each geom's frame."""


def intersect(groups: tuple[tuple[int, int, int], ...], sizes: jax.Array, triangles: jax.Array,
              column_slot: jax.Array, geom_xpos: jax.Array, geom_xmat: jax.Array, origin: jax.Array,
              dirs: jax.Array) -> Hits:
    """Nearest hit of rays from `origin` [3] along unit `dirs` [P, 3] (world frame).

    `groups`: static (geom type, first slot, end slot) of each primitive type group; `sizes` [G, 3] geom sizes;
    `triangles` [T, 3, 3] geom-local vertices; `column_slot` [Gp + T] the geom slot of each candidate (0..Gp-1,
    then each triangle's geom); `geom_xpos` [G, 3], `geom_xmat` [G, 3, 3] poses of the drawable geoms.
    """
    from mujoco.mjx._src.types import GeomType  # here, not at the top: importing MJX costs a second per process

    local_pnt = jnp.einsum("gji,gj->gi", geom_xmat, origin - geom_xpos)
    local_vec = jnp.einsum("gji,pj->pgi", geom_xmat, dirs)
    columns = [_primitive_dists(GeomType(kind), sizes[start:end], local_pnt[start:end], local_vec[:, start:end])
               for kind, start, end in groups]
    n_prims = groups[-1][2] if groups else 0
    if triangles.shape[0]:
        tri_slot = column_slot[n_prims:]
        tri_pnt, tri_vec = local_pnt[tri_slot], local_vec[:, tri_slot]
        columns.append(jax.vmap(_triangle_dists, in_axes=(None, None, 0))(triangles, tri_pnt, tri_vec))
    n_rays = dirs.shape[0]
    if not columns:
        empty = jnp.full((n_rays,), -1, jnp.int32)
        return Hits(jnp.full((n_rays,), jnp.inf), empty, empty, local_pnt, local_vec)
    dists = jnp.concatenate(columns, axis=1)
    column = jnp.argmin(dists, axis=1).astype(jnp.int32)
    dist = jnp.take_along_axis(dists, column[:, None], axis=1)[:, 0]
    slot = jnp.where(jnp.isinf(dist), -1, column_slot[column]).astype(jnp.int32)
    return Hits(dist, slot, column, local_pnt, local_vec)


def normals(hits: Hits, n_prims: int, geom_types: jax.Array, sizes: jax.Array, tri_normal: jax.Array,
            geom_xmat: jax.Array) -> jax.Array:
    """[P, 3] unit world-frame surface normal at each hit, turned to face the ray (zeros where nothing is hit).

    Primitives: analytic from the geom-local hit point; meshes: the hit triangle's normal (`tri_normal` [T, 3]).
    """
    slot = jnp.maximum(hits.slot, 0)
    vec = jnp.take_along_axis(hits.local_vec, slot[:, None, None], axis=1)[:, 0]
    point = hits.local_pnt[slot] + jnp.where(jnp.isinf(hits.dist), 0.0, hits.dist)[:, None] * vec
    local = jax.vmap(_primitive_normal)(geom_types[slot], sizes[slot], point)
    if tri_normal.shape[0]:
        tri = tri_normal[jnp.clip(hits.column - n_prims, 0, tri_normal.shape[0] - 1)]
        local = jnp.where((hits.column >= n_prims)[:, None], tri, local)
    local = jnp.where((jnp.sum(local * vec, axis=1) > 0)[:, None], -local, local)
    world = jnp.einsum("pij,pj->pi", geom_xmat[slot], local)
    return jnp.where((hits.slot >= 0)[:, None], world, 0.0)


def triangle_normals(triangles: np.ndarray) -> np.ndarray:
    """[T, 3] unit normals of geom-local triangles [T, 3, 3] (NumPy, at build time)."""
    normal = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    length = np.linalg.norm(normal, axis=1, keepdims=True)
    return (normal / np.where(length > 0, length, 1.0)).astype(np.float32)


def _primitive_dists(kind: GeomType, sizes: jax.Array, pnt: jax.Array, vec: jax.Array) -> jax.Array:
    """[P, g] distances from rays to g geoms of one type (inf on a miss), via mjx's `ray_geom`."""
    from mujoco.mjx._src.ray import ray_geom

    per_geom = jax.vmap(lambda size, p, v: ray_geom(size, p, v, kind))
    return jax.vmap(per_geom, in_axes=(None, None, 0))(sizes, pnt, vec)


def _triangle_dists(triangles: jax.Array, pnt: jax.Array, vec: jax.Array) -> jax.Array:
    """[T] Moller-Trumbore distances of one ray (`pnt` [T, 3], `vec` [T, 3] per triangle's frame); inf on a miss."""
    v0, edge1, edge2 = triangles[:, 0], triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0]
    h = jnp.cross(vec, edge2)
    det = jnp.sum(edge1 * h, axis=1)
    inv = 1.0 / jnp.where(jnp.abs(det) > 1e-12, det, 1.0)
    s = pnt - v0
    u = inv * jnp.sum(s * h, axis=1)
    q = jnp.cross(s, edge1)
    v = inv * jnp.sum(vec * q, axis=1)
    t = inv * jnp.sum(edge2 * q, axis=1)
    valid = (jnp.abs(det) > 1e-12) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    return jnp.where(valid, t, jnp.inf)


def _primitive_normal(kind: jax.Array, size: jax.Array, p: jax.Array) -> jax.Array:
    """[3] unit outward normal of a plane/sphere/capsule/ellipsoid/box (type `kind`) at local point `p` [3]."""
    from mujoco.mjx._src.types import GeomType

    safe = jnp.where(size > 0, size, 1.0)
    capsule = p - jnp.array([0.0, 0.0, 1.0]) * jnp.clip(p[2], -size[1], size[1])
    ratio = jnp.abs(p) / safe
    box = jax.nn.one_hot(jnp.argmax(ratio), 3) * jnp.sign(p)
    normal = jnp.select(
        [kind == GeomType.PLANE, kind == GeomType.SPHERE, kind == GeomType.CAPSULE,
         kind == GeomType.ELLIPSOID, kind == GeomType.BOX],
        [jnp.array([0.0, 0.0, 1.0]), p, capsule, p / (safe * safe), box],
        jnp.array([0.0, 0.0, 1.0]))
    length = jnp.linalg.norm(normal)
    return normal / jnp.where(length > 0, length, 1.0)
