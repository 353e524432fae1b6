"""A 3D convolution computed as temporal taps of 2D convolutions is XLA's 3D convolution, values and gradients."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.networks.conv3d import Conv3D, choose_impl, conv3d


@pytest.mark.parametrize("kernel, strides, padding", [
    ((3, 3, 3), (1, 2, 2), ((1, 1), (1, 1), (1, 1))),
    ((3, 3, 3), (2, 2, 2), ((1, 1), (1, 1), (1, 1))),
    ((3, 7, 7), (1, 2, 2), ((1, 1), (3, 3), (3, 3))),  # R3D-18's stem
    ((1, 1, 1), (2, 2, 2), ((0, 0), (0, 0), (0, 0))),  # its downsample shortcut
    ((2, 3, 3), (1, 1, 1), ((0, 1), (1, 0), (0, 0))),  # uneven kernel and padding
])
def test_taps_compute_the_native_convolution_and_its_gradients(kernel, strides, padding):
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 9, 9, 4))
    k = jax.random.normal(jax.random.PRNGKey(1), (*kernel, 4, 6)) / np.sqrt(np.prod(kernel) * 4)  # outputs ~ 1
    native = conv3d(x, k, strides, padding, "native")
    taps = conv3d(x, k, strides, padding, "taps")
    assert native.shape == taps.shape
    np.testing.assert_allclose(taps, native, rtol=1e-4, atol=1e-4)
    loss = lambda impl: lambda x, k: jnp.sum(jnp.sin(conv3d(x, k, strides, padding, impl)))  # noqa: E731
    for a, b in zip(jax.grad(loss("taps"), (0, 1))(x, k), jax.grad(loss("native"), (0, 1))(x, k), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_the_module_has_nn_convs_parameters_either_way_and_same_padding_matches():
    x = jnp.ones((1, 4, 8, 8, 3))
    ours = Conv3D(5, (3, 3, 3), strides=(2, 2, 2), padding="SAME", impl="taps")
    params = ours.init(jax.random.PRNGKey(0), x)
    flax_conv = nn.Conv(5, (3, 3, 3), strides=(2, 2, 2), padding="SAME")
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(jnp.shape, flax_conv.init(jax.random.PRNGKey(0), x))
    np.testing.assert_allclose(ours.apply(params, x), flax_conv.apply(params, x), rtol=1e-5, atol=1e-5)
    assert choose_impl("cpu") == "taps" and choose_impl("gpu") == "native"
