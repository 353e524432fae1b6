"""SAC from camera frames (DrQ): random shifts, an encoder trained by the critic alone and shared with the policy,
frozen encoders and batch-norm statistics, and an exact resume of a pixel run."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.sac.augment import PAD, random_shift
from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.losses import actor_loss, critic_loss
from rlfit.algos.sac.networks import ENCODER, make_sac_networks
from rlfit.algos.offpolicy.replay import Batch
from rlfit.algos.sac.update import init_opt_states, make_gradient_update, make_optimizers
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.networks.encoders import EncoderSpec, make_encoder

B, T, SIZE, C, A = 4, 2, 16, 3, 2


def test_each_shifted_clip_is_one_crop_of_the_border_padded_clip_with_one_offset_for_all_frames():
    frames = jax.random.randint(jax.random.PRNGKey(0), (B, T, SIZE, SIZE, C), 0, 256).astype(jnp.uint8)
    shifted = np.asarray(random_shift(frames, jax.random.PRNGKey(1)))
    assert shifted.dtype == np.uint8 and shifted.shape == frames.shape
    padded = np.pad(np.asarray(frames), ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD), (0, 0)), mode="edge")
    offsets = set()
    for b in range(B):
        matches = [(y, x) for y, x in itertools.product(range(2 * PAD + 1), repeat=2)
                   if np.array_equal(padded[b, :, y:y + SIZE, x:x + SIZE], shifted[b])]
        assert matches, f"clip {b} is not a crop of its padded clip"
        offsets.add(matches[0])
    assert len(offsets) > 1, "every clip got the same offset"
    np.testing.assert_array_equal(random_shift(frames, jax.random.PRNGKey(1), pad=0), frames)


@pytest.fixture(scope="module")
def pixel_networks():
    config = SACConfig(policy_hidden=(16,), q_hidden=(16,), batch_size=B)
    obs = {PIXELS_KEY: jnp.zeros((T, SIZE, SIZE, C), jnp.uint8), "state": jnp.zeros(5)}
    spec = EncoderSpec("simple2dcnn", features=8, frames=T, image_size=SIZE, channels=C)
    return config, make_sac_networks(obs, A, config, encoder=spec)


def batch_of(key) -> Batch:
    keys = jax.random.split(key, 4)
    frames = jax.random.randint(keys[0], (B, T, SIZE, SIZE, C), 0, 256).astype(jnp.uint8)
    next_frames = jax.random.randint(keys[1], (B, T, SIZE, SIZE, C), 0, 256).astype(jnp.uint8)
    return Batch({PIXELS_KEY: frames, "state": jnp.zeros((B, 5))}, jax.random.uniform(keys[2], (B, A), minval=-1),
                 jax.random.normal(keys[3], (B,)), jnp.ones(B), {PIXELS_KEY: next_frames, "state": jnp.zeros((B, 5))})


def norm(tree) -> float:
    return float(sum(jnp.sum(jnp.abs(x)) for x in jax.tree.leaves(tree)))


def test_the_critic_trains_the_encoder_and_the_actor_does_not(pixel_networks):
    config, networks = pixel_networks
    params = networks.init(jax.random.PRNGKey(0))
    assert jax.tree.all(jax.tree.map(jnp.array_equal, params.policy["params"][ENCODER], params.q["params"][ENCODER]))
    assert set(params.target_q["params"]) == {"head"}, "the target network follows only the Q heads"
    batch, key = batch_of(jax.random.PRNGKey(1)), jax.random.PRNGKey(2)
    # the features every loss sees are the Q encoder's, computed once per batch (each computation compiled whole:
    # op by op, the convolutions' gradients took seconds)
    features = jax.jit(networks.encode)(params.q, batch.obs)
    direct = jax.jit(make_encoder(networks.encoder).apply)({"params": params.q["params"][ENCODER]},
                                                           batch.obs[PIXELS_KEY])
    np.testing.assert_allclose(features.q, direct, rtol=1e-6)
    np.testing.assert_array_equal(features.policy, features.q)

    @jax.jit
    def critic_value_and_grad(q, policy, target_q, batch, key):
        return jax.value_and_grad(critic_loss, has_aux=True)(q, policy, target_q, 0.1, networks, batch, 1.0, 0.99,
                                                             key)

    (loss, encoded), critic_grad = critic_value_and_grad(params.q, params.policy, params.target_q, batch, key)
    np.testing.assert_allclose(encoded.q, direct, rtol=1e-6)
    assert norm(critic_grad["params"][ENCODER]) > 0 and norm(critic_grad["params"]["head"]) > 0
    # the actor loss through the whole network (policy encoder included) leaves the encoder untouched
    def actor_from_frames(policy_params):
        return actor_loss(policy_params, params.q, 0.1, networks, networks.encode(params.q, batch.obs), key)

    actor_grad = jax.jit(jax.grad(actor_from_frames))(params.policy)
    assert norm(actor_grad["params"][ENCODER]) == 0.0 and norm(actor_grad["params"]["head"]) > 0
    # and the policy head on those features is the acting network on the frames
    np.testing.assert_allclose(jax.jit(networks.policy_head)(params.policy, features.policy),
                               jax.jit(networks.policy_logits)(params.policy, batch.obs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("freeze", [False, True])
def test_an_update_shares_the_critics_encoder_with_the_policy_and_freezing_keeps_it(pixel_networks, freeze):
    config, networks = pixel_networks
    optimizers = make_optimizers(config, encoder=True, freeze_encoder=freeze)
    params = networks.init(jax.random.PRNGKey(0))
    update = jax.jit(make_gradient_update(networks, optimizers, config))
    new, *_ = update(params, init_opt_states(optimizers, params), None, batch_of(jax.random.PRNGKey(1)),
                     jax.random.PRNGKey(2))
    encoder_moved = norm(jax.tree.map(jnp.subtract, new.q["params"][ENCODER], params.q["params"][ENCODER]))
    assert (encoder_moved == 0.0) == freeze
    assert norm(jax.tree.map(jnp.subtract, new.q["params"]["head"], params.q["params"]["head"])) > 0
    assert norm(jax.tree.map(jnp.subtract, new.policy["params"]["head"], params.policy["params"]["head"])) > 0
    assert jax.tree.all(jax.tree.map(jnp.array_equal, new.policy["params"][ENCODER], new.q["params"][ENCODER]))


def test_frozen_batch_norm_statistics_never_change():
    """The optimizer every encoder network gets: `batch_stats` (r3d18's frozen BN) never moves, the rest learns."""
    import optax

    from rlfit.networks.pixels import encoder_optimizer

    spec = EncoderSpec("r3d18", features=8, frames=T, image_size=SIZE, channels=C, norm="frozen_bn")
    shapes = jax.eval_shape(make_encoder(spec).init, jax.random.PRNGKey(0), jnp.zeros(spec.input_shape(1), jnp.uint8))
    assert set(shapes) == {"params", "batch_stats"}
    leaves = jax.tree.map(lambda x: np.ones(x.shape, x.dtype), shapes)
    variables = {name: {ENCODER: tree} for name, tree in leaves.items()}  # as inside a policy or Q network
    optimizer = encoder_optimizer(optax.adam(0.1), freeze_encoder=False)

    @jax.jit  # one program for R3D-18's dozens of arrays (op by op, a program per operation and shape)
    def step(variables):
        grads = jax.tree.map(jnp.ones_like, variables)
        updates, _ = optimizer.update(grads, optimizer.init(variables), variables)
        return optax.apply_updates(variables, updates)

    new = step(variables)
    assert jax.tree.all(jax.tree.map(np.array_equal, new["batch_stats"], variables["batch_stats"]))
    assert all(bool(np.all(np.asarray(a) != b)) for a, b in zip(jax.tree.leaves(new["params"]),
                                                              jax.tree.leaves(variables["params"])))


WEIGHTED_ENV = "tests.toy_env:make_weighted"
"""The toy environment on a MuJoCo model whose point the JAX camera draws (tests/toy_env.py): a pixel run at the
toy's compile cost (on CartpoleBalance this test compiled its physics with the camera, ~40 CPU seconds)."""
PIXEL_RUN = [WEIGHTED_ENV, "--algo", "sac", "--preset", "smoke", "--set", "env.observation=pixels",
             "--set", f"env.image_size={SIZE}", "--set", f"env.frames={T}", "--set", "network.encoder=simple2dcnn",
             "--set", "network.encoder_features=8", "--set", "run.save_interval=1", "--set", "run.eval_every=0",
             "--set", "run.num_eval_envs=4", "--set", "env.episode_length=100", "--quiet"]
"""Each run evaluates at its end: 4 episodes of 100 steps, each step drawn."""


def pretrained_file(path, spec: EncoderSpec) -> dict:
    """Writes simple2dcnn weights of known values (every kernel 0.01 * its shape's index pattern) with a spec
    that asks for an input normalization; returns the flat arrays written."""
    from rlfit.networks.pretrained import flatten, save_encoder_weights, spec_metadata

    variables = make_encoder(spec).init(jax.random.PRNGKey(7), jnp.zeros(spec.input_shape(1), jnp.uint8))
    variables = jax.tree.map(lambda x: np.linspace(-0.05, 0.05, x.size, dtype=np.float32).reshape(x.shape), variables)
    save_encoder_weights(path, variables, spec_metadata(spec, source="test"))
    return flatten(variables)


@pytest.mark.slow
def test_a_pixel_run_resumes_exactly_and_its_policy_loads_and_exports(tmp_path, capfd):
    """A pixel run from pretrained, frozen encoder weights: straight 2 iterations vs 1 + resume to 2 give the
    same parameters bit for bit; the policy file holds the encoder, the file's weights unchanged and its input
    normalization; load_policy and the ONNX export agree with the training networks. Train, resume and export run
    in this process (the CLI's main)."""
    from tests.checkpoints.conftest import ToyCli

    normalized = EncoderSpec("simple2dcnn", features=8, frames=T, image_size=SIZE, channels=C, mean=(0.5, 0.4, 0.3),
                             std=(0.2, 0.25, 0.3))
    weights = pretrained_file(tmp_path / "encoder.safetensors", normalized)
    pretrained = ["--set", f"network.pretrained={tmp_path / 'encoder.safetensors'}", "--set",
                  "network.freeze_encoder=true"]
    cli = ToyCli(tmp_path, "sac", capfd=capfd)
    half, full = tmp_path / "half", tmp_path / "full"
    first = cli.run("train", *PIXEL_RUN, *pretrained, "--timesteps", "64", "--run-dir", str(half))
    assert first.returncode == 0, first.stderr
    resumed = cli.run("resume", str(half), "--timesteps", "128", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    straight = cli.run("train", *PIXEL_RUN, *pretrained, "--timesteps", "128", "--run-dir", str(full))
    assert straight.returncode == 0, straight.stderr
    assert cli.summary(half)["params_digest"] == cli.summary(full)["params_digest"]
    assert [r["replay_size"] for r in cli.train_rows(half)] == [r["replay_size"] for r in cli.train_rows(full)]

    from rlfit.deploy.policy_file import load_policy, read_policy_files

    files = read_policy_files(full)
    network = files.description["network"]
    assert network["kind"] == "encoder_mlp" and network["encoder"]["name"] == "simple2dcnn"
    assert files.description["observation"]["policy_key"] == PIXELS_KEY
    assert network["encoder"]["mean"] == list(normalized.mean) and network["encoder"]["std"] == list(normalized.std)
    from rlfit.networks.pretrained import flatten

    trained = flatten({"params": files.params["params"]["encoder"]})
    assert set(trained) == set(weights)
    for name, value in weights.items():  # frozen: still the file's weights after training
        np.testing.assert_array_equal(trained[name], value, err_msg=name)
    # the loaded policy against the training networks on the same parameters (built from the config, not the file)
    config = SACConfig(policy_hidden=tuple(network["layer_sizes"][:-1]), q_hidden=(8,))
    obs = {PIXELS_KEY: jnp.zeros((T, SIZE, SIZE, C), jnp.uint8)}
    networks = make_sac_networks(obs, 1, config, encoder=normalized)
    frames = jax.random.randint(jax.random.PRNGKey(3), (5, T, SIZE, SIZE, C), 0, 256).astype(jnp.uint8)
    mean = networks.policy_logits(jax.tree.map(jnp.asarray, files.params), {PIXELS_KEY: frames})[:, :1]
    policy = load_policy(full)
    np.testing.assert_allclose(np.asarray(policy({PIXELS_KEY: frames})), np.tanh(np.asarray(mean)), atol=1e-6)
    assert policy({PIXELS_KEY: frames[0]}).shape == (1,)  # one unbatched observation

    exported = cli.run("export", str(full), "--out", str(tmp_path / "policy.onnx"))
    assert exported.returncode == 0, exported.stderr
    assert f"input '{PIXELS_KEY}' uint8 [batch, {T}, {SIZE}, {SIZE}, {C}]" in exported.stdout
    import onnxruntime

    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    (onnx_actions,) = session.run(["action"], {PIXELS_KEY: np.asarray(frames)})
    np.testing.assert_allclose(onnx_actions, np.tanh(np.asarray(mean)), atol=1e-5)


@pytest.mark.slow
def test_a_pixel_policy_plays_with_the_agents_view_beside_the_scene(tmp_path, capfd):
    """`rlfit play` of a pixel policy shows the agent's frames beside the scene. On CartpoleBalance, since play runs
    the scene's physics in native MuJoCo in place of Playground's `mjx_env.step`, which the toy has not; the policy
    is written untrained (`make_policy_run`: what play reads, nothing compiled), and play runs in this process (the
    CLI's main, as tests/deploy/play/test_play.py runs it too)."""
    from tests.checkpoints.conftest import ToyCli
    from tests.deploy.play.support import make_policy_run

    pixels = ["algo=sac", "sac.min_replay_size=0", "env.observation=pixels", f"env.image_size={SIZE}",
              f"env.frames={T}", "network.encoder=simple2dcnn", "network.encoder_features=8"]
    run = make_policy_run(tmp_path / "run", "CartpoleBalance", pixels, traced=True)
    video = tmp_path / "play.mp4"
    played = ToyCli(tmp_path, capfd=capfd).run("play", str(run), "--seconds", "0.1", "--out", str(video))
    assert played.returncode == 0, played.stderr
    import imageio.v3 as iio

    assert iio.imread(video, index=0).shape == (480, 640 + 480, 3)  # the scene, then the agent's view at 480 px


def test_an_encoder_without_an_onnx_export_is_refused_in_one_line():
    from rlfit.errors import UserError
    from rlfit.deploy.export.onnx_encoders import encoder_nodes

    spec = {**EncoderSpec("simple2dcnn", features=8, frames=T, image_size=SIZE, channels=C).to_dict(),
            "name": "resnet9"}  # a policy file from a later rlfit with an encoder this one cannot export
    with pytest.raises(UserError, match="ONNX export of the resnet9 encoder is not supported yet") as error:
        encoder_nodes(spec, {}, PIXELS_KEY, "features")
    assert "\n" not in str(error.value)


def test_a_pickle_or_a_missing_file_as_pretrained_weights_is_refused_before_anything_is_written(tmp_path, capfd):
    import pickle

    from tests.checkpoints.conftest import ToyCli

    cli = ToyCli(tmp_path, "sac", capfd=capfd)
    pickled = tmp_path / "weights.pt"
    pickled.write_bytes(pickle.dumps({"stem": np.zeros(3)}))
    for path, message in ((pickled, "is a pickle, which rlfit does not load"),
                          (tmp_path / "missing.safetensors", "network.pretrained: no file at")):
        run_dir = tmp_path / "run"
        result = cli.run("train", "CartpoleBalance", "--algo", "sac", "--set", "env.observation=pixels", "--set",
                         "network.encoder=r3d18", "--set", f"network.pretrained={path}", "--run-dir", str(run_dir))
        assert result.returncode == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert not run_dir.exists()
