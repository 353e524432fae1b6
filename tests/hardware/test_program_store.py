"""rlfit's store of traced programs (`rlfit.hardware.program_store`): a program found there is not traced again, gives
the same results as the traced function, and a store that cannot be read or written only costs a trace."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.hardware import program_store
from rlfit.hardware.compile_log import timed_compile
from rlfit.hardware.jax_setup import compile_ahead


class Counted:
    """A pytree function that counts how often JAX traces it."""

    def __init__(self) -> None:
        self.traces = 0

    def __call__(self, state: dict, scale: jax.Array) -> tuple[dict, jax.Array]:
        self.traces += 1
        moved = {"x": state["x"] * scale + 1.0, "count": state["count"] + 1}
        return moved, jnp.sum(moved["x"])


def arguments(size: int = 4) -> tuple[dict, jax.Array]:
    return {"x": jnp.arange(size, dtype=jnp.float32), "count": jnp.int32(0)}, jnp.float32(2.0)


def test_a_stored_program_is_not_traced_again_and_computes_what_the_function_computes(tmp_path):
    first = Counted()
    stored = program_store.traced(first, arguments(), "key", tmp_path)
    assert first.traces == 1 and len(list(tmp_path.glob("*.jaxprog"))) == 1

    again = Counted()
    with timed_compile("program") as timing:
        loaded = program_store.traced(again, arguments(), "key", tmp_path)
    assert again.traces == 0  # read from the store: the Python function never ran
    assert timing.record.from_store
    expected_state, expected_total = Counted()(*arguments())
    for program in (stored, loaded):
        state, total = jax.jit(program.function())(*arguments())
        assert jax.tree.structure(state) == jax.tree.structure(expected_state)
        np.testing.assert_array_equal(state["x"], expected_state["x"])
        assert int(state["count"]) == 1 and float(total) == float(expected_total)


def test_another_key_or_another_shape_is_another_entry(tmp_path):
    counted = Counted()
    program_store.traced(counted, arguments(4), "key", tmp_path)
    program_store.traced(counted, arguments(5), "key", tmp_path)
    program_store.traced(counted, arguments(4), "another key", tmp_path)
    program_store.traced(counted, arguments(4), "key", tmp_path)
    assert counted.traces == 3 and len(list(tmp_path.glob("*.jaxprog"))) == 3


def test_an_unreadable_entry_is_traced_again_and_rewritten(tmp_path):
    program_store.traced(Counted(), arguments(), "key", tmp_path)
    (entry,) = tmp_path.glob("*.jaxprog")
    entry.write_bytes(entry.read_bytes()[:100])  # cut short, as by a full disk
    counted = Counted()
    program = program_store.traced(counted, arguments(), "key", tmp_path)
    assert counted.traces == 1
    assert float(jax.jit(program.function())(*arguments())[1]) == 2 * (0 + 1 + 2 + 3) + 4
    reread = Counted()
    program_store.traced(reread, arguments(), "key", tmp_path)
    assert reread.traces == 0


def test_a_store_that_cannot_be_written_leaves_the_program_working(tmp_path):
    blocked = tmp_path / "programs"
    blocked.write_text("a file where the folder should be")
    counted = Counted()
    program = program_store.traced(counted, arguments(), "key", blocked)
    assert counted.traces == 1 and blocked.read_text() == "a file where the folder should be"
    assert int(jax.jit(program.function())(*arguments())[0]["count"]) == 1
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("programs*.tmp"))


def test_compile_ahead_uses_the_store_only_with_a_key_and_names_the_program_as_the_function(tmp_path, monkeypatch):
    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    counted = Counted()
    compiled = compile_ahead(counted, *arguments(), store_key="key")
    assert counted.traces == 1 and len(list(tmp_path.glob("*.jaxprog"))) == 1
    assert float(compiled(*arguments())[1]) == 16.0
    compile_ahead(counted, *arguments(), store_key="key")
    assert counted.traces == 1  # the second compile read the stored program
    compile_ahead(counted, *arguments())
    assert counted.traces == 2  # no key: traced as always

    def train_iteration(state: dict, scale: jax.Array) -> tuple[dict, jax.Array]:
        return Counted()(state, scale)

    lowered_name = compile_ahead(train_iteration, *arguments(), store_key="named").as_text()
    assert "jit_train_iteration" in lowered_name  # the compile cache's entry keeps the program's name


@pytest.mark.parametrize("switch", ["0", "off", "false"])
def test_the_store_is_off_when_switched_off_or_without_a_compile_cache(monkeypatch, tmp_path, switch):
    monkeypatch.setenv(program_store.STORE_SWITCH, switch)
    assert program_store.store_dir() is None
    monkeypatch.delenv(program_store.STORE_SWITCH)
    saved = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    try:
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))
        jax.config.update("jax_enable_compilation_cache", True)
        assert program_store.store_dir() == tmp_path / "programs"
        jax.config.update("jax_enable_compilation_cache", False)
        assert program_store.store_dir() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", saved[0])
        jax.config.update("jax_enable_compilation_cache", saved[1])


def test_the_code_fingerprint_follows_an_edited_file(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(program_store, "WATCHED_MODULES", ("pkg",))
    program_store.code_fingerprint.cache_clear()
    before = program_store.code_fingerprint()
    program_store.code_fingerprint.cache_clear()
    assert program_store.code_fingerprint() == before
    (package / "__init__.py").write_text("X = 22\n")
    program_store.code_fingerprint.cache_clear()
    assert program_store.code_fingerprint() != before
    program_store.code_fingerprint.cache_clear()


def test_result_shapes_are_read_from_the_store_instead_of_traced_and_equal_jax_eval_shape(tmp_path):
    """(A new Counted each time: JAX itself would not trace the same function object twice for the same shapes.)"""
    expected = jax.eval_shape(Counted(), *arguments())
    first_fn, again_fn = Counted(), Counted()
    first = program_store.result_shapes(first_fn, arguments(), "key", tmp_path)
    again = program_store.result_shapes(again_fn, arguments(), "key", tmp_path)
    assert (first_fn.traces, again_fn.traces) == (1, 0) and len(list(tmp_path.glob("*.shapes"))) == 1
    for shapes in (first, again):
        assert jax.tree.structure(shapes) == jax.tree.structure(expected)
        assert [(s.shape, s.dtype, s.weak_type) for s in jax.tree.leaves(shapes)] == [
            (s.shape, s.dtype, s.weak_type) for s in jax.tree.leaves(expected)]
    other_shape, other_key = Counted(), Counted()
    program_store.result_shapes(other_shape, arguments(5), "key", tmp_path)
    program_store.result_shapes(other_key, arguments(), "another key", tmp_path)
    assert (other_shape.traces, other_key.traces) == (1, 1) and len(list(tmp_path.glob("*.shapes"))) == 3


def test_result_shapes_without_a_key_or_with_an_unreadable_entry_are_traced(tmp_path):
    program_store.result_shapes(Counted(), arguments(), None, tmp_path)
    assert not list(tmp_path.iterdir())
    program_store.result_shapes(Counted(), arguments(), "key", tmp_path)
    (entry,) = tmp_path.glob("*.shapes")
    entry.write_bytes(b"cut short")
    retraced = Counted()
    shapes = program_store.result_shapes(retraced, arguments(), "key", tmp_path)
    assert retraced.traces == 1 and shapes[0]["x"].shape == (4,)
    read = Counted()
    program_store.result_shapes(read, arguments(), "key", tmp_path)
    assert read.traces == 0  # rewritten whole


def test_result_shapes_of_jax_key_types_are_correct_and_not_stored(tmp_path):
    def keys(seed):
        return {"key": jax.random.key(seed), "x": jnp.zeros(3)}

    for _ in range(2):
        shapes = program_store.result_shapes(keys, (np.int32(0),), "key", tmp_path)
        assert jax.dtypes.issubdtype(shapes["key"].dtype, jax.dtypes.prng_key) and shapes["x"].shape == (3,)
    assert not list(tmp_path.glob("*.shapes"))


def garble(entry):
    """32 bytes in the middle of `entry` inverted, as a disk's error or an interrupted rewrite can leave them."""
    data = bytearray(entry.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 32] = bytes(255 - byte for byte in data[middle:middle + 32])
    entry.write_bytes(bytes(data))


