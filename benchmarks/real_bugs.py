"""Real-bug benchmark: published bugs of PyTorch's own CPU kernels, each found or not by
`conform run` at default settings (examples, dtypes, a random seed) over its op.

Every bug in BUGS cites where it was published and carries a tiny repro that returns True while
the bug is present in the installed torch. The benchmark

1. runs each repro (a bug that no longer reproduces is reported as such, not counted);
2. runs `conform run --ops <the ops> --device cpu` once, default settings, into a fresh
   temporary database (one run: the cells of an op are independent of the other ops);
3. reads the op's cells: the bug is found when a cell of the bug's dtype has the expected
   failing outcome and, where a bug says what its input looks like (`evidence`), the cell's
   minimal case is of that kind (a norm layer's cell failing on a one-element precision edge
   is not its variance overflow); the cell's message is printed so a reader can check it.

    python benchmarks/real_bugs.py [--set original|disjoint|all] [--only NAME,...] [--seed N] [--workers N]

docs/evaluation/real_bugs.md lists the bugs with their repros and the last measured table.
The original set (BUGS) is the default, so its past numbers stay comparable; BUGS_DISJOINT is a
second set of other published bugs, chosen before conform ran on them
(docs/evaluation/real_bugs_disjoint.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
# a NaN's position against the vector width: every floating cell (their widths differ from golden's)
FLOATS = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class Bug:
    name: str
    op: str  # the conform op whose cells should find it
    dtypes: tuple[str, ...]  # cells in which the bug shows
    outcome: str  # "mismatch" or "grad_mismatch", or both as "mismatch|grad_mismatch"
    source: str
    repro: Callable[[], bool]  # True while the bug reproduces
    cls: str  # the class of input that reaches it
    # (message, minimal case as stored JSON) -> is the cell's failure this bug? None: any failure of the cell
    evidence: Callable[[str, dict], bool] | None = None
    # other ops whose cells reach the same kernel (pairwise_distance is at::norm(x1 - x2 + eps, p):
    # aten/src/ATen/native/Distance.cpp); a cell reports one failure, so two bugs of one kernel
    # meet in both ops' cells
    also: tuple[str, ...] = ()
    # which kind of check a tool needs to see it (CATEGORIES)
    category: str = ""


# What a correct tool needs to see a bug, on the plain CPU:
CATEGORIES = {
    # the expectation shares it: golden is the same kernel in float64, so a bug of the semantics or
    # the algorithm (not of the precision) is in golden too; an independent reference or a gradient
    # without autograd's formula sees it
    "shared": "the expectation shares the bug",
    # the result depends on where an element sits (vector body or scalar tail), on the length, or on
    # a reduced-precision scalar path: a position/length relation sees it
    "position": "the result depends on position or length",
    # a layout the generator must draw: a strided out=, a transposed operand that makes the op raise
    "layout": "a layout not drawn",
    # values at the op's own edges: results just below overflow, scales and coordinates near extremes
    "edge": "values at the op's own edges",
}


def _specs(case: dict) -> list[dict]:
    """The tensor specs of a stored case, in argument order."""
    out = []
    for v in list(case.get("args", [])) + list(case.get("kwargs", {}).values()):
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, dict) and "__tensor__" in x:
                out.append(x["__tensor__"])
    return out


def _large(message: str, case: dict) -> bool:
    """The cell's minimal case keeps values whose squares overflow (the large-magnitude bands)."""
    return any(s.get("magnitude") in ("beyond_sqrt", "sqrt_max", "near_max") for s in _specs(case))


def _arg(case: dict, name: str, position: int):
    args = case.get("args", [])
    return case.get("kwargs", {}).get(name, args[position] if len(args) > position else None)


def _order(case: dict):
    """A p-norm's order in a vector_norm or pairwise_distance case (None: the default, 2)."""
    return _arg(case, "ord", 1) if "vector_norm" in case.get("op", "") else _arg(case, "p", 2)


def _order_two(message: str, case: dict) -> bool:
    return _large(message, case) and _order(case) in (None, 2, 2.0)


def _large_order(message: str, case: dict) -> bool:
    p = _order(case)
    return isinstance(p, (int, float)) and p > 10 and ("infinity mismatch" in message or "NaN mismatch" in message)


