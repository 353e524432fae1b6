"""An upper bound of a lowered program's device memory, read from its StableHLO without compiling it.

XLA's compile-time memory analysis is exact but needs XLA's compile, which for a MuJoCo humanoid's training step
takes a minute on a CPU and minutes on a GPU host. The lowered program (what `jax.jit(...).lower(...)` gives,
before XLA sees it) already names every value the program computes and its shape. This module walks it in the
order it is written and adds up the bytes of the values alive at each operation:

- a value lives from the operation that defines it to its last use (a returned value to the end), in a buffer of
  its bytes rounded up to 64 (XLA's alignment); an operation with several results adds XLA's table of them;
- an operation holds the live values, its new results, and the peak of what runs inside it (a loop's body and
  condition, a conditional's branches; a called function's peak, which includes what it returns);
- a buffer that dies at an operation and that its block may give up (defined in it, a loop's carried state, an
  argument the caller donated or gave up) is reused where XLA reuses it: an update (`dynamic_update_slice`,
  `scatter`) writes into it, an annotation (a sharding constraint, an optimization barrier) leaves its value
  there, a loop keeps its state in its initial operands' buffers, and a called function may update and return
  the buffers given up to it;
- the program holds its arguments throughout, its peak, and any argument it returns unchanged a second time.

The same walk with XLA's fusion modelled (`rlfit.hardware.fusion`: a value XLA is expected to keep inside a fusion
holds no buffer and keeps what it is computed from alive until it is read; a reshape reuses its operand's buffer; a
matrix product holds a transposed copy of an operand it contracts on the leading side) gives the estimate the
planner uses (`ProgramBound.estimate_bytes`): within 10% of XLA's CPU analysis for the DM Control PPO steps
measured (benchmarks/trace_bound.py), on either side of it; further off for others (G1's step at 8 environments:
+51%).

For the bound, every other value of the unoptimized program is counted as its own buffer: XLA's fusion, which keeps most
elementwise intermediates out of memory, reshapes that are views, and its other reuse only lower the figure XLA
reports. The bound is not a proof: it is checked against XLA's analysis in tests/hardware/test_program_memory.py
and benchmarks/trace_bound.py (1.1-1.7x XLA's figure for the training steps measured there). The planner plans
from the estimate, not the bound, where the estimate with its margin fits the budget (`rlfit.planning.measure`);
elsewhere XLA compiles and decides.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from rlfit.hardware.fusion import Fusion, dot_copy_bytes

TENSOR_TYPE = re.compile(r"^tensor<(?P<dims>(?:[0-9]+x)*)(?P<element>[A-Za-z][A-Za-z0-9_]*|complex<[a-z0-9]+>)>$")
"""A ranked tensor type as MLIR prints it: `tensor<512x30xf32>`, `tensor<i1>`."""
ELEMENT_BYTES = {"i1": 1, "i4": 1, "ui4": 1, "i8": 1, "ui8": 1, "i16": 2, "ui16": 2, "i32": 4, "ui32": 4, "i64": 8,
                 "ui64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "complex<f32>": 8, "complex<f64>": 16}
"""Bytes per element of each element type (XLA stores booleans as bytes). Float8 types and unknown names fall back
to 8 bytes, more than any of them takes."""
UNKNOWN_ELEMENT_BYTES = 8
ALIGNMENT = 64
"""Bytes each computed value is rounded up to, as XLA aligns its buffers (64 on a CPU, less on a GPU)."""
TUPLE_ENTRY_BYTES = 8
"""Bytes of one entry of the table of pointers XLA allocates for an operation with several results."""
IN_PLACE = ("stablehlo.dynamic_update_slice", "stablehlo.scatter", "sdy.sharding_constraint",
            "stablehlo.optimization_barrier")
"""Operations whose result XLA writes into (or leaves in) its operand's buffer when that operand is not read again:
updates, and annotations that compute nothing (a sharding constraint, an optimization barrier)."""


@dataclass(frozen=True)
class ProgramBound:
    """Bytes of a lowered program, read from its StableHLO: the arguments and results exactly, the peak of the
    values it computes as an upper bound."""

    argument_bytes: int
    output_bytes: int
    peak_bytes: int
    """The most bytes of computed values (results included) alive at once, with every value its own buffer."""
    passthrough_bytes: int
    """Results that are arguments returned unchanged (XLA copies them unless they are donated)."""
    operations: int
    """Operations walked (a function once per set of arguments given up to it)."""
    fused_peak_bytes: int = 0
    """The same peak with the values XLA's fusion is expected to keep out of memory holding no buffer, and a
    reshape reusing its operand's (`rlfit.hardware.fusion`): an estimate, not a bound."""

    @property
    def total_bytes(self) -> int:
        """The bound of the program's device memory: arguments + peak + arguments returned unchanged."""
        return self.argument_bytes + self.peak_bytes + self.passthrough_bytes

    @property
    def estimate_bytes(self) -> int:
        """The estimate of the program's device memory, XLA's fusion modelled: arguments + the fused peak +
        arguments returned unchanged. On either side of XLA's analysis (benchmarks/trace_bound.py)."""
        return self.argument_bytes + self.fused_peak_bytes + self.passthrough_bytes

    @property
    def temp_bytes(self) -> int:
        """The bound less arguments and results: what stands for XLA's temporaries."""
        return self.total_bytes - self.argument_bytes - self.output_bytes


