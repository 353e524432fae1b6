"""The JAX camera against MuJoCo's own OpenGL renderer (segmentation and depth), plus refusal and batching."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from rlfit.envs.camera import CHANNELS, LUMA, CameraSpec, cast, check_drawable, make_camera, render, render_batch
from rlfit.errors import UserError

# Every drawable type, distinct colours, a named camera looking down at them. Collisions are off (mjx has no
# ellipsoid-box collision) and multisampling is off, so MuJoCo's segmentation has no blended edge pixels.
SCENE = """
<mujoco>
  <visual><quality offsamples="0"/></visual>
  <default><geom contype="0" conaffinity="0"/></default>
  <asset><mesh name="tet" vertex="0 0 0  0.35 0 0  0 0.35 0  0 0 0.35"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.8 0.8 0.8 1"/>
    <body name="ball" pos="-0.5 0 0.3"><freejoint/><geom type="sphere" size="0.25" rgba="1 0 0 1"/></body>
    <body name="crate" pos="0.55 0 0.25"><freejoint/>
      <geom type="box" size="0.2 0.25 0.25" euler="0 0 30" rgba="0 1 0 1"/></body>
    <body name="pill" pos="0 0.6 0.25"><freejoint/>
      <geom type="capsule" size="0.12 0.25" euler="0 90 20" rgba="0 0 1 1"/></body>
    <body name="egg" pos="0 -0.6 0.3"><freejoint/>
      <geom type="ellipsoid" size="0.3 0.15 0.2" euler="0 0 45" rgba="1 1 0 1"/></body>
    <body name="gem" pos="0.7 -0.7 0.1" euler="10 20 30"><freejoint/>
      <geom type="mesh" mesh="tet" rgba="1 0 1 1"/></body>
    <camera name="eye" pos="0 -2.5 2" xyaxes="1 0 0 0 0.6 0.8"/>
  </worldbody>
</mujoco>
"""
SIZE = 64


@pytest.fixture(scope="module")
def scene():
    model = mujoco.MjModel.from_xml_string(SCENE)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data, mjx.put_model(model), mjx.put_data(model, data)


REFERENCE_SCRIPT = """
import sys
import mujoco
import numpy as np
model = mujoco.MjModel.from_xml_string(sys.stdin.read())
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
renderer = mujoco.Renderer(model, int(sys.argv[2]), int(sys.argv[2]))
out = {}
for index, view in enumerate(("eye", "")):
    renderer.enable_segmentation_rendering()
    renderer.update_scene(data, camera=view or -1)
    seg = renderer.render().copy()
    renderer.disable_segmentation_rendering()
    renderer.enable_depth_rendering()
    renderer.update_scene(data, camera=view or -1)
    out[f"depth{index}"] = renderer.render().copy()
    renderer.disable_depth_rendering()
    out[f"geom{index}"] = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)
