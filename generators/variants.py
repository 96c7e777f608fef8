"""Variants of a drawn case: other values, inplace and out= overloads, inputs of a wrong size.

The runner runs an out= case several ways, because out handling is where backends slip: with
the out tensor the generator drew (empty: the op resizes it), preallocated to the exact result
shape, wrongly sized (the op must resize it, with a warning), and non-contiguous (the op must
write through the strides, or copy back): rows sliced, and permuted (its last dim strided, its
memory order not the logical one: a kernel that writes in memory order, as the CPU's random
fills do, or that assumes a unit last stride, as avg_pool3d's does, slips there). Only the runner knows the result shapes (from the
reference run), so it passes them in.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from generators.case import STRIDELESS_LAYOUTS, STRUCTURED_KINDS, Case, TensorSpec

OUT_VARIANTS = ("as_drawn", "preallocated", "wrong_size", "noncontiguous", "permuted")
# the variants whose outs are not contiguous, held against the preallocated one
STRIDED_OUT_VARIANTS = ("noncontiguous", "permuted")


def out_variants(case: Case, result_shapes: dict[str, tuple[int, ...] | list[tuple[int, ...]]]) -> dict[str, Case]:
    """{variant name: case} for each of OUT_VARIANTS, given the result shape of each out argument.

    `result_shapes` maps an out argument's name (`[a.name for a in op.out_args]`) to the shape
    the op produces for it (a list of shapes for a Tensor[] out). Arguments missing from it keep
    their drawn spec.
    """
    variants = {"as_drawn": case}
    for variant in OUT_VARIANTS[1:]:
        kwargs = dict(case.kwargs)
        for name, shape in result_shapes.items():
            spec = case.kwargs.get(name)
            if isinstance(spec, list):
                kwargs[name] = [_out_spec(s, tuple(sh), variant) for s, sh in zip(spec, shape)]
            elif isinstance(spec, TensorSpec):
                kwargs[name] = _out_spec(spec, tuple(shape), variant)
        variants[variant] = dataclasses.replace(case, kwargs=kwargs)
    if variants["permuted"] == variants["noncontiguous"]:
        del variants["permuted"]  # no out with two dims to swap: the same case again
    return variants


def _out_spec(spec: TensorSpec, shape: tuple[int, ...], variant: str) -> TensorSpec:
    if spec.layout in STRIDELESS_LAYOUTS:
        # a sparse or mkldnn out has no strides: only its size can be wrong (by a whole block
        # for a blocked layout, whose blocks must tile the matrix)
        grow = spec.blocksize[-1] if spec.blocksize else 1
        wrong = tuple(shape[:-1]) + (shape[-1] + grow,) if shape and variant == "wrong_size" else shape
        return dataclasses.replace(spec, shape=wrong)
    if spec.axis is not None:
        # a per-channel quantized out: its channels are those of its base, so it stays
        # contiguous (the noncontiguous variant repeats the preallocated one)
        axis = min(spec.axis, len(shape) - 1) if shape else None
        wrong = tuple(shape[:-1]) + (shape[-1] + 1,) if shape and variant == "wrong_size" else shape
        return dataclasses.replace(spec, shape=wrong, layout="contiguous", axis=axis)
    if variant == "preallocated":
        return dataclasses.replace(spec, shape=shape, layout="contiguous")
    if variant == "wrong_size":
        wrong = tuple(shape[:-1]) + (shape[-1] + 1,) if shape else (2,)
        return dataclasses.replace(spec, shape=wrong, layout="contiguous")
    if variant == "noncontiguous":
        # a step-2 slice is non-contiguous for every shape with a leading dim > 1; the
        # transposed layout covers matrices whose leading dim is 1
        layout = (
            "transposed" if len(shape) >= 2 and shape[0] <= 1 and shape[-1] > 1 else "sliced" if shape else "offset"
        )
        return dataclasses.replace(spec, shape=shape, layout=layout)
    if variant == "permuted":
        swap = len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1
        return (
            _out_spec(spec, shape, "noncontiguous")
            if not swap
            else dataclasses.replace(spec, shape=shape, layout="transposed")
        )
    raise ValueError(f"unknown out variant {variant!r}")


# An out= of this dtype holds no floating or complex result without an unsafe cast, which PyTorch's
# out= contract says the op must refuse (torch/_prims_common/wrappers.py, _safe_copy_out:
# "Attempting to cast from ... to out tensor with dtype ..., but this can't be cast because it
# is not safe!"; OpInfo's TestCommon.test_out checks it, and its expected failures name kernels,
# MPS ones among them, that write the truncated values instead).
UNSAFE_OUT_DTYPE = "int64"
_CASTS_UNSAFELY = ("float32", "float64", "float16", "bfloat16", "complex64", "complex128")


def unsafe_out_case(case: Case, out_names) -> Case | None:
    """`case` with every floating or complex out among `out_names` made UNSAFE_OUT_DTYPE, or None
    when it has none, or no tensor input: a factory op (zeros.out, randn.out) takes its result's
    dtype from its out, so any out dtype is its own."""
    outs = {n for n in out_names if isinstance(case.kwargs.get(n), TensorSpec)}
    inputs = [a for a in case.args if isinstance(a, TensorSpec)] + [
        v for k, v in case.kwargs.items() if k not in outs and isinstance(v, TensorSpec)
    ]
    changed = {
        n: dataclasses.replace(case.kwargs[n], dtype=UNSAFE_OUT_DTYPE, layout="contiguous")
        for n in outs
        if case.kwargs[n].dtype in _CASTS_UNSAFELY and case.kwargs[n].layout not in STRIDELESS_LAYOUTS
    }
    if not inputs or not changed:
        return None
    return dataclasses.replace(case, kwargs={**case.kwargs, **changed})


# The out dtype an out of each dtype is swapped for (other_dtype_out_case): the neighbour of its
# kind, wider where there is one (an out that holds the result safely, which some kernels still
# refuse: a reduction's out must match its input's dtype), narrower for the widest
OTHER_OUT_DTYPE = {
    "bool": "float32",
    "uint8": "int64",
    "int8": "int64",
    "int16": "int64",
    "int32": "int64",
    "int64": "int32",
    "float16": "float64",
    "bfloat16": "float64",
    "float32": "float64",
    "float64": "float32",
    "complex64": "complex128",
    "complex128": "complex64",
}


def other_dtype_out_case(case: Case, out_names) -> Case | None:
    """`case` with every dense out among `out_names` of another dtype (OTHER_OUT_DTYPE), or None
    when it has none or no tensor input (a factory's out gives its dtype)."""
    outs = {n for n in out_names if isinstance(case.kwargs.get(n), TensorSpec)}
    if not any(isinstance(a, TensorSpec) for a in case.args) and not any(
        isinstance(v, TensorSpec) for k, v in case.kwargs.items() if k not in outs
    ):
        return None
    changed = {
        n: dataclasses.replace(case.kwargs[n], dtype=OTHER_OUT_DTYPE[case.kwargs[n].dtype], layout="contiguous")
        for n in outs
        if case.kwargs[n].dtype in OTHER_OUT_DTYPE and case.kwargs[n].layout not in STRIDELESS_LAYOUTS
    }
    return dataclasses.replace(case, kwargs={**case.kwargs, **changed}) if changed else None


def inplace_target(case: Case):
    """The argument an inplace op mutates (its first positional argument), to compare after the call."""
    return case.args[0] if case.args else None


# layouts in which elements of a tensor share memory (a stride of 0), first the one used
OVERLAPPING_LAYOUTS = ("expanded", "expanded_last")


def overlapping_self_case(case: Case) -> Case | None:
    """An in-place case with its self made a tensor of the same shape and dtype whose elements
    share memory (expanded: a dim of stride 0, the first batch item or each row's first value
    repeated), or None where self is not a plain strided tensor of two or more elements along a
    dim that can be expanded. In-place ops must refuse to write it ("unsupported operation: more
    than one element of the written-to tensor refers to a single memory location": the check of
    aten/src/ATen/MemoryOverlap.cpp, assert_no_internal_overlap, which TensorIterator and most
    in-place kernels run)."""
    target = inplace_target(case)
    if (
        not isinstance(target, TensorSpec)
        or target.layout in STRIDELESS_LAYOUTS
        or target.quantized
        or target.numel < 2
    ):
        return None
    shape = tuple(target.shape)
    if len(shape) >= 1 and shape[0] > 1:
        layout = "expanded"
    elif len(shape) >= 2 and shape[-1] > 1:
        layout = "expanded_last"
    else:
        return None
    over = dataclasses.replace(target, layout=layout, stride=None, storage_offset=0, requires_grad=False)
    return dataclasses.replace(case, args=(over, *case.args[1:]))


# At most this many inputs of a case are each given a wrong size (see wrong_size_inputs)
WRONG_SIZE_INPUTS = 4


# the shapes a malformed input takes (see malformed_inputs), each a function of the drawn shape
MALFORMED_SHAPES = {
    "one longer in its last dim": lambda shape: (*shape[:-1], shape[-1] + 1),
    "empty in its first dim": lambda shape: (0, *shape[1:]),
    "with one more leading dim": lambda shape: (2, *shape),
    "with one dim fewer": lambda shape: shape[1:],
}


def wrong_size_inputs(case: Case, out_names=()) -> list[tuple[str, Case]]:
    """(argument name or position, case) for each tensor input (not an out) of at least one
    dim, one at a time, its last dim one longer, contiguous: an input whose size no longer fits
    the others' (a bias longer than the channels, an index longer than its source), which the
    CPU kernel refuses and a device's or meta's kernel must refuse too. The first
    WRONG_SIZE_INPUTS such inputs, in argument order."""
    grow = MALFORMED_SHAPES["one longer in its last dim"]
    return [(where, _with_input(case, where, spec, grow(spec.shape))) for where, spec in _sized_inputs(case, out_names)]


def has_sized_input(case: Case, out_names=()) -> bool:
    """Whether the case has an input whose size can be made wrong (see wrong_size_inputs)."""
    return bool(_sized_inputs(case, out_names))


def empty_inputs(case: Case, out_names=()) -> list[tuple[str, Case]]:
    """(argument name or position, case) for the first tensor input (not an out) of at least one
    dim, its first dim emptied, contiguous: a batch of none, which a kernel that computes on the
    batch must compute on too (an empty result) or refuse as the CPU does. At most one variant."""
    empty = MALFORMED_SHAPES["empty in its first dim"]
    return [
        (where, _with_input(case, where, spec, empty(spec.shape)))
        for where, spec in _sized_inputs(case, out_names)[:1]
        if spec.shape[0] > 0
    ]


# Arguments that name a dim of a tensor input, and how far outside every input's rank the dim
# out of range is set (beyond any rank a case draws, and beyond a dim one past the last, which
# unsqueeze and stack accept)
DIM_ARGUMENTS = ("dim", "dim0", "dim1", "dim2", "dims")
DIM_BEYOND_RANK = 40


def out_of_range_dims(op, case: Case, out_names=()) -> list[tuple[str, Case, str, Case]]:
    """(what, case, where, empty case) for each dim argument the case passes (an int, or the last
    element of a list of them): the case with that dim DIM_BEYOND_RANK past its largest input's
    rank, and the same with its first tensor input empty in its first dim (empty_inputs; where
    that input was drawn empty, the case is the empty one and the other has a batch of one). Whether
    a dim is in range depends on ranks alone: a kernel that refuses it for the one must refuse it
    for the other (cummin returned an empty result for dim -46, pytorch#188224: it returned early
    for an empty input, before it wrapped the dim)."""
    ranks = [len(spec.shape) for _, spec in _sized_inputs(case, out_names, lists=True, scalars=True)]
    bad = max(ranks, default=0) + DIM_BEYOND_RANK
    made = []
    for where, arg, value in _schema_places(op, case):
        if arg.name not in DIM_ARGUMENTS:
            continue
        if arg.base_type in ("int", "SymInt") and type(value) is int:
            changed = bad
        elif arg.base_type in ("int[]", "SymInt[]") and value and all(type(v) is int for v in value):
            changed = [*value[:-1], bad]
        else:
            continue
        drawn = _with_value(case, where, changed)
        sized = _sized_inputs(drawn, out_names)[:1]
        if sized and sized[0][1].shape[0] == 0:
            # drawn with a batch of none already: the same with a batch of one is the other side
            emptied, spec = sized[0]
            full = _with_input(drawn, emptied, spec, (1, *spec.shape[1:]))
            made.append((f"{input_label(where)} set to {changed}", full, emptied, drawn))
        for emptied, empty in empty_inputs(drawn, out_names):
            made.append((f"{input_label(where)} set to {changed}", drawn, emptied, empty))
    return made


def input_label(where: str) -> str:
    """How a message names an input: "argument 2" for position 1, "'weight'" for a keyword, "the
    first tensor of argument 2" for the first of a list."""
    where, _, element = where.partition(".")
    label = f"argument {int(where) + 1}" if where.isdigit() else repr(where)
    return f"the first tensor of {label}" if element else label


def _sized_inputs(case: Case, out_names, lists: bool = False, scalars: bool = False) -> list[tuple[str, TensorSpec]]:
    """(argument position or name, spec) of the case's first WRONG_SIZE_INPUTS tensor inputs (not
    outs) of at least one dim whose shape can change: not quantized, strided, values not given.
    `lists`: the first tensor of a list argument too (position or name, then ".0"); `scalars`:
    0-d tensors too."""
    places = [(str(i), v) for i, v in enumerate(case.args)]
    places += [(k, v) for k, v in case.kwargs.items() if k not in out_names]
    if lists:
        places = [
            (f"{where}.0", v[0]) if isinstance(v, (list, tuple)) and v and isinstance(v[0], TensorSpec) else (where, v)
            for where, v in places
        ]
    return [
        (where, v)
        for where, v in places
        if isinstance(v, TensorSpec)
        and not v.quantized
        and v.layout not in STRIDELESS_LAYOUTS
        and (v.shape or scalars)
        and v.data is None
    ][:WRONG_SIZE_INPUTS]


def _with_input(case: Case, where: str, spec: TensorSpec, shape) -> Case:
    """`case` with its input at `where` of another shape, contiguous. A structured matrix's edge
    pattern (an entry of a square matrix) is dropped where the shape is no longer square."""
    shape = tuple(shape)
    square = len(shape) >= 2 and shape[-1] == shape[-2]
    edges = None if spec.values in STRUCTURED_KINDS and not square else spec.edges
    return _with_value(
        case,
        where,
        dataclasses.replace(spec, shape=shape, layout="contiguous", stride=None, storage_offset=0, edges=edges),
    )


# the shapes a malformed 0-d input takes: a gradient or a scale that should be a single number
# handed as an empty vector or as two numbers (published CPU crash: multi_margin_loss_backward
# reads an empty grad_output's first element)
MALFORMED_SCALAR_SHAPES = {
    "empty in its first dim": (0,),
    "with one more leading dim": (2,),
}
# how a message names them
SCALAR_SHAPE_NAMES = {
    "empty in its first dim": "empty, of shape (0,) in place of 0-d",
    "with one more leading dim": "of shape (2,) in place of 0-d",
}


def _malformed_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape MALFORMED_SHAPES[name] gives `shape`; of a 0-d shape, MALFORMED_SCALAR_SHAPES's
    (None where it has none)."""
    if shape:
        return MALFORMED_SHAPES[name](shape)
    return MALFORMED_SCALAR_SHAPES.get(name)


def malformed_inputs(case: Case, out_names=()) -> list[tuple[str, Case]]:
    """(what, case) for each tensor input (not an out), one at a time, in each of
    MALFORMED_SHAPES (a 0-d one in each of MALFORMED_SCALAR_SHAPES): arguments whose shapes no
    longer fit the op's contract (a hidden state of another rank, gates not a multiple of the
    gate count, zero rows, an empty gradient where a number is due), which a kernel must refuse
    or compute with, never die on (published CPU crashes: gru_cell on a 5-d hidden state,
    _pdist_backward on zero rows, rnn cell backwards on undersized gates). The first
    WRONG_SIZE_INPUTS such inputs, in argument order; of a list (cat's tensors, an rnn's
    weights), its first tensor."""
    sized = _sized_inputs(case, out_names, lists=True, scalars=True)
    made = []
    for where, spec in sized:
        for name in MALFORMED_SHAPES:
            shape = _malformed_shape(name, spec.shape)
            if shape is not None:
                text = name if spec.shape else SCALAR_SHAPE_NAMES[name]
                made.append((f"{input_label(where)} {text}", _with_input(case, where, spec, shape)))
    if len(sized) >= 2:  # arguments malformed together (two empty inputs, both with a batch dim)
        for name in JOINT_MALFORMED_SHAPES:
            joint = case
            for where, spec in sized:
                joint = _with_input(joint, where, spec, _malformed_shape(name, spec.shape))
            made.append((f"every input {name}", joint))
    return made


def malformed_dtypes(case: Case, out_names=()) -> list[tuple[str, Case]]:
    """(what, case) for each tensor input (not an out; 0-d ones too), one at a time, of the other
    kind of number: an integer one (an index, a count, a zero point) as float32, a floating one
    as int64, with the values the case drew; and an int64 one as int32 (an index tensor of the
    narrower integer type many APIs also take). A kernel that dispatches on one argument's dtype
    and reads another's memory as that dtype (published CPU crash: quantize_per_channel to qint32
    with floating zero points) dies where it must refuse or convert. The first WRONG_SIZE_INPUTS
    such inputs, in argument order; not bools, not complex ones."""
    made = []
    for where, spec in _sized_inputs(case, out_names, lists=True, scalars=True):
        dtype = spec.torch_dtype
        if dtype is torch.bool or dtype.is_complex:
            continue
        others = ["int64"] if dtype.is_floating_point else ["float32"]
        if dtype is torch.int64:
            others.append("int32")
        for other in others:
            kind = "a floating" if other == "float32" else "an integer"
            what = f"{input_label(where)} of {kind} dtype ({other})"
            made.append((what, _with_value(case, where, _as_dtype(spec, other))))
    return made


def _as_dtype(spec: TensorSpec, dtype: str) -> TensorSpec:
    """`spec` of `dtype` with the values it drew (converted: integers exactly, floats truncated
    toward zero), contiguous."""
    values = spec.materialize(lambda t: t).detach().to(getattr(torch, dtype)).reshape(-1).tolist()
    return dataclasses.replace(
        spec, dtype=dtype, data=tuple(values), values="real", layout="contiguous", stride=None, storage_offset=0
    )


# the MALFORMED_SHAPES given to every input at once: kernels that check one argument against
# another (an empty input beside an empty gradient) pass a check each alone would fail
JOINT_MALFORMED_SHAPES = ("empty in its first dim", "with one more leading dim")

# numbers a kernel must refuse or compute with, never die on. Integers: zero (a divisor: a
# stride, a group count, a size), -1 (an index, a count) and int64's extremes, whose sums and
# products overflow a size or offset computation (a kernel size near 2**63). Floats: zero and -1
# (a scale, an eps, a norm's order), NaN and the infinities (a size computed from a scale, a
# bin count from a range)
EXTREME_INTEGERS = {"0": 0, "-1": -1, "2**63 - 1": 2**63 - 1, "-2**63": -(2**63)}
EXTREME_FLOATS = {"0.0": 0.0, "-1.0": -1.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# schema types (ArgSpec.base_type) whose value is a number, and lists of them
NUMBER_TYPES = ("int", "SymInt", "float", "Scalar")
NUMBER_LIST_TYPES = ("int[]", "SymInt[]", "float[]")


def malformed_numbers(op, case: Case) -> list[tuple[str, Case]]:
    """(what, case) for each number the case passes, in turn: an int set to each of
    EXTREME_INTEGERS, a float to each of EXTREME_FLOATS (a Scalar as the kind of number it is);
    a list of them with every element so, and one element shorter and longer (a kernel size of
    another rank); an integer tensor input (an index, an offset, a length) with every element its
    dtype's smallest, then its largest value. Arguments a kernel must check before it uses them
    (published CPU crashes: max_pool1d with a kernel size near 2**63, embedding_bag with offsets
    out of range); what the op then does besides dying is not judged. Not bools, not tensors of
    floating values (their extremes are drawn as values: the "special" kind)."""
    made = []
    for where, arg, value in _schema_places(op, case):
        label = input_label(where)
        if arg.base_type in NUMBER_TYPES and _extremes(value):
            made += [(f"{label} set to {text}", _with_value(case, where, v)) for text, v in _extremes(value).items()]
        elif arg.base_type in NUMBER_LIST_TYPES and isinstance(value, (list, tuple)) and value:
            extremes = _extremes(value[0])
            if not extremes or any(type(x) is not type(value[0]) for x in value):
                continue
            made += [
                (f"{label} with every element {text}", _with_value(case, where, [v] * len(value)))
                for text, v in extremes.items()
            ]
            made.append((f"{label} one element shorter", _with_value(case, where, list(value[:-1]))))
            made.append((f"{label} one element longer", _with_value(case, where, [*value, value[-1]])))
        elif isinstance(value, TensorSpec) and _integer_values(value):
            limits = torch.iinfo(value.torch_dtype)
            for text, v in (("smallest", limits.min), ("largest", limits.max)):
                extreme = dataclasses.replace(
                    value, data=(v,) * value.numel, layout="contiguous", stride=None, storage_offset=0
                )
                made.append((f"{label} with every element its dtype's {text}", _with_value(case, where, extreme)))
    return made


def _extremes(value) -> dict:
    """The extremes a number of value's kind is set to ({} for a bool, None, anything else)."""
    return EXTREME_INTEGERS if type(value) is int else EXTREME_FLOATS if type(value) is float else {}


