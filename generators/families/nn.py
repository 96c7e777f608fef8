"""Neural-network layers: embedding bags, recurrent networks, losses, attention, packed sequences."""

from __future__ import annotations

from generators import memo
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.tables import symbolic
from generators.strategies import draw_tensor


@family("embedding_bag", "embedding_bag_forward_only")
def embedding_bag(ctx):
    """One to three bags, at sorted offsets from 0 (empty bags too). With include_last_offset
    (drawn where the op takes it, with two offsets or more: a lone offset [0] with it and
    per-sample weights crash the CPU kernel, torch 2.13, instead of raising) the last offset ends
    the last bag: the indices' count, or before it, where the indices after it belong to no bag
    (the sum mode leaves them out, mean and max take them: pytorch#191965)."""
    symbolic(ctx, {"weight": "v d", "indices": "b:indexv", "per_sample_weights": "?b"})
    n = ctx.fixed["indices"].shape[0] if isinstance(ctx.fixed.get("indices"), TensorSpec) else 0
    bags = ctx.draw(memo.integers(1, 3), label="bags")
    offsets = [0, *sorted(ctx.draw(memo.integers(0, n), label=f"offset {i}") for i in range(bags - 1))]
    last = "include_last_offset" in _arg_names(ctx) and ctx.draw(memo.booleans(), label="include_last_offset")
    if last:
        offsets.append(n - ctx.draw(memo.integers(0, min(1, n - offsets[-1])), label="trailing indices"))
    ctx.fixed["offsets"] = _ints(offsets)
    if "include_last_offset" in _arg_names(ctx):
        ctx.fixed["include_last_offset"] = last
    if "mode" in _arg_names(ctx):
        ctx.fixed["mode"] = (
            0 if ctx.fixed.get("per_sample_weights") is not None else ctx.draw(memo.integers(0, 2), label="mode")
        )


def _ints(values) -> TensorSpec:
    return TensorSpec(shape=(len(values),), dtype="int64", data=tuple(values))


@family(
    "embedding_bag_backward",
    "embedding_bag_dense_backward",
    "embedding_bag_sparse_backward",
    "embedding_bag_per_sample_weights_backward",
)
def embedding_bag_backward(ctx):
    """What _embedding_bag's derivative passes (derivatives.yaml): the forward's indices and offsets,
    its results offset2bag, bag_size and maximum_indices, num_weights = weight.size(0), and a
    gradient of one row per bag. offset2bag is the full map of each index to its bag, as
    _embedding_bag_backward rebuilds it (make_offset2bag, EmbeddingBag.cpp) before it calls the
    dense and sparse kernels (the sum mode's forward leaves it empty); per-sample weights go with
    the sum mode only ("per_sample_weights only supported for mode='sum'")."""
    import torch

    names = _arg_names(ctx)
    rows, width, n, bags = (ctx.draw(memo.integers(1, 4), label=x) for x in ("num_weights", "width", "indices", "bags"))
    cuts = sorted(ctx.draw(memo.integers(0, n), label=f"offset {i}") for i in range(bags - 1))
    offsets = [0, *cuts]
    indices = [ctx.draw(memo.integers(0, rows - 1), label=f"index {i}") for i in range(n)]
    mode = 0 if "weight" in names else ctx.draw(memo.integers(0, 2), label="mode")
    padding_idx = ctx.draw(memo.integers(-1, rows - 1), label="padding_idx")
    psw = None
    if "per_sample_weights" in names and mode == 0 and ctx.draw(memo.booleans(), label="per-sample weights"):
        psw = _tensor(ctx, (n,), label="per_sample_weights")
    # the forward in float64 for bag_size and maximum_indices (the max mode's argmax rows)
    fwd_weight = torch.arange(rows * width, dtype=torch.float64).reshape(rows, width).remainder(3)
    _, _, bag_size, max_indices = torch.ops.aten._embedding_bag(
        fwd_weight,
        torch.tensor(indices),
        torch.tensor(offsets),
        False,
        mode,
        False,
        None if psw is None else torch.ones(n, dtype=torch.float64),
        False,
        padding_idx,
    )
    offset2bag = [sum(o <= i for o in offsets) - 1 for i in range(n)]
    ctx.shape = (bags, width)
    ctx.fixed["grad"] = _tensor(ctx, ctx.shape, label="grad")
    if "weight" in names:
        ctx.fixed["weight"] = _tensor(ctx, (rows, width), label="weight")
    ctx.fixed.update(indices=_ints(indices), offset2bag=_ints(offset2bag), mode=mode, padding_idx=padding_idx)
    ctx.fixed["bag_size"] = _ints(bag_size.tolist())
    ctx.fixed["maximum_indices"] = TensorSpec(
        shape=tuple(max_indices.shape), dtype="int64", data=tuple(max_indices.flatten().tolist())
    )
    if "offsets" in names:
        ctx.fixed["offsets"] = _ints(offsets)
    if "num_weights" in names:
        ctx.fixed["num_weights"] = rows
    if "per_sample_weights" in names:
        ctx.fixed["per_sample_weights"] = psw
    sparse = "sparse" in ctx.op.base_name or ("sparse" in names and ctx.draw(memo.booleans(), label="sparse"))
    if "sparse" in names:
        ctx.fixed["sparse"] = sparse
    # "embedding_backward: scale_grad_by_freq not supported with sparse gradients"
    ctx.fixed["scale_grad_by_freq"] = not sparse and ctx.draw(memo.booleans(), label="scale_grad_by_freq")


