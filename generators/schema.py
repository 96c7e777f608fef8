"""`from_schema(op, dtype)`: the case strategy of any operator overload, driven by its schema.

Arguments are drawn in schema order into a `Context`, so later arguments see earlier ones: a
`dim` is drawn within the rank of the tensor before it, an `index` within the size of that dim,
a second tensor broadcasts against the first. Family builders (`generators.families`) fill in
what a schema cannot say (a convolution's weight shape, an SPD matrix, ...) by pre-drawing some
arguments; the generic strategies of this module fill the rest.
"""

from __future__ import annotations

from generators import argtypes, backward, capture, contracts, families, memo, op_ranges
from generators.case import QUANTIZED_STORAGE, Case
from generators.context import OMIT, VARARGS, Context, Untestable
from generators.strategies import DEFAULT_MAX_NUMEL, DTYPE_NAMES, huge_band_for, shapes, stressed


def cell_dtypes(op, requested: list[str]) -> list[str]:
    """The dtype cells of `op` among `requested` dtype names.

    Ops with tensor inputs, and factories with a dtype argument (whose value is the cell), get
    every requested dtype: which of them the op accepts is the reference's call, not ours. Ops
    without either (TorchScript builtins, factories without a dtype) get the single cell "none".
    """
    if op.has_tensor_inputs:
        return list(requested)
    if any(argtypes.normalize(a.type).rstrip("?") == "ScalarType" for a in op.arguments if not a.is_out):
        return list(requested)
    return ["none"]


def from_schema(op, dtype: str, *, max_numel: int = DEFAULT_MAX_NUMEL, reference=None) -> memo.SearchStrategy[Case]:
    """Cases for `op` in the cell `dtype` (a dtype name, or "none"), at most `max_numel` elements each.
    `reference(op, name)`: the op's independent float64 function, or None (generators.op_ranges).

    Raises `Untestable` when no case can be generated; the reason says why.
    """
    if max_numel < 1:
        raise ValueError("max_numel must be positive")
    if dtype != "none" and dtype not in DTYPE_NAMES and dtype not in ("complex128", "uint16", "uint32", "uint64"):
        raise ValueError(f"unknown dtype cell {dtype!r}")
    rules = getattr(op, "rules", None)
    if rules is not None and rules.untestable:
        raise Untestable(rules.untestable)
    quantized_cell(op, dtype)
    if (
        rules is not None
        and rules.hints.get("cells") == "floating"
        and dtype not in ("float32", "float64", "float16", "bfloat16")
    ):
        raise Untestable(f"takes floating tensors only: {rules.hints.get('cells_reason', 'a floating-only kernel')}")
    builder = families.builder_for(op)
    # check every argument type up front, so Untestable is raised here and not mid-draw
    for arg in op.arguments:
        if arg.name in getattr(builder, "provides", ()):
            continue
        problem = argtypes.builtin_unsupported(op, arg) if argtypes.is_builtin(op) else argtypes.unsupported(arg)
        if problem:
            raise Untestable(problem)
    # most examples after a cell's first are stress cases (generators.strategies.STRESS_VARIANTS)
    op_range = op_range_for(op, dtype, reference)
    return stressed(
        _cases(op, dtype, max_numel, builder),
        tensors=len(op.tensor_args),
        # a unary op with a threshold of its own: a "huge" case's long rows in its range band (beyond
        # sqrt(max) its results are inf or 0 everywhere; near its threshold a vector path that
        # overflows early parts from the scalar tail)
        huge_band=op_range if op_range.startswith(op_ranges.PREFIX) else huge_band_for(op),
        reduces=op.family == "reduction",
        op_range=op_range,
        full_rank=bool(rules is not None and rules.hints.get("full_rank")),
    )


def op_range_for(op, dtype: str, reference=None) -> str:
    """The band of the op's own range its inputs are drawn in: the one opdb/rules/ranges.toml
    names (hint `op_range`; "none": none), else the one computed from its threshold
    (generators.op_ranges) in a floating cell."""
    named = (getattr(op.rules, "hints", None) or {}).get("op_range")
    if named is not None:
        return "" if named == "none" else named
    return op_ranges.computed(op, dtype, reference) if dtype in ("float32", "float64", "float16", "bfloat16") else ""


def quantized_cell(op, cell: str) -> str | None:
    """The quantized dtype that stands for `cell` in an op whose rules hint a quantized input
    (quint8, qint8, qint32 in the uint8, int8, int32 cells: the integer storage they share);
    None for other ops. Raises Untestable in the other cells."""
    rules = getattr(op, "rules", None)
    if rules is None or not rules.hints.get("quantized"):
        return None
    for qdtype, storage in QUANTIZED_STORAGE.items():
        if storage == cell:
            return qdtype
    raise Untestable(
        f"takes a quantized tensor: the {cell} cell has none (quint8, qint8 and qint32 are tested in the uint8, int8 and int32 cells)"
    )