def _integer_values(spec: TensorSpec) -> bool:
    """An integer tensor whose values can be given: strided, not quantized, of some elements."""
    dtype = spec.torch_dtype
    return (
        not spec.quantized
        and spec.layout not in STRIDELESS_LAYOUTS
        and spec.numel > 0
        and not dtype.is_floating_point
        and not dtype.is_complex
        and dtype is not torch.bool
    )


def _schema_places(op, case: Case):
    """(argument position or name, schema argument, value) of the case's arguments (not outs):
    positional ones in schema order, then keywords by name."""
    positional = [a for a in op.arguments if not a.kwarg_only and not a.is_out]
    by_name = {a.name: a for a in op.arguments if not a.is_out}
    places = [(str(i), positional[i], v) for i, v in enumerate(case.args[: len(positional)])]
    places += [(k, by_name[k], v) for k, v in case.kwargs.items() if k in by_name]
    return places


def contiguous_inputs(case: Case) -> Case:
    """`case` with each strided tensor (inputs and outs, in lists too) contiguous, of the same
    shape (its values follow from its seed in the new layout: for the malformed arguments, whose
    only verdict is a death): the layout every kernel has, where an argument's checks and size
    arithmetic run before any layout's own path. A spec object in two places stays one object."""
    made: dict[int, TensorSpec] = {}

    def swap(v):
        if isinstance(v, TensorSpec):
            if v.layout in STRIDELESS_LAYOUTS or (v.layout == "contiguous" and v.stride is None):
                return v
            if id(v) not in made:
                made[id(v)] = dataclasses.replace(v, layout="contiguous", stride=None, storage_offset=0)
            return made[id(v)]
        if isinstance(v, (list, tuple)):
            return type(v)(swap(x) for x in v)
        return v

    return dataclasses.replace(
        case, args=tuple(swap(a) for a in case.args), kwargs={k: swap(v) for k, v in case.kwargs.items()}
    )