# -- recurrent networks ----------------------------------------------------------------------------

_GATES = {"gru": 3, "lstm": 4, "rnn_tanh": 1, "rnn_relu": 1}


@family("gru", "lstm", "rnn_tanh", "rnn_relu")
def recurrent(ctx):
    """A whole network: input (T, N, I) (batch first: (N, T, I)) or packed data with decreasing
    batch sizes; hidden state (layers * directions, N, H), two of them for an LSTM; and the flat
    parameter list PyTorch's modules pass: per layer and direction w_ih, w_hh[, b_ih, b_hh]."""
    names = _arg_names(ctx)
    base = ctx.op.base_name
    gates = _GATES[base]
    layers = ctx.draw(memo.integers(1, 2), label="num_layers")
    bidirectional = ctx.draw(memo.booleans(), label="bidirectional")
    has_biases = ctx.draw(memo.booleans(), label="has_biases")
    dirs = 2 if bidirectional else 1
    n = ctx.draw(memo.integers(1, 3), label="batch")
    t = ctx.draw(memo.integers(1, 3), label="steps")
    i = ctx.draw(memo.integers(1, 3), label="input size")
    h = ctx.draw(memo.integers(1, 3), label="hidden size")
    if "batch_sizes" in names:
        # packed: step s holds the sequences longer than s, in decreasing order of length
        sizes = _batch_sizes(ctx, n, t)
        ctx.shape = (sum(sizes), i)
        ctx.fixed["data"] = _tensor(ctx, ctx.shape, label="data")
    else:
        batch_first = ctx.draw(memo.booleans(), label="batch_first")
        ctx.fixed["batch_first"] = batch_first
        ctx.shape = (n, t, i) if batch_first else (t, n, i)
        ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    hidden = (layers * dirs, n, h)
    ctx.fixed["hx"] = (
        [_tensor(ctx, hidden, label="h0"), _tensor(ctx, hidden, label="c0")]
        if base == "lstm"
        else _tensor(ctx, hidden, label="hx")
    )
    params = []
    for layer in range(layers):
        width = i if layer == 0 else h * dirs
        for d in range(dirs):
            where = f"layer {layer} direction {d}"
            params += [
                _tensor(ctx, (gates * h, width), label=f"w_ih {where}"),
                _tensor(ctx, (gates * h, h), label=f"w_hh {where}"),
            ]
            if has_biases:
                params += [
                    _tensor(ctx, (gates * h,), label=f"b_ih {where}"),
                    _tensor(ctx, (gates * h,), label=f"b_hh {where}"),
                ]
    ctx.fixed.update(params=params, has_biases=has_biases, num_layers=layers, dropout=0.0, bidirectional=bidirectional)
    ctx.fixed["train"] = ctx.draw(memo.booleans(), label="train")  # no dropout: the same either way


