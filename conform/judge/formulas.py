"""Losses and activations as their documentation writes them, evaluated stably in float64.

The independent references of opdb/rules/references.toml name these where no library function
computes the op: each is the documented formula (torch.nn's page of the loss), with every log of
a sigmoid taken as -logaddexp(0, -x) and every exponential of a scaled input kept inside
logaddexp, so that the value stays right where the formula is finite and a naive evaluation is
not: at infinite logits (the loss of a logit of -inf with a target of 0.9 is +inf), and at a
scale (softplus's beta) whose product with the input overflows exp. `indeterminate` gives the
elements where the formula itself is 0 * inf or inf - inf at inputs that hold no NaN: the
reference decides nothing there.

NumPy (and scipy.special inside a function): reproduction scripts embed this module's source.
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