def _with_value(case: Case, where: str, value) -> Case:
    """`case` with the argument at `where` replaced by `value` (at "where.0": the first element of
    the list there)."""
    where, _, element = where.partition(".")
    if element:
        within = case.args[int(where)] if where.isdigit() else case.kwargs[where]
        value = type(within)([value, *within[1:]])
    if where.isdigit():
        i = int(where)
        return dataclasses.replace(case, args=(*case.args[:i], value, *case.args[i + 1 :]))
    return dataclasses.replace(case, kwargs={**case.kwargs, where: value})


def reseeded(case: Case, k: int, out_names=()) -> Case | None:
    """The case with other values, the k-th (k >= 1) of its value variants: every tensor whose
    values follow from its seed gets a seed derived from its own and k; shapes, dtypes, layouts,
    value kinds, bands and edge patterns stay. Specs that share a seed share the derived one, and
    a spec object in two places stays one object. None when no input (an out's values are
    overwritten) has values that follow from a seed: the same case again."""
    if k < 1:
        raise ValueError(f"value variants count from 1, not {k}")
    made: dict[int, TensorSpec] = {}
    inputs_changed = False

    def swap(v, is_out=False):
        nonlocal inputs_changed
        if isinstance(v, TensorSpec):
            if v.data is not None:
                return v
            if id(v) not in made:
                made[id(v)] = dataclasses.replace(v, seed=derived_seed(v.seed, k))
            inputs_changed = inputs_changed or not is_out
            return made[id(v)]
        if isinstance(v, tuple):
            return tuple(swap(x, is_out) for x in v)
        if isinstance(v, list):
            return [swap(x, is_out) for x in v]
        if isinstance(v, dict) and set(v) == {"dict"}:
            return {"dict": [[swap(key, is_out), swap(x, is_out)] for key, x in v["dict"]]}
        return v

    args = tuple(swap(a) for a in case.args)
    kwargs = {name: swap(v, name in out_names) for name, v in case.kwargs.items()}
    if not inputs_changed:
        return None
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def derived_seed(seed: int, k: int) -> int:
    """A seed for the k-th value variant of a tensor drawn with `seed` (a 31-bit mix of both)."""
    x = (seed * 0x9E3779B1 + k * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 16
    return (x * 0x7FEB352D & 0xFFFFFFFF) >> 1
