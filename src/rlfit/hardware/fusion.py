"""Which values of a lowered program XLA's fusion is expected to keep out of memory, and the copies its matrix
products add.

XLA fuses chains of elementwise operations (and the broadcasts, reshapes, slices and conversions between them)
into one kernel that writes only the chain's last value; a reduction fuses its elementwise inputs the same way.
Across JAX's function calls too: XLA inlines every call before it fuses. So in a lowered StableHLO program a value
is expected to stay inside a fusion, and hold no buffer of its own, when

- it is made by a fusible operation (`FUSIBLE`), but is not a part of a larger operand (a slice, which kept out
  would hold the whole operand until read); or by a call whose function computes it by such operations from its
  arguments and its other results alone, and
- every operation that reads it fuses it (`FUSIBLE` and `stablehlo.reduce`; a call whose function only fuses that
  argument; a function's return, where the caller decides, but not the program's own), and
- it is not an expensive operation's (`EXPENSIVE`: an exponential, a division) read by several operations, which
  XLA computes once into memory rather than once per reader.

A value kept out is computed where it is read, so what it is computed from lives until then
(`Fusion.computed_from`; the walk moves those values' last use on).

A matrix product (`stablehlo.dot_general`) whose operand is not in XLA's canonical order (batch dimensions first,
then the left operand's contracted dimensions last and the right operand's right after the batch: a weight's
gradient contracts the batch of activations) reads a transposed copy of that operand, held while it runs
(`dot_copy_bytes`).

Everything else (a matrix product's operands and result, a gather, a loop's state, an update's buffer, what the
program returns) is a buffer. This is a model of XLA's choices, not a proof: the estimate built on it
(`rlfit.hardware.program_memory.ProgramBound.estimate_bytes`) may lie on either side of XLA's analysis, and is
checked against it in tests/hardware/test_program_memory.py and benchmarks/trace_bound.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

_ELEMENTWISE = (
    "add subtract multiply divide remainder maximum minimum power atan2 and or xor not negate abs sign exponential "
    "exponential_minus_one log log_plus_one sqrt rsqrt cbrt tanh logistic sine cosine tan floor ceil "
    "round_nearest_even round_nearest_afz is_finite compare select clamp convert bitcast_convert shift_left "
    "shift_right_logical shift_right_arithmetic popcnt count_leading_zeros real imag complex")
_SHAPING = "broadcast_in_dim reshape transpose slice concatenate iota constant pad reverse dynamic_slice"
FUSIBLE = frozenset(f"stablehlo.{name}" for name in (_ELEMENTWISE + " " + _SHAPING).split())
"""Operations XLA's loop fusion takes in (elementwise, and the shape changes between them)."""
EXPENSIVE = frozenset(f"stablehlo.{name}" for name in (
    "divide remainder power atan2 exponential exponential_minus_one log log_plus_one sqrt rsqrt cbrt tanh "
    "logistic sine cosine tan").split())
"""Fusible operations XLA does not compute again for each reader (its `IsExpensive`)."""
CONSUMERS = FUSIBLE | {"stablehlo.reduce"}
"""Operations that fuse what they read (a reduction fuses its elementwise inputs)."""