renderer.close()
np.savez(sys.argv[1], **out)
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """MuJoCo's renderer at each view: (geom id [H, W], -1 for none; z-depth [H, W] metres).

    Rendered in a child process with MUJOCO_GL=egl: MuJoCo picks its OpenGL backend when it is first imported,
    which in a test session may have happened anywhere, with another setting."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("reference") / "views.npz"
    result = subprocess.run([sys.executable, "-c", REFERENCE_SCRIPT, str(out), str(SIZE)], input=SCENE, text=True,
                            capture_output=True, env={**os.environ, "MUJOCO_GL": "egl"}, timeout=300)
    if result.returncode != 0:  # no EGL on this machine
        pytest.skip(f"mujoco.Renderer cannot render here with EGL: {result.stderr.strip().splitlines()[-1:]}")
    views = np.load(out)
    return {view: (views[f"geom{index}"], views[f"depth{index}"]) for index, view in enumerate(("eye", ""))}


@pytest.fixture(scope="module")
def ours(scene):
    """The JAX camera at each view: (camera, z-depth [H, W], geom id [H, W], depth image [H, W] uint8)."""
    model, _, mjx_model, mjx_data = scene
    views = {}
    for view in ("eye", ""):
        camera = make_camera(model, CameraSpec(SIZE, "depth", view))
        depth, geom = jax.jit(cast)(camera, mjx_model, mjx_data)
        image = jax.jit(render)(camera, mjx_model, mjx_data)
        views[view] = camera, np.asarray(depth), np.asarray(geom), np.asarray(image)[..., 0].astype(int)
    return views


@pytest.mark.parametrize("view", ["eye", ""], ids=["named", "default"])
def test_silhouettes_match_mujoco(scene, reference, ours, view):
    model = scene[0]
    geom, expected = ours[view][2], reference[view][0]
    for g in range(model.ngeom):
        ours_mask, theirs = geom == g, expected == g
        assert theirs.sum() > 30, f"geom {g} is too small in the reference view to compare"
        # Both sample pixel centres; they differ only where MuJoCo's tessellated surfaces (28 slices per
        # circle) or depth-buffer rounding move an edge across a pixel centre, a few pixels per silhouette.
        # The smallest object covers ~45 pixels, so one edge pixel costs ~2% IoU: 0.95 allows two.
        iou = (ours_mask & theirs).sum() / (ours_mask | theirs).sum()
        assert iou >= 0.95, f"geom {g}: IoU {iou:.3f} ({ours_mask.sum()} vs {theirs.sum()} pixels)"


@pytest.mark.parametrize("view", ["eye", ""], ids=["named", "default"])
def test_depth_matches_mujoco(reference, ours, view):
    camera, depth, geom, image = ours[view]
    expected_geom, expected = reference[view]
    agree = (geom == expected_geom) & (geom >= 0)
    error = np.abs(depth - expected)[agree]
    far = float(camera.far)
    step = far / 255
    # Inside a surface both are exact up to float32 (MuJoCo's depth buffer is 24-bit over [znear, zfar]);
    # larger errors come only from tessellated curved surfaces near their silhouettes, under a step.
    assert np.median(error) < 0.01 * step
    assert np.percentile(error, 99) < step
    quantized = np.round(np.minimum(expected, far) / far * 255)
    assert np.mean(np.abs(image - quantized)[agree] <= 1) >= 0.99
    assert np.all(image[geom < 0] == 255)


def test_refuses_a_cylinder_in_one_line():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="sphere" size="1"/><geom name="pole" type="cylinder" size="0.1 1"/>'
        "</worldbody></mujoco>")
    with pytest.raises(UserError) as error:
        check_drawable(model)
    message = str(error.value)
    assert "\n" not in message and "'pole'" in message and "cylinder" in message
    with pytest.raises(UserError, match="cylinder"):
        make_camera(model, CameraSpec(16, "rgb", ""))


def test_ignores_geoms_mujoco_does_not_draw():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="sphere" size="1"/><geom type="cylinder" size="0.1 1" group="3"/>'
        '<geom type="cylinder" size="0.1 1" rgba="1 0 0 0"/></worldbody></mujoco>')
    check_drawable(model)
    assert make_camera(model, CameraSpec(8, "rgb", "")).geom_ids.tolist() == [0]


def test_unknown_camera_is_a_user_error(scene):
    with pytest.raises(UserError, match="has no camera 'eyes'.*did you mean eye"):
        make_camera(scene[0], CameraSpec(16, "rgb", "eyes"))


def _batch(model: mujoco.MjModel, count: int):
    """`count` mjx Data with the ball and the crate moved differently in each, stacked on a leading axis."""
    datas = []
    for i in range(count):
        data = mujoco.MjData(model)
        data.qpos[0:3] += [0.2 * i, 0.1 * i, 0.0]
        data.qpos[7:10] += [0.0, 0.15 * i, 0.05 * i]
        mujoco.mj_forward(model, data)
        datas.append(mjx.put_data(model, data))
    return jax.tree.map(lambda *x: jnp.stack(x), *datas)


@pytest.fixture(scope="module")
def batched(scene):
    """Every channels option rendered by one jitted, vmapped function over 3 poses: (images, trace count)."""
    model, _, mjx_model, _ = scene
    cameras = {channels: make_camera(model, CameraSpec(24, channels, "eye")) for channels in CHANNELS}
    traces = []

    @jax.jit
    def render_all(cameras, data):
        traces.append(1)  # runs only while tracing
        return {c: jax.vmap(render, in_axes=(None, None, 0))(cam, mjx_model, data) for c, cam in cameras.items()}

    images = jax.tree.map(np.asarray, render_all(cameras, _batch(model, 3)))
    reversed_images = render_all(cameras, jax.tree.map(lambda x: x[::-1], _batch(model, 3)))
    return images, jax.tree.map(np.asarray, reversed_images), len(traces)


@pytest.mark.parametrize("channels", list(CHANNELS))
def test_vmapped_render_gives_one_image_per_env(batched, channels):
    images = batched[0][channels]
    assert images.dtype == np.uint8 and images.shape == (3, 24, 24, CHANNELS[channels])
    assert all(not np.array_equal(images[i], images[j]) for i, j in [(0, 1), (0, 2), (1, 2)])
    assert np.array_equal(batched[1][channels], images[::-1])


def test_vmapped_render_compiles_once(batched):
    assert batched[2] == 1


def test_gray_and_rgbd_agree_with_rgb(batched):
    rgb, gray, rgbd = (batched[0][c] for c in ("rgb", "gray", "rgbd"))
    assert np.abs(rgb @ np.asarray(LUMA) - gray[..., 0]).max() <= 1.5  # luma of rounded vs unrounded RGB
    assert np.array_equal(rgbd[..., :3], rgb)
    assert np.array_equal(rgbd[..., 3:], batched[0]["depth"])


def test_render_batch_matches_vmap(scene, batched):
    model, _, mjx_model, _ = scene
    camera = make_camera(model, CameraSpec(24, "rgb", "eye"))
    images = jax.jit(render_batch, static_argnames="chunk")(camera, mjx_model, _batch(model, 3), chunk=2)
    assert np.array_equal(np.asarray(images), batched[0]["rgb"])  # 3 envs in chunks of 2: the remainder too
