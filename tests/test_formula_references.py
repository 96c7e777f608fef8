"""Independent references written as formulas (conform.judge.formulas): pooling's windows as Pool.h
sizes them, indexing and selection as torch documents them; against torch's kernels where they
are right, and a kernel golden shares a bug with."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import formulas, references
from conform.outcomes import Outcome
from conform.run.execute import run_case
from generators.case import Case, TensorSpec

aten = torch.ops.aten
MAX = (F.max_pool1d, F.max_pool2d, F.max_pool3d)
AVG = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)
ADAPTIVE = {"avg": (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d),
            "max": (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)}  # fmt: skip


def _config(rng):
    dims = rng.choice([1, 2, 3])
    k = [rng.randint(1, 4) for _ in range(dims)]
    return (
        dims,
        k,
        [rng.randint(1, 3) for _ in range(dims)],
        [rng.randint(0, k[i] // 2) for i in range(dims)],
        [rng.randint(1, 2) for _ in range(dims)],
        rng.random() < 0.5,
        [rng.randint(1, 6) for _ in range(dims)],
    )


def _input(rng, dims, size, dtype):
    x = torch.randn(rng.choice([(2,), (1, 3)]) + tuple(size), dtype=torch.float64) * 10
    if dtype == torch.int64:
        return x.round().to(dtype)
    if rng.random() < 0.4:  # a NaN or an infinity the window must carry
        x.view(-1)[rng.randrange(x.numel())] = rng.choice([float("nan"), float("inf"), -float("inf")])
    return x


@pytest.mark.parametrize("kind", ["max", "avg", "adaptive avg", "adaptive max"])
def test_the_formulas_are_the_cpu_kernels_where_they_are_right(kind):
    rng, compared = random.Random(kind), 0
    for _ in range(150):
        dims, k, s, p, d, ceil, size = _config(rng)
        dtype = rng.choice([torch.float64, torch.int64]) if kind in ("max", "avg") else torch.float64
        x = _input(rng, dims, size, dtype)
        try:
            if kind == "max":
                want, got = (
                    MAX[dims - 1](x, k, s, p, d, ceil_mode=ceil),
                    formulas.max_pool(x.numpy(), k, s, p, d, ceil, dims),
                )
            elif kind == "avg":
                include, override = rng.random() < 0.5, rng.choice([None, 3]) if dims > 1 else None
                extra = (override,) if dims > 1 else ()
                want = AVG[dims - 1](x, k, s, p, ceil, include, *extra)
                got = formulas.avg_pool(x.numpy(), k, s, p, ceil, include, override, dims)
            else:
                how = kind.split()[1]
                want, got = (
                    ADAPTIVE[how][dims - 1](x, size[::-1]),
                    formulas.adaptive_pool(x.numpy(), size[::-1], dims, how),
                )
        except (RuntimeError, ValueError):  # a window larger than the padded input, or of padding alone
            continue
        want = want[0] if isinstance(want, tuple) else want
        got = torch.from_numpy(np.asarray(got))
        assert got.shape == want.shape and torch.equal(got.isnan(), want.isnan()), (dims, k, s, p, d, ceil, size)
        assert torch.allclose(got.double(), want.double(), rtol=1e-12, atol=1e-12, equal_nan=True), (
            dims,
            k,
            s,
            p,
            ceil,
        )
        compared += 1
    assert compared > 60


def test_a_window_of_padding_alone_has_no_opinion():
    # dilation 2 steps over the one element: the CPU returns -inf where the op should refuse it
    x = torch.tensor([[[5.0]]], dtype=torch.float64)
    with pytest.raises(ValueError):
        formulas.max_pool(x.numpy(), [2], [1], [1], [2], False, 1)


class _PaddingNotCounted(TorchDispatchMode):
    """avg_pool2d dividing by the input elements a window covers even with count_include_pad:
    the float64 golden run goes through it too."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.avg_pool2d.default:
            args = list(args) + [None] * (7 - len(args))
            args[5] = False
            return func(*args[:6])
        return func(*args, **(kwargs or {}))


