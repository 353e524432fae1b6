"""What the JAX camera draws of a MuJoCo model: the visible geoms, their flat colours, mesh triangles, the sky.

Everything here reads the host-side `mujoco.MjModel` once (NumPy, outside `jit`); the camera keeps the results
as static arrays. A geom is *visible* when MuJoCo's default visual option would render it: its geom group is
one of 0, 1, 2 (`mjv_defaultOption` turns groups 3-5 off) and its alpha is not 0 (the material's alpha when it
has a material, else the geom's). Invisible geoms are skipped, never refused.
"""

from __future__ import annotations

from typing import NamedTuple

import mujoco
import numpy as np

from rlfit.errors import UserError

VISIBLE_GROUPS = (0, 1, 2)
"""Geom groups MuJoCo renders by default (`mujoco.MjvOption().geomgroup` is 1 1 1 0 0 0)."""

MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
DRAWABLE = frozenset(int(t) for t in (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_SPHERE,
                                      mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_ELLIPSOID,
                                      mujoco.mjtGeom.mjGEOM_BOX, MESH))
"""Geom types `mjx.ray` intersects in mujoco-mjx 3.x (its `_RAY_FUNC`), so the types the camera can draw."""

DEFAULT_SKY = (0.45, 0.55, 0.65)
"""Background RGB in [0, 1] when the model has no skybox texture."""


class Scene(NamedTuple):
    """The drawable part of a model, as NumPy arrays (G = visible geoms, T = their mesh triangles).

    Geoms are in slots sorted by type (so each type is a contiguous run and meshes come last).
    """

    geom_ids: np.ndarray
    """[G] int32 model geom index of each visible geom."""
    geom_types: np.ndarray
    """[G] int32 `mjtGeom` of each visible geom."""
    geom_rgb: np.ndarray
    """[G, 3] float32 flat colour in [0, 1]: material (times its texture's mean colour) or geom rgba."""
    mesh_triangles: np.ndarray
    """[T, 3, 3] float32 triangle vertices in their geom's local frame."""
    mesh_slot: np.ndarray
    """[T] int32 index into `geom_ids` (not the model geom index) of each triangle's geom."""
    sky_rgb: np.ndarray
    """[3] float32 background colour: the skybox texture's mean colour, else `DEFAULT_SKY`."""


def geom_label(mj_model: mujoco.MjModel, geom: int) -> str:
    """'pole' for a named geom, '#3' for an unnamed one."""
    name = mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_GEOM, geom)
    return f"'{name}'" if name else f"#{geom}"


def visible_geoms(mj_model: mujoco.MjModel) -> np.ndarray:
    """[G] int indices of the geoms MuJoCo's default visual option renders (groups 0-2, alpha > 0)."""
    alpha = np.array([_geom_rgba(mj_model, geom)[3] for geom in range(mj_model.ngeom)]).reshape(-1)
    shown = np.isin(mj_model.geom_group, VISIBLE_GROUPS) & (alpha > 0)
    return np.flatnonzero(shown)


def check_drawable(mj_model: mujoco.MjModel) -> None:
    """Raises a one-line UserError naming the first visible geom whose type the camera cannot draw."""
    for geom in visible_geoms(mj_model):
        geom_type = int(mj_model.geom_type[geom])
        if geom_type not in DRAWABLE:
            kind = mujoco.mjtGeom(geom_type).name.removeprefix("mjGEOM_").lower()
            raise UserError(
                f"camera: geom {geom_label(mj_model, geom)} is a {kind}, which the JAX camera cannot draw "
                "(mjx.ray handles planes, spheres, capsules, ellipsoids, boxes and meshes); "
                "use env.observation=state or remove it from the scene")


def build_scene(mj_model: mujoco.MjModel) -> Scene:
    """The drawable scene of `mj_model`; raises UserError (see `check_drawable`) when a visible geom is not."""
    check_drawable(mj_model)
    visible = visible_geoms(mj_model)
    if not visible.size:
        raise UserError("camera: the model has no visible geom (all are in groups 3-5 or have alpha 0); "
                        "add one, or use env.observation=state")
    geom_ids = visible[np.argsort(mj_model.geom_type[visible], kind="stable")].astype(np.int32)
    triangles, slots = _mesh_triangles(mj_model, geom_ids)
    return Scene(
        geom_ids=geom_ids,
        geom_types=mj_model.geom_type[geom_ids].astype(np.int32),
        geom_rgb=np.stack([_geom_rgb(mj_model, g) for g in geom_ids]).reshape(-1, 3).astype(np.float32),
        mesh_triangles=triangles,
        mesh_slot=slots,
        sky_rgb=_sky_rgb(mj_model),
    )


def _geom_rgba(mj_model: mujoco.MjModel, geom: int) -> np.ndarray:
    """[4] the rgba MuJoCo draws a geom with: its material's when it has one, else its own."""
    matid = int(mj_model.geom_matid[geom])
    return mj_model.mat_rgba[matid] if matid >= 0 else mj_model.geom_rgba[geom]


def _geom_rgb(mj_model: mujoco.MjModel, geom: int) -> np.ndarray:
    """[3] flat colour: the material's rgba times its RGB texture's mean colour, else the geom's rgba."""
    matid = int(mj_model.geom_matid[geom])
    rgb = _geom_rgba(mj_model, geom)[:3]
    if matid < 0:
        return rgb
    texid = int(np.atleast_1d(mj_model.mat_texid[matid])[int(mujoco.mjtTextureRole.mjTEXROLE_RGB)])
    return rgb * _texture_mean(mj_model, texid) if texid >= 0 else rgb


def _texture_mean(mj_model: mujoco.MjModel, texid: int) -> np.ndarray:
    """[3] mean colour in [0, 1] of texture `texid` (a gray texture gives three equal values)."""
    channels = int(mj_model.tex_nchannel[texid])
    size = int(mj_model.tex_width[texid]) * int(mj_model.tex_height[texid]) * channels
    start = int(mj_model.tex_adr[texid])
    pixels = mj_model.tex_data[start:start + size].reshape(-1, channels).astype(np.float32) / 255.0
    mean = pixels.mean(axis=0)
    return np.resize(mean[:3], 3) if channels >= 3 else np.repeat(mean[:1], 3)


def _sky_rgb(mj_model: mujoco.MjModel) -> np.ndarray:
    """[3] the first skybox texture's mean colour, else `DEFAULT_SKY`."""
    skyboxes = np.flatnonzero(mj_model.tex_type == int(mujoco.mjtTexture.mjTEXTURE_SKYBOX))
    if skyboxes.size:
        return _texture_mean(mj_model, int(skyboxes[0])).astype(np.float32)
    return np.asarray(DEFAULT_SKY, np.float32)


def _mesh_triangles(mj_model: mujoco.MjModel, geom_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[T, 3, 3] triangles (geom-local vertices) of every visible mesh geom and [T] their slot in `geom_ids`."""
    triangles, slots = [np.zeros((0, 3, 3), np.float32)], [np.zeros((0,), np.int32)]
    for slot, geom in enumerate(geom_ids):
        if int(mj_model.geom_type[geom]) != MESH:
            continue
        mesh = int(mj_model.geom_dataid[geom])
        faces = mj_model.mesh_face[mj_model.mesh_faceadr[mesh]:][:mj_model.mesh_facenum[mesh]]
        verts = mj_model.mesh_vert[mj_model.mesh_vertadr[mesh]:][:mj_model.mesh_vertnum[mesh]]
        triangles.append(verts[faces].astype(np.float32))
        slots.append(np.full(len(faces), slot, np.int32))
    return np.concatenate(triangles), np.concatenate(slots)