class Fusion:
    """The fusion model of one module: `kept_out(value, readers)` for any value of it, and what a value kept out
    is computed from (`computed_from`), with what each function returns and reads summarised once."""

    def __init__(self, functions: dict[str, Any]) -> None:
        self.functions = functions
        self._returns: dict[tuple[str, int], frozenset[tuple[str, int]] | None] = {}
        self._reads: dict[tuple[str, int], bool] = {}
        self._readers: dict[str, dict[Any, list[Any]]] = {}

    def kept_out(self, value: Any, readers: Sequence[Any]) -> bool:
        """Whether `value` is expected to stay inside a fusion (no buffer of its own). `readers`: the operations of
        its block that read it (once each)."""
        if not readers or not self.made_fusible(value):
            return False
        if len(readers) > 1 and self.maker(value) in EXPENSIVE:
            return False
        return all(self.fuses(reader, value) for reader in readers)

    def made_fusible(self, value: Any) -> bool:
        """Whether `value` is made by a fusible operation, directly or as a called function's result computed
        from that function's arguments by fusible operations alone. Not a part of a larger operand (a slice): kept
        out, it would hold the whole operand until it is read."""
        if not hasattr(value, "result_number"):
            return False  # a block argument
        name = _name(value.owner)
        if name == "func.call":
            return self._returned_from(_callee(value.owner), value.result_number) is not None
        return name in FUSIBLE and not any(_elements(operand) > _elements(value) for operand in value.owner.operands)

    def computed_from(self, operation: Any, value: Any) -> list[Any]:
        """The values `value` (a result of `operation`, kept out) is computed from: all of the operation's
        operands, or for a call the arguments and other results its function computes that result from."""
        operands = list(operation.operands)
        if _name(operation) != "func.call":
            return operands
        sources = self._returned_from(_callee(operation), value.result_number) or frozenset()
        results = list(operation.results)
        return [operands[index] if kind == "argument" else results[index] for kind, index in sorted(sources)]

    def maker(self, value: Any) -> str:
        """The name of the operation that makes `value`, through the calls that return it ("" for an argument)."""
        seen = 0
        while hasattr(value, "result_number") and _name(value.owner) == "func.call" and seen < 64:
            function = self.functions.get(_callee(value.owner))
            if function is None:
                return "func.call"
            value, seen = list(_body(function).operations)[-1].operands[value.result_number], seen + 1
        return _name(value.owner) if hasattr(value, "result_number") else ""

    def fuses(self, reader: Any, value: Any) -> bool:
        """Whether `reader` (an operation reading `value`) fuses it."""
        name = _name(reader)
        if name == "func.return":  # the caller decides; what the program returns is a buffer
            return str(reader.operation.parent.attributes["sym_name"]).strip('"') != "main"
        if name in CONSUMERS:
            return True
        if name == "func.call":
            callee = _callee(reader)
            return all(self._reads_fused(callee, position)
                       for position, operand in enumerate(reader.operands) if operand == value)
        return False

    def _returned_from(self, function: str, position: int) -> frozenset[tuple[str, int]] | None:
        """What `function` computes its result at `position` from by fusible operations alone, each value on the
        way kept out: ("argument", position) and ("result", position) of its other results, which the caller
        holds; None where that result is a buffer of the function's own."""
        key = (function, position)
        if key not in self._returns:
            self._returns[key] = None  # a recursive call (none in JAX's output) fuses nothing
            if function in self.functions:
                returned = list(list(_body(self.functions[function]).operations)[-1].operands)
                others = {value: index for index, value in enumerate(returned) if index != position}
                others.pop(returned[position], None)
                self._returns[key] = self._sources(function, returned[position], {}, others)
        return self._returns[key]

    def _sources(self, function: str, value: Any, memo: dict[Any, frozenset[tuple[str, int]] | None],
                 others: dict[Any, int]) -> frozenset[tuple[str, int]] | None:
        if not hasattr(value, "result_number"):
            return frozenset({("argument", value.arg_number)})
        if value in others:
            return frozenset({("result", others[value])})
        if value in memo:
            return memo[value]
        memo[value] = None
        readers = self._function_readers(function).get(value, [])
        owner = value.owner
        if (not self.made_fusible(value) or (len(readers) > 1 and self.maker(value) in EXPENSIVE)
                or not all(self.fuses(reader, value) for reader in readers)):
            return None
        found: frozenset[tuple[str, int]] = frozenset()
        for operand in self.computed_from(owner, value):
            sources = self._sources(function, operand, memo, others)
            if sources is None:
                return None
            found |= sources
        memo[value] = found
        return found

    def _function_readers(self, function: str) -> dict[Any, list[Any]]:
        if function not in self._readers:
            readers: dict[Any, list[Any]] = {}
            for operation in _body(self.functions[function]).operations:
                for operand in set(operation.operands):
                    readers.setdefault(operand, []).append(operation)
            self._readers[function] = readers
        return self._readers[function]

    def _reads_fused(self, function: str, position: int) -> bool:
        key = (function, position)
        if key not in self._reads:
            self._reads[key] = False
            if function in self.functions:
                argument = _body(self.functions[function]).arguments[position]
                readers = self._function_readers(function).get(argument, [])
                self._reads[key] = all(_name(op) in CONSUMERS or (_name(op) == "func.call" and self.fuses(op, argument))
                                       for op in readers)
        return self._reads[key]


_DIMENSIONS = re.compile(r"(lhs|rhs)_(batching|contracting)_dimensions = \[([0-9, ]*)\]")


def dot_copy_bytes(operation: Any, buffer_bytes: Callable[[Any], int]) -> int:
    """Bytes of the transposed copies a `stablehlo.dot_general` reads (0 for any other operation): each operand
    not in canonical order (the left: batch dimensions first, contracted ones last; the right: batch dimensions
    first, contracted ones next) counted at `buffer_bytes` of it."""
    if _name(operation) != "stablehlo.dot_general":
        return 0
    found = {(side, kind): [int(d) for d in dims.split(",") if d.strip()]
             for side, kind, dims in _DIMENSIONS.findall(str(operation.attributes["dot_dimension_numbers"]))}
    lhs, rhs = list(operation.operands)[:2]
    copies = 0
    for side, operand in (("lhs", lhs), ("rhs", rhs)):
        batch, contracted = found.get((side, "batching"), []), found.get((side, "contracting"), [])
        rank = len(operand.type.shape)
        start = rank - len(contracted) if side == "lhs" else len(batch)
        canonical = (batch == list(range(len(batch)))
                     and contracted == list(range(start, start + len(contracted))))
        copies += 0 if canonical else buffer_bytes(operand)
    return copies


def _elements(value: Any) -> int:
    count = 1
    for dimension in getattr(value.type, "shape", ()):
        count *= dimension
    return count


def _name(operation: Any) -> str:
    return str(operation.operation.name if hasattr(operation, "operation") else operation.name)


def _callee(call: Any) -> str:
    return str(call.attributes["callee"]).lstrip("@").strip('"')


def _body(function: Any) -> Any:
    return function.regions[0].blocks[0]