class _NaNSkipped(TorchDispatchMode):
    """max_pool2d that takes the largest number of each window, passing over its NaNs."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (
            aten.max_pool2d.default,
            aten.max_pool2d_with_indices.default,
        ):  # (the CPU's max_pool2d calls the latter)
            x = args[0]
            return func(torch.nan_to_num(x, nan=-torch.inf), *args[1:], **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _case(qualname, x, *args):
    return Case(qualname, (TensorSpec(tuple(x.shape), "float32", data=tuple(x.flatten().tolist())), *args), seed=1)


@pytest.mark.parametrize(
    "qualname, mode, args",
    [
        ("aten::avg_pool2d", _PaddingNotCounted, ([2, 2], [2, 2], [1, 1], False, True)),
        ("aten::max_pool2d", _NaNSkipped, ([2, 2], [2, 2])),
    ],
)
def test_a_pooling_bug_golden_shares_is_found_on_the_cpu(qualname, mode, args):
    x = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = float("nan") if qualname == "aten::max_pool2d" else x[0, 0, 0, 1]
    op = opdb.lookup(qualname)
    assert run_case(op, _case(qualname, x, *args), CPUBackend()).outcome is Outcome.PASS
    with mode():
        r = run_case(op, _case(qualname, x, *args), CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas." in r.message and "disagrees with the CPU kernel" in r.message


def _selection(rng, kind):
    nd = rng.randint(1, 3)
    shape = tuple(rng.randint(1, 4) for _ in range(nd))
    dtype = rng.choice([torch.float64, torch.int64])
    x = torch.randn(shape, dtype=torch.float64) * 5
    if dtype == torch.int64:
        x = x.round().long()
    elif rng.random() < 0.4:
        x.view(-1)[rng.randrange(x.numel())] = float("nan")
    dim = rng.randrange(-nd, nd)
    n = shape[dim]
    if kind == "gather":
        ish = tuple(rng.randint(0, s) if d != dim % nd else rng.randint(0, 4) for d, s in enumerate(shape))
        index = torch.randint(0, n, ish)
        return torch.gather(x, dim, index), formulas.gather(x.numpy(), dim, index.numpy())
    if kind == "scatter_add":
        index = torch.randint(0, n, tuple(rng.randint(0, s) for s in shape))
        src = torch.randint(-5, 5, shape).to(x.dtype)
        return x.scatter_add(dim, index, src), formulas.scatter_add(x.numpy(), dim, index.numpy(), src.numpy())
    if kind == "masked_select":
        mask = torch.rand(shape[rng.randint(0, nd - 1) :]) > 0.5
        return torch.masked_select(x, mask), formulas.masked_select(x.numpy(), mask.numpy())
    if kind == "kthvalue":
        k, keep = rng.randint(1, n), rng.random() < 0.5
        return torch.kthvalue(x, k, dim, keep)[0], formulas.kthvalue(x.numpy(), k, dim, keep)
    if kind in ("median", "nanmedian"):
        keep = rng.random() < 0.5
        return getattr(torch, kind)(x, dim, keep)[0], formulas.median(x.numpy(), dim, keep, kind == "nanmedian")
    k, largest = rng.randint(0, n), rng.random() < 0.5
    return torch.topk(x, k, dim, largest)[0], formulas.topk(x.numpy(), k, dim, largest, True)


@pytest.mark.parametrize("kind", ["gather", "scatter_add", "masked_select", "kthvalue", "median", "nanmedian", "topk"])
def test_the_selection_formulas_are_the_cpu_kernels_where_they_are_right(kind):
    rng = random.Random(kind)
    for _ in range(120):
        want, got = _selection(rng, kind)
        got = torch.from_numpy(np.asarray(got))
        assert got.shape == want.shape, kind
        assert torch.allclose(got.double(), want.double(), rtol=0, atol=0, equal_nan=True), kind


def test_an_index_is_read_as_the_integer_it_is_in_a_low_precision_cell():
    # the sweep's case: index 746 is 744 in bfloat16; promoted as a value would be, the reference
    # added src's NaN at 744, not at 746 where the kernel rightly put it
    op = opdb.lookup("aten::scatter_add_")
    x = TensorSpec((1176,), "bfloat16", magnitude="moderate")
    index = TensorSpec((62,), "int64", values="index", low=0, high=1176)
    src = TensorSpec((1176,), "bfloat16", values="special")
    r = run_case(op, Case(op.qualname, (x, 0, index, src)), CPUBackend(), grad=False)
    assert r.outcome is Outcome.PASS, r.message


def test_a_reference_gives_its_own_reason_where_other_files_set_hints_of_the_op():
    # shapes.toml sets scatter_add_'s int32 index hint after references.toml sets its reference
    why = references.reference_for(opdb.lookup("aten::scatter_add_")).why
    assert "repeated indices adding up" in why and "int32" not in why


def _conv_config(rng):
    dims, groups = rng.choice([1, 2, 3]), rng.choice([1, 2])
    cin, cout = groups * rng.randint(1, 2), groups * rng.randint(1, 2)
    k = [rng.randint(1, 3) for _ in range(dims)]
    s, d = [rng.randint(1, 2) for _ in range(dims)], [rng.randint(1, 2) for _ in range(dims)]
    batch = (2,) if rng.random() < 0.7 else ()
    x = torch.randn(batch + (cin,) + tuple(rng.randint(1, 5) for _ in range(dims)), dtype=torch.float64)
    bias = torch.randn(cout, dtype=torch.float64) if rng.random() < 0.5 else None
    return dims, groups, cin, cout, k, s, d, x, bias


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
def test_the_convolution_formulas_are_the_cpu_kernels_where_they_are_right():
    rng, compared = random.Random("conv"), 0
    for _ in range(200):
        dims, groups, cin, cout, k, s, d, x, bias = _conv_config(rng)
        b = None if bias is None else bias.numpy()
        try:
            if rng.random() < 0.5:
                w = torch.randn((cout, cin // groups, *k), dtype=torch.float64)
                pad = rng.choice(["same", "valid", [rng.randint(0, 2) for _ in range(dims)]])
                s = [1] * dims if pad == "same" else s
                want = (F.conv1d, F.conv2d, F.conv3d)[dims - 1](x, w, bias, s, pad, d, groups)
                got = formulas.conv(x.numpy(), w.numpy(), b, s, pad, d, groups, dims)
            else:
                w = torch.randn((cin, cout // groups, *k), dtype=torch.float64)
                p, extra = (
                    [rng.randint(0, 2) for _ in range(dims)],
                    [rng.randint(0, max(s[i], d[i]) - 1) for i in range(dims)],
                )
                want = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[dims - 1](
                    x, w, bias, s, p, extra, groups, d
                )
                got = formulas.conv_transpose(x.numpy(), w.numpy(), b, s, p, extra, groups, d, dims)
        except RuntimeError:  # a kernel larger than the padded input: the op refuses it
            continue
        assert torch.allclose(torch.from_numpy(np.asarray(got)), want, rtol=1e-10, atol=1e-10), (dims, groups, k, s, d)
        compared += 1
    assert compared > 100


class _DilationIgnored(TorchDispatchMode):
    """A convolution kernel that reads its kernel's taps next to each other whatever the dilation."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.convolution.default:
            args = list(args)
            args[5] = [1] * len(args[5])  # the test's kernel is two taps dilated by 2: one element too many
            out = func(*args)
            return out[..., : out.shape[-1] - 1]
        return func(*args, **(kwargs or {}))


