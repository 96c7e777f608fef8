"""Internal kernels that only their public op calls, with the arguments that op builds for them.

These kernels do not check their arguments (their one caller already has): drawn freely, their
tensors disagree in shape and the kernel reads or writes out of bounds and kills the process, a
false alarm of conform's own. Each builder draws what the caller passes; the comment names the
PyTorch source of the caller (torch 2.13) and the "audit" helper's standalone check of the crash.
"""

from __future__ import annotations

import itertools

import torch

from generators import memo
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.tables import symbolic, table
from generators.strategies import draw_tensor


def _nonempty(ctx, *, min_dims: int = 1) -> tuple[int, ...]:
    """The main shape with at least `min_dims` dims and no zero-sized dim."""
    shape = tuple(max(1, s) for s in ctx.shape)
    while len(shape) < min_dims:
        shape = (ctx.draw(memo.integers(1, 4), label=f"size {len(shape)}"), *shape)
    ctx.shape = shape
    return shape


def _contiguous(ctx, shape, *, label, dtype=None, values=None):
    return draw_tensor(
        ctx.draw,
        dtype=dtype or ctx.dtype,
        shape=tuple(shape),
        values=values or ctx.values or "real",
        layout="contiguous",
        label=label,
    )


def _ints(values, dtype: str = "int64") -> TensorSpec:
    return TensorSpec(shape=(len(values),), dtype=dtype, data=tuple(values))


@family("cummax_helper", "cummin_helper")
def cumulative_helper(ctx):
    """values and indices of self's shape, dim wrapped: cummax/cummin resize both to self.sizes()
    and call the helper only for a non-empty self of one dim or more (ReduceOps.cpp); with other
    shapes the helper corrupts the heap (audit: `_cummax_helper(randn(65), empty(1), empty(4))`)."""
    shape = _nonempty(ctx)
    ctx.fixed["self"] = _tensor(ctx, shape, label="self")
    ctx.fixed["values"] = _contiguous(ctx, shape, label="values")
    ctx.fixed["indices"] = _contiguous(ctx, shape, dtype="int64", values="index", label="indices")
    ctx.fixed["dim"] = ctx.draw(memo.integers(0, len(shape) - 1), label="dim")


# the gradients of one LSTM / GRU cell step, as autograd passes them (RNN.cpp's
# _thnn_differentiable_*_cell_backward formulas): gates of 4 or 3 hidden sizes per row
table(
    {
        "thnn_differentiable_lstm_cell_backward": {
            "cx": "n h",
            "grad_hy": "n h",
            "grad_cy": "n h",
            "input_gates": "n 4h",
            "hidden_gates": "n 4h",
            "input_bias": "?4h",
            "hidden_bias": "?4h",
            "cy": "n h",
        },
        "thnn_differentiable_gru_cell_backward": {
            "hx": "n h",
            "grad_hy": "n h",
            "input_gates": "n 3h",
            "hidden_gates": "n 3h",
            "input_bias": "?3h",
            "hidden_bias": "?3h",
        },
    }
)


@family("transform_bias_rescale_qkv")
def transform_bias_rescale_qkv(ctx):
    """qkv (B, T, 3*D), qkv_bias (3*D), num_heads dividing D: what native multi-head attention
    (aten/src/ATen/native/transformers/attention.cpp) passes; num_heads = 0 is a SIGFPE, a 4-d or
    empty qkv a crash (audit)."""
    heads, per_head, b, t = (ctx.draw(memo.integers(1, 3), label=x) for x in ("heads", "head dim", "batch", "tokens"))
    d = heads * per_head
    ctx.shape = (b, t, 3 * d)
    ctx.fixed["qkv"] = _tensor(ctx, ctx.shape, label="qkv")
    ctx.fixed["qkv_bias"] = _tensor(ctx, (3 * d,), label="qkv_bias")
    ctx.fixed["num_heads"] = heads


