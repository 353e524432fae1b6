"""An upper bound of a lowered program's device memory, read from its StableHLO without compiling it.

XLA's compile-time memory analysis is exact but needs XLA's compile, which for a MuJoCo humanoid's training step
takes a minute on a CPU and minutes on a GPU host. The lowered program (what `jax.jit(...).lower(...)` gives,
before XLA sees it) already names every value the program computes and its shape. This module walks it in the
order it is written and adds up the bytes of the values alive at each operation:

- a value lives from the operation that defines it to its last use (a returned value to the end), in a buffer of
  its bytes rounded up to 64 (XLA's alignment); an operation with several results adds XLA's table of them;
- an operation holds the live values, its new results, and the peak of what runs inside it (a loop's body and
  condition, a conditional's branches; a called function's peak, which includes what it returns);
- an update (`dynamic_update_slice`, `scatter`) of a buffer that dies at it and that the block owns (defined in
  it, or a loop body's carried state) writes in place, as XLA does: no new buffer;
- the program holds its arguments throughout, its peak, and any argument it returns unchanged a second time.

Every other value of the unoptimized program is counted as its own buffer: XLA's fusion, which keeps most
elementwise intermediates out of memory, reshapes that are views, and its reuse of donated arguments only lower
the figure XLA reports. The bound is not a proof: it is checked against XLA's analysis in
tests/hardware/test_program_memory.py and benchmarks/trace_bound.py (1.8-3.4x XLA's figure for the training steps
measured there: least for PPO, most for a replay buffer of pixels, which the unoptimized program copies), and rlfit
uses it only where even the bound, with the planner's margin, fits the budget (`rlfit.run.sizing`); elsewhere XLA
compiles and decides.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

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
IN_PLACE = ("stablehlo.dynamic_update_slice", "stablehlo.scatter")
"""Updates XLA writes into their operand's buffer when that operand is not read again."""


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
    """Operations walked (functions counted once each)."""

    @property
    def total_bytes(self) -> int:
        """The bound of the program's device memory: arguments + peak + arguments returned unchanged."""
        return self.argument_bytes + self.peak_bytes + self.passthrough_bytes

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
    """The bound of a StableHLO module (an `mlir.ir.Module` with a public `main`). Raises UnboundedProgram where a
    value's size cannot be read or a called function is missing."""
    walker = _Walker({_symbol(op): op for op in module.body.operations if op.operation.name == "func.func"})
    if "main" not in walker.functions:
        raise UnboundedProgram("the module has no main function")
    main = walker.functions["main"]
    block = main.regions[0].blocks[0]
    arguments = list(block.arguments)
    returned = list(block.operations)[-1].operands
    argument_set = set(arguments)
    return ProgramBound(argument_bytes=sum(value_bytes(a) for a in arguments),
                        output_bytes=sum(value_bytes(v) for v in returned),
                        peak_bytes=walker.function_peak("main") + tuple_bytes(len(returned)),
                        passthrough_bytes=sum(buffer_bytes(v) for v in returned if v in argument_set),
                        operations=walker.operations)


def _symbol(function: Any) -> str:
    return str(function.attributes["sym_name"]).strip('"')


class _Walker:
    """Peaks of a module's functions, each walked once."""

    def __init__(self, functions: dict[str, Any]) -> None:
        self.functions = functions
        self.peaks: dict[str, int] = {}
        self.operations = 0

    def function_peak(self, name: str) -> int:
        if name not in self.functions:
            raise UnboundedProgram(f"the module calls {name}, which it does not hold")
        if name not in self.peaks:
            self.peaks[name] = 0  # a recursive call (none in JAX's output) would count nothing more
            self.peaks[name] = self.region_peak(self.functions[name].regions[0])
        return self.peaks[name]

    def region_peak(self, region: Any, arguments_reusable: bool = False) -> int:
        return max((self.block_peak(block, arguments_reusable) for block in region.blocks), default=0)

    def block_peak(self, block: Any, arguments_reusable: bool = False) -> int:
        """The most bytes of values defined in `block` (its arguments belong to whoever holds the block) alive at
        once, with what runs inside each operation added at that operation. `arguments_reusable`: the block's
        arguments are buffers an update may write in place (a loop body's carried state)."""
        operations = list(block.operations)
        self.operations += len(operations)
        last_use: dict[Any, int] = {}
        for index, operation in enumerate(operations):
            for operand in operation.operands:
                last_use[operand] = index
        arguments = set(block.arguments) if arguments_reusable else set()
        live = peak = 0
        defined: dict[Any, int] = {}
        for index, operation in enumerate(operations):
            results = [(result, buffer_bytes(result)) for result in operation.results]
            in_place = self.written_in_place(operation, index, last_use, defined, arguments)
            new_bytes = (sum(size for position, (_, size) in enumerate(results) if position not in in_place)
                         + tuple_bytes(len(results)))
            peak = max(peak, live + self.held_by(operation, new_bytes))
            for position, (result, size) in enumerate(results):
                if result in last_use:
                    kept = position not in in_place or in_place[position] in defined  # else: the loop's buffer
                    defined[result] = size if kept else 0
                    live += defined[result]
            for operand in set(operation.operands):
                if last_use.get(operand) == index and operand in defined:
                    live -= defined.pop(operand)
        return peak

    @staticmethod
    def written_in_place(operation: Any, index: int, last_use: dict[Any, int], defined: dict[Any, int],
                         arguments: set[Any]) -> dict[int, Any]:
        """{result position: the operand it overwrites} for an update (`dynamic_update_slice`, `scatter`) whose
        updated operand dies at it: XLA writes the result into that operand's buffer. Only for an operand this
        block owns (defined in it, or a loop body's carried state), never for one a caller may still read."""
        if operation.operation.name not in IN_PLACE:
            return {}
        operands = list(operation.operands)
        return {position: operands[position] for position in range(len(operation.results))
                if last_use.get(operands[position]) == index
                and (operands[position] in defined or operands[position] in arguments)
                and operands.count(operands[position]) == 1}

    def held_by(self, operation: Any, result_bytes: int) -> int:
        """Bytes an operation holds beyond the values alive around it: its new results and what runs inside it. A
        called function's peak includes the values it returns, which are the call's results; a loop's or a
        conditional's regions are counted beside its results."""
        name = operation.operation.name
        if name == "func.call":
            callee = str(operation.attributes["callee"]).lstrip("@").strip('"')
            return max(result_bytes, self.function_peak(callee))
        if name == "stablehlo.while":
            condition, body = operation.regions
            return result_bytes + max(self.region_peak(condition), self.region_peak(body, arguments_reusable=True))
        inner = max((self.region_peak(region) for region in operation.regions), default=0)
        return result_bytes + inner