def test_a_convolution_bug_golden_shares_is_found_on_the_cpu():
    op = opdb.lookup("aten::conv1d")
    x = TensorSpec((1, 1, 8), "float32", data=tuple(float(i) for i in range(8)))
    w = TensorSpec((1, 1, 2), "float32", data=(1.0, -1.0))
    case = Case(op.qualname, (x, w, None, [1], [0], [2]), seed=1)
    assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS
    with _DilationIgnored():
        r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas.conv)" in r.message and "disagrees with the CPU kernel" in r.message


# -- linear algebra --------------------------------------------------------------------------------


def _spd(rng, batch, n, dtype=torch.float64):
    a = torch.randn(batch + (n, n), dtype=dtype)
    return a @ a.mH + n * torch.eye(n, dtype=dtype)


def _linalg(rng, kind):
    """(torch's float64 result, the formula's) for a random case of `kind`."""
    batch = rng.choice([(), (2,), (2, 1)])
    n = rng.randint(1, 4)
    dtype = rng.choice([torch.float64, torch.complex128])
    if kind == "cholesky":
        upper = rng.random() < 0.5
        a = _spd(rng, batch, n, dtype)
        a = a + torch.randn_like(a).tril(-1) if upper else a + torch.randn_like(a).triu(1)  # the unread triangle
        return torch.linalg.cholesky(a, upper=upper), formulas.cholesky(a.numpy(), upper)
    if kind in ("cholesky_solve", "cholesky_inverse"):
        upper = rng.random() < 0.5
        f = torch.linalg.cholesky(_spd(rng, batch, n, dtype), upper=upper)
        f = f + torch.randn_like(f).tril(-1) if upper else f + torch.randn_like(f).triu(1)
        if kind == "cholesky_inverse":
            return torch.cholesky_inverse(f, upper), formulas.cholesky_inverse(f.numpy(), upper)
        b = torch.randn(batch + (n, rng.randint(1, 3)), dtype=dtype)
        return torch.cholesky_solve(b, f, upper), formulas.cholesky_solve(b.numpy(), f.numpy(), upper)
    if kind == "solve_triangular":
        upper, left, unit = (rng.random() < 0.5 for _ in range(3))
        a = torch.randn(batch + (n, n), dtype=dtype) + 3 * torch.eye(n, dtype=dtype)
        b = torch.randn(batch + ((n, 2) if left else (2, n)), dtype=dtype)
        got = torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
        return got, formulas.solve_triangular(a.numpy(), b.numpy(), upper, left, unit)
    if kind == "triangular_solve":
        upper, transpose, unit = (rng.random() < 0.5 for _ in range(3))
        a = torch.randn(batch + (n, n), dtype=dtype) + 3 * torch.eye(n, dtype=dtype)
        b = torch.randn(batch + (n, 2), dtype=dtype)
        got = torch.triangular_solve(b, a, upper, transpose, unit).solution
        return got, formulas.solve_triangular(a.numpy(), b.numpy(), upper, True, unit, transpose)
    # not 1e200: torch's float64 norms square in float64 and overflow there
    x = torch.randn(batch + (n, rng.randint(1, 4)), dtype=dtype) * 10.0 ** rng.choice([0, 30])
    keep = rng.random() < 0.5
    if kind == "matrix_norm":
        ord_ = rng.choice(["fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf")])
        return torch.linalg.matrix_norm(x, ord_, keepdim=keep), formulas.matrix_norm(x.numpy(), ord_, (-2, -1), keep)
    if kind == "linalg_norm":
        ord_, dim = rng.choice(
            [(None, None), (None, [-1]), (3.0, [-1]), (0.5, [-2]), ("nuc", [-2, -1]), (2.0, [-1, -2])]
        )
        return torch.linalg.norm(x, ord_, dim, keep), formulas.linalg_norm(x.numpy(), ord_, dim, keep)
    if kind == "cdist":
        y = torch.randn(x.shape[:-2] + (3, x.shape[-1]), dtype=torch.float64)
        p = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
        return torch.cdist(x.real, y, p), formulas.cdist(x.real.numpy(), y.numpy(), p)
    if kind == "cosine_similarity":
        y = torch.randn(x.shape[-1:], dtype=torch.float64)
        return F.cosine_similarity(x.real, y, -1, 1e-8), formulas.cosine_similarity(x.real.numpy(), y.numpy(), -1, 1e-8)
    if kind == "addbmm":
        b1, b2 = torch.randn(3, n, 2, dtype=dtype), torch.randn(3, 2, 4, dtype=dtype)
        s = torch.full((n, 4), float("nan"), dtype=dtype)  # never read where beta is 0
        beta, alpha = rng.choice([0.0, 0.5]), rng.choice([1.0, -2.0])
        if beta:
            s = torch.randn_like(s)
        return torch.addbmm(s, b1, b2, beta=beta, alpha=alpha), formulas.addbmm(
            s.numpy(), b1.numpy(), b2.numpy(), beta, alpha
        )
    if kind in NORMS:
        return _norm(rng, kind)
    assert kind == "matrix_exp"
    a = torch.randn(batch + (n, n), dtype=dtype)
    return torch.linalg.matrix_exp(a), formulas.matrix_exp(a.numpy())