def _expanded(message: str, case: dict) -> bool:
    specs = _specs(case)
    return bool(specs) and specs[0].get("layout") == "expanded"


def _nan_grad_differs(fn, dtype=torch.float64, n=17) -> bool:
    """A NaN's gradient differs between the vectorised body and the scalar tail (#195075)."""
    x = torch.full((n,), float("nan"), dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    g = x.grad
    return not (g.isnan() == g[0].isnan()).all() or not torch.equal(g.nan_to_num(7.0), g[:1].nan_to_num(7.0).expand(n))


def _fmod_nan() -> bool:
    tiny = torch.finfo(torch.float32).tiny / 4  # a subnormal divisor: |a / b| overflows
    return bool(torch.fmod(torch.full((16,), 2.5), torch.full((16,), tiny))[0].isnan()) and math.fmod(2.5, tiny) == 0.0


def _remainder_nan() -> bool:
    tiny = torch.finfo(torch.float32).tiny / 4
    return bool(torch.remainder(torch.full((16,), 2.5), torch.full((16,), tiny))[0].isnan())


def _norm_overflow(fn) -> bool:
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 1e30
    got, want = fn(x), fn(x.double())
    return not torch.allclose(got.double(), want, atol=1e-3, equal_nan=False)


def _fused_sgd() -> bool:
    p, g = torch.ones(17, dtype=torch.float16), torch.ones(17, dtype=torch.float16)
    torch._fused_sgd_(
        [p],
        [g],
        [],
        weight_decay=0.0,
        momentum=0.0,
        lr=0.5,
        dampening=0.0,
        nesterov=False,
        maximize=False,
        is_first_step=True,
    )
    return p[0].item() == 1.0  # the full vector block was never updated


def _median_expanded() -> bool:
    x = torch.arange(5.0).reshape(1, 5).expand(3, 5)
    return not torch.equal(x.median(dim=0).values, x.contiguous().median(dim=0).values)


def _div_trunc_fpe() -> bool:
    """INT_MIN // -1 in trunc mode kills the process with SIGFPE (run in a child)."""
    code = "import torch; torch.div(torch.tensor([-2**31], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32), rounding_mode='trunc')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == -8


def _vector_norm_overflow() -> bool:
    """The 2-norm squares and sums in the dtype: inf for a norm of 1e20, far inside float32's range."""
    x = torch.tensor([1e20, 1.0, 1.0])
    return bool(torch.linalg.vector_norm(x).isinf()) and math.isfinite(float(torch.linalg.vector_norm(x.double())))


def _pnorm_overflow() -> bool:
    """A p-norm evaluated as (sum |d|**p)**(1/p): |3|**100 overflows float32, the norm is 3.09."""
    x = torch.full((1, 17), 3.0)
    return bool(F.pairwise_distance(x, torch.zeros(1, 17), p=100.0).isinf().all()) and math.isfinite(
        float(F.pairwise_distance(x.double(), torch.zeros(1, 17, dtype=torch.float64), p=100.0))
    )


def _floor_divide_half() -> bool:
    """The vectorised bfloat16 floor_divide rounds the quotient up: 560 // 3 is 187 in a long tensor."""
    a, b = torch.full((64,), 560.0, dtype=torch.bfloat16), torch.full((64,), 3.0, dtype=torch.bfloat16)
    return torch.floor_divide(a, b)[0].item() == 187.0 and torch.floor_divide(a[:1], b[:1])[0].item() == 186.0


def _matrix_exp_half() -> bool:
    a = torch.tensor([[0.5, 0.1], [0.2, 0.3]])
    return not torch.allclose(
        torch.linalg.matrix_exp(a.half()).float(), torch.linalg.matrix_exp(a), rtol=1e-2, atol=1e-2
    )


BUGS = [
    Bug(
        "gelu_inf_nan",
        "aten::gelu",
        ("float32", "bfloat16"),  # bfloat16 runs the float32 vectorised loop: NaN there too
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/185770 (also #187293)",
        lambda: bool(F.gelu(torch.full((16,), float("inf")))[0].isnan()),
        "special values in a full vector block",
    ),
    Bug(
        "fmod_vectorised_nan",
        "aten::fmod.Tensor",
        ("float32", "bfloat16"),  # bfloat16 runs the float32 vectorised loop: NaN there too
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193753",
        _fmod_nan,
        "subnormal divisor in a full vector block",
    ),
    Bug(
        "remainder_vectorised_nan",
        "aten::remainder.Tensor",
        ("float32", "bfloat16"),  # bfloat16 runs the float32 vectorised loop: NaN there too
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193753",
        _remainder_nan,
        "subnormal divisor in a full vector block",
    ),
    Bug(
        "hardtanh_backward_nan",
        "aten::hardtanh_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(F.hardtanh),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "hardshrink_backward_nan",
        "aten::hardshrink_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(F.hardshrink),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "softshrink_backward_nan",
        "aten::softshrink_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(F.softshrink),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "elu_backward_nan",
        "aten::elu_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(F.elu),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "hardswish_backward_nan",
        "aten::hardswish_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(F.hardswish),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "logit_backward_nan",
        "aten::logit_backward",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/195075",
        lambda: _nan_grad_differs(lambda x: torch.logit(x, eps=0.1)),
        "NaN in the vector body and the tail",
    ),
    Bug(
        "ldexp_power_overflow",
        "aten::ldexp.Tensor",
        ("float16", "float32", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/133265",
        lambda: bool(
            torch.ldexp(torch.tensor([2.0**-10], dtype=torch.float16), torch.tensor([20], dtype=torch.float16)).isinf()
        ),
        "an exponent whose power of two overflows while the result does not",
    ),
    Bug(
        "layer_norm_variance_overflow",
        "aten::native_layer_norm",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/162489 (fix proposed in PR #178123)",
        lambda: _norm_overflow(lambda x: F.layer_norm(x, (16,))),
        "float32 values near 1e30 (large magnitudes)",
        _large,
    ),
    Bug(
        "group_norm_variance_overflow",
        "aten::native_group_norm",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/162489 (fix proposed in PR #178123)",
        lambda: _norm_overflow(lambda x: F.group_norm(x.reshape(4, 4, 4), 2)),
        "float32 values near 1e30 (large magnitudes)",
        _large,
    ),
    Bug(
        "batch_norm_variance_overflow",
        "aten::native_batch_norm",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/162489 (fix proposed in PR #178123)",
        lambda: _norm_overflow(lambda x: F.batch_norm(x, None, None, training=True)),
        "float32 values near 1e30 (large magnitudes)",
        _large,
    ),
    Bug(
        "fused_sgd_half_skips_blocks",
        "aten::_fused_sgd_",
        ("float16", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/191763",
        _fused_sgd,
        "half-precision parameters longer than a vector",
    ),
    Bug(
        "div_trunc_int_min_fpe",
        "aten::div.Tensor_mode",
        ("int32", "int64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/138425",
        _div_trunc_fpe,
        "integer extremes divided by -1",
    ),
    Bug(
        "vector_norm_square_overflow",
        "aten::linalg_vector_norm",
        ("float32", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193006",
        _vector_norm_overflow,
        "values whose squares overflow while the norm fits",
        _order_two,
        ("aten::pairwise_distance",),
    ),
    Bug(
        "pnorm_large_order_overflow",
        "aten::pairwise_distance",
        ("float32", "bfloat16", "float16"),
        # the gradient's |d|**(p-1) / norm**(p-1) is the same evaluation: NaN in half precision
        # (five 3s at p=38: NaN for 0.2087), whose forward accumulates in float32
        "mismatch|grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/184036",
        _pnorm_overflow,
        "a p-norm order past the dtype's exponent range (|x|**p overflows, the norm fits)",
        _large_order,
        ("aten::linalg_vector_norm",),  # named in the issue: vector_norm(diff, ord=p) overflows alike
    ),
    Bug(
        "floor_divide_half_vectorised",
        "aten::floor_divide",
        ("bfloat16", "float16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193754",
        _floor_divide_half,
        "moderate half-precision values in a vector block (exact comparison)",
    ),
    Bug(
        "median_dim_expanded_garbage",
        "aten::median.dim",
        ("float32", "float64", "bfloat16", "float16", "int64", "int32"),
        "mismatch",
        "conform's own CPU sweep audit (docs/evaluation/sweep_audit.md); no upstream report found",
        _median_expanded,
        "an expanded (stride-0) input",
        _expanded,
    ),
    # the backward of matrix_exp exponentiates a 2n x 2n block matrix: a 1 x 1 half matrix's
    # gradient is already -inf (1.6487 expected), the same kernel's bug seen through its gradient
    Bug(
        "matrix_exp_half_wrong",
        "aten::linalg_matrix_exp",
        ("float16", "bfloat16"),
        "mismatch|grad_mismatch",
        "conform's own CPU sweep audit (docs/evaluation/sweep_audit.md); no upstream report found",
        _matrix_exp_half,
        "half-precision matrices of size >= 2 (the gradient of any size)",
    ),
]


# ---------------------------------------------------------------------------------------------
# A second, disjoint set: published CPU bugs of other ops (or other bugs of the same op), chosen
# from PyTorch's tracker and its OpInfo expected-failure lists before conform ran on them, to
# measure what it finds on bugs it was never shaped around. `python benchmarks/real_bugs.py
# --set disjoint`.
# ---------------------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
OPINFO = "https://github.com/pytorch/pytorch/blob/main/torch/testing/_internal/common_methods_invocations.py"


def _message_has(*needles: str) -> Callable[[str, dict], bool]:
    """Evidence: the cell's message names the bug's kind of difference (compare's wording)."""
    return lambda message, case: any(n in message for n in needles)


_NAN_DIFF = _message_has("NaN mismatch", "non-finite values")
_INF_DIFF = _message_has("infinity mismatch", "non-finite values")
_ZERO_SIGN = _message_has("sign of zero")


def _mm_path(message: str, case: dict) -> bool:
    """cdist's cancellation: more than 25 rows on a side, and a finite error (not an overflow)."""
    rows = [s["shape"][-2] for s in _specs(case) if len(s.get("shape", [])) >= 2]
    return any(r > 25 for r in rows) and not _NAN_DIFF(message, case) and not _INF_DIFF(message, case)


def _searchsorted_nan() -> bool:
    """NaN sorts last (torch.sort, NumPy): 4 belongs before the NaN of [1, 3, nan], at index 2."""
    return torch.searchsorted(torch.tensor([1.0, 3.0, NAN]), torch.tensor([4.0])).item() == 3


def _logsumexp_grad_inf() -> bool:
    """d logsumexp([inf, 1]) is softmax's limit (1, 0); logaddexp's own gradient gives it."""
    x = torch.tensor([INF, 1.0], requires_grad=True)
    torch.logsumexp(x, 0).backward()
    return bool(x.grad[0].isnan())


def _zero_sign_by_length(fn, n_short: int = 1, n_long: int = 64) -> bool:
    short, long = fn(n_short)[0], fn(n_long)[0]
    return bool(short.signbit() != long.signbit())


def _sinh_vector_overflow() -> bool:
    """sinh(89) = 2.24e38 fits float32; the vectorised (Sleef) path overflows, the scalar tail does not."""
    return bool(torch.sinh(torch.full((64,), 89.0))[0].isinf()) and math.isfinite(
        torch.sinh(torch.full((1,), 89.0)).item()
    )


def _rsqrt_half_scalar() -> bool:
    """The one-element (scalar) bfloat16 path rounds twice: 31.75 where 1/sqrt(x) rounds to 31.625."""
    x = torch.tensor(0.00099945068359375, dtype=torch.bfloat16)
    return torch.rsqrt(x.expand(64).contiguous())[0].item() != torch.rsqrt(x.reshape(1)).item()


def _cdist_by_size() -> bool:
    """Past 25 rows cdist switches to |x|^2 + |y|^2 - 2xy (cancellation): the same pair, another distance."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(30, 3, generator=g) + 1000, torch.randn(30, 3, generator=g) + 1000
    full, alone = torch.cdist(a, b)[0, 0].item(), torch.cdist(a[:1], b[:1])[0, 0].item()
    return abs(full - alone) > 1e-3 * alone


def _pool3d_strided_out() -> bool:
    x = torch.randn(1, 2, 4, 4, 4, generator=torch.Generator().manual_seed(0))
    out = torch.zeros(1, 2, 2, 2, 4)[..., ::2]
    torch._C._nn.avg_pool3d(x, 2, out=out)
    return not torch.equal(out, F.avg_pool3d(x, 2))


def _narrow_copy_strided_out() -> bool:
    t = torch.arange(24.0).reshape(2, 3, 4)
    out = torch.zeros(4, 6, 4)[::2, ::2, ::2]
    torch.narrow_copy(t, 2, 1, 2, out=out)
    return not torch.equal(out, t.narrow_copy(2, 1, 2))


def _group_norm_strided_raises() -> bool:
    x = torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(0))
    xt = x.transpose(0, 2).contiguous().transpose(0, 2)  # same values, another layout
    torch.native_group_norm(x, None, None, 4, 6, 5, 2, 1e-5)
    try:
        torch.native_group_norm(xt, None, None, 4, 6, 5, 2, 1e-5)
    except RuntimeError:
        return True
    return False


def _randn_strided_out() -> bool:
    torch.manual_seed(0)
    want = torch.randn(4, 4)
    torch.manual_seed(0)
    out = torch.empty(4, 4).t()
    torch.randn(4, 4, out=out)
    return not torch.equal(out, want)


def _premature_overflow(fn) -> bool:
    """float32 overflows at 89 where the value (about 1.9e37) fits; float64 computes it."""
    return bool(fn(torch.tensor([89.0])).isinf()) and math.isfinite(
        fn(torch.tensor([89.0], dtype=torch.float64)).item()
    )


BUGS_DISJOINT = [
    # -- the expectation shares the bug ------------------------------------------------------
    Bug(
        "sign_nan_zero",
        "aten::sign",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/187295 (also #41245)",
        lambda: torch.sign(torch.full((3,), NAN))[0].item() == 0.0,
        "NaN (sign returns 0, NumPy NaN)",
        _NAN_DIFF,
        ("aten::sgn",),
        "shared",
    ),
    Bug(
        "heaviside_nan_zero",
        "aten::heaviside",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/187296",
        lambda: torch.heaviside(torch.full((3,), NAN), torch.ones(3))[0].item() == 0.0,
        "NaN input (heaviside returns 0, NumPy NaN)",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "searchsorted_nan_boundary",
        "aten::searchsorted.Tensor",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/158738 (fix PR #159632 not merged)",
        _searchsorted_nan,
        "NaN inside the sorted boundaries",
        category="shared",
    ),
    Bug(
        "bce_with_logits_neg_inf",
        "aten::binary_cross_entropy_with_logits",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/135359",
        lambda: bool(
            F.binary_cross_entropy_with_logits(torch.tensor([-INF]), torch.tensor([0.9])).isnan()
        ),  # the documented formula gives +inf
        "-inf logits with a soft target",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "logsumexp_grad_inf",
        "aten::logsumexp",
        FLOATS,
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/49724",
        _logsumexp_grad_inf,
        "+inf in the reduced row (the gradient formula meets inf - inf)",
        category="shared",
    ),
    Bug(
        "remainder_zero_sign",
        "aten::remainder.Tensor",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193755",
        lambda: bool(torch.remainder(torch.tensor([-1.0]), torch.tensor([1.0])).signbit()),  # Python: 0.0
        "an exact multiple: the zero takes the dividend's sign, not the divisor's",
        _ZERO_SIGN,
        category="shared",
    ),
    # -- the result depends on position or length -----------------------------------------------
    Bug(
        "minimum_zero_sign_by_length",
        "aten::minimum",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/193781",
        lambda: _zero_sign_by_length(lambda n: torch.minimum(torch.full((n,), 0.0), torch.full((n,), -0.0))),
        "+0.0 against -0.0, in the scalar tail and in a vector block",
        _ZERO_SIGN,
        ("aten::maximum",),
        "position",
    ),
    Bug(
        "clamp_tensor_zero_sign_by_length",
        "aten::clamp.Tensor",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/pull/197018 (review: clamp's scalar and vector paths"
        " differ on signed zeros; also #87131)",
        lambda: _zero_sign_by_length(lambda n: torch.clamp(torch.full((n,), -0.0), min=torch.zeros(n))),
        "-0.0 clamped at a +0.0 bound, in the scalar tail and in a vector block",
        _ZERO_SIGN,
        category="position",
    ),
    Bug(
        "sinh_vector_overflow",
        "aten::sinh",
        ("float32", "bfloat16", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/48641 (OpInfo skips cosh's reference_numerics_large for it)",
        _sinh_vector_overflow,
        "results just below overflow (x in [88.7, 89.4] for float32), inside a vector block",
        _INF_DIFF,
        ("aten::cosh",),
        "position",
    ),
    Bug(
        "rsqrt_half_scalar_path",
        "aten::rsqrt",
        ("bfloat16", "float16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/162907 (fix PR #162955 not merged)",
        _rsqrt_half_scalar,
        "half-precision inputs alone (the scalar path rounds twice) against a vector block",
        category="position",
    ),
    Bug(
        "cdist_mm_path_by_size",
        "aten::_cdist_forward",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/37734 (also #42479)",
        _cdist_by_size,
        "more than 25 rows of points far from the origin (the matrix-multiply path cancels)",
        _mm_path,
        ("aten::cdist",),
        category="position",
    ),
    # -- layouts not drawn --------------------------------------------------------------------
    Bug(
        "avg_pool3d_strided_out",
        "aten::avg_pool3d.out",
        ("float32", "float64", "int64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/84577; " + OPINFO + " (nn.functional.avg_pool3d:"
        " expectedFailure TestCommon.test_out, device_type='cpu')",
        _pool3d_strided_out,
        "a non-contiguous out=",
        category="layout",
    ),
    Bug(
        "narrow_copy_strided_out",
        "aten::narrow_copy.out",
        FLOATS + ("int64", "int32"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/84577",
        _narrow_copy_strided_out,
        "a non-contiguous out=",
        category="layout",
    ),
    Bug(
        "group_norm_strided_raises",
        "aten::native_group_norm",
        FLOATS,
        "device_error",
        OPINFO + " (native_group_norm: expectedFailure TestCommon.test_noncontiguous_samples, device_type='cpu')",
        _group_norm_strided_raises,
        "a non-contiguous input (the op raises; the same values contiguous do not)",
        category="layout",
    ),
    Bug(
        "randn_strided_out",
        "aten::randn.out",
        ("none", "float32", "float64", "bfloat16", "float16"),  # a factory op's cell is "none"
        "mismatch",
        OPINFO + " (randn: expectedFailure TestCommon.test_out, device_type='cpu': values depend on"
        " the strides of out)",
        _randn_strided_out,
        "a transposed out= under a fixed seed",
        category="layout",
    ),
    # -- values at the op's own edges ---------------------------------------------------------
    Bug(
        "softplus_large_beta",
        "aten::softplus",
        ("float32", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/171249",
        lambda: bool(F.softplus(torch.tensor([0.5]), beta=1e30, threshold=1e30).isinf()),  # 0.5 expected
        "a beta (and threshold) near the dtype's range: exp(beta * x) overflows",
        _INF_DIFF,
        category="edge",
    ),
    Bug(
        "cosine_similarity_overflow",
        "aten::cosine_similarity",
        ("float32", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/51912",
        lambda: F.cosine_similarity(torch.tensor([[1e20, 2e20]]), torch.tensor([[1e20, 2e20]])).item() == 0.0,
        "vectors whose squared norms overflow (1e20 in float32): 0 where 1 is right",
        _large,
        category="edge",
    ),
    Bug(
        "i0_premature_overflow",
        "aten::i0",
        ("float32", "bfloat16", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/192291",
        lambda: _premature_overflow(torch.i0),
        "results just below overflow (x near 89 in float32, 713 in float64): exp(x) overflows first",
        _INF_DIFF,
        category="edge",
    ),
    Bug(
        "i1_premature_overflow",
        "aten::special_i1",
        ("float32", "bfloat16", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/192294",
        lambda: _premature_overflow(torch.special.i1),
        "results just below overflow (x near 89 in float32, 713 in float64): exp(x) overflows first",
        _INF_DIFF,
        category="edge",
    ),
]

SETS = {"original": BUGS, "disjoint": BUGS_DISJOINT, "all": BUGS + BUGS_DISJOINT}

FAILING = ("mismatch", "grad_mismatch", "crash", "timeout", "device_error", "missing_error", "meta_mismatch")


def reproduces(bug: Bug) -> bool | str:
    try:
        return bool(bug.repro())
    except Exception as e:  # noqa: BLE001 - a repro that raises does not reproduce
        return f"{type(e).__name__}: {e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--set",
        dest="bug_set",
        choices=sorted(SETS),
        default="original",
        help="which bugs: the original set, the disjoint one, or all (default: original)",
    )
    ap.add_argument("--only", default="", help="comma list of bug names")
    ap.add_argument("--seed", type=int, default=None, help="run seed (default: random, printed)")
    ap.add_argument("--workers", default="1")
    ap.add_argument("--db", default=None, help="reuse an existing run's database instead of running")
    ap.add_argument("--keep", default=None, help="copy the run's database here (to audit the cells afterwards)")
    args = ap.parse_args()
    bugs = [b for b in SETS[args.bug_set] if not args.only or b.name in args.only.split(",")]
    live = []
    for b in bugs:
        r = reproduces(b)
        if r is not True:
            print(f"{b.name}: does not reproduce on torch {torch.__version__} ({r})", file=sys.stderr)
        else:
            live.append(b)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    with tempfile.TemporaryDirectory(prefix="real-bugs-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "run.db"
        secs = 0.0
        if not args.db:
            ops = ",".join(sorted({op for b in live for op in (b.op, *b.also)}))
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            t = time.monotonic()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "conform.cli",
                    "run",
                    "--ops",
                    ops,
                    "--device",
                    "cpu",
                    "--db",
                    str(db),
                    "-n",
                    args.workers,
                    "-q",
                    "--no-bench",  # timing is not what this measures
                    "--seed",
                    str(seed),
                ],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
            )
            secs = time.monotonic() - t
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
            if args.keep:
                shutil.copyfile(db, args.keep)
        with sqlite3.connect(db) as c:
            rows = c.execute(
                'SELECT o.qualname, r.dtype, r.outcome, r.message, f."case" FROM results r JOIN ops o ON o.id = r.op_id'
                " LEFT JOIN failures f ON f.result_id = r.id"
            ).fetchall()
    cells: dict[str, list[tuple[str, str, str, dict]]] = {}
    for op, dtype, outcome, message, case in rows:
        cells.setdefault(op, []).append((dtype, outcome, message or "", json.loads(case) if case else {}))
    table = []
    found = 0
    for b in live:
        hits = [
            (d, o, m)
            for op in (b.op, *b.also)
            for d, o, m, case in cells.get(op, [])
            if d in b.dtypes and o in b.outcome.split("|") and (b.evidence is None or b.evidence(m, case))
        ]
        found += bool(hits)
        other = [
            (d, o, m) for d, o, m, _ in cells.get(b.op, []) if d in b.dtypes and o in b.outcome.split("|") and not hits
        ]
        note = (
            f"{hits[0][0]}: {hits[0][2][:110]}"
            if hits
            else f"{other[0][0]} failed on another input class: {other[0][2][:80]}"
            if other
            else ", ".join(sorted({f"{d} {o}" for d, o, _, _ in cells.get(b.op, []) if o in FAILING}))
            or "all cells pass"
        )
        table.append((b.name, b.op, "yes" if hits else "NO", b.category or "-", b.cls, note))
    header = ("bug", "op", "found", "category", "inputs that reach it", "cell / what the op's cells said")
    widths = [max(len(str(r[i])) for r in table + [header]) for i in range(len(header))]
    print(
        f"torch {torch.__version__}, seed {seed}, one conform run over {len({op for b in live for op in (b.op, *b.also)})} ops in {secs:.0f} s"
    )
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |")
    print(
        f"found {found}/{len(live)} reproducing bugs ({100.0 * found / max(len(live), 1):.0f}%); {len(bugs) - len(live)} listed bugs do not reproduce here"
    )


if __name__ == "__main__":
    main()