@family("lstm_cell")
def lstm_cell(ctx):
    symbolic(ctx, {"input": "n i", "w_ih": "4h i", "w_hh": "4h h", "b_ih": "?4h", "b_hh": "?4h"})
    n, h = ctx.shape[0], ctx.fixed["w_hh"].shape[1]
    ctx.fixed["hx"] = [_tensor(ctx, (n, h), label="h0"), _tensor(ctx, (n, h), label="c0")]


# -- losses ----------------------------------------------------------------------------------------


@family("ctc_loss")
def ctc_loss(ctx):
    """log_probs (T, N, C); padded targets (N, S) of classes other than the blank; input lengths
    up to T and target lengths up to S, as int lists or int64 tensors."""
    names = {a.name: a for a in ctx.op.arguments}
    t = ctx.draw(memo.integers(1, 6), label="input length")
    n = ctx.draw(memo.integers(1, 3), label="batch")
    c = ctx.draw(memo.integers(2, 5), label="classes")
    s = ctx.draw(memo.integers(1, 4), label="target length")
    blank = ctx.draw(memo.integers(0, c - 1), label="blank")
    ctx.shape = (t, n, c)
    ctx.fixed["log_probs"] = _tensor(ctx, ctx.shape, label="log_probs")
    # classes drawn from [0, c - 1) and shifted past the blank
    targets = [ctx.draw(memo.integers(0, c - 2), label=f"target[{j}]") for j in range(n * s)]
    targets = tuple(x + (x >= blank) for x in targets)
    ctx.fixed["targets"] = TensorSpec(shape=(n, s), dtype="int64", data=targets)
    if ctx.op.base_name.startswith("_"):
        # _ctc_loss returns log_alpha (its backward takes it), which the CPU kernel leaves
        # uninitialized past each sequence's lengths: full, equal lengths define all of it
        target_length = ctx.draw(memo.integers(0, min(s, t)), label="target_lengths")
        lengths = {"input_lengths": [t] * n, "target_lengths": [target_length] * n}
    else:
        lengths = {
            "input_lengths": [ctx.draw(memo.integers(1, t), label=f"input_lengths[{j}]") for j in range(n)],
            "target_lengths": [ctx.draw(memo.integers(0, min(s, t)), label=f"target_lengths[{j}]") for j in range(n)],
        }
    for name, values in lengths.items():
        tensor = names[name].type.startswith("Tensor")
        ctx.fixed[name] = TensorSpec(shape=(n,), dtype="int64", data=tuple(values)) if tensor else values
    ctx.fixed["blank"] = blank


@family("affine_grid_generator")
def affine_grid(ctx):
    """theta (N, 2, 3) for a 2-d grid of size (N, C, H, W), (N, 3, 4) for a 3-d one."""
    d = ctx.draw(memo.integers(2, 3), label="spatial dims")
    n = ctx.draw(memo.integers(1, 2), label="batch")
    size = [n, ctx.draw(memo.integers(1, 2), label="channels")] + [
        ctx.draw(memo.integers(1, 4), label=f"size[{i}]") for i in range(d)
    ]
    ctx.fixed["size"] = size
    ctx.shape = (n, d, d + 1)
    # the backward takes no theta; its gradient's shape comes from running the forward on it
    ctx.fixed["theta"] = _tensor(ctx, ctx.shape, label="theta")