NORMS = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm")


def _norm(rng, kind):
    c, spatial = rng.choice([2, 4, 6]), tuple(rng.randint(2, 4) for _ in range(rng.randint(1, 2)))
    x = torch.randn((rng.randint(1, 3), c) + spatial, dtype=torch.float64) * 10.0 ** rng.choice([0, 3, -3])
    w, b = torch.randn(c, dtype=torch.float64), torch.randn(c, dtype=torch.float64)
    eps = rng.choice([1e-5, 1e-3])
    if kind in ("layer_norm", "rms_norm"):
        shape = list(x.shape[-rng.randint(1, x.ndim - 1) :])
        lw = torch.randn(shape, dtype=torch.float64)
        if kind == "rms_norm":
            return aten.rms_norm(x, shape, lw, None), formulas.rms_norm(x.numpy(), shape, lw.numpy(), None)
        return aten.layer_norm(x, shape, lw, lw, eps), formulas.layer_norm(
            x.numpy(), shape, lw.numpy(), lw.numpy(), eps
        )
    if kind == "group_norm":
        return aten.group_norm(x, 2, w, b, eps), formulas.group_norm(x.numpy(), 2, w.numpy(), b.numpy(), eps)
    stats = rng.random() < 0.5  # the batch's (the sample's) statistics, or running ones
    rm, rv = (None, None) if stats else (b, w.abs())
    np_rm, np_rv = (None, None) if stats else (rm.numpy(), rv.numpy())
    if kind == "batch_norm":
        got = aten.batch_norm(x, w, b, rm, rv, stats, 0.1, eps, False)
        return got, formulas.batch_norm(x.numpy(), w.numpy(), b.numpy(), np_rm, np_rv, stats, eps)
    got = aten.instance_norm(x, w, b, rm, rv, stats, 0.1, eps, False)
    return got, formulas.instance_norm(x.numpy(), w.numpy(), b.numpy(), np_rm, np_rv, stats, eps)


LINALG = ["cholesky", "cholesky_solve", "cholesky_inverse", "solve_triangular", "triangular_solve", "matrix_norm",
          "linalg_norm", "cdist", "cosine_similarity", "addbmm", "matrix_exp", *NORMS]  # fmt: skip


def test_an_integer_einsum_is_summed_as_the_kernel_sums_it():
    """A one-operand int32 einsum is a sum (int64 in torch); two operands wrap in int32."""
    x = torch.tensor([[2**31 - 1, 1], [-5, 2]], dtype=torch.int32)
    assert torch.einsum("ca->a", x).tolist() == formulas.einsum("ca->a", [x.numpy()]).tolist()
    op = opdb.lookup("aten::einsum")
    case = Case(op.qualname, ("ca->a", [TensorSpec((2, 2), "int32", data=tuple(x.flatten().tolist()))]), seed=1)
    assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS


def test_a_non_finite_input_leaves_a_lapack_reference_without_opinion():
    """A NaN in B reaches other rows through a general solver's zeros (0 * NaN) and not through a
    triangular one: where NaN and infinity land is the algorithm's, so the reference says nothing."""
    op = opdb.lookup("aten::linalg_solve_triangular")
    ref = references.reference_for(op)
    assert ref.finite
    a = torch.tensor([[1.0, 0.5], [0.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([[float("nan")], [1.5]], dtype=torch.float64)
    with pytest.raises(references._NoOpinion):
        references.evaluate(ref, op, (a, b), {"upper": True})
    got, _ = references.evaluate(ref, op, (a, b.nan_to_num(2.0)), {"upper": True})
    assert got.tolist() == [[1.25], [1.5]]


class _LowerRead(TorchDispatchMode):
    """linalg_cholesky(upper=True) that reads the lower triangle: the float64 golden run too."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.linalg_cholesky_ex.default and (kwargs or {}).get("upper", args[1] if len(args) > 1 else False):
            a = args[0]
            low = a.tril(-1)
            herm = low + low.mH + torch.diag_embed(a.diagonal(dim1=-2, dim2=-1))
            return func(herm, *args[1:], **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def test_a_linear_algebra_bug_golden_shares_is_found_on_the_cpu():
    op = opdb.lookup("aten::linalg_cholesky")
    a = [4.0, 1.0, 0.5, 2.0, 5.0, 1.0, 0.25, 3.0, 6.0]  # the upper and lower triangles differ
    case = Case(op.qualname, (TensorSpec((3, 3), "float32", data=tuple(a)),), {"upper": True}, seed=1)
    assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS
    with _LowerRead():
        r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas.cholesky)" in r.message and "disagrees with the CPU kernel" in r.message


# -- losses, integrals and selections ----------------------------------------------------------------


def _other(rng, kind):
    n, c = rng.randint(1, 4), rng.randint(2, 5)
    if kind == "cross_entropy":
        x = torch.randn((n, c) + (rng.randint(1, 3),) * rng.randint(0, 1), dtype=torch.float64) * 3
        w = torch.rand(c, dtype=torch.float64) if rng.random() < 0.5 else None
        red, smooth = rng.choice([0, 1, 2]), rng.choice([0.0, 0.1, 1.0])
        if rng.random() < 0.5:  # class indices, some ignored
            t, ignore = torch.randint(0, c, x.shape[:1] + x.shape[2:]), rng.choice([-100, 0])
            t.view(-1)[0] = 1 % c  # at least one counted target for the mean
        else:  # probabilities
            t, ignore = torch.softmax(torch.randn_like(x), 1), -100
        got = aten.cross_entropy_loss(x, t, w, red, ignore, smooth)
        return got, formulas.cross_entropy(x.numpy(), t.numpy(), None if w is None else w.numpy(), red, ignore, smooth)
    if kind == "triplet_margin_loss":
        a, p, neg = (torch.randn(n, 4, dtype=torch.float64) for _ in range(3))
        norm, swap, red = rng.choice([1.0, 2.0, 3.0]), rng.random() < 0.5, rng.choice([0, 1, 2])
        got = aten.triplet_margin_loss(a, p, neg, 1.0, norm, 1e-6, swap, red)
        return got, formulas.triplet_margin_loss(a.numpy(), p.numpy(), neg.numpy(), 1.0, norm, 1e-6, swap, red)
    if kind == "multilabel_margin_loss":
        x, t = torch.randn(n, c, dtype=torch.float64), torch.full((n, c), -1)
        for r in range(n):
            k = rng.randint(0, c)
            t[r, :k] = torch.randperm(c)[:k]
        red = rng.choice([0, 1, 2])
        return aten.multilabel_margin_loss(x, t, red), formulas.multilabel_margin_loss(x.numpy(), t.numpy(), red)
    y, dim = torch.randn(3, rng.randint(1, 5), dtype=torch.float64), rng.choice([-1, 0, 1])
    if kind == "cumulative_trapezoid":
        x = torch.randn(y.shape[dim], dtype=torch.float64).cumsum(0) if rng.random() < 0.5 else torch.randn_like(y)
        return aten.cumulative_trapezoid(y, x, dim=dim), formulas.cumulative_trapezoid(y.numpy(), x.numpy(), 1.0, dim)
    if kind == "diff":
        k, pre = rng.randint(0, 3), torch.randn(3, 2, dtype=torch.float64) if rng.random() < 0.5 else None
        return aten.diff(y, k, -1, pre, None), formulas.diff(y.numpy(), k, -1, None if pre is None else pre.numpy())
    if kind == "take_along_dim":
        if rng.random() < 0.5:
            i = torch.randint(0, y.numel(), (5,))
            return aten.take_along_dim(y, i, None), formulas.take_along_dim(y.numpy(), i.numpy(), None)
        i = torch.randint(0, y.shape[0], (rng.randint(1, 4), 1))  # broadcast along the other dim
        return aten.take_along_dim(y, i, 0), formulas.take_along_dim(y.numpy(), i.numpy(), 0)
    if kind == "one_hot":
        cls, classes = torch.randint(0, 4, (3, 2)), rng.choice([-1, 4, 6])
        return aten.one_hot(cls, classes), formulas.one_hot(cls.numpy(), classes)
    if kind == "attention":
        return _attention(rng)
    if kind in ("rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell"):
        return _cell(rng, kind)
    if kind == "pad":
        x, mode = (
            torch.randn(2, 3, 4, 5, dtype=torch.float64),
            rng.choice(["constant", "reflect", "replicate", "circular"]),
        )
        # reflect, replicate and circular pad the last 2 dims of a 4-d input (torch refuses others)
        widths = [
            rng.randint(-1 if mode == "constant" else 0, 2)
            for _ in range(2 * (rng.randint(1, 3) if mode == "constant" else 2))
        ]
        value = rng.choice([None, 1.5]) if mode == "constant" else None
        return aten.pad(x, widths, mode, value), formulas.pad(x.numpy(), widths, mode, value)
    if kind == "embedding_bag":
        return _bag(rng)
    assert kind == "window"
    length, periodic = rng.randint(0, 9), rng.random() < 0.5
    name = rng.choice(["bartlett", "blackman", "hamming", "kaiser"])
    got = getattr(torch, f"{name}_window")(length, periodic, dtype=torch.float64)
    return got, formulas.window(name, length, periodic, *((12.0,) if name == "kaiser" else ()))


def _bag(rng):
    table, mode, pad = torch.randn(10, 3, dtype=torch.float64), rng.choice([0, 1, 2]), rng.choice([None, 2, -1])
    n = rng.randint(0, 8)
    indices, last = torch.randint(0, 10, (n,)), rng.random() < 0.5
    cuts = sorted(rng.randint(0, n) for _ in range(rng.randint(0, 3)))
    offsets = torch.tensor([0, *cuts] + ([n] if last else []), dtype=torch.int64)
    weights = torch.rand(n, dtype=torch.float64) if mode == 0 and rng.random() < 0.5 else None
    got = aten.embedding_bag.padding_idx(table, indices, offsets, False, mode, False, weights, last, pad)[0]
    np_weights = None if weights is None else weights.numpy()
    return got, formulas.embedding_bag(table.numpy(), indices.numpy(), offsets.numpy(), mode, np_weights, last, pad)


def _attention(rng):
    heads, kv_heads = rng.choice([(1, 1), (2, 2), (4, 2), (4, 1)])
    length, keys, e = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 4)
    q = torch.randn(2, heads, length, e, dtype=torch.float64)
    k = torch.randn(2, kv_heads, keys, e, dtype=torch.float64)
    v = torch.randn(2, kv_heads, keys, rng.randint(1, 4), dtype=torch.float64)
    causal, mask = rng.random() < 0.3, None
    if not causal and rng.random() < 0.6:
        mask = (
            torch.rand(length, keys) > 0.3
            if rng.random() < 0.5
            else torch.randn(2, 1, length, keys, dtype=torch.float64)
        )
    scale, gqa = rng.choice([None, 0.3]), heads != kv_heads
    got = aten.scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale=scale, enable_gqa=gqa)
    args = (q.numpy(), k.numpy(), v.numpy(), None if mask is None else mask.numpy(), 0.0, causal, scale, gqa)
    hidden = torch.from_numpy(np.ascontiguousarray(formulas.attention_undecided(*args)))
    return got.masked_fill(hidden, 0.0), np.where(hidden.numpy(), 0.0, formulas.scaled_dot_product_attention(*args))


def _cell(rng, kind):
    n, inputs, hidden = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)
    gates = {"gru_cell": 3, "lstm_cell": 4}.get(kind, 1)
    x, h, c = (torch.randn(n, size, dtype=torch.float64) for size in (inputs, hidden, hidden))
    w_ih, w_hh = (
        torch.randn(gates * hidden, inputs, dtype=torch.float64),
        torch.randn(gates * hidden, hidden, dtype=torch.float64),
    )
    b = [torch.randn(gates * hidden, dtype=torch.float64) for _ in range(2)] if rng.random() < 0.7 else [None, None]
    nb = [None if t is None else t.numpy() for t in b]
    if kind == "lstm_cell":
        got = aten.lstm_cell(x, [h, c], w_ih, w_hh, *b)
        want = formulas.lstm_cell(x.numpy(), [h.numpy(), c.numpy()], w_ih.numpy(), w_hh.numpy(), *nb)
        return torch.stack(got), np.stack(want)
    if kind == "gru_cell":
        return aten.gru_cell(x, h, w_ih, w_hh, *b), formulas.gru_cell(
            x.numpy(), h.numpy(), w_ih.numpy(), w_hh.numpy(), *nb
        )
    got = getattr(aten, kind)(x, h, w_ih, w_hh, *b)
    return got, formulas.rnn_cell(x.numpy(), h.numpy(), w_ih.numpy(), w_hh.numpy(), *nb, kind.split("_")[1])


OTHER = ["cross_entropy", "triplet_margin_loss", "multilabel_margin_loss", "cumulative_trapezoid", "diff",
         "take_along_dim", "one_hot", "attention", "rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell", "pad",
         "window", "embedding_bag"]  # fmt: skip


INDEXING = ["index", "index_put", "scatter", "scatter_reduce", "put", "masked_scatter"]


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("kind", LINALG + OTHER + INDEXING)
def test_the_formulas_beyond_pooling_are_the_cpu_kernels_where_they_are_right(kind):
    rng = random.Random(kind)
    for _ in range(40):
        got, want = (_linalg if kind in LINALG else _indexing if kind in INDEXING else _other)(rng, kind)
        want = torch.as_tensor(np.asarray(want)).to(got.dtype)
        assert got.shape == want.shape, (kind, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, equal_nan=True, msg=kind)


def test_trapezoids_infinite_endpoint_is_found_on_the_cpu():
    """torch.trapezoid(y, dx) is dx * (sum(y) - (y[0] + y[-1]) / 2): NaN at an infinite endpoint,
    where the rule is inf; golden float64 computes the same rewrite."""
    op = opdb.lookup("aten::trapezoid.dx")
    case = Case(op.qualname, (TensorSpec((3,), "float32", data=(float("inf"), 1.0, 2.0)),), seed=1)
    r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas.trapezoid)" in r.message
    finite = Case(op.qualname, (TensorSpec((3,), "float32", data=(3.0, 1.0, 2.0)),), seed=1)
    assert run_case(op, finite, CPUBackend()).outcome is Outcome.PASS


def test_integer_inputs_leave_a_floating_only_reference_without_opinion():
    """The kernel's int64 products wrap before its floating result: its rule, not the formula's."""
    op = opdb.lookup("aten::trapezoid.x")
    ref = references.reference_for(op)
    assert ref.floating
    y = TensorSpec((2,), "int64", data=(2**62, 2**62))
    x = TensorSpec((2,), "int64", data=(0, 2**62))
    assert references.opinion(op, Case(op.qualname, (y, x), seed=1), ref) is None
    yf, xf = TensorSpec((2,), "float32", data=(1.0, 3.0)), TensorSpec((2,), "float32", data=(0.0, 2.0))
    assert references.opinion(op, Case(op.qualname, (yf, xf), seed=1), ref) is not None


def test_a_polynomial_reference_has_no_opinion_where_scipy_or_the_degree_decides_nothing():
    x = np.array([0.5, np.nan, np.inf, 0.5, 0.5])
    n = np.array([3.0, 0.0, 3.0, 2.5, -1.0])
    assert formulas.polynomial_undecided("eval_chebyt", n, x).tolist() == [False, True, True, True, True]
    op = opdb.lookup("aten::special_chebyshev_polynomial_t")
    xs = TensorSpec((3,), "float32", data=(0.25, -0.5, float("nan")))
    ns = TensorSpec((3,), "float32", data=(4.0, 7.0, 0.0))
    assert run_case(op, Case(op.qualname, (xs, ns), seed=1), CPUBackend()).outcome is Outcome.PASS


def _indexing(rng, kind):
    dtype = rng.choice([torch.float64, torch.int64])
    x = (torch.randn(3, 4, 5, dtype=torch.float64) * 5).to(dtype)
    if kind in ("index", "index_put"):
        idx = [None] * rng.randint(0, 1) + [torch.randint(-3, 3, (2,)), torch.randint(0, 4, (2,))][: rng.randint(1, 2)]
        if rng.random() < 0.3:
            idx = [torch.rand(3, 4) > 0.5]
        np_idx = [None if i is None else i.numpy() for i in idx]
        got = aten.index.Tensor(x, idx)
        if kind == "index":
            return got, formulas.index(x.numpy(), np_idx)
        values = (torch.randn(got.shape, dtype=torch.float64) * 3).to(dtype)
        return aten.index_put(x, idx, values, True), formulas.index_put(x.numpy(), np_idx, values.numpy(), True)
    dim = rng.randrange(-3, 3)
    shape = [rng.randint(1, s) for s in x.shape]
    shape[dim % 3] = rng.randint(1, 6)
    index, src = torch.randint(0, x.shape[dim % 3], shape), (torch.randn(6, 6, 6, dtype=torch.float64) * 3).to(dtype)
    if kind == "scatter":
        reduce = rng.choice(["add", "multiply"])
        return aten.scatter.reduce(x, dim, index, src, reduce=reduce), formulas.scatter(
            x.numpy(), dim, index.numpy(), src.numpy(), reduce
        )
    if kind == "scatter_reduce":
        means = ["mean"] if dtype.is_floating_point else []  # an integer mean: no opinion (its sum wraps)
        reduce, include = rng.choice(["sum", "prod", "amax", "amin", *means]), rng.random() < 0.5
        got = aten.scatter_reduce.two(x, dim, index, src, reduce, include_self=include)
        return got, formulas.scatter_reduce(x.numpy(), dim, index.numpy(), src.numpy(), reduce, include)
    if kind == "put":
        at = torch.randint(-x.numel(), x.numel(), (rng.randint(1, 6),))
        source = src.reshape(-1)[: at.numel()]
        return aten.put(x, at, source, True), formulas.put(x.numpy(), at.numpy(), source.numpy(), True)
    assert kind == "masked_scatter"
    mask = torch.rand(4, 5) > 0.5
    return aten.masked_scatter(x, mask, src), formulas.masked_scatter(x.numpy(), mask.numpy(), src.numpy())


def test_a_position_written_twice_has_no_opinion_without_accumulate():
    x = np.zeros(4)
    with pytest.raises(ValueError):
        formulas.put(x, np.array([1, 1]), np.array([2.0, 3.0]), False)
    assert formulas.put(x, np.array([1, 1]), np.array([2.0, 3.0]), True).tolist() == [0.0, 5.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        formulas.scatter(np.zeros((2, 2)), 0, np.array([[0, 1], [0, 0]]), np.ones((2, 2)))
    with pytest.raises(ValueError):  # an integer mean's sum wraps in the kernel's dtype
        formulas.scatter_reduce(
            np.zeros(2, dtype=np.int32), 0, np.array([0, 0]), np.ones(2, dtype=np.int32), "mean", True
        )


# -- backwards that move gradients to indices or windows --------------------------------------


def _backward_pairs(rng):
    """(torch's backward, the formula's) for one random valid case of each backward."""
    dims = rng.choice([2, 3])
    k = [rng.randint(1, 3) for _ in range(dims)]
    s, p = [rng.randint(1, 2) for _ in range(dims)], [rng.randint(0, k[i] // 2) for i in range(dims)]
    x = torch.randn(2, 3, *[rng.randint(k[i], 5) for i in range(dims)], dtype=torch.float64)
    ceil = rng.random() < 0.5
    pool, pool_bw = (aten.max_pool2d_with_indices, aten.max_pool2d_with_indices_backward) if dims == 2 else (
        aten.max_pool3d_with_indices, aten.max_pool3d_with_indices_backward)  # fmt: skip
    out, idx = pool(x, k, s, p, [1] * dims, ceil)
    g = torch.randn_like(out)
    yield (
        "max_pool",
        pool_bw(g, x, k, s, p, [1] * dims, ceil, idx),
        formulas.pool_backward(g.numpy(), x.numpy(), idx.numpy(), dims),
    )
    avg, avg_bw = (
        (aten.avg_pool2d, aten.avg_pool2d_backward) if dims == 2 else (aten.avg_pool3d, aten.avg_pool3d_backward)
    )
    cip, div = rng.random() < 0.5, rng.choice([None, 2])
    g = torch.randn_like(avg(x, k, s, p, ceil, cip, div))
    g.view(-1)[0] = rng.choice([1.0, float("inf")])  # an infinite gradient reaches its window only
    want = formulas.avg_pool_backward(g.numpy(), x.numpy(), k, s, p, ceil, cip, div, dims)
    yield "avg_pool", avg_bw(g, x, k, s, p, ceil, cip, div), want
    y, dim, keep = torch.randn(3, 4, 5, dtype=torch.float64), rng.choice([0, 1, -1]), rng.random() < 0.5
    v, i = y.max(dim, keep)
    g = torch.randn_like(v)
    got = aten.value_selecting_reduction_backward(g, dim, i, list(y.shape), keep)
    yield "value_selecting", got, formulas.value_selecting_backward(g.numpy(), dim, i.numpy(), y.shape, keep)
    index = torch.randint(0, y.shape[dim], (rng.randint(0, 6),))
    g = torch.randn_like(y.index_select(dim, index))
    got = aten.index_select_backward(g, list(y.shape), dim, index)
    yield "index_select", got, formulas.index_select_backward(g.numpy(), y.shape, dim, index.numpy())
    ind, g = torch.randint(0, 6, (2, 3)), torch.randn(2, 3, 4, dtype=torch.float64)
    pad, freq = rng.choice([-1, 2]), rng.random() < 0.5
    got = aten.embedding_backward(g, ind, 6, pad, freq, False)
    yield "embedding", got, formulas.embedding_backward(g.numpy(), ind.numpy(), 6, pad, freq)


def test_the_backward_formulas_are_the_cpu_kernels_where_they_are_right():
    rng, seen = random.Random(5), set()
    for _ in range(40):
        for kind, got, want in _backward_pairs(rng):
            assert np.allclose(got.numpy(), want), kind
            seen.add(kind)
    assert seen == {"max_pool", "avg_pool", "value_selecting", "index_select", "embedding"}
    empty = formulas.value_selecting_backward(np.array(2.5), 0, np.zeros(0, np.int64), (), False)
    assert empty == 0  # a scalar that no index selects keeps no gradient


class _PoolGradientOverwritten(TorchDispatchMode):
    """max_pool2d's backward on the CPU itself writing (not adding) each gradient at its index: two
    windows that share a maximum keep one gradient. Golden shares it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.max_pool2d_with_indices_backward.default:
            grad, x, indices = args[0], args[1], args[7]
            flat = torch.zeros_like(x).flatten(-2)
            return flat.scatter(-1, indices.flatten(-2), grad.flatten(-2)).view_as(x)
        return func(*args, **(kwargs or {}))


def test_a_pooling_gradient_bug_golden_shares_is_found_on_the_cpu():
    op = opdb.lookup("aten::max_pool2d_with_indices_backward")
    x = TensorSpec((1, 1, 3), "float32", data=(1.0, 5.0, 2.0))  # both windows of size 2, stride 1 pick 5.0
    args = (TensorSpec((1, 1, 2), "float32", data=(0.5, 0.25)), x, [1, 2], [1, 1], [0, 0], [1, 1], False)
    case = Case(op.qualname, (*args, TensorSpec((1, 1, 2), "int64", data=(1, 1))), seed=1)
    assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS
    with _PoolGradientOverwritten():
        r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (formulas.pool_backward)" in r.message
