"""Randomizers with Playground's signature `(mjx.Model, keys [N, 2]) -> (batched model, in_axes)` for the tests of
`env.randomization: module:function`: one that works on any MuJoCo model, and ones that break each rule."""

from __future__ import annotations

import jax


def _axes(model, batched: dict):
    return jax.tree.map(lambda _: None, model).tree_replace({name: 0 for name in batched})


def scaled_masses(model, keys):
    """Every body's mass times U(0.5, 2) and every joint's damping times U(0.5, 2), per environment."""

    def one(key):
        mass_key, damping_key = jax.random.split(key)
        return {"body_mass": model.body_mass * jax.random.uniform(mass_key, model.body_mass.shape, minval=0.5,
                                                                  maxval=2.0),
                "dof_damping": model.dof_damping * jax.random.uniform(damping_key, model.dof_damping.shape,
                                                                      minval=0.5, maxval=2.0)}

    fields = jax.vmap(one)(keys)
    return model.tree_replace(fields), _axes(model, fields)


def fails(model, keys):
    raise RuntimeError("the friction table is missing")


def unbatched(model, keys):
    """Says body_mass is batched but returns one mass vector for every environment."""
    return model.tree_replace({"body_mass": model.body_mass * 2.0}), _axes(model, {"body_mass": None})


def model_only(model, keys):
    return model


not_callable = 3


def batches_nothing(model, keys):
    return model, jax.tree.map(lambda _: None, model)