@memo.composite
def _cases(draw, op, cell, max_numel, builder):
    rules = getattr(op, "rules", None)
    ctx = Context(
        op=op,
        dtype=quantized_cell(op, cell) or ("float32" if cell == "none" else cell),
        cell=cell,
        max_numel=max_numel,
        draw=draw,
        values=(rules.domain if rules is not None else "real") or "real",
        hints=dict(rules.hints) if rules is not None else {},
    )
    n_tensors = (
        sum(
            3 if argtypes.normalize(a.type).startswith("Tensor") and "[]" in a.type else 1
            for a in op.arguments
            if a.is_tensor_like
        )
        or 1
    )
    ctx.per_tensor = max(1, max_numel // n_tensors)
    ctx.shape = draw(shapes(max_dims=4, max_side=5, max_numel=ctx.per_tensor), label="shape")
    if ctx.hints.get("layout") in ("sparse_csr", "sparse_csc") and ctx.rank != 2:
        # compressed layouts are (batches of) matrices
        ctx.shape = draw(shapes(min_dims=2, max_dims=2, max_side=5, max_numel=ctx.per_tensor), label="matrix shape")
    if ctx.hints.get("quantized") == "per_channel" and ctx.rank == 0:
        # per-channel quantization needs an axis
        ctx.shape = draw(
            shapes(min_dims=1, max_dims=4, max_side=5, max_numel=ctx.per_tensor), label="shape with channels"
        )
    n_list = draw(memo.integers(1, 3), label="list_len")
    first = next((a for a in op.arguments if a.is_tensor_like and not a.is_out), None)
    if first is not None and first.name in ctx.hints.get("zero_dim", ()):
        ctx.shape = ()  # the op takes its first tensor as one number (opdb/rules/shapes.toml)
    ctx.list_shapes = [ctx.shape] * n_list
    along = ctx.hints.get("concat_dim")
    if along and ctx.rank >= 1 and n_list >= 2:
        # members joined along a dimension differ in size there (opdb hint concat_dim): the
        # common size first (the simplest), then half of it, one, or none
        d = draw(memo.integers(0, ctx.rank - 1), label="concat dim")
        n0 = ctx.shape[d]
        sizes = [
            draw(memo.sampled_from((n0, max(1, n0 // 2), 1, 0)), label=f"size along dim {i}") for i in range(n_list)
        ]
        ctx.list_shapes = [ctx.shape[:d] + (n,) + ctx.shape[d + 1 :] for n in sizes]
        ctx.fixed[along] = d - ctx.rank if draw(memo.booleans(), label="concat dim from the end") else d
    # an internal op with a known caller takes what the caller passes it (generators.capture)
    if not (ctx.hints.get("caller") and capture.from_caller(ctx, _cases)) and builder is not None:
        builder(ctx)
    deferred = backward.deferred_args(op) if backward.is_backward(op) else ()
    values: dict = {}
    for arg in [a for a in op.arguments if a.name not in deferred] + [a for a in op.arguments if a.name in deferred]:
        if arg.name in ctx.fixed:
            value = ctx.fixed[arg.name]
        elif arg.name in deferred:
            value = backward.draw_deferred(arg, ctx)
        elif arg.is_out:
            if "out dtypes" not in ctx.hints:
                results = backward.out_results(op, ctx.drawn) or []
                ctx.hints["out dtypes"] = [r and r[0] for r in results]
                ctx.hints["out results"] = results
            value = argtypes.out_values(arg, ctx)
        else:
            value = argtypes.draw_arg(arg, ctx)
        value = contracts.within_contract(arg.name, value, ctx)
        values[arg.name] = value
        if value is not OMIT:
            ctx.drawn[arg.name] = value
    values = contracts.produce(values, ctx)
    args: list = []
    kwargs: dict = {}
    positional_open = True
    for arg in op.arguments:
        value = values[arg.name]
        if value is OMIT:
            if not arg.kwarg_only:
                positional_open = False
            continue
        if arg.kwarg_only or arg.is_out or not positional_open:
            kwargs[arg.name] = value
        else:
            args.append(value)
    # a vararg builtin's extra positional values ("einsum.sublist(Tensor a, ...)"), from its builder
    args.extend(ctx.fixed.get(VARARGS, ()))
    seed = draw(memo.integers(0, 2**31 - 1), label="seed")
    case = Case(op=op.qualname, args=tuple(args), kwargs=kwargs, seed=seed)
    return _enforce_cap(case, max_numel)


def _enforce_cap(case: Case, max_numel: int) -> Case:
    """Family builders size tensors from their own rules; a last guard keeps the element cap."""
    total = sum(t.numel for t in case.tensor_specs())
    if total <= max_numel:
        return case
    from hypothesis import reject

    reject()
