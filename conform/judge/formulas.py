"""Ops as their documentation writes them, in NumPy and float64: losses, activations, pooling,
convolution, selection, linear algebra and normalization.

The independent references of opdb/rules/references.toml name these where no library function
computes the op: each is the documented formula (torch.nn's page of the loss), with every log of
a sigmoid taken as -logaddexp(0, -x) and every exponential of a scaled input kept inside
logaddexp, so that the value stays right where the formula is finite and a naive evaluation is
not: at infinite logits (the loss of a logit of -inf with a target of 0.9 is +inf), and at a
scale (softplus's beta) whose product with the input overflows exp. `indeterminate` gives the
elements where the formula itself is 0 * inf or inf - inf at inputs that hold no NaN: the
reference decides nothing there.

NumPy (and SciPy inside a function): reproduction scripts embed this module's source.
"""

from __future__ import annotations

import numpy


def _reduce(loss, reduction):
    """`loss` reduced as torch's `reduction` enum says: 0 none, 1 mean, 2 sum."""
    if reduction == 0:
        return loss
    return numpy.mean(loss) if reduction == 1 else numpy.sum(loss)


def _weighted(loss, weight):
    return loss if weight is None else weight * loss


def indeterminate(value, *inputs):
    """Where `value` is NaN while no input holds a NaN there (anywhere, for a reduced value):
    0 * inf or inf - inf in the formula, a point that its documentation leaves open."""
    value = numpy.asarray(value)
    nan_in = numpy.zeros(value.shape, dtype=bool)
    for x in inputs:
        if x is None:
            continue
        nan = numpy.isnan(numpy.asarray(x, dtype=numpy.float64))
        try:
            nan_in = nan_in | numpy.broadcast_to(nan, value.shape)
        except ValueError:
            nan_in = nan_in | bool(nan.any())
    return numpy.isnan(value) & ~nan_in


def binary_cross_entropy_with_logits(x, y, weight=None, pos_weight=None, reduction=1):
    """-w [p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))], log sigmoid(x) = -logaddexp(0, -x)."""
    p = 1.0 if pos_weight is None else pos_weight
    loss = p * y * numpy.logaddexp(0.0, -x) + (1.0 - y) * numpy.logaddexp(0.0, x)
    return _reduce(_weighted(loss, weight), reduction)


def binary_cross_entropy(x, y, weight=None, reduction=1):
    """-w [y log x + (1 - y) log(1 - x)], each log clamped at -100 (BCELoss's documented clamp)."""
    loss = -(y * numpy.maximum(numpy.log(x), -100.0) + (1.0 - y) * numpy.maximum(numpy.log1p(-x), -100.0))
    return _reduce(_weighted(loss, weight), reduction)


def soft_margin_loss(x, y, reduction=1):
    """log(1 + exp(-y x)), as logaddexp(0, -y x)."""
    return _reduce(numpy.logaddexp(0.0, -y * x), reduction)