@family("weight_norm", "weight_norm_interface", "weight_norm_interface_backward", "weight_norm_differentiable_backward")
def weight_norm(ctx):
    """g (and the saved norms) of norm_except_dim's shape: v's size at dim, 1 elsewhere, for dim
    0 or the last, the only dims the fused kernel takes (WeightNorm.cpp); a g of another size is
    indexed without a check (audit: `_weight_norm_interface(randn(1426), randn(1), 0)` segfaults)."""
    names = _arg_names(ctx)
    shape = _nonempty(ctx)
    dim = ctx.draw(memo.sampled_from((0, len(shape) - 1)), label="dim")
    g_shape = tuple(s if i == dim else 1 for i, s in enumerate(shape))
    ctx.fixed["dim"] = dim
    # _weight_norm passes the interface v.contiguous() and g.contiguous(), and the interface
    # allocates its norms with g's strides: an expanded g gives a norm of one element that the
    # kernel writes in full (heap corruption, seen here with an expanded g of 31 elements)
    draw = _tensor if ctx.op.base_name == "_weight_norm" else _contiguous
    for name in ("v", "saved_v"):
        if name in names:
            ctx.fixed[name] = draw(ctx, shape, label=name)
    if "grad_w" in names:
        # the differentiable backward checks "grad_w must be contiguous" (its dim 0 or last too:
        # drawn by the generic path it was valid by luck)
        draw_grad = _contiguous if "differentiable" in ctx.op.base_name else _tensor
        ctx.fixed["grad_w"] = draw_grad(ctx, shape, label="grad_w")
    for name in ("g", "saved_g"):
        if name in names:
            ctx.fixed[name] = draw(ctx, g_shape, label=name)
    if "saved_norms" in names:
        norms = _forward_norms(ctx.fixed["saved_v"], ctx.fixed["saved_g"], dim)
        # a dtype the forward has no kernel for: drawn norms, which the backward rejects the
        # same way (its cell then says "no kernel", not a generator error)
        ctx.fixed["saved_norms"] = norms or _contiguous(ctx, g_shape, values="positive", label="saved_norms")


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _forward_norms(v: TensorSpec, g: TensorSpec, dim: int) -> TensorSpec | None:
    """The norms _weight_norm_interface saves for v (in float for half-precision weights:
    WeightNorm.cpp), as explicit values. Norms drawn apart from v put a subnormal norm under a
    column of norm 3.9, and the backward, which rounds them to g's dtype by definition, divided by
    zero where golden did not (sweep seed 17: grad_g inf, grad_v -inf)."""
    try:
        with torch.no_grad():
            norms = torch.ops.aten._weight_norm_interface(v.materialize(_same), g.materialize(_same), dim)[1]
    except (RuntimeError, NotImplementedError):  # no kernel for the dtype
        return None
    return TensorSpec(
        shape=tuple(norms.shape), dtype=str(norms.dtype).removeprefix("torch."), data=tuple(norms.flatten().tolist())
    )


@family("segment_reduce", "segment_reduce_backward")
def segment_reduce(ctx):
    """Lengths of the segments along axis 0, non-negative and summing to data's size there
    (SegmentReduce.cpp checks that only when unsafe=False; with lengths that disagree the kernel
    reads past data: audit); the backward's grad and output have one row per segment."""
    names = _arg_names(ctx)
    shape = _nonempty(ctx)
    n = ctx.draw(memo.integers(1, 3), label="segments")
    cuts = sorted(ctx.draw(memo.integers(0, shape[0]), label=f"cut {i}") for i in range(n - 1))
    bounds = [0, *cuts, shape[0]]
    lengths = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    ctx.fixed["data"] = _tensor(ctx, shape, label="data")
    ctx.fixed["lengths"] = _ints(lengths)
    ctx.fixed["axis"] = 0
    for name in ("indices", "offsets"):
        if name in names:
            ctx.fixed[name] = None
    if "unsafe" in names:
        ctx.fixed["unsafe"] = False
    if "reduce" in names:
        ctx.fixed["reduce"] = ctx.draw(memo.sampled_from(("sum", "mean", "max", "min", "prod")), label="reduce")
    for name in ("grad", "output"):
        if name in names:
            ctx.fixed[name] = _tensor(ctx, (n, *shape[1:]), label=name)