def cut_short(entry):
    """`entry` cut to half its length, as a kill -9 or a full disk while writing can leave it."""
    entry.write_bytes(entry.read_bytes()[:entry.stat().st_size // 2])


def notes(capfd):
    """The notes rlfit printed on stderr since the last call."""
    return [line for line in capfd.readouterr().err.splitlines() if line.startswith("rlfit: note:")]


@pytest.mark.parametrize("damage", [garble, cut_short])
def test_a_damaged_entry_is_removed_named_once_traced_again_and_read_back(tmp_path, monkeypatch, capfd, damage):
    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    compile_ahead(Counted(), *arguments(), store_key="key")
    (entry,) = tmp_path.glob("*.jaxprog")
    compile_ahead(Counted(), *arguments(5), store_key="key")  # another program, whose entry stays whole
    damage(entry)
    notes(capfd)

    counted = Counted()
    with timed_compile("program") as timing:
        compiled = compile_ahead(counted, *arguments(), store_key="key")
    assert counted.traces == 1 and not timing.record.from_store
    assert float(compiled(*arguments())[1]) == 2 * (0 + 1 + 2 + 3) + 4
    (note,) = notes(capfd)
    assert f"damaged cache entry {entry} (" in note and "removed it, so its program is traced again" in note

    for size in (4, 5):  # the rewritten entry and the untouched one are both read back, without a note
        again = Counted()
        with timed_compile("program") as timing:
            compile_ahead(again, *arguments(size), store_key="key")
        assert again.traces == 0 and timing.record.from_store
    assert notes(capfd) == []


def test_an_entry_jax_cannot_load_is_removed_and_traced_again(tmp_path, monkeypatch, capfd):
    """Whole and with a matching digest, but its StableHLO does not load (as a garbled entry of the old format,
    without a digest, did): lowering the stored program fails, so the code is traced instead."""
    import dataclasses

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    stored = program_store.traced(Counted(), arguments(), "key", tmp_path)
    (entry,) = tmp_path.glob("*.jaxprog")
    broken = dataclasses.replace(stored.exported, mlir_module_serialized=b"not a StableHLO module")
    program_store._keep(entry, {"format": program_store.FORMAT, "exported": bytes(broken.serialize()),
                                "in_tree": stored.in_tree, "out_tree": stored.out_tree, "name": stored.name})
    notes(capfd)
    counted = Counted()
    with timed_compile("program") as timing:
        compiled = compile_ahead(counted, *arguments(), store_key="key")
    assert counted.traces == 1 and not timing.record.from_store
    assert float(compiled(*arguments())[1]) == 16.0
    (note,) = notes(capfd)
    assert f"damaged cache entry {entry} (" in note and "removed it" in note
    again = Counted()
    compile_ahead(again, *arguments(), store_key="key")
    assert again.traces == 0


def test_an_entry_that_cannot_be_read_or_removed_is_named_and_the_program_traced(tmp_path, capfd):
    program_store.traced(Counted(), arguments(), "key", tmp_path)
    (entry,) = tmp_path.glob("*.jaxprog")
    entry.unlink()
    entry.mkdir()  # a folder where the entry should be: it can be neither read nor removed as a file
    notes(capfd)
    counted = Counted()
    program = program_store.traced(counted, arguments(), "key", tmp_path)
    assert counted.traces == 1 and float(jax.jit(program.function())(*arguments())[1]) == 16.0
    (note,) = notes(capfd)
    assert f"damaged cache entry {entry} (cannot be read: " in note and "could not remove it" in note


@pytest.mark.parametrize("damage", [garble, cut_short])
def test_a_damaged_shapes_entry_is_removed_named_traced_again_and_read_back(tmp_path, capfd, damage):
    program_store.result_shapes(Counted(), arguments(), "key", tmp_path)
    (entry,) = tmp_path.glob("*.shapes")
    damage(entry)
    notes(capfd)
    retraced = Counted()
    shapes = program_store.result_shapes(retraced, arguments(), "key", tmp_path)
    assert retraced.traces == 1 and shapes[0]["x"].shape == (4,)
    (note,) = notes(capfd)
    assert f"damaged cache entry {entry} (" in note
    read = Counted()
    assert program_store.result_shapes(read, arguments(), "key", tmp_path)[0]["x"].shape == (4,)
    assert read.traces == 0 and notes(capfd) == []