@family("col2im")
def col2im(ctx):
    """Columns (N, C * prod(kernel), blocks) where blocks is the number of sliding windows that
    fit the output with the drawn kernel, dilation, padding and stride."""
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 2), label="channels")
    k = [ctx.draw(memo.integers(1, 3), label=f"kernel[{i}]") for i in range(2)]
    dilation = [ctx.draw(memo.integers(1, 2), label=f"dilation[{i}]") for i in range(2)]
    padding = [ctx.draw(memo.integers(0, 1), label=f"padding[{i}]") for i in range(2)]
    stride = [ctx.draw(memo.integers(1, 2), label=f"stride[{i}]") for i in range(2)]
    out = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(memo.integers(0, 3), label=f"extent[{i}]") for i in range(2)]
    blocks = 1
    for i in range(2):
        blocks *= (out[i] + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1
    unbatched = ctx.draw(memo.integers(0, 3), label="unbatched") == 0
    ctx.shape = (c * k[0] * k[1], blocks) if unbatched else (n, c * k[0] * k[1], blocks)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed.update(output_size=out, kernel_size=k, dilation=dilation, padding=padding, stride=stride)


@family("im2col")
def im2col(ctx):
    """An (N, C, H, W) or (C, H, W) image at least as large as the dilated kernel, with 2-d
    kernel, dilation, padding and stride."""
    k = [ctx.draw(memo.integers(1, 3), label=f"kernel[{i}]") for i in range(2)]
    dilation = [ctx.draw(memo.integers(1, 2), label=f"dilation[{i}]") for i in range(2)]
    extent = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(memo.integers(0, 3), label=f"extent[{i}]") for i in range(2)]
    lead = [ctx.draw(memo.integers(1, 2), label="channels")]
    if ctx.draw(memo.booleans(), label="batched"):
        lead.insert(0, ctx.draw(memo.integers(1, 2), label="batch"))
    ctx.shape = (*lead, *extent)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    padding = [ctx.draw(memo.integers(0, 1), label=f"padding[{i}]") for i in range(2)]
    stride = [ctx.draw(memo.integers(1, 2), label=f"stride[{i}]") for i in range(2)]
    ctx.fixed.update(kernel_size=k, dilation=dilation, padding=padding, stride=stride)


def _batch_sizes(ctx, n: int, t: int) -> list[int]:
    """A packed sequence's batch sizes: step s holds the sequences longer than s, in decreasing
    order of length, so the sizes never grow and the first is the batch; set as batch_sizes."""
    sizes = sorted((ctx.draw(memo.integers(1, n), label=f"batch_sizes[{s}]") for s in range(t)), reverse=True)
    sizes[0] = n
    ctx.fixed["batch_sizes"] = TensorSpec(shape=(t,), dtype="int64", data=tuple(sizes))
    return sizes


@family("pad_packed_sequence", "pack_padded_sequence_backward")
def packed_sequence(ctx):
    """Packed data (sum(batch_sizes), *features) with valid batch sizes; the padded size."""
    n = ctx.draw(memo.integers(1, 3), label="batch")
    t = ctx.draw(memo.integers(1, 3), label="steps")
    features = tuple(ctx.draw(memo.lists(memo.integers(1, 3), max_size=2), label="features"))
    sizes = _batch_sizes(ctx, n, t)
    ctx.shape = (sum(sizes), *features)
    batch_first = ctx.draw(memo.booleans(), label="batch_first")
    ctx.fixed["batch_first"] = batch_first
    names = _arg_names(ctx)
    data = "data" if "data" in names else "grad"
    ctx.fixed[data] = _tensor(ctx, ctx.shape, label=data)
    if "total_length" in names:
        ctx.fixed["total_length"] = t + ctx.draw(memo.integers(0, 1), label="extra length")
    if "input_size" in names:
        ctx.fixed["input_size"] = [n, t, *features] if batch_first else [t, n, *features]


@family(
    "scaled_dot_product_attention", "scaled_dot_product_attention_math", "scaled_dot_product_flash_attention_for_cpu"
)
def attention(ctx):
    """query (B, H, L, E), key (B, H, S, E), value (B, H, S, E); no dropout, no mask. The public
    op drawn apart had tensors under 2 dims or of unequal embeddings ("Expected query, key, and
    value to all be at least 2 dimensional", attention.cpp's validate_sdpa_input)."""
    b, h = ctx.draw(memo.integers(1, 2), label="batch"), ctx.draw(memo.integers(1, 2), label="heads")
    length, source, e = (
        ctx.draw(memo.integers(1, 4), label=x) for x in ("target length", "source length", "embedding")
    )
    ctx.shape = (b, h, length, e)
    ctx.fixed["query"] = _tensor(ctx, ctx.shape, label="query")
    ctx.fixed["key"] = _tensor(ctx, (b, h, source, e), label="key")
    ctx.fixed["value"] = _tensor(ctx, (b, h, source, e), label="value")
    ctx.fixed.update(dropout_p=0.0, attn_mask=None)
    names = _arg_names(ctx)
    for name in ("dropout_mask",):
        if name in names:
            ctx.fixed[name] = None
    if "enable_gqa" in names:
        ctx.fixed["enable_gqa"] = False


