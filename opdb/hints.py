"""The hints an opdb rule may give (`hints = { ... }` in opdb/rules/*.toml): every known key with
its type, its default and what it means. A rules file with an unknown key or a value of the wrong
type fails to load, naming the file and the line.

Read them with `OpRules.hint(name)` (or `hint(op, name)` for an op that may have no rules): the
rule's value, else the default written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hint:
    kind: str  # "bool", "str", "number", "names" (a list of strings), "bounds", "table" (checked by opdb.rules)
    default: Any
    meaning: str

    def check(self, value: Any) -> str:
        """What is wrong with `value` for this hint, or ""."""
        ok = {
            "bool": lambda v: isinstance(v, bool),
            "str": lambda v: isinstance(v, str) and v != "",
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "names": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "bounds": lambda v: (
                isinstance(v, dict)
                and all(
                    isinstance(b, list) and len(b) == 2 and all(isinstance(x, (int, float)) for x in b)
                    for b in v.values()
                )
            ),
            "table": lambda v: isinstance(v, dict),
            "any": lambda v: True,
        }[self.kind](value)
        return "" if ok else f"must be {_KIND_WORDS[self.kind]}, got {value!r}"


_KIND_WORDS = {
    "bool": "true or false",
    "str": "a non-empty string",
    "number": "a number",
    "names": "a list of argument names",
    "bounds": "a table of argument name -> [low, high]",
    "table": "a table",
    "any": "anything",
}

HINTS: dict[str, Hint] = {
    # how conform compares
    "golden": Hint("bool", True, "compute float64 golden for this op's cases (false: no golden judge)"),
    "strides": Hint("bool", True, "compare the output's strides with the reference's"),
    "sign_of_zero": Hint(
        "any", False, '-0.0 and 0.0 differ in the result and its gradients (real dtypes); "result": the result only'
    ),
    "exact_only_with": Hint("str", None, "the argument whose presence makes the op exact (div's rounding_mode)"),
    "unit_floor": Hint(
        "number", None, "the unit of an input is at least the dtype's unit at this magnitude (x + 1 in the dtype)"
    ),
    "result": Hint("str", None, '"legacy_batched": a legacy vmap BatchedTensor, unwrapped before it is compared'),
    "isolate": Hint("bool", False, "the op kills the process on some inputs: each cell runs in a fresh process"),
    # what generators draw
    "cells": Hint("str", None, '"floating": the op takes floating tensors only'),
    "cells_reason": Hint("str", None, 'why "cells" restricts the dtypes'),
    "layout": Hint("str", None, "the layout of the tensors drawn (contiguous, sparse_coo, sparse_csr, ...)"),
    "full_rank": Hint(
        "bool", False, "the result jumps where a matrix loses rank: no tensor drawn with rows of one repeated value"
    ),
    "quantized": Hint("str", None, "quantized inputs: per_tensor, per_channel or any"),
    "matrix": Hint("str", None, '"spd": square inputs are symmetric positive definite'),
    "input_products": Hint("bool", False, "the op multiplies input values together: no magnitude stress band"),
    "out_sized": Hint("bool", False, "out= tensors must already have the result's shape"),
    "zero_dim": Hint("names", (), "arguments drawn as 0-d tensors holding one number"),
    "index_int32": Hint("bool", False, "the op takes int32 index tensors as well as int64: both are drawn"),
    "concat_dim": Hint(
        "str", None, "the int argument along which the op joins its Tensor[] (the members' sizes there differ)"
    ),
    "bounds": Hint("bounds", {}, "[low, high) of the whole number a zero_dim argument holds"),
    "nonzero": Hint("names", (), "arguments never drawn as zero (or empty)"),
    "nonzero_args": Hint("names", (), "tensor arguments whose elements are never zero"),
    "positive_args": Hint("names", (), "tensor arguments drawn positive"),
    "probability_args": Hint("names", (), "tensor arguments drawn in [0, 1]"),
    "nonnegative_scalars": Hint("names", (), "scalar arguments drawn >= 0"),
    "ordered_scalars": Hint("names", (None, None), "two scalar arguments drawn with the first <= the second"),
    "exponent_args": Hint("names", (), "arguments that are exponents or shift counts (drawn as small integers)"),
    "seeded_arg": Hint("str", None, "the argument that makes a seeded op deterministic when 0 or false"),
    "unique_indices": Hint("bool", False, "with repeated indices, which write lands is unspecified"),
    "unless_accumulate": Hint("bool", False, "unique_indices only where accumulate is false"),
    # documented value domains (opdb/rules/contracts.toml; generators/contracts.py draws them)
    "argument_values": Hint("table", {}, "argument name -> the documented value kind (sign, probability, ...)"),
    "produced_by": Hint(
        "table", None, "inputs drawn from their producer's results: op = 'aten::x', results = {arg = i}"
    ),
    "caller": Hint("str", None, "the public op whose forward/backward calls this internal op: its call is captured"),
    "contract_doc": Hint("names", (), "[where it is documented, the documented words]"),
    "contract_opinfo": Hint("str", None, "the OpInfo whose sample inputs all satisfy the contract"),
    # which metamorphic relations hold (conform/judge/metamorphic.py; opdb/rules/relations.toml)
    "layout_relation": Hint("bool", True, "the result does not depend on the inputs' layout (false: views, strides)"),
    "position_relation": Hint("bool", True, "an element's result does not depend on its position in the tensor"),
    "alias_relation": Hint(
        "bool", True, "an out= (or in-place self) given as another input too raises or gives what it gives unaliased"
    ),
    "out_accumulates": Hint(
        "bool",
        False,
        "the out= overload adds into the out it is given (by contract): an element it leaves is the out's own",
    ),
    "overlap_check": Hint(
        "bool",
        True,
        "an in-place write into a tensor whose elements share memory (an expanded self) must raise "
        "(false: the op writes one value per element, which ATen allows there)",
    ),
    "element_precision": Hint(
        "bool",
        True,
        "float64 golden holds each element of the result and gradient (conform.judge.gradients.gross_elements)",
    ),
    "limit_at_infinity": Hint(
        "bool",
        True,
        "a result saturated over the top of the dtype's range in float64 is the op's value at +-inf (conform.judge.limits)",
    ),
    "position_exact": Hint(
        "names", (), "dtypes in which the op's result is exactly determined: equal bit for bit at every position"
    ),
    "position_exact_when": Hint("table", None, "argument -> the value it must have (or be absent) for position_exact"),
    "position_opmath": Hint(
        "bool",
        True,
        "float16 and bfloat16 results are computed in float32 and rounded once: the same bits at every position"
        " away from a rounding midpoint",
    ),
    "batch_relation": Hint(
        "any", None, "{argument: [item dim, result dim]}: the op applies per item along those dims (the batch relation)"
    ),
    "seeded_relations": Hint(
        "bool", True, "a random op re-seeded identically draws the same values into any out layout and overload"
    ),
    "layout_precondition": Hint(
        "bool", False, "raising in one layout with a text that states the layout requirement is the documented contract"
    ),
    # independent references (conform/judge/references.py; opdb/rules/references.toml)
    "reference": Hint("any", None, 'a Python expression over the arguments, "decomposition", or "" for none'),
    "reference_ignore": Hint("str", None, "the elements a documented semantic difference leaves undecided"),
    "reference_sign_of_zero": Hint(
        "bool", False, "the op defines the sign of a zero result, and the reference computes it"
    ),
    "reference_output": Hint("any", None, "compare only this output of a tuple result"),
    "reference_floating_inputs": Hint(
        "bool", False, "the reference speaks only where every tensor of values is floating or complex"
    ),
    "reference_finite_inputs": Hint(
        "bool", False, "the reference speaks only where every floating input is finite (LAPACK, BLAS)"
    ),
    "documented_gradient": Hint(
        "str",
        None,
        "an expression over the non-tensor arguments: where true, the documented gradient is not the derivative",
    ),
    "gradient_equivalent": Hint(
        "table",
        None,
        "input name -> its vector-Jacobian product by an equivalent API (expression over the arguments and grad)",
    ),
    # draws relative to the op's own range (opdb/rules/ranges.toml)
    "op_range": Hint(
        "str",
        None,
        "the range (generators.tensor.OP_RANGES) whose overflow edge the op's inputs are drawn below; none: no computed one",
    ),
    "equal_values_defined": Hint(
        "bool",
        False,
        "one value repeated is no 0 / 0 for the op (no mean subtracted): its finite values are judged there too",
    ),
    # what golden computes
    "quotient_rounded_first": Hint(
        "str", None, "with this argument, the quotient rounded to the result dtype before rounding_mode is right too"
    ),
    "discontinuity": Hint(
        "table", None, "where the op's step sits: at = input|computed, precision = math|dtype, period = argument"
    ),
    "gradient_discontinuity": Hint(
        "table",
        None,
        "where the op's gradient steps: at = input (an input as given compared with a constant or an argument)",
    ),
    "bin_edges": Hint("table", None, "counts judged against the edges the dtype computes: edges = op, counts = op"),
}


def hint(op_or_rules, name: str) -> Any:
    """The hint `name` of an op (or of its OpRules): the rule's value, else the default. An op
    without rules (a test's stand-in) gets the default. KeyError for a name HINTS does not know."""
    default = HINTS[name].default
    rules = getattr(op_or_rules, "rules", op_or_rules)
    return (getattr(rules, "hints", None) or {}).get(name, default)


def problems(hints: Any) -> list[tuple[str, str]]:
    """(key, what is wrong) for each unknown key or ill-typed value of a rule's `hints` table."""
    if not isinstance(hints, dict):
        return [("", "hints must be a table")]
    found = []
    for key, value in hints.items():
        spec = HINTS.get(key)
        if spec is None:
            found.append((key, f"unknown hint {key!r}; known: {', '.join(sorted(HINTS))}"))
        elif wrong := spec.check(value):
            found.append((key, f"hint {key!r} {wrong}"))
    return found