@family("embedding_dense_backward", "embedding_backward")
def embedding_dense_backward(ctx):
    """indices below num_weights (or equal to padding_idx): embedding's backward
    (Embedding.cpp) gets the weight's row count; a larger index writes past the gradient
    (audit: `embedding_dense_backward.out(randn(4,2), tensor([0,5,1,2]), 3, ...)` segfaults, and
    so does embedding_backward, which dispatches to it: sweep seeds 13 and 14 died drawing it)."""
    rows, width, n = (ctx.draw(memo.integers(1, 4), label=x) for x in ("num_weights", "width", "indices"))
    symbolic(ctx, {"grad_output": f"{n} {width}", "grad": f"{n} {width}"})
    if "sparse" in _arg_names(ctx):
        # "embedding_backward: scale_grad_by_freq not supported with sparse gradients"
        sparse = ctx.draw(memo.booleans(), label="sparse")
        ctx.fixed["sparse"] = sparse
        ctx.fixed["scale_grad_by_freq"] = not sparse and ctx.draw(memo.booleans(), label="scale_grad_by_freq")
    ctx.fixed["indices"] = draw_tensor(
        ctx.draw, dtype="int64", shape=(n,), values="index", low=0, high=rows, layout="contiguous", label="indices"
    )
    ctx.fixed["num_weights"] = rows
    ctx.fixed["padding_idx"] = ctx.draw(memo.integers(-1, rows - 1), label="padding_idx")


@family("chunk_cat")
def chunk_cat(ctx):
    """Tensors of one or more dims and a dim valid for them (torch.distributed's FSDP calls it so;
    a 0-d tensor segfaults: audit)."""
    shape = _nonempty(ctx)
    ctx.list_shapes = [shape] * len(ctx.list_shapes)
    ctx.fixed["dim"] = ctx.draw(memo.integers(-len(shape), len(shape) - 1), label="dim")
    ctx.fixed["num_chunks"] = ctx.draw(memo.integers(1, 3), label="num_chunks")


@family("nested_compute_contiguous_strides_offsets")
def nested_sizes(ctx):
    """A nested tensor's sizes: one row of positive sizes per component, one or more of each (an
    empty one segfaults: audit)."""
    n, d = (ctx.draw(memo.integers(1, 3), label=x) for x in ("components", "dims"))
    sizes = [ctx.draw(memo.integers(1, 4), label=f"size {i}") for i in range(n * d)]
    ctx.fixed["nested_size"] = TensorSpec(shape=(n, d), dtype="int64", data=tuple(sizes))


@family("convert_indices_from_coo_to_csr")
def coo_to_csr_indices(ctx):
    """Sorted row indices in [0, size) of a 1-d tensor, as a COO tensor's first index row is
    (SparseCsrTensor.cpp's callers); a 0-d input aborts (audit)."""
    size = ctx.draw(memo.integers(0, 4), label="size")
    n = ctx.draw(memo.integers(0, 5), label="nnz") if size else 0
    rows = sorted(ctx.draw(memo.integers(0, size - 1), label=f"row {i}") for i in range(n))
    ctx.shape = (n,)
    ctx.fixed["self"] = _ints(rows, ctx.dtype if ctx.dtype in ("int32", "int64") else "int64")
    ctx.fixed["size"] = size