@family("native_multi_head_attention")
def native_multi_head_attention(ctx):
    """query, key, value (B, L, E) with E divisible by the head count; packed in-projection
    weights (3E, E) and bias (3E,), out-projection (E, E) and (E,); no mask."""
    b, length = ctx.draw(memo.integers(1, 2), label="batch"), ctx.draw(memo.integers(1, 3), label="length")
    heads = ctx.draw(memo.integers(1, 2), label="num_head")
    e = heads * ctx.draw(memo.integers(1, 2), label="head dim")
    ctx.shape = (b, length, e)
    self_attention = ctx.draw(memo.booleans(), label="self attention")
    query = _tensor(ctx, ctx.shape, label="query")
    ctx.fixed["query"] = query
    for name in ("key", "value"):
        ctx.fixed[name] = query if self_attention else _tensor(ctx, ctx.shape, label=name)
    ctx.fixed.update(embed_dim=e, num_head=heads, mask=None, mask_type=None)
    ctx.fixed["qkv_weight"] = _tensor(ctx, (3 * e, e), label="qkv_weight")
    ctx.fixed["qkv_bias"] = _tensor(ctx, (3 * e,), label="qkv_bias")
    ctx.fixed["proj_weight"] = _tensor(ctx, (e, e), label="proj_weight")
    ctx.fixed["proj_bias"] = _tensor(ctx, (e,), label="proj_bias")


@family("glu_jvp")
def glu_jvp(ctx):
    """glu's result (n, k) and its input and tangent (n, 2k): halved along dim 1."""
    symbolic(ctx, {"glu": "n k", "x": "n 2k", "dx": "n 2k"})
    ctx.fixed["dim"] = 1


@family("no_grad_embedding_renorm", "embedding_renorm")
def embedding_renorm(ctx):
    """Rows of an embedding, indices into them, a positive max norm and a p-norm order, as
    F.embedding passes them (torch/nn/functional.py); embedding_renorm names them self and
    indices (Embedding.cpp's embedding_renorm_: an index past the rows is "select(): index out
    of range", which made its cells valid by luck)."""
    rows, width, n = (ctx.draw(memo.integers(1, 4), label=x) for x in ("rows", "width", "indices"))
    symbolic(ctx, {"weight": f"{rows} {width}", "self": f"{rows} {width}"})
    index = "indices" if "indices" in _arg_names(ctx) else "input"
    # in range, always (draw_index sometimes steps outside on purpose: an error case, not a renorm)
    ctx.fixed[index] = draw_tensor(
        ctx.draw, dtype="int64", shape=(n,), values="index", low=0, high=rows, layout="contiguous", label=index
    )
    ctx.fixed["max_norm"] = ctx.draw(memo.sampled_from((0.5, 1.0, 2.0)), label="max_norm")
    ctx.fixed["norm_type"] = ctx.draw(memo.sampled_from((1.0, 2.0, 3.0)), label="norm_type")


@family("glu")
def glu(ctx):
    """glu halves its input along dim, which must be even ("Halving dimension must be even",
    GatedLinearUnit.cpp); glu_backward's gradient and glu_backward_jvp's grad_glu and dgrad_glu
    are glu's result, half as long there (Activation.cpp's glu_backward_jvp narrows the others)."""
    symbolic(
        ctx,
        {
            "self": "n 2k",
            "grad_output": "n k",
            "grad_x": "n 2k",
            "grad_glu": "n k",
            "x": "n 2k",
            "dgrad_glu": "n k",
            "dx": "n 2k",
        },
    )
    ctx.fixed["dim"] = ctx.draw(memo.sampled_from((1, -1)), label="dim")


