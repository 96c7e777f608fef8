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