def huber_loss(x, y, reduction=1, delta=1.0):
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta), d = x - y."""
    d = numpy.abs(x - y)
    return _reduce(numpy.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def smooth_l1_loss(x, y, reduction=1, beta=1.0):
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (L1 when beta is 0), d = x - y."""
    d = numpy.abs(x - y)
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(numpy.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


def poisson_nll_loss(x, y, log_input=True, full=False, eps=1e-8, reduction=1):
    """exp(x) - y x for log inputs, else x - y log(x + eps); with `full`, Stirling's term
    y log y - y + 0.5 log(2 pi y) where y > 1."""
    loss = numpy.exp(x) - y * x if log_input else x - y * numpy.log(x + eps)
    if full:
        big = y > 1
        safe = numpy.where(big, y, 2.0)
        loss = loss + numpy.where(big, safe * numpy.log(safe) - safe + 0.5 * numpy.log(2 * numpy.pi * safe), 0.0)
    return _reduce(loss, reduction)


def kl_div(x, y, reduction=1, log_target=False):
    """y (log y - x) with 0 log 0 = 0 (x holds log-probabilities); exp(y) (y - x) for log targets.
    A negative target has no logarithm: NaN, as the documented formula (and torch's xlogy) gives."""
    if log_target:
        loss = numpy.exp(y) * (y - x)
    else:
        logy = numpy.log(numpy.where(y == 0, 1.0, y))
        loss = numpy.where(y == 0, 0.0, y * logy) - y * x
    return _reduce(loss, reduction)


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, as logaddexp(0, beta x) / beta; x itself where beta x exceeds
    the threshold (the documented reversion to the linear function)."""
    bx = beta * x
    return numpy.where(bx > threshold, x, numpy.logaddexp(0.0, bx) / beta)


def i0(x):
    """The modified Bessel function I0 as exp(|x| + log i0e(x)): finite wherever its value is
    (i0(713) is 2.5e307), where exp(|x|) alone overflows past 709.78 (and scipy.special.i0 with it)."""
    import scipy.special  # here: scipy loads in about half a second

    with numpy.errstate(divide="ignore", invalid="ignore"):
        value = numpy.exp(numpy.abs(x) + numpy.log(scipy.special.i0e(x)))
    return numpy.where(numpy.isinf(x), numpy.inf, value)


def i1(x):
    """The modified Bessel function I1 as sign(x) exp(|x| + log |i1e(x)|), as i0."""
    import scipy.special  # here: scipy loads in about half a second

    e = scipy.special.i1e(x)
    with numpy.errstate(divide="ignore", invalid="ignore"):
        value = numpy.sign(e) * numpy.exp(numpy.abs(x) + numpy.log(numpy.abs(e)))
    return numpy.where(numpy.isinf(x), x, numpy.where(e == 0, e, value))


def _axes(x, dim):
    """The axes a reduction over `dim` (None or empty: all) covers, non-negative."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % max(x.ndim, 1) for d in dims) if x.ndim else ()


def softmax(x, dim):
    """exp(x) / sum(exp(x)) over `dim`, with its limit where +inf is among the elements: the +inf
    ones share 1 equally, the others get 0 (x - max is inf - inf there, NaN naively)."""
    x = numpy.asarray(x, dtype=numpy.float64)
    if x.ndim == 0:
        return numpy.where(numpy.isnan(x), numpy.nan, 1.0)
    axes = _axes(x, dim)
    top = numpy.max(x, axis=axes, keepdims=True)
    with numpy.errstate(all="ignore"):
        e = numpy.exp(x - numpy.where(numpy.isfinite(top), top, 0.0))
        plain = e / numpy.sum(e, axis=axes, keepdims=True)
        big = numpy.isposinf(x)
        limit = big / numpy.sum(big, axis=axes, keepdims=True)
    return numpy.where(numpy.any(big, axis=axes, keepdims=True) & ~numpy.isnan(top), limit, plain)


def unreduce(grad, x, dim, keepdim):
    """A reduction's output weights `grad` broadcast back over the reduced axes of `x`."""
    grad = numpy.asarray(grad, dtype=numpy.float64)
    if not keepdim and numpy.ndim(x):
        grad = numpy.expand_dims(grad, _axes(numpy.asarray(x), dim))
    return numpy.broadcast_to(grad, numpy.shape(x))


# -- pooling, as aten/src/ATen/native/Pool.h and its CPU kernels define the windows ----------------


def _per_dim(value, dims: int, default=None) -> list[int]:
    """A pooling argument (an int, or a list of one or `dims` ints; empty: `default`) per dim."""
    if value is None or (not isinstance(value, (int, numpy.integer)) and len(value) == 0):
        return list(default)
    values = [int(value)] if isinstance(value, (int, numpy.integer)) else [int(v) for v in value]
    return values * dims if len(values) == 1 else values


def pooled_size(size: int, kernel: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """Pool.h's pooling_output_shape: the windows that fit, with ceil_mode one more where it
    starts inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, dims: int):
    """The largest element of each window (NaN where the window holds one: the CPU kernels take a
    NaN as the maximum), padding taking no part; ValueError (no opinion) where a window reads
    padding alone."""
    x = numpy.asarray(x)
    k = _per_dim(kernel_size, dims)
    s, p, d = _per_dim(stride, dims, k), _per_dim(padding, dims, [0]), _per_dim(dilation, dims, [1])
    spatial = x.shape[x.ndim - dims :]
    outs = [pooled_size(spatial[i], k[i], p[i], s[i], d[i], ceil_mode) for i in range(dims)]
    result = numpy.zeros(x.shape[: x.ndim - dims] + tuple(outs), dtype=x.dtype)
    for o in numpy.ndindex(*outs):
        reads = [
            [q for q in (o[i] * s[i] - p[i] + j * d[i] for j in range(k[i])) if 0 <= q < spatial[i]]
            for i in range(dims)
        ]
        if not all(reads):
            # a dilated window can read padding alone: the CPU gives its start, -inf, where the op
            # should refuse the arguments (a published bug): no opinion on such a case
            raise ValueError("a window of padding alone")
        window = x[(Ellipsis, *numpy.ix_(*reads))].reshape(x.shape[: x.ndim - dims] + (-1,))
        result[(Ellipsis, *o)] = window.max(axis=-1)
    return result


def avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, dims: int):
    """The mean of each window as the CPU kernel (AvgPoolKernel.cpp) divides it: by the window's
    size up to the padded input's end with count_include_pad, by the input elements it covers
    without, or by divisor_override; a window wholly in the padding is 0. Integer inputs divide
    as C++ does, toward zero."""
    x = numpy.asarray(x)
    k = _per_dim(kernel_size, dims)
    s, p = _per_dim(stride, dims, k), _per_dim(padding, dims, [0])
    spatial = x.shape[x.ndim - dims :]
    outs = [pooled_size(spatial[i], k[i], p[i], s[i], 1, ceil_mode) for i in range(dims)]
    result = numpy.zeros(x.shape[: x.ndim - dims] + tuple(outs), dtype=x.dtype)
    for o in numpy.ndindex(*outs):
        starts = [o[i] * s[i] - p[i] for i in range(dims)]
        ends = [min(starts[i] + k[i], spatial[i] + p[i]) for i in range(dims)]
        padded = int(numpy.prod([ends[i] - starts[i] for i in range(dims)]))
        lo = [max(starts[i], 0) for i in range(dims)]
        hi = [min(ends[i], spatial[i]) for i in range(dims)]
        if any(lo[i] >= hi[i] for i in range(dims)):
            continue
        window = x[(Ellipsis, *(slice(lo[i], hi[i]) for i in range(dims)))].reshape(x.shape[: x.ndim - dims] + (-1,))
        divisor = divisor_override or (padded if count_include_pad else window.shape[-1])
        total = window.sum(axis=-1)
        if numpy.issubdtype(x.dtype, numpy.integer):
            floor = total // divisor  # C++ truncates: one more toward zero where a negative sum leaves a remainder
            result[(Ellipsis, *o)] = floor + ((total < 0) & (total % divisor != 0))
        else:
            result[(Ellipsis, *o)] = total / divisor
    return result


def adaptive_pool(x, output_size, dims: int, how: str):
    """Each output element the mean ("avg") or the largest ("max", NaN first) of its window:
    input positions floor(o * in / out) up to ceil((o + 1) * in / out)."""
    x = numpy.asarray(x)
    spatial = x.shape[x.ndim - dims :]
    outs = _per_dim(output_size, dims)
    result = numpy.zeros(
        x.shape[: x.ndim - dims] + tuple(outs),
        dtype=numpy.result_type(x.dtype, numpy.float64) if how == "avg" else x.dtype,
    )
    for o in numpy.ndindex(*outs):
        window = x[
            (
                Ellipsis,
                *(slice(o[i] * spatial[i] // outs[i], -(-(o[i] + 1) * spatial[i] // outs[i])) for i in range(dims)),
            )
        ].reshape(x.shape[: x.ndim - dims] + (-1,))
        if window.shape[-1]:
            result[(Ellipsis, *o)] = window.mean(axis=-1) if how == "avg" else window.max(axis=-1)
    return result


# -- indexing and selection, as torch's documentation defines them ----------------------------------


def _within(index, size: int):
    """`index` as int64, or ValueError where an entry lies outside [0, size): the kernel refuses
    such an index (and an accepted one is judged elsewhere), numpy would wrap it."""
    index = numpy.asarray(index, dtype=numpy.int64)
    if index.size and (index.min() < 0 or index.max() >= size):
        raise ValueError("an index outside the dim")
    return index


def gather(x, dim, index):
    """out[i][j] = x[index[i][j]][j] (dim 0): index may be shorter than x in the other dims."""
    x = numpy.asarray(x)
    if x.ndim == 0:
        return numpy.broadcast_to(x, numpy.shape(_within(index, 1))).copy()
    dim = dim % x.ndim
    index = _within(index, x.shape[dim])
    part = tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))
    return numpy.take_along_axis(x[part], index, axis=dim)


def scatter_add(x, dim, index, src):
    """x with src[i][j] added at x[index[i][j]][j] (dim 0), repeated indices adding up; src is
    read over index's shape."""
    x, src = numpy.asarray(x), numpy.asarray(src)
    if x.ndim == 0:
        return x + src.reshape(-1)[: numpy.size(_within(index, 1))].sum(dtype=x.dtype)
    dim = dim % x.ndim
    index = _within(index, x.shape[dim])
    where = list(numpy.indices(index.shape, sparse=True))
    where[dim] = index
    out = x.copy()
    numpy.add.at(out, tuple(where), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _inexact(grad) -> bool:
    """A floating or complex gradient: an integer one the kernel sums in its own dtype, wrapping
    by its own rule, where these formulas add exactly."""
    return numpy.asarray(grad).dtype.kind in "fc"


def pool_backward(grad, x, indices, dims: int):
    """The gradient of a max pooling (fixed, adaptive or fractional) at the indices its forward
    returned: each output's gradient added at the input position its index names, the indices
    counting positions in the flattened plane of x's last `dims` dims."""
    if not _inexact(grad):
        return None
    x, grad = numpy.asarray(x), numpy.asarray(grad)
    lead, plane = x.shape[: x.ndim - dims], int(numpy.prod(x.shape[x.ndim - dims :]))
    rows = int(numpy.prod(lead))
    index = _within(numpy.reshape(indices, (rows, -1)), plane)
    out = numpy.zeros((rows, plane), dtype=numpy.result_type(grad.dtype, numpy.float64))
    numpy.add.at(out, (numpy.arange(rows)[:, None], index), grad.reshape(rows, -1))
    return out.reshape(x.shape)


def avg_pool_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, dims: int):
    """The gradient of avg_pool: the adjoint of the linear map `avg_pool` computes, each input
    position receiving each window's gradient over that window's divisor. Built from the forward
    formula applied to every basis image of the plane at once."""
    if not _inexact(grad):
        return None
    x, grad = numpy.asarray(x), numpy.asarray(grad)
    spatial = x.shape[x.ndim - dims :]
    n = int(numpy.prod(spatial))
    basis = numpy.eye(n).reshape((n, *spatial))
    weights = avg_pool(basis, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, dims)
    weights = weights.reshape(n, -1)  # input position -> output position
    g = grad.reshape(grad.shape[: grad.ndim - dims] + (1, -1))
    # a window's gradient reaches only the elements it covers (an inf or NaN gradient elsewhere none)
    with numpy.errstate(invalid="ignore"):
        terms = numpy.where(weights != 0, g * weights, 0)
    return terms.sum(axis=-1).reshape(x.shape)


def value_selecting_backward(grad, dim, indices, sizes, keepdim: bool):
    """The gradient of a reduction that selects one element per slice (max.dim, min.dim,
    kthvalue, mode, median.dim): each slice's gradient at the index it selected, zeros elsewhere."""
    if not _inexact(grad):
        return None
    grad, indices = numpy.asarray(grad), numpy.asarray(indices)
    out = numpy.zeros(tuple(sizes), dtype=numpy.result_type(grad.dtype, numpy.float64))
    if out.ndim == 0:  # a scalar's one element, selected by index 0 (or by none)
        return out + grad.reshape(-1)[0] if _within(indices, 1).size else out
    dim = dim % out.ndim
    if not keepdim:
        grad, indices = numpy.expand_dims(grad, dim), numpy.expand_dims(indices, dim)
    numpy.put_along_axis(out, _within(indices, out.shape[dim]), grad, axis=dim)
    return out


def index_select_backward(grad, sizes, dim, index):
    """The gradient of index_select: the selected slices' gradients added back at their indices,
    repeated indices adding up."""
    if not _inexact(grad):
        return None
    grad = numpy.asarray(grad)
    out = numpy.zeros(tuple(sizes), dtype=numpy.result_type(grad.dtype, numpy.float64))
    if out.ndim == 0:
        return out + grad.reshape(-1).sum()
    dim = dim % out.ndim
    index = _within(numpy.reshape(index, -1), out.shape[dim])
    numpy.add.at(numpy.moveaxis(out, dim, 0), index, numpy.moveaxis(grad, dim, 0))
    return out


def embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq: bool):
    """The gradient of embedding's weight: each looked-up row's gradient added at its index, none
    at padding_idx, each divided by how often its index occurs where scale_grad_by_freq
    (torch.nn.functional.embedding's documentation)."""
    if not _inexact(grad):
        return None
    grad = numpy.asarray(grad)
    index = _within(numpy.reshape(indices, -1), num_weights)
    rows = grad.reshape(index.size, -1).astype(numpy.result_type(grad.dtype, numpy.float64))
    if scale_grad_by_freq:
        counts = numpy.bincount(index, minlength=num_weights)
        rows = rows / counts[index][:, None]
    out = numpy.zeros((num_weights, rows.shape[-1]), dtype=rows.dtype)
    keep = index != padding_idx if padding_idx is not None and padding_idx >= 0 else numpy.ones(index.size, bool)
    numpy.add.at(out, index[keep], rows[keep])
    return out


def masked_select(x, mask):
    """The elements of x where the mask, both broadcast, is true: a vector in row-major order."""
    values, mask = numpy.broadcast_arrays(numpy.asarray(x), numpy.asarray(mask, dtype=bool))
    return values[mask]


def kthvalue(x, k, dim, keepdim):
    """The k-th smallest element along dim (NaN the largest, as torch.sort puts it)."""
    x = numpy.asarray(x)
    if x.ndim == 0:
        return x.copy()
    picked = numpy.take(numpy.sort(x, axis=dim), [k - 1], axis=dim)
    return picked if keepdim else numpy.squeeze(picked, axis=dim)


def median(x, dim, keepdim, ignore_nan: bool):
    """The lower of the two middle elements along dim (torch.median's); NaN where the slice holds
    one, or with ignore_nan (nanmedian) the lower middle of its other elements, NaN if none."""
    x = numpy.asarray(x)
    if x.ndim == 0:
        return x.copy()
    moved = numpy.moveaxis(x, dim, -1)
    out = numpy.empty(moved.shape[:-1], dtype=x.dtype)
    for i in numpy.ndindex(*out.shape):
        row = moved[i]
        nan = numpy.isnan(row) if numpy.issubdtype(x.dtype, numpy.inexact) else numpy.zeros(row.shape, dtype=bool)
        kept = row[~nan] if ignore_nan else row
        if not kept.size or (not ignore_nan and nan.any()):
            out[i] = numpy.nan
        else:
            out[i] = numpy.sort(kept)[(kept.size - 1) // 2]
    return numpy.expand_dims(out, dim) if keepdim else out


def topk(x, k, dim, largest, is_sorted):
    """The k largest (smallest) elements along dim, from the largest (smallest) on; NaN the
    largest, as torch.sort puts it. In no defined order when not sorted: ValueError."""
    if not is_sorted:
        raise ValueError("topk's order is unspecified when not sorted")
    x = numpy.asarray(x)
    if x.ndim == 0:
        return x.copy()
    ordered = numpy.sort(x, axis=dim)
    if largest:
        ordered = numpy.flip(ordered, axis=dim)
    return numpy.take(ordered, range(k), axis=dim)


# -- convolution, as torch.nn.Conv{1,2,3}d and ConvTranspose{1,2,3}d document it ---------------


def _conv_padding(padding, kernel: list[int], dilation: list[int], dims: int) -> list[tuple[int, int]]:
    """(before, after) per spatial dim: "valid" none, "same" dilation * (kernel - 1) split with
    the odd one after (Convolution.cpp's _convolution_mode), numbers on both sides."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * dims
        total = [dilation[i] * (kernel[i] - 1) for i in range(dims)]
        return [(t // 2, t - t // 2) for t in total]
    return [(p, p) for p in _per_dim(padding, dims, [0])]


def _conv_operands(x, weight, stride, dilation, dims: int):
    """x (an unbatched input as a batch of one) and weight as arrays, whether x was unbatched, the
    kernel's spatial size, and stride and dilation per dim."""
    x, weight = numpy.asarray(x), numpy.asarray(weight)
    unbatched = x.ndim == dims + 1
    s, d = _per_dim(stride, dims, [1]), _per_dim(dilation, dims, [1])
    return (x[None] if unbatched else x), weight, unbatched, list(weight.shape[2:]), s, d


def conv(x, weight, bias, stride, padding, dilation, groups, dims: int):
    """out[n, o] = bias[o] + sum over the group's input channels c and kernel offsets k of
    x[n, c, s * i + d * k - p] * weight[o, c, k] (cross-correlation), an unbatched input as a
    batch of one."""
    x, weight, unbatched, kernel, s, d = _conv_operands(x, weight, stride, dilation, dims)
    x = numpy.pad(x, [(0, 0), (0, 0)] + _conv_padding(padding, kernel, d, dims))
    outs = [(x.shape[2 + i] - d[i] * (kernel[i] - 1) - 1) // s[i] + 1 for i in range(dims)]
    n, cin = x.shape[:2]
    cout, per_group = weight.shape[0], cin // groups
    xg = x.reshape((n, groups, per_group) + x.shape[2:])
    wg = weight.reshape((groups, cout // groups, per_group) + tuple(kernel))
    out = numpy.zeros((n, groups, cout // groups) + tuple(outs), dtype=numpy.result_type(x, weight))
    for k in numpy.ndindex(*kernel):
        window = xg[
            (slice(None), slice(None), slice(None))
            + tuple(slice(k[i] * d[i], k[i] * d[i] + s[i] * (outs[i] - 1) + 1, s[i]) for i in range(dims))
        ]
        out += numpy.einsum("ngc...,goc->ngo...", window, wg[(Ellipsis, *k)])
    out = out.reshape((n, cout) + tuple(outs))
    if bias is not None:
        out = out + numpy.asarray(bias).reshape((1, cout) + (1,) * dims)
    return out[0] if unbatched else out


def conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, dims: int):
    """The adjoint of conv: each x[n, c, i] times weight[c, o, k] added at s * i + d * k - p,
    output_padding more at the end of each dim, an unbatched input as a batch of one."""
    x, weight, unbatched, kernel, s, d = _conv_operands(x, weight, stride, dilation, dims)
    p, extra = _per_dim(padding, dims, [0]), _per_dim(output_padding, dims, [0])
    n, cin = x.shape[:2]
    per_group, cout_g = cin // groups, weight.shape[1]
    full = [(x.shape[2 + i] - 1) * s[i] + d[i] * (kernel[i] - 1) + 1 + extra[i] for i in range(dims)]
    out = numpy.zeros((n, groups, cout_g) + tuple(full), dtype=numpy.result_type(x, weight))
    xg = x.reshape((n, groups, per_group) + x.shape[2:])
    wg = weight.reshape((groups, per_group, cout_g) + tuple(kernel))
    for k in numpy.ndindex(*kernel):
        at = (slice(None), slice(None), slice(None)) + tuple(
            slice(k[i] * d[i], k[i] * d[i] + s[i] * (x.shape[2 + i] - 1) + 1, s[i]) for i in range(dims)
        )
        out[at] += numpy.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis, *k)])
    sizes = [full[i] - 2 * p[i] for i in range(dims)]
    out = out[(slice(None), slice(None), slice(None)) + tuple(slice(p[i], p[i] + sizes[i]) for i in range(dims))]
    out = out.reshape((n, groups * cout_g) + tuple(sizes))
    if bias is not None:
        out = out + numpy.asarray(bias).reshape((1, groups * cout_g) + (1,) * dims)
    return out[0] if unbatched else out


# -- linear algebra, in NumPy's own LAPACK (not torch's calls into its BLAS and LAPACK) ---------------


def _mT(a):
    return numpy.swapaxes(a, -1, -2)


def _from_triangle(a, upper: bool):
    """The Hermitian matrix that one triangle of `a` and its real diagonal define: what LAPACK's
    potrf and syevd read of their input (the other triangle is never touched)."""
    a = numpy.asarray(a)
    tri = numpy.triu(a, 1) if upper else numpy.tril(a, -1)
    diag = numpy.real(numpy.diagonal(a, axis1=-2, axis2=-1))
    return tri + numpy.conj(_mT(tri)) + diag[..., None] * numpy.eye(a.shape[-1])


def cholesky(a, upper: bool):
    """The Cholesky factor of the Hermitian positive-definite matrix of `a`'s lower (upper)
    triangle: L with A = L L^H, or U = L^H with A = U^H U. numpy raises on an indefinite matrix
    (torch raises too, or reports it in `info`): no opinion there."""
    low = numpy.linalg.cholesky(_from_triangle(a, upper))
    return numpy.conj(_mT(low)) if upper else low


def cholesky_solve(b, factor, upper: bool):
    """X with A X = B, A = L L^H (U^H U) of the triangular factor as given; torch reads only the
    factor's own triangle."""
    f = numpy.triu(factor) if upper else numpy.tril(factor)
    a = numpy.conj(_mT(f)) @ f if upper else f @ numpy.conj(_mT(f))
    return numpy.linalg.solve(a, b)


def cholesky_inverse(factor, upper: bool):
    """The inverse of A = L L^H (U^H U) of the triangular factor."""
    n = numpy.shape(factor)[-1]
    return cholesky_solve(numpy.broadcast_to(numpy.eye(n), numpy.shape(factor)), factor, upper)


def hermitian(a, upper: bool):
    """The Hermitian matrix of `a`'s upper (lower) triangle, as LAPACK's heevd and potrf read it."""
    return _from_triangle(a, upper)


def householder_q(a, tau, m: int):
    """H_1 ... H_k, H_i = I - tau_i v_i v_i^H with v_i 1 at row i, zero above it and `a`'s column
    i below it: the m x m orthogonal (unitary) matrix that geqrf's (a, tau) represent (LAPACK's
    ?orgqr; torch.linalg.householder_product's documentation)."""
    a, tau = numpy.asarray(a), numpy.asarray(tau)
    batch = numpy.broadcast_shapes(a.shape[:-2], tau.shape[:-1])
    dtype = numpy.result_type(a, tau, numpy.float64)
    q = numpy.broadcast_to(numpy.eye(m, dtype=dtype), (*batch, m, m)).copy()
    for i in reversed(range(tau.shape[-1])):
        v = numpy.zeros((*batch, m), dtype=dtype)
        v[..., i] = 1
        v[..., i + 1 :] = a[..., i + 1 : m, i]
        w = numpy.einsum("...i,...ij->...j", numpy.conj(v), q)
        q = q - tau[..., i, None, None] * v[..., :, None] * w[..., None, :]
    return q


def householder_product(a, tau):
    """The first n columns of the product of the Householder reflectors (a: m x n, tau: k <= n)."""
    m, n = numpy.shape(a)[-2:]
    return householder_q(a, tau, m)[..., :, :n]


def ormqr(a, tau, c, left: bool, transpose: bool):
    """Q C (C Q where not `left`), Q^H in place of Q where `transpose`, Q the m x m product of the
    reflectors of `a` and `tau` (m is C's rows where `left`, its columns otherwise)."""
    c = numpy.asarray(c)
    q = householder_q(a, tau, c.shape[-2] if left else c.shape[-1])
    if transpose:
        q = numpy.conj(_mT(q))
    return q @ c if left else c @ q


def pivots_permutation(pivots, m: int):
    """P with A = P L U from LAPACK's 1-indexed row interchanges (row i swapped with pivots[i]
    in turn); None where a pivot names no row at or below its own."""
    pivots = numpy.asarray(pivots)
    k = pivots.shape[-1]
    if ((pivots < numpy.arange(1, k + 1)) | (pivots > m)).any():
        return None
    flat = pivots.reshape(-1, k)
    ps = numpy.zeros((flat.shape[0], m, m))
    for b, piv in enumerate(flat):
        perm = list(range(m))
        for i, p in enumerate(piv):
            perm[i], perm[p - 1] = perm[p - 1], perm[i]
        ps[b, perm, range(m)] = 1.0  # row perm[j] of A is row j of L U
    return ps.reshape(*pivots.shape[:-1], m, m)


def lu_unpack(lu, pivots, unpack_data: bool = True, unpack_pivots: bool = True):
    """(P, L, U) of torch.linalg.lu_factor's compact form: L unit lower triangular (m x k), U upper
    triangular (k x n), P from the pivots. Nothing where a part is not unpacked or a pivot is out of
    range."""
    if not (unpack_data and unpack_pivots):
        return None
    lu = numpy.asarray(lu)
    m, n = lu.shape[-2:]
    k = min(m, n)
    p = pivots_permutation(pivots, m)
    if p is None or numpy.shape(pivots)[-1] != k:
        return None
    lower = numpy.tril(lu, -1)[..., :, :k] + numpy.eye(m, k)
    upper = numpy.triu(lu)[..., :k, :]
    return numpy.broadcast_to(p, (*lu.shape[:-2], m, m)), lower, upper


def lu_solve(lu, pivots, b, left: bool = True, adjoint: bool = False):
    """X with A X = B (X A = B where not `left`), A^H in place of A where `adjoint`, A = P L U of
    lu_factor's compact form; nothing where a pivot is out of range, and numpy raises on a
    singular A: no opinion."""
    unpacked = lu_unpack(lu, pivots)
    if unpacked is None:
        return None
    p, lower, upper = unpacked
    a = p @ lower @ upper
    if adjoint:
        a = numpy.conj(_mT(a))
    b = numpy.asarray(b)
    return numpy.linalg.solve(a, b) if left else _mT(numpy.linalg.solve(_mT(a), _mT(b)))


def solve_triangular(a, b, upper: bool, left: bool = True, unitriangular: bool = False, transpose: bool = False):
    """X with T X = B (X T = B where not `left`), T the upper (lower) triangle of `a`, its diagonal
    taken as ones where `unitriangular`, transposed first where `transpose`. numpy raises on a
    zero on the diagonal: no opinion."""
    a = numpy.asarray(a)
    t = numpy.triu(a) if upper else numpy.tril(a)
    if unitriangular:
        t = t - numpy.diagonal(t, axis1=-2, axis2=-1)[..., None] * numpy.eye(a.shape[-1]) + numpy.eye(a.shape[-1])
    if transpose:
        t = _mT(t)
    if left:
        return numpy.linalg.solve(t, b)
    return _mT(numpy.linalg.solve(_mT(t), _mT(numpy.asarray(b))))


def logdet(a):
    """log(det(A)): -inf for a zero determinant, NaN for a negative real one (torch.logdet's
    documentation), the complex log of a complex one."""
    a = numpy.asarray(a)
    if numpy.iscomplexobj(a):
        return numpy.log(numpy.linalg.det(a))
    sign, log = numpy.linalg.slogdet(a)
    return numpy.where(sign > 0, log, numpy.where(sign == 0, -numpy.inf, numpy.nan))


def _scaled(a, axes):
    """`a` divided by its largest absolute value over `axes` (kept), and that scale: a norm of the
    scaled matrix neither overflows nor underflows where the norm itself fits."""
    m = numpy.max(numpy.abs(a), axis=axes, keepdims=True) if numpy.size(a) else numpy.ones((1,) * numpy.ndim(a))
    m = numpy.where(numpy.isfinite(m) & (m > 0), m, 1.0)
    return a / m, m


def matrix_norm(a, ord, dim, keepdim: bool):
    """The matrix norm of `ord` ('fro', 'nuc', ±1, ±2, ±inf) over the two dims `dim`, as
    numpy.linalg.norm computes it, on the matrix scaled by its largest absolute value (and
    scaled back): numpy squares in float64, which overflows for entries beyond 1e154."""
    a = numpy.asarray(a)
    dim = tuple(int(d) % a.ndim for d in dim)
    if len(dim) != 2 or dim[0] == dim[1]:
        raise ValueError("a matrix norm needs two distinct dims")
    scaled, m = _scaled(a, dim)
    n = numpy.linalg.norm(scaled, ord=ord, axis=dim, keepdims=True) * m
    return n if keepdim else numpy.squeeze(n, axis=dim)


def vector_norm(a, ord, dim, keepdim: bool):
    """The vector norm of order `ord` over `dim` (every dim where None), scaled as matrix_norm."""
    a = numpy.abs(numpy.asarray(a))
    if a.ndim == 0:
        return vector_norm(a.reshape(1), ord, None, False).reshape(())
    axes = tuple(range(a.ndim)) if dim is None or len(dim) == 0 else tuple(int(d) % a.ndim for d in dim)
    ord = 2.0 if ord is None else float(ord)
    if ord == 0:
        n = numpy.sum(a != 0, axis=axes, keepdims=True).astype(numpy.float64)
    elif ord == numpy.inf:
        n = numpy.max(a, axis=axes, keepdims=True)
    elif ord == -numpy.inf:
        n = numpy.min(a, axis=axes, keepdims=True)
    else:
        scaled, m = _scaled(a, axes)
        n = numpy.sum(scaled**ord, axis=axes, keepdims=True) ** (1.0 / ord) * m
    return n if keepdim else numpy.squeeze(n, axis=axes) if numpy.ndim(n) else n


def linalg_norm(a, ord, dim, keepdim: bool):
    """torch.linalg.norm: a vector norm over one dim (or of the flattened input where neither
    `ord` nor `dim` is given), a matrix norm over two; a 2-D input's default dims with an `ord`."""
    a = numpy.asarray(a)
    if dim is None and ord is None:
        n = vector_norm(a.reshape(-1), 2.0, None, False)
        return numpy.reshape(n, (1,) * a.ndim) if keepdim else n
    if dim is None:
        dim = list(range(a.ndim))
    if isinstance(ord, str) or len(dim) == 2:
        return matrix_norm(a, "fro" if ord is None else ord, dim, keepdim)
    return vector_norm(a, ord, dim, keepdim)


def cdist(x1, x2, p: float):
    """The p-norm distance of every row of x1 to every row of x2, batch dims broadcast."""
    d = numpy.abs(numpy.asarray(x1)[..., :, None, :] - numpy.asarray(x2)[..., None, :, :])
    return vector_norm(d, p, [-1], False)


def cosine_similarity(x1, x2, dim: int, eps: float):
    """x1 · x2 / (max(|x1|, eps) max(|x2|, eps)) along dim, both broadcast (the formula of
    torch.nn.functional.cosine_similarity's documentation), each norm scaled as matrix_norm."""
    x1, x2 = numpy.broadcast_arrays(numpy.asarray(x1), numpy.asarray(x2))
    n1 = numpy.maximum(vector_norm(x1, 2.0, [dim], True), eps)
    n2 = numpy.maximum(vector_norm(x2, 2.0, [dim], True), eps)
    return numpy.sum((x1 / n1) * (x2 / n2), axis=dim)


def addbmm(x, batch1, batch2, beta, alpha):
    """beta x + alpha Σ_b batch1[b] @ batch2[b]; x is not read where beta is 0 (no NaN from it)."""
    product = alpha * numpy.sum(numpy.matmul(batch1, batch2), axis=0)
    return product if beta == 0 else beta * numpy.asarray(x) + product


def einsum(equation: str, tensors):
    """numpy.einsum with integer operands summed in int64: the comparison wraps the sum to the
    kernel's integer dtype, which is int64 where torch reduces one operand with sum."""
    wide = [numpy.asarray(t, dtype=numpy.int64) if numpy.asarray(t).dtype.kind in "biu" else t for t in tensors]
    return numpy.einsum(equation, *wide)


def matrix_exp(a):
    """exp(A) by scipy's Padé approximation with scaling and squaring (Al-Mohy and Higham).
    Where exp(A) overflows float64 the squarings meet inf - inf in any algorithm: no opinion."""
    import scipy.linalg  # here: only the matrix exponential's cells pay its import

    a = numpy.asarray(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    out = numpy.stack([scipy.linalg.expm(m) for m in flat]).reshape(a.shape) if flat.shape[0] else a.copy()
    if not numpy.isfinite(out).all():
        raise ValueError("exp(A) overflows float64")
    return out


# -- normalization, as torch.nn's pages write it ---------------------------------------------------


def _normalized(x, axes, eps: float):
    """(x - mean) / sqrt(var + eps) over `axes`, the variance biased (divided by the count)."""
    mean = numpy.mean(x, axis=axes, keepdims=True)
    var = numpy.mean(numpy.square(x - mean), axis=axes, keepdims=True)
    return (x - mean) / numpy.sqrt(var + eps)


def _affine(y, weight, bias, shape):
    """y * weight + bias, each reshaped to `shape` (broadcast over the other dims)."""
    if weight is not None:
        y = y * numpy.reshape(weight, shape)
    if bias is not None:
        y = y + numpy.reshape(bias, shape)
    return y


def _per_channel(x) -> tuple:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def layer_norm(x, normalized_shape, weight, bias, eps: float):
    """Normalized over the last len(normalized_shape) dims, then the elementwise affine."""
    x = numpy.asarray(x)
    k = len(normalized_shape)
    if k == 0 or tuple(x.shape[x.ndim - k :]) != tuple(normalized_shape):
        raise ValueError("normalized_shape is not the input's last dims")
    return _affine(_normalized(x, tuple(range(x.ndim - k, x.ndim)), eps), weight, bias, tuple(normalized_shape))


def rms_norm(x, normalized_shape, weight, eps):
    """x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) dims, times weight; eps by
    default the machine epsilon of the input's dtype (float64's here, as golden's)."""
    x = numpy.asarray(x)
    k = len(normalized_shape)
    if k == 0 or tuple(x.shape[x.ndim - k :]) != tuple(normalized_shape):
        raise ValueError("normalized_shape is not the input's last dims")
    eps = numpy.finfo(x.dtype).eps if eps is None else eps
    ms = numpy.mean(numpy.square(x), axis=tuple(range(x.ndim - k, x.ndim)), keepdims=True)
    return _affine(x / numpy.sqrt(ms + eps), weight, None, tuple(normalized_shape))


def group_norm(x, num_groups: int, weight, bias, eps: float):
    """The channels (dim 1) in num_groups groups, each normalized over its channels and the
    spatial dims, then the per-channel affine."""
    x = numpy.asarray(x)
    n, c = x.shape[0], x.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ValueError("the channels do not split into the groups")
    grouped = x.reshape(n, num_groups, -1)
    return _affine(_normalized(grouped, (2,), eps).reshape(x.shape), weight, bias, _per_channel(x))


def batch_norm(x, weight, bias, running_mean, running_var, training: bool, eps: float):
    """Each channel (dim 1) normalized by the batch's statistics over every other dim (training),
    or by the running ones, then the per-channel affine. The running statistics' update is a
    side effect, not the result."""
    x = numpy.asarray(x)
    shape = _per_channel(x)
    if training:
        y = _normalized(x, tuple(d for d in range(x.ndim) if d != 1), eps)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("evaluation mode needs the running statistics")
        y = (x - numpy.reshape(running_mean, shape)) / numpy.sqrt(numpy.reshape(running_var, shape) + eps)
    return _affine(y, weight, bias, shape)


def instance_norm(x, weight, bias, running_mean, running_var, use_input_stats: bool, eps: float):
    """Each (sample, channel) normalized over the spatial dims (use_input_stats), or every
    sample by the running statistics, then the per-channel affine."""
    x = numpy.asarray(x)
    if not use_input_stats:
        return batch_norm(x, weight, bias, running_mean, running_var, False, eps)
    if x.ndim < 3:
        raise ValueError("instance_norm needs spatial dims")
    return _affine(_normalized(x, tuple(range(2, x.ndim)), eps), weight, bias, _per_channel(x))


# -- more losses, integrals and selections, as their documentation writes them ---------------------


def _log_softmax(x, axis: int):
    import scipy.special  # here: reproduction scripts embed this module

    return scipy.special.log_softmax(x, axis=axis)


def cross_entropy(x, target, weight, reduction, ignore_index: int, label_smoothing: float):
    """torch.nn.CrossEntropyLoss: -sum_c w_c q_c log softmax(x)_c over the class dim (1, or 0 for
    an unbatched input), q the target's one-hot (class indices, ignore_index contributing
    nothing) or its probabilities, mixed with the uniform (label_smoothing); the mean of class
    indices is divided by the summed weights of the counted targets, of probabilities by N."""
    x, target = numpy.asarray(x, dtype=numpy.float64), numpy.asarray(target)
    axis = 1 if x.ndim >= 2 else 0
    c = x.shape[axis]
    w = numpy.ones(c) if weight is None else numpy.asarray(weight, dtype=numpy.float64)
    w_b = w.reshape((c,) + (1,) * (x.ndim - axis - 1))
    logp = _log_softmax(x, axis)
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError("label_smoothing outside [0, 1], where the documentation defines it")
    if target.dtype.kind in "iu":
        valid = target != ignore_index
        t = numpy.where(valid, target, 0).astype(numpy.int64)
        if t.size and (t.min() < 0 or t.max() >= c):
            raise ValueError("a target class outside [0, C)")
        picked = numpy.squeeze(numpy.take_along_axis(logp, numpy.expand_dims(t, axis), axis), axis)
        wt = w[t] * valid
        loss = numpy.where(valid, -picked * w[t], 0.0)  # an ignored target is 0 whatever its logits
        if eps:
            smooth = numpy.where(valid, -numpy.sum(logp * w_b, axis=axis), 0.0)
            loss = (1 - eps) * loss + eps / c * smooth
        if reduction == 1:
            return numpy.sum(loss) / numpy.sum(wt)
        return _reduce(loss, reduction)
    q = target * (1 - eps) + eps / c
    return _reduce(-numpy.sum(logp * q * w_b, axis=axis), reduction)


def cross_entropy_undecided(x, target, weight, reduction, ignore_index: int, label_smoothing: float):
    """Where cross_entropy decides nothing: the formula's own 0 * inf or inf - inf
    (`indeterminate`), and a sample with a logit of +inf, whose log_softmax torch computes as
    inf - inf (NaN) and SciPy as its limit (undocumented, as for log_softmax)."""
    value = cross_entropy(x, target, weight, reduction, ignore_index, label_smoothing)
    x = numpy.asarray(x, dtype=numpy.float64)
    top = numpy.isposinf(x).any(axis=1 if x.ndim >= 2 else 0)
    mask = indeterminate(value, x, target, weight)
    return mask | (top if reduction == 0 else top.any())


def l1_loss(x, y, reduction=1):
    """torch.nn.L1Loss: |x - y|."""
    return _reduce(numpy.abs(numpy.asarray(x) - numpy.asarray(y)), reduction)


def triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction):
    """torch.nn.TripletMarginLoss: max(d(a, p) - d(a, n) + margin, 0), d(x, y) = ||x - y + eps||_p
    over the last dim (pairwise_distance), d(a, n) the smaller of it and d(p, n) with swap."""

    def d(x, y):
        return vector_norm(numpy.asarray(x) - numpy.asarray(y) + eps, p, [-1], False)

    dn = d(anchor, negative)
    if swap:
        dn = numpy.minimum(dn, d(positive, negative))
    return _reduce(numpy.maximum(d(anchor, positive) - dn + margin, 0.0), reduction)


def multilabel_margin_loss(x, target, reduction=1):
    """torch.nn.MultiLabelMarginLoss: sum over the target classes j (up to the first -1) and the
    other classes i of max(0, 1 - (x[j] - x[i])), divided by the number of classes."""
    x, target = numpy.asarray(x, dtype=numpy.float64), numpy.asarray(target, dtype=numpy.int64)
    rows, trows = numpy.atleast_2d(x), numpy.atleast_2d(target)
    c = rows.shape[-1]
    loss = numpy.zeros(rows.shape[0])
    for n in range(rows.shape[0]):
        labels = []
        for t in trows[n]:
            if t < 0:
                break
            if t >= c:
                raise ValueError("a target class outside [0, C)")
            labels.append(int(t))
        others = [i for i in range(c) if i not in labels]
        loss[n] = sum(max(0.0, 1 - (rows[n, j] - rows[n, i])) for j in labels for i in others) / c
    return _reduce(loss if x.ndim > 1 else loss.reshape(()), reduction)


def cumulative_trapezoid(y, x=None, dx=1.0, dim=-1):
    """The running trapezoid rule along dim: one element fewer than y there."""
    y = numpy.asarray(y)
    n = y.shape[dim]
    lo, hi = numpy.take(y, range(0, n - 1), axis=dim), numpy.take(y, range(1, n), axis=dim)
    if x is None:
        step = dx
    else:
        x = numpy.asarray(x)
        step = numpy.diff(x, axis=dim if x.ndim == y.ndim else -1)
        if x.ndim == 1 and y.ndim > 1:
            step = step.reshape([-1 if d == dim % y.ndim else 1 for d in range(y.ndim)])
    return numpy.cumsum((lo + hi) / 2 * step, axis=dim)


def diff(x, n, dim, prepend=None, append=None):
    """numpy.diff with prepend and append only where given (booleans by inequality, as torch);
    n = 0 is the input itself, without them (numpy's and torch's rule)."""
    if n == 0:
        return numpy.asarray(x)
    parts = [v for v in (prepend, x, append) if v is not None]
    x = numpy.concatenate([numpy.asarray(v) for v in parts], axis=dim) if len(parts) > 1 else numpy.asarray(x)
    return numpy.diff(x, n=n, axis=dim)


def take_along_dim(x, indices, dim):
    """x and indices broadcast except along dim, then numpy.take_along_axis (flattened where dim
    is None); an index outside the dim has no opinion."""
    x, indices = numpy.asarray(x), numpy.asarray(indices)
    if dim is None:
        return numpy.take_along_axis(x.reshape(-1), _within(indices.reshape(-1), x.size), axis=0)
    dim = dim % max(x.ndim, 1)
    shape = list(
        numpy.broadcast_shapes(
            x.shape[:dim] + (1,) + x.shape[dim + 1 :], indices.shape[:dim] + (1,) + indices.shape[dim + 1 :]
        )
    )
    xs, js = list(shape), list(shape)
    xs[dim], js[dim] = x.shape[dim], indices.shape[dim]
    return numpy.take_along_axis(
        numpy.broadcast_to(x, xs), _within(numpy.broadcast_to(indices, js), x.shape[dim]), axis=dim
    )


def one_hot(x, num_classes: int):
    """A last dim of num_classes (the largest class + 1 where -1), 1 at each class."""
    x = numpy.asarray(x, dtype=numpy.int64)
    n = num_classes if num_classes >= 0 else (int(x.max()) + 1 if x.size else 0)
    return numpy.eye(n, dtype=numpy.int64)[_within(x, n)]


def trapezoid(y, x=None, dx=1.0, dim=-1):
    """The trapezoid rule along dim (numpy.trapezoid, numpy.trapz before NumPy 2)."""
    rule = getattr(numpy, "trapezoid", None) or numpy.trapz
    return rule(y, x=x, axis=dim) if x is not None else rule(y, dx=dx, axis=dim)


# -- attention, recurrent cells and padding, as torch.nn's pages write them -------------------------


def _attention_bias(L: int, S: int, attn_mask, is_causal: bool):
    bias = numpy.zeros((L, S))
    if is_causal:
        bias = numpy.where(numpy.tril(numpy.ones((L, S), dtype=bool)), 0.0, -numpy.inf)
    if attn_mask is not None:
        mask = numpy.asarray(attn_mask)
        bias = numpy.where(mask, bias, -numpy.inf) if mask.dtype == bool else mask + bias
    return bias


def scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """softmax(q k^T * scale + bias) v, the bias -inf where a boolean mask (or causality) hides a
    key and the float mask otherwise, keys and values repeated over query heads with enable_gqa
    (the reference implementation on torch.nn.functional.scaled_dot_product_attention's page).
    No opinion with dropout (random) or a non-finite query, key or value (where NaN and infinity
    land is the fused kernel's order)."""
    if dropout_p:
        raise ValueError("dropout draws random numbers")
    q, k, v = (numpy.asarray(t) for t in (q, k, v))
    if not all(numpy.isfinite(t).all() for t in (q, k, v)):
        raise ValueError("a non-finite query, key or value")
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        k = numpy.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = numpy.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    factor = 1 / numpy.sqrt(q.shape[-1]) if scale is None else scale
    weights = q @ _mT(k) * factor + _attention_bias(q.shape[-2], k.shape[-2], attn_mask, is_causal)
    return softmax(weights, -1) @ v


def attention_undecided(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """The query rows whose every key is masked: softmax of -inf alone is NaN in the formula, and
    torch's kernels give 0 there (undocumented)."""
    bias = _attention_bias(numpy.shape(q)[-2], numpy.shape(k)[-2], attn_mask, is_causal)
    hidden = numpy.isneginf(bias).all(axis=-1, keepdims=True)
    out = numpy.broadcast_shapes(numpy.shape(q)[:-1], hidden.shape[:-1]) + (numpy.shape(v)[-1],)
    return numpy.broadcast_to(hidden, out)


def _expit(x):
    import scipy.special  # here: reproduction scripts embed this module

    return scipy.special.expit(x)


def _gates(x, h, w_ih, w_hh, b_ih, b_hh):
    g = numpy.asarray(x) @ _mT(numpy.asarray(w_ih)) + numpy.asarray(h) @ _mT(numpy.asarray(w_hh))
    return g + (0 if b_ih is None else b_ih) + (0 if b_hh is None else b_hh)


def rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity: str):
    """h' = tanh (relu) of x W_ih^T + b_ih + h W_hh^T + b_hh (torch.nn.RNNCell)."""
    g = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    return numpy.tanh(g) if nonlinearity == "tanh" else numpy.maximum(g, 0.0)


def lstm_cell(x, hx, w_ih, w_hh, b_ih, b_hh):
    """(h', c'): the gates i, f, g, o in that order, c' = f c + i g, h' = o tanh(c') (torch.nn.LSTMCell)."""
    h, c = hx
    i, f, g, o = numpy.split(_gates(x, h, w_ih, w_hh, b_ih, b_hh), 4, axis=-1)
    c2 = _expit(f) * c + _expit(i) * numpy.tanh(g)
    return _expit(o) * numpy.tanh(c2), c2


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """h' = (1 - z) n + z h, r and z sigmoid gates, n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
    the gates r, z, n in that order (torch.nn.GRUCell)."""
    gi = numpy.asarray(x) @ _mT(numpy.asarray(w_ih)) + (0 if b_ih is None else b_ih)
    gh = numpy.asarray(h) @ _mT(numpy.asarray(w_hh)) + (0 if b_hh is None else b_hh)
    ir, iz, inn = numpy.split(gi, 3, axis=-1)
    hr, hz, hn = numpy.split(gh, 3, axis=-1)
    r, z = _expit(ir + hr), _expit(iz + hz)
    n = numpy.tanh(inn + r * hn)
    return (1 - z) * n + z * numpy.asarray(h)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad(x, widths, mode: str, value):
    """torch.nn.functional.pad: (before, after) pairs from the last dim backwards; a negative
    width crops (constant mode); reflect, replicate and circular as numpy.pad's reflect, edge and
    wrap."""
    x = numpy.asarray(x)
    if len(widths) % 2 or len(widths) // 2 > x.ndim or mode not in _PAD_MODES:
        raise ValueError("a padding torch refuses")
    pairs = [(0, 0)] * x.ndim
    for i in range(len(widths) // 2):
        pairs[x.ndim - 1 - i] = (int(widths[2 * i]), int(widths[2 * i + 1]))
    if any(p < 0 for pair in pairs for p in pair) and mode != "constant":
        raise ValueError("a negative width outside constant mode")
    grown = [(max(a, 0), max(b, 0)) for a, b in pairs]
    if mode == "constant":
        out = numpy.pad(x, grown, constant_values=0 if value is None else value)
    else:
        out = numpy.pad(x, grown, mode=_PAD_MODES[mode])
    crop = tuple(slice(-min(a, 0), out.shape[d] + min(b, 0)) for d, (a, b) in enumerate(pairs))
    return out[crop]


def whole_degrees(n):
    """n where it is a whole non-negative degree, 0 elsewhere (the elements `fractional_degrees` masks)."""
    n = numpy.asarray(n, dtype=numpy.float64)
    return numpy.where(fractional_degrees(n), 0, n).astype(numpy.int64)


def fractional_degrees(n):
    """Degrees torch's polynomial kernels truncate to an integer (or read as 0 below 0)."""
    n = numpy.asarray(n, dtype=numpy.float64)
    return ~numpy.isfinite(n) | (n != numpy.trunc(n)) | (n < 0) | (n > 2**20)


def window(kind: str, length: int, periodic: bool, alpha: float = 0.54, beta: float = 0.46):
    """A window of `length` points as torch's window functions document it: the symmetric window
    of length + 1 points without its last where periodic; hamming's general alpha - beta cos,
    kaiser's beta in `alpha`."""
    n = length + 1 if periodic else length
    if length <= 1:  # "if window_length = 1, the returned window contains a single value 1"
        return numpy.ones(length)
    i = numpy.arange(n)
    if kind == "hamming":
        w = alpha - beta * numpy.cos(2 * numpy.pi * i / (n - 1))
    elif kind == "kaiser":
        w = numpy.kaiser(n, alpha)
    else:
        w = {"bartlett": numpy.bartlett, "blackman": numpy.blackman}[kind](n)
    return w[:length]


def polynomial_undecided(name: str, n, x):
    """Where scipy.special.`name` (an orthogonal polynomial) decides nothing: a fractional or
    negative degree, degree 0 at a NaN (the constant 1 to torch, whose kernels return it before
    reading x; NaN to SciPy), an infinite x (NaN in torch's recurrences and mostly in SciPy's,
    the limit in a few of SciPy's), and SciPy's own NaN at a finite x and degree (its
    hypergeometric forms far outside [-1, 1] or at a huge degree)."""
    import scipy.special  # here: reproduction scripts embed this module

    x = numpy.asarray(x, dtype=numpy.float64)
    undecided = fractional_degrees(n) | (numpy.isnan(x) & (numpy.asarray(n) == 0)) | numpy.isinf(x)
    with numpy.errstate(all="ignore"):
        value = getattr(scipy.special, name)(whole_degrees(n), x)
    return undecided | indeterminate(value, x, n)


# -- indexing writes and advanced indexing, as torch documents them ---------------------------------


def _advanced(indices, ndim: int):
    """Tensor?[] indices as a NumPy index: None a full slice, a bool (not uint8) tensor a mask, an
    integer tensor positions (negative ones from the end, as both wrap them)."""
    out = []
    for i in indices:
        if i is None:
            out.append(slice(None))
            continue
        i = numpy.asarray(i)
        if i.dtype == numpy.uint8:
            raise ValueError("a uint8 index: torch reads it as a mask, numpy as positions")
        out.append(i)
    if len(out) > ndim:
        raise ValueError("more indices than dims")
    return tuple(out)


def index(x, indices):
    """x[indices] by NumPy's advanced indexing, which torch's follows (its dims first where the
    index tensors are not adjacent)."""
    x = numpy.asarray(x)
    return x[_advanced(indices, x.ndim)]


def _unique_targets(shape, where) -> bool:
    positions = numpy.arange(int(numpy.prod(shape))).reshape(shape)[where]
    return numpy.unique(positions).size == numpy.size(positions)


def index_put(x, indices, values, accumulate: bool):
    """x with x[indices] = values (+= with accumulate, repeated positions adding up). Without
    accumulate a repeated position keeps an undefined one of its values: no opinion there."""
    out = numpy.array(x, copy=True)
    where = _advanced(indices, out.ndim)
    if accumulate:
        numpy.add.at(out, where, numpy.broadcast_to(values, out[where].shape))
        return out
    if not _unique_targets(out.shape, where):
        raise ValueError("a position written twice")
    out[where] = values
    return out


def _scatter_where(x, dim: int, index):
    index = numpy.asarray(index, dtype=numpy.int64)
    where = list(numpy.indices(index.shape, sparse=True))
    where[dim] = _within(index, x.shape[dim])
    return tuple(where)


def scatter(x, dim, index, src, reduce=None):
    """x with src[i][j] written at x[index[i][j]][j] (dim 0), src read over index's shape (a number
    everywhere for the value overloads); with reduce 'add' or 'multiply' combined into x instead.
    A position written twice without reduce keeps an undefined one: no opinion there."""
    out = numpy.array(x, copy=True)
    if out.ndim == 0:
        raise ValueError("a 0-d self")
    dim = dim % out.ndim
    where = _scatter_where(out, dim, index)
    shape = numpy.shape(index)
    src = numpy.asarray(src)
    values = src[tuple(slice(0, n) for n in shape)] if src.ndim else numpy.broadcast_to(src, shape)
    if reduce is None:
        if not _unique_targets(out.shape, where):
            raise ValueError("a position written twice")
        out[where] = values
    else:
        {"add": numpy.add, "multiply": numpy.multiply}[reduce].at(out, where, values)
    return out


def scatter_reduce(x, dim, index, src, reduce: str, include_self: bool):
    """torch.Tensor.scatter_reduce_: each position of x that index names reduced ('sum', 'prod',
    'mean', 'amax', 'amin') over the src values sent to it, and x's own value where include_self;
    positions no index names keep x's value. No opinion on an integer mean: the kernel sums in the
    case's integer dtype, which wraps, and the reference may read the integers wider (int64)."""
    x = numpy.asarray(x)
    if x.ndim == 0:
        raise ValueError("a 0-d self")
    if reduce == "mean" and x.dtype.kind in "iu":
        raise ValueError("an integer mean: the kernel's accumulator decides")
    acc = numpy.array(x, dtype=numpy.float64 if x.dtype.kind == "f" else None, copy=True)
    where = _scatter_where(acc, dim % acc.ndim, index)
    values = numpy.asarray(src)[tuple(slice(0, n) for n in numpy.shape(index))]
    if not include_self:  # start from the identity, or from the first value sent (amax, amin)
        acc[where] = values if reduce in ("amax", "amin") else (1 if reduce == "prod" else 0)
    ufuncs = {"sum": numpy.add, "mean": numpy.add, "prod": numpy.multiply, "amax": numpy.maximum, "amin": numpy.minimum}
    ufuncs[reduce].at(acc, where, values)
    if reduce == "mean":
        count = numpy.zeros(acc.shape, dtype=numpy.int64)
        numpy.add.at(count, where, 1)
        acc = acc / numpy.maximum(count + include_self, 1)  # a position no index names: x / 1
    return acc


def put(x, index, source, accumulate: bool):
    """x with source put at the flat positions index (negative ones from the end), added with
    accumulate; a position written twice without accumulate keeps an undefined one."""
    out = numpy.array(x, copy=True)
    flat = out.reshape(-1)
    index = numpy.asarray(index, dtype=numpy.int64).reshape(-1)
    if index.size and (index.min() < -flat.size or index.max() >= flat.size):
        raise ValueError("an index outside the tensor")
    index = numpy.where(index < 0, index + flat.size, index)
    source = numpy.asarray(source).reshape(-1)[: index.size]
    if accumulate:
        numpy.add.at(flat, index, source)
    else:
        if numpy.unique(index).size != index.size:
            raise ValueError("a position written twice")
        flat[index] = source
    return flat.reshape(out.shape)


def masked_scatter(x, mask, source):
    """x with source's leading elements, in row-major order, copied where the mask (broadcast to
    x) is true."""
    out = numpy.array(x, copy=True)
    m = numpy.broadcast_to(numpy.asarray(mask, dtype=bool), out.shape)
    n = int(m.sum())
    source = numpy.asarray(source).reshape(-1)
    if source.size < n:
        raise ValueError("fewer source elements than true mask elements")
    out[m] = source[:n]
    return out


def embedding_bag(weight, indices, offsets, mode: int, per_sample_weights, include_last_offset: bool, padding_idx=None):
    """torch.nn.functional.embedding_bag's bags reduced: the rows of weight that each bag's
    indices name (offsets[b] to offsets[b + 1], the last bag to the end unless include_last_offset;
    each row of a 2-d indices a bag), summed (each times its per-sample weight), averaged or
    maxed (0, 1, 2); padding_idx's rows left out of the bag; an empty bag is zeros."""
    weight, indices = numpy.asarray(weight), numpy.asarray(indices, dtype=numpy.int64)
    psw = None if per_sample_weights is None else numpy.asarray(per_sample_weights)
    if indices.ndim == 2:
        if offsets is not None and numpy.size(offsets):
            raise ValueError("offsets with a 2-d input")
        starts, flat = numpy.arange(indices.shape[0]) * indices.shape[1], indices.reshape(-1)
        ends = starts + indices.shape[1]
        psw = None if psw is None else psw.reshape(-1)
    else:
        flat, offsets = indices, numpy.asarray(offsets, dtype=numpy.int64)
        if include_last_offset:
            starts, ends = offsets[:-1], offsets[1:]
        else:
            starts, ends = offsets, numpy.append(offsets[1:], flat.size)
    if (flat.size and (flat.min() < 0 or flat.max() >= weight.shape[0])) or (starts.size and starts[0] != 0):
        raise ValueError("an index outside the table, or a first offset other than 0")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    out = numpy.zeros((len(starts), weight.shape[1]))
    for b, (lo, hi) in enumerate(zip(starts, ends)):
        if hi < lo or hi > flat.size:
            raise ValueError("offsets out of order")
        keep = [i for i in range(lo, hi) if flat[i] != padding_idx]
        if not keep:
            continue
        rows = weight[flat[keep]]
        if mode == 0:
            out[b] = (rows * (psw[keep][:, None] if psw is not None else 1)).sum(axis=0)
        elif mode == 1:
            out[b] = rows.mean(axis=0)
        else:
            out[b] = rows.max(axis=0)
    return out