class UnboundedProgram(ValueError):
    """The program holds a value whose size cannot be read from its type (a dynamic shape, a tuple, an unknown
    type): no bound; the caller measures the program another way (XLA's compile)."""


@functools.lru_cache(maxsize=4096)
def type_bytes(type_text: str) -> int:
    """Bytes of one value of the MLIR type printed as `type_text` (`tensor<4x3xf32>`: 48); 0 for a token. Raises
    UnboundedProgram for any other type, or a tensor whose shape is not static."""
    if type_text == "!stablehlo.token":
        return 0  # orders side effects; holds no device buffer
    match = TENSOR_TYPE.match(type_text)
    if match is None:
        raise UnboundedProgram(f"no static size for a value of type {type_text}")
    count = 1
    for dim in match["dims"].split("x")[:-1]:
        count *= int(dim)
    return count * ELEMENT_BYTES.get(match["element"], UNKNOWN_ELEMENT_BYTES)


def value_bytes(value: Any) -> int:
    """Bytes of an MLIR value (by its type)."""
    return type_bytes(str(value.type))


def buffer_bytes(value: Any) -> int:
    """Bytes of the buffer holding an MLIR value: its bytes rounded up to ALIGNMENT."""
    return -(-value_bytes(value) // ALIGNMENT) * ALIGNMENT


def tuple_bytes(count: int) -> int:
    """Bytes of the pointer table XLA allocates for `count` results (none for one)."""
    return TUPLE_ENTRY_BYTES * count if count > 1 else 0


def lowered_bound(lowered: Any) -> ProgramBound:
    """The bound of `lowered` (a `jax.stages.Lowered`): its StableHLO walked as described above. Compiles nothing."""
    return module_bound(lowered.compiler_ir("stablehlo"))


def module_bound(module: Any) -> ProgramBound:
    """The bound of a StableHLO module (an `mlir.ir.Module` with a public `main`), and the estimate beside it (the
    same walk with XLA's expected fusion, `rlfit.hardware.fusion`). Raises UnboundedProgram where a value's size
    cannot be read or a called function is missing."""
    functions = {_symbol(op): op for op in module.body.operations if op.operation.name == "func.func"}
    if "main" not in functions:
        raise UnboundedProgram("the module has no main function")
    main = functions["main"]
    block = main.regions[0].blocks[0]
    arguments = list(block.arguments)
    returned = list(block.operations)[-1].operands
    donated = donated_positions(main)
    walker, fused = _Walker(functions), _Walker(functions, Fusion(functions))
    peak, aliases = walker.function_peak("main", donated)
    fused_peak, _ = fused.function_peak("main", donated)
    passed = [v for position, v in enumerate(returned) if v in set(arguments) and position not in aliases]
    return ProgramBound(argument_bytes=sum(value_bytes(a) for a in arguments),
                        output_bytes=sum(value_bytes(v) for v in returned),
                        peak_bytes=peak + tuple_bytes(len(returned)),
                        passthrough_bytes=sum(buffer_bytes(v) for v in passed),
                        operations=walker.operations,
                        fused_peak_bytes=fused_peak + tuple_bytes(len(returned)))


def donated_positions(main: Any) -> frozenset[int]:
    """Positions of `main`'s arguments the caller donates (JAX's `tf.aliasing_output` or `jax.buffer_donor`): their
    buffers are the program's to update in place."""
    if "arg_attrs" not in main.attributes:
        return frozenset()
    attributes = [str(attribute) for attribute in main.attributes["arg_attrs"]]
    return frozenset(position for position, text in enumerate(attributes)
                     if "tf.aliasing_output" in text or "jax.buffer_donor" in text)


def _symbol(function: Any) -> str:
    return str(function.attributes["sym_name"]).strip('"')


class _Walker:
    """Peaks of a module's functions, each walked once per set of arguments it may update in place."""

    def __init__(self, functions: dict[str, Any], fusion: Fusion | None = None) -> None:
        self.functions = functions
        self.fusion = fusion
        """Where given, the values it keeps out of memory hold no buffer, and a reshape reuses its operand's."""
        self.peaks: dict[tuple[str, frozenset[int]], tuple[int, dict[int, int]]] = {}
        self.operations = 0

    def function_peak(self, name: str, reusable: frozenset[int] = frozenset()) -> tuple[int, dict[int, int]]:
        """(the function's peak, {result position: the argument position whose buffer holds it}) where the
        arguments at `reusable` are buffers the caller gives up (it reads them no more)."""
        if name not in self.functions:
            raise UnboundedProgram(f"the module calls {name}, which it does not hold")
        key = (name, reusable)
        if key not in self.peaks:
            self.peaks[key] = (0, {})  # a recursive call (none in JAX's output) would count nothing more
            block = self.functions[name].regions[0].blocks[0]
            self.peaks[key] = self.block_peak(block, reusable)
        return self.peaks[key]

    def region_peak(self, region: Any, reusable: frozenset[int] = frozenset()) -> int:
        return max((self.block_peak(block, reusable)[0] for block in region.blocks), default=0)

    def block_peak(self, block: Any, reusable: frozenset[int] = frozenset()) -> tuple[int, dict[int, int]]:
        """(the most bytes of values defined in `block` alive at once, with what runs inside each operation added
        at that operation; {position of a returned value: the argument position whose buffer holds it}). The
        block's arguments belong to whoever holds the block; those at `reusable` (a loop body's carried state, a
        donated or given-up argument) may be updated in place."""
        operations = list(block.operations)
        self.operations += len(operations)
        last_use: dict[Any, int] = {}
        readers: dict[Any, list[Any]] = {}
        for index, operation in enumerate(operations):
            for operand in operation.operands:
                if last_use.get(operand) != index:
                    readers.setdefault(operand, []).append(operation)
                last_use[operand] = index
        arguments = list(block.arguments)
        held = {argument for position, argument in enumerate(arguments) if position not in reusable}
        kept = self.kept_out(operations, readers, last_use, held)
        dying: dict[int, list[Any]] = {}
        for value, index in last_use.items():
            dying.setdefault(index, []).append(value)
        origin = {arguments[position]: position for position in reusable}  # value -> argument buffer it lives in
        live = peak = 0
        defined: dict[Any, int] = {}
        for index, operation in enumerate(operations[:-1]):
            results = [(result, 0 if result in kept else buffer_bytes(result)) for result in operation.results]
            owned = {operand for operand in operation.operands
                     if last_use.get(operand) == index and (operand in defined or operand in origin)
                     and list(operation.operands).count(operand) == 1}
            in_place, inner = self.inside(operation, owned)
            new_bytes = (sum(size for position, (_, size) in enumerate(results) if position not in in_place)
                         + tuple_bytes(len(results)))
            peak = max(peak, live + (max(new_bytes, inner) if operation.operation.name == "func.call"
                                     else new_bytes + inner))
            for position, (result, size) in enumerate(results):
                overwritten = in_place.get(position)
                if overwritten is not None and overwritten in origin:
                    origin[result] = origin[overwritten]
                if result in last_use:
                    transferred = overwritten is not None and overwritten not in origin
                    defined[result] = size if overwritten is None or transferred else 0
                    live += defined[result]
            for value in dying.get(index, ()):
                if value in defined:
                    live -= defined.pop(value)
        returned = list(operations[-1].operands) if operations else []
        return peak, {position: origin[value] for position, value in enumerate(returned) if value in origin}

    def kept_out(self, operations: list[Any], readers: dict[Any, list[Any]], last_use: dict[Any, int],
                 held: set[Any]) -> set[Any]:
        """The values of a block's `operations` the fusion model keeps out of memory (none without it), and the
        reshapes of a buffer that outlives them or that the block may not give up (`held`: arguments; a view of it,
        as XLA makes such a reshape a bitcast). Each is computed (or viewed) where it is read, so what it is computed
        from lives until then: `last_use` is moved on to it."""
        kept: set[Any] = set()
        if self.fusion is None:
            return kept
        for index in range(len(operations) - 1, -1, -1):
            operation = operations[index]
            for result in operation.results:
                viewed = operation.operation.name == "stablehlo.reshape" and (
                    operation.operands[0] in held or last_use.get(operation.operands[0], index) > index)
                if viewed or self.fusion.kept_out(result, readers.get(result, [])):
                    kept.add(result)
                    end = last_use.get(result, index)
                    for operand in self.fusion.computed_from(operation, result):
                        last_use[operand] = max(last_use.get(operand, index), end)
        return kept

    def inside(self, operation: Any, owned: set[Any]) -> tuple[dict[int, Any], int]:
        """({result position: the operand whose buffer it is written into}, the peak of what runs inside the
        operation). `owned`: operands that die here and whose buffers this block may give up. An update
        (`dynamic_update_slice`, `scatter`) writes its result into its updated operand's buffer, and an annotation
        (`IN_PLACE`) leaves it there; a loop's state lives in its initial operands' buffers and its body updates
        that state in place; a called function may update in place the buffers given up to it and return them."""
        name = operation.operation.name
        operands = list(operation.operands)
        count = len(operation.results)
        if name in IN_PLACE or (name == "stablehlo.reshape" and self.fusion is not None):
            return {position: operands[position] for position in range(count) if operands[position] in owned}, 0
        if name == "stablehlo.while":
            condition, body = operation.regions
            state = frozenset(range(len(operands)))
            inner = max(self.region_peak(condition), self.region_peak(body, state))
            return {position: operands[position] for position in range(count) if operands[position] in owned}, inner
        if name == "func.call":
            callee = str(operation.attributes["callee"]).lstrip("@").strip('"')
            given = frozenset(position for position, operand in enumerate(operands) if operand in owned)
            inner, aliases = self.function_peak(callee, given)
            return {result: operands[argument] for result, argument in aliases.items()}, inner
        copies = dot_copy_bytes(operation, buffer_bytes) if self.fusion is not None else 0
        return {}, copies + max((self.region_peak(region) for region in operation.regions), default=0)