@family("convert_indices_from_csr_to_coo")
def csr_to_coo_indices(ctx):
    """A CSR matrix's crow_indices (from 0, non-decreasing, ending at nnz) and col_indices (nnz
    of them); other ones segfault (audit: `crow=[0,5,2], col=[0,1,2,3]`)."""
    rows, cols = (ctx.draw(memo.integers(0, 3), label=x) for x in ("rows", "cols"))
    per_row = [ctx.draw(memo.integers(0, cols), label=f"row {i} nnz") for i in range(rows)]
    crow = [0]
    for k in per_row:
        crow.append(crow[-1] + k)
    col = [c for k in per_row for c in sorted(ctx.draw(memo.permutations(range(cols)), label="cols")[:k])]
    dtype = ctx.dtype if ctx.dtype in ("int32", "int64") else "int64"
    ctx.shape = (len(crow),)
    ctx.fixed["crow_indices"] = _ints(crow, dtype)
    ctx.fixed["col_indices"] = _ints(col, dtype)


@family("mkldnn_rnn_layer")
def mkldnn_rnn_layer(ctx):
    """One unidirectional LSTM layer as aten/src/ATen/native/mkldnn/RNN.cpp calls it: input (T, B, I), weights
    (4H, I), (4H, H) and biases (4H), hx and cx (B, H), mode 2 (LSTM, the only mode it takes),
    hidden_size H, one layer, no packed batch sizes; other sizes crash the kernel (audit)."""
    t, b, i, h = (ctx.draw(memo.integers(1, 3), label=x) for x in ("steps", "batch", "input size", "hidden size"))
    # time-major input and batch_first=False: with batch_first and a (B, T, I) input the kernel
    # corrupts the heap here (seen with T=3, B=1), and the LSTM path gives it time-major input
    batch_first = False
    ctx.shape = (t, b, i)
    # contiguous, as the caller makes them: a transposed or expanded one corrupts the heap here
    ctx.fixed["input"] = _contiguous(ctx, ctx.shape, label="input")
    for name, shape in (
        ("weight0", (4 * h, i)),
        ("weight1", (4 * h, h)),
        ("weight2", (4 * h,)),
        ("weight3", (4 * h,)),
        ("hx_", (b, h)),
        ("cx_", (b, h)),
    ):
        ctx.fixed[name] = _contiguous(ctx, shape, label=name)
    ctx.fixed.update(
        batch_sizes=[],
        mode=2,
        hidden_size=h,
        num_layers=1,
        has_biases=True,
        bidirectional=False,
        batch_first=batch_first,
    )


@family("rowwise_prune")
def rowwise_prune(ctx):
    """What torch.ao's embedding pruning passes (aten/src/ATen/native/RowwisePrune.cpp): a 2-d
    weight, a 1-d bool mask of one entry per row, and int32 or int64 for the compressed indices
    ("compressed_indices_dtype should be either int(int32) or long(int64)")."""
    rows = ctx.draw(memo.integers(0, 5), label="rows")
    cols = ctx.draw(memo.integers(1, 4), label="cols")
    ctx.shape = (rows, cols)
    ctx.fixed["weight"] = _tensor(ctx, ctx.shape, label="weight")
    ctx.fixed["mask"] = draw_tensor(ctx.draw, dtype="bool", shape=(rows,), label="mask")
    ctx.fixed["compressed_indices_dtype"] = {
        "dtype": ctx.draw(memo.sampled_from(["int32", "int64"]), label="index dtype")
    }


@family("rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise_functional", "rrelu_with_noise_backward")
def rrelu_with_noise(ctx):
    """noise of self's shape: in training the kernel writes one noise value per element of self
    into noise without checking its size (Activation.cpp, _rrelu_with_noise_train), so a smaller
    noise is a heap overflow (sweep seed 13 died drawing rrelu_with_noise_backward: the generator
    runs the forward to size grad_output). noise is written (Tensor(b!)): no expanded layout, whose
    elements share memory (expanded noise and self corrupt the heap)."""
    ctx.fixed["noise"] = _tensor(ctx, ctx.shape, label="noise", writable=True)