@family("multi_margin_loss")
def multi_margin_loss(ctx):
    """Scores (n, c), a class per row, a weight per class, and a p of 1 or 2 ("only p == 1 and
    p == 2 supported", LossMultiMargin.cpp's multi_margin_loss_shape_check): any other p was
    rejected, so the backward's cells were valid by luck."""
    symbolic(ctx, {"self": "n c", "target": "n:indexc", "weight": "?c"})
    if "p" in _arg_names(ctx):
        ctx.fixed["p"] = ctx.draw(memo.sampled_from((1, 2)), label="p")
    if "backward" in ctx.op.base_name:
        # in range, always: the forward's cells keep draw_index's deliberate out-of-range target
        n, c = ctx.fixed["self"].shape
        ctx.fixed["target"] = draw_tensor(
            ctx.draw, dtype="int64", shape=(n,), values="index", low=0, high=c, layout="contiguous", label="target"
        )


@family("embedding_sparse_backward")
def embedding_sparse_backward(ctx):
    """A gradient of the embedding's result, shaped indices.shape + (d,), indices below
    num_weights, a padding_idx among them or -1, and no scale_grad_by_freq ("embedding_backward:
    scale_grad_by_freq not supported with sparse gradients", Embedding.cpp's
    embedding_sparse_backward)."""
    rows, width, n = (ctx.draw(memo.integers(1, 4), label=x) for x in ("rows", "width", "indices"))
    ctx.fixed["indices"] = draw_tensor(
        ctx.draw, dtype="int64", shape=(n,), values="index", low=0, high=rows, layout="contiguous", label="indices"
    )
    ctx.shape = (n, width)
    ctx.fixed["grad"] = _tensor(ctx, ctx.shape, label="grad")
    ctx.fixed["num_weights"] = rows
    ctx.fixed["padding_idx"] = ctx.draw(memo.integers(-1, rows - 1), label="padding_idx")
    ctx.fixed["scale_grad_by_freq"] = False


@family("transformer_encoder_layer_fwd")
def transformer_encoder_layer(ctx):
    """What nn.TransformerEncoderLayer's fast path passes (aten/src/ATen/native/transformers/
    transformer.cpp): src (B, L, E) with E divisible by the head count, the packed in-projection
    (3E, E) and (3E,), the out-projection (E, E) and (E,), layer-norm weights and biases (E,), a
    feed-forward (F, E), (F,), (E, F), (E,); no mask. Drawn apart, the norm weights missed E
    ("Expected weight to be of same shape as normalized_shape"): valid by luck."""
    b, length = ctx.draw(memo.integers(1, 2), label="batch"), ctx.draw(memo.integers(1, 3), label="length")
    heads = ctx.draw(memo.integers(1, 2), label="num_heads")
    e = heads * ctx.draw(memo.integers(1, 2), label="head dim")
    f = ctx.draw(memo.integers(1, 4), label="feed-forward dim")
    ctx.shape = (b, length, e)
    ctx.fixed["src"] = _tensor(ctx, ctx.shape, label="src")
    shapes = {
        "qkv_weight": (3 * e, e),
        "qkv_bias": (3 * e,),
        "proj_weight": (e, e),
        "proj_bias": (e,),
        "norm_weight_1": (e,),
        "norm_bias_1": (e,),
        "norm_weight_2": (e,),
        "norm_bias_2": (e,),
        "ffn_weight_1": (f, e),
        "ffn_bias_1": (f,),
        "ffn_weight_2": (e, f),
        "ffn_bias_2": (e,),
    }
    for name, shape in shapes.items():
        ctx.fixed[name] = _tensor(ctx, shape, label=name)
    ctx.fixed.update(embed_dim=e, num_heads=heads, mask=None, mask_type=None)
    ctx.fixed["eps"] = 1e-5


@family("masked_softmax_backward")
def masked_softmax_backward(ctx):
    """The gradient, the forward's output and a bool mask, all of one shape ("Mask shape should
    match grad shape", aten/src/ATen/native/SoftMax.cpp's masked_softmax_backward_cpu), and a dim
    within it: a mask drawn at a broadcast shape made one case in three valid."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="side"),)
    for name in ("grad_output", "output"):
        ctx.fixed[name] = _tensor(ctx, ctx.shape, label=name)
    ctx.fixed["mask"] = draw_tensor(ctx.draw, dtype="bool", shape=ctx.shape, label="mask")
    ctx.fixed["dim"] = ctx.draw(memo.integers(-ctx.rank, ctx.rank - 1), label="dim")
