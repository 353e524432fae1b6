"""The CPU's 2D convolution (custom gradient) against XLA's own: the same values and gradients, inside loops too."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.networks.conv2d import choose_impl, conv2d, flax_conv

CASES = [  # x shape, kernel shape, strides, padding
    ((2, 9, 11, 3), (3, 3, 3, 4), (2, 2), "VALID"),
    ((2, 10, 7, 3), (3, 2, 3, 5), (2, 3), "SAME"),
    ((1, 8, 8, 2), (3, 3, 2, 2), (1, 1), ((1, 2), (0, 1))),
    ((3, 12, 12, 4), (4, 4, 4, 6), (4, 4), "VALID"),  # a patch projection (stride = kernel)
    ((2, 7, 7, 9), (3, 3, 9, 8), (1, 1), "VALID"),
]


def loss(impl, x, kernel, strides, padding):
    return jnp.sum(jnp.sin(conv2d(x, kernel, strides, padding, impl)))


@pytest.mark.parametrize("x_shape,kernel_shape,strides,padding", CASES)
def test_taps_gives_xlas_values_and_gradients(x_shape, kernel_shape, strides, padding):
    x = jax.random.normal(jax.random.PRNGKey(0), x_shape)
    kernel = jax.random.normal(jax.random.PRNGKey(1), kernel_shape)
    expected = jax.lax.conv_general_dilated(x, kernel, strides, padding,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(conv2d(x, kernel, strides, padding, "taps"), expected, rtol=1e-5, atol=1e-5)
    native = jax.grad(loss, argnums=(1, 2))("native", x, kernel, strides, padding)
    taps = jax.grad(loss, argnums=(1, 2))("taps", x, kernel, strides, padding)
    for got, want in zip(taps, native):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_inside_a_scan_the_gradient_is_the_same():
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 9, 9, 3))
    kernel = jax.random.normal(jax.random.PRNGKey(1), (3, 3, 3, 4))

    def descend(impl):
        def step(k, _):
            return k - 0.01 * jax.grad(loss, argnums=2)(impl, x, k, (1, 1), "VALID"), None
        return jax.jit(lambda k: jax.lax.scan(step, k, None, length=3)[0])(kernel)

    np.testing.assert_allclose(descend("taps"), descend("native"), rtol=1e-4, atol=1e-5)


def test_flax_conv_keeps_nn_convs_parameters_and_refuses_what_it_does_not_compute():
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 8, 3))
    plain = nn.Conv(4, (3, 3), strides=(2, 2), padding="VALID")
    variables = plain.init(jax.random.PRNGKey(1), x)
    taps = nn.Conv(4, (3, 3), strides=(2, 2), padding="VALID", conv_general_dilated=flax_conv("taps"))
    np.testing.assert_allclose(taps.apply(variables, x), plain.apply(variables, x), rtol=1e-5, atol=1e-5)
    dilated = nn.Conv(4, (3, 3), kernel_dilation=(2, 2), conv_general_dilated=flax_conv("taps"))
    with pytest.raises(ValueError, match="without dilation"):
        dilated.init(jax.random.PRNGKey(1), x)
    assert choose_impl("cpu") == "taps" and choose_impl("gpu") == "native"
    with pytest.raises(ValueError, match="unknown 2D convolution impl"):
        conv2d(x, variables["params"]["kernel"], (1, 1), "VALID", "fast")
