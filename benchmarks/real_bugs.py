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

    python benchmarks/real_bugs.py [--set NAME] [--only NAME,...] [--seed N] [--workers N]
    (--set: original, disjoint, heldout, fresh, fifth ... eleventh, or all)
    python benchmarks/real_bugs.py --set heldout --check-repros   # the repros only, no conform run

docs/evaluation/real_bugs.md lists the bugs with their repros and the last measured table.
The original set (BUGS) is the default, so its past numbers stay comparable; BUGS_DISJOINT is a
second set of other published bugs, chosen before conform ran on them
(docs/evaluation/real_bugs_disjoint.md). BUGS_HELDOUT is a third, of ops neither names, fixed
before conform ran on it (docs/evaluation/real_bugs_heldout.md); its meta-kernel bugs are looked
for in a run on the meta device (Bug.device), so that set runs conform once per device.
BUGS_FRESH is a fourth, of ops none of the other three names, drawn in order from the skip and
expected-failure entries of PyTorch's OpInfo database and from tracker searches by class, fixed
before conform ran on it (docs/evaluation/real_bugs_fresh.md). BUGS_FIFTH is a fifth, of ops none
of the other four names, drawn in order from sources the fresh set did not use (the meta
expected-failure tables, other OpInfo test families, new tracker queries), fixed before conform ran
on it (docs/evaluation/real_bugs_fifth.md). BUGS_SIXTH is a sixth, of ops none of the other five
names, drawn in order from tracker searches the fifth set did not use, fixed before conform ran on it
(docs/evaluation/real_bugs_sixth.md). BUGS_SEVENTH is a seventh, of ops none of the other six names,
drawn in order from tracker searches by op family that no earlier set used, fixed before conform ran
on it (docs/evaluation/real_bugs_seventh.md). BUGS_EIGHTH is an eighth, of ops none of the other seven
names, drawn in order from tracker searches by op family and by symptom that no earlier set used, fixed
before conform ran on it (docs/evaluation/real_bugs_eighth.md). BUGS_NINTH is a ninth, of ops none of
the other eight names, drawn in order from tracker searches by op family and by symptom that no earlier
set used, fixed before conform ran on it (docs/evaluation/real_bugs_ninth.md). BUGS_TENTH is a tenth,
of ops none of the other nine names, drawn in order from tracker searches no earlier set used and from
the expected-failure entries of PyTorch's OpInfo database, fixed before conform ran on it
(docs/evaluation/real_bugs_tenth.md). BUGS_ELEVENTH is an eleventh, of ops none of the other ten names,
drawn in order from the expected failures of PyTorch's test files outside OpInfo, tracker searches on
nine topics and the most recent reports, fixed before conform ran on it
(docs/evaluation/real_bugs_eleventh.md).
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
import warnings
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
    # the conform device whose cells show it: "cpu", or "meta" where the meta kernel is at fault
    # (its cells are compared with the CPU's shapes, dtypes and strides)
    device: str = "cpu"


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
    # the backward formula is wrong at special points (infinities, saturated outputs, tiny or huge
    # arguments): a gradient from an independent formula or finite differences sees it
    "gradient": "the gradient formula at special points",
    # the meta kernel's output shape, dtype or strides disagree with the real kernel's
    "meta": "the meta kernel's form",
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
    return any(
        (s.get("magnitude") or "").removeprefix("equal_") in ("beyond_sqrt", "sqrt_max", "near_max")
        for s in _specs(case)
    )


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


# ---------------------------------------------------------------------------------------------
# A third, held-out set: published CPU and meta kernel bugs of ops neither set above names,
# chosen from PyTorch's tracker before conform ran on any of them, to measure conform on bugs
# no one has shaped it around. `python benchmarks/real_bugs.py --set heldout`.
# ---------------------------------------------------------------------------------------------

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _grad_of(fn, *values, dtype=torch.float64) -> list[torch.Tensor]:
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    fn(*xs).sum().backward()
    return [x.grad for x in xs]


def _reduce_mean(message: str, case: dict) -> bool:
    """index_reduce's cell failed on a mean reduction (the count is kept in the dtype)."""
    return _arg(case, "reduce", 3) == "mean"


def _index_reduce_mean(dtype=torch.bfloat16) -> bool:
    """The mean's count is accumulated in the dtype: it stops at 256 in bfloat16 (2048 in float16),
    so [0, 1, 0, 1, ...] onto one index averages 1.0, not 0.5 (the report's repro, n = 512)."""
    n = 512 if dtype == torch.bfloat16 else 4096
    src = torch.tensor([0.0, 1.0], dtype=dtype).repeat(n // 2)
    got = torch.zeros(1, dtype=dtype).index_reduce(0, torch.zeros(n, dtype=torch.int32), src, "mean")
    return abs(got.item() - 0.5) > 0.1


def _i0e_half_scalar_path() -> bool:
    """A half-precision i0e alone takes the scalar path, which is not correctly rounded: bfloat16
    i0e(0) is 0.9921875 alone, 1.0 (exact) inside a vector block; float16 i0e(0.5) 0.6455 against
    0.6450."""

    def alone_vs_block(v, dtype):
        return torch.special.i0e(torch.tensor([v], dtype=dtype)).item(), torch.special.i0e(
            torch.full((64,), v, dtype=dtype)
        )[0].item()

    one, block = alone_vs_block(0.0, torch.bfloat16)
    one16, block16 = alone_vs_block(0.5, torch.float16)
    return one != block and block == 1.0 and one16 != block16


def _round_decimals_overflow() -> bool:
    """round(x, decimals) scales by 10**decimals first: 3e37 (already an integer) rounds to inf."""
    return bool(torch.round(torch.tensor([3e37]), decimals=2).isinf()) and bool(
        torch.round(torch.tensor([1e300], dtype=torch.float64), decimals=10).isinf()
    )


def _exp2_grad_overflow() -> bool:
    """d exp2(x) = ln 2 * 2**x is computed as ln 2 * exp2(x): at x = 128.2 the result overflows
    float32 while the derivative, 2.7e38, fits (float64: x = 1024)."""
    (g,) = _grad_of(torch.exp2, 128.2, dtype=torch.float32)
    (g64,) = _grad_of(torch.exp2, 1024.0)
    return bool(g.isinf()) and bool(g64.isinf())


def _atan2_grad_overflow() -> bool:
    """d atan2(a, b)/da = b / (a**2 + b**2) built from the reciprocal 1 / (a**2 + b**2), which
    overflows: a = b = 2e-3 in float16 gives inf where 250 is right (1e-20 in float32)."""
    for dtype, v in ((torch.float16, 2e-3), (torch.float32, 1e-20)):
        ga, _ = _grad_of(torch.atan2, v, v, dtype=dtype)
        if not bool(ga.isinf()):
            return False
    return True


def _tail_grad_zero(fn, x: float, want: float) -> bool:
    """The backward formula rebuilds the derivative from the rounded output (1 - y**2, y * (1 - y),
    y + 1): 0 where the derivative is a normal float64 number."""
    (g,) = _grad_of(fn, x)
    return g.item() == 0.0 and want > torch.finfo(torch.float64).tiny


def _logaddexp_grad_neg_inf() -> bool:
    """logaddexp(-inf, -inf) is -inf; its gradient is exp(a - out) = exp(-inf + inf): NaN where the
    limit (and logaddexp(-inf, -inf + 2)'s associativity) gives (0.5, 0.5) or 0."""
    ga, gb = _grad_of(torch.logaddexp, [-INF], [-INF])
    return bool(ga.isnan().all()) and bool(gb.isnan().all())


def _gelu_strided_out() -> bool:
    """float32 gelu into a non-contiguous out= (transposed, or every other element) writes the
    values in the wrong places: the oneDNN path assumes a contiguous result."""
    x = torch.randn(10, 10, generator=torch.Generator().manual_seed(0))
    out = torch.zeros(10, 10).t()
    torch._C._nn.gelu(x, out=out)
    return not torch.allclose(out, F.gelu(x))


def _max_unpool2d_meta_strides() -> bool:
    """For a channels_last input the CPU kernel returns a channels_last result
    (suggest_memory_format); the meta kernel (the decomposition) returns a contiguous one."""
    pooled, idx = F.max_pool2d(
        torch.randn(1, 2, 4, 6).to(memory_format=torch.channels_last), kernel_size=2, return_indices=True
    )
    cpu = torch.ops.aten.max_unpool2d(pooled, idx, [4, 6])
    meta = torch.ops.aten.max_unpool2d(pooled.to("meta"), idx.to("meta"), [4, 6])
    return cpu.stride() != meta.stride()


def _batch_norm_meta_eval_stats() -> bool:
    """In evaluation mode the CPU kernel returns empty save_mean/save_invstd; the meta kernel
    returns them with the channel count."""
    x, rm, rv = torch.rand(2, 3), torch.rand(3), torch.rand(3)

    def run(d):
        return torch.ops.aten.native_batch_norm(
            x.to(d), None, None, rm.to(d), rv.to(d), training=False, momentum=1e-4, eps=1e-6
        )

    return run("cpu")[1].shape != run("meta")[1].shape


def _batch_norm_meta_strides() -> bool:
    """The CPU kernel returns a contiguous output for a transposed input; the meta kernel keeps the
    input's strides."""
    x = torch.randn(2, 3, 4).transpose(1, 2)

    def run(d):
        args = (x.to(d), torch.ones(4, device=d), torch.zeros(4, device=d))
        return torch.ops.aten.native_batch_norm(
            *args, torch.zeros(4, device=d), torch.ones(4, device=d), True, 0.1, 1e-5
        )[0]

    return run("cpu").stride() != run("meta").stride()


_SHAPE = _message_has("shape")
_STRIDES = _message_has("strides")

BUGS_HELDOUT = [
    # -- the expectation shares the bug -------------------------------------------------------
    Bug(
        "silu_neg_inf_nan",
        "aten::silu",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/160876 (fix PR #195197 not merged)",
        lambda: all(bool(F.silu(torch.full((16,), -INF, dtype=d))[0].isnan()) for d in _DTYPES.values()),
        "-inf: x * sigmoid(x) evaluates -inf * 0 (NaN) where the limit is 0",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "igamma_nan_argument_finite",
        "aten::igamma",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/132614",
        lambda: (
            torch.igamma(torch.tensor([INF]), torch.tensor([NAN])).item() == 0.0
            and torch.igamma(torch.tensor([NAN]), torch.tensor([0.0])).item() == 0.0
        ),
        "NaN in one argument with an infinite or zero other: a finite result, NaN expected",
        _NAN_DIFF,
        ("aten::special_gammainc",),
        "shared",
    ),
    Bug(
        "igammac_nan_argument_finite",
        "aten::igammac",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/132614 (gammaincc, named in the report)",
        lambda: (
            torch.igammac(torch.tensor([INF]), torch.tensor([NAN])).item() == 1.0
            and torch.igammac(torch.tensor([NAN]), torch.tensor([0.0])).item() == 1.0
        ),
        "NaN in one argument with an infinite or zero other: a finite result, NaN expected",
        _NAN_DIFF,
        ("aten::special_gammaincc",),
        "shared",
    ),
    Bug(
        "polygamma_pole_finite",
        "aten::polygamma",
        ("float32", "float64", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/55357 (also #106692, #186640)",
        lambda: (
            bool(torch.polygamma(1, torch.tensor([-1.0])).isfinite())
            and bool(torch.polygamma(1, torch.tensor([-2.0], dtype=torch.float64)).isfinite())
        ),
        "n >= 1 at a non-positive integer (a pole): finite garbage (1.3e15) where SciPy gives +inf",
        _INF_DIFF,
        ("aten::special_polygamma",),
        "shared",
    ),
    Bug(
        "polygamma_inf_nan",
        "aten::polygamma",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/55357 (n > 1 at +inf)",
        lambda: bool(torch.polygamma(2, torch.tensor([INF])).isnan()),
        "n >= 2 at +inf: NaN where the limit (SciPy) is -0 or 0",
        _NAN_DIFF,
        ("aten::special_polygamma",),
        "shared",
    ),
    # -- the result depends on length and the dtype's path --------------------------------------
    Bug(
        "index_reduce_mean_half_count",
        "aten::index_reduce",
        ("bfloat16", "float16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/139242 (fix PR #139264 closed unmerged)",
        lambda: _index_reduce_mean(torch.bfloat16) and _index_reduce_mean(torch.float16),
        "more than 256 (bfloat16) or 2048 (float16) sources onto one index, reduce='mean'",
        _reduce_mean,
        category="position",
    ),
    Bug(
        "i0e_half_scalar_path",
        "aten::special_i0e",
        ("bfloat16", "float16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/140348 (bfloat16 i0e on the CPU differs from the GPU)",
        _i0e_half_scalar_path,
        "half-precision inputs alone (the scalar path) against the same inside a vector block, exactly",
        category="position",
    ),
    # -- a layout the generator must draw ------------------------------------------------------
    Bug(
        "gelu_strided_out",
        "aten::gelu.out",
        ("float32",),
        "mismatch",
        OPINFO + " (nn.functional.gelu: TestCommon.test_out skipped, 'Tensor-likes are not close')",
        _gelu_strided_out,
        "a non-contiguous out= (transposed or strided) for a contiguous float32 input",
        category="layout",
    ),
    # -- values at the op's own edges ---------------------------------------------------------
    Bug(
        "round_decimals_overflow",
        "aten::round.decimals",
        ("float32", "bfloat16", "float64"),
        "mismatch",
        "no upstream report found; wrong by the documentation (round to `decimals` places: 3e37 is"
        " already an integer); the scale-by-10**decimals numerics were questioned in the review of"
        " https://github.com/pytorch/pytorch/pull/66195",
        _round_decimals_overflow,
        "|x| > max / 10**decimals (already integers): x * 10**decimals overflows to inf",
        _INF_DIFF,
        category="edge",
    ),
    Bug(
        "ndtr_lower_tail_zero",
        "aten::special_ndtr",
        ("float32", "float64", "bfloat16"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/192295 (fix PR #192632 not merged)",
        lambda: (
            torch.special.ndtr(torch.tensor([-10.0], dtype=torch.float64)).item() == 0.0
            and torch.special.ndtr(torch.tensor([-6.0])).item() == 0.0
        ),
        "the lower tail (x below -8.3 in float64, -5.5 in float32): (1 + erf(x / sqrt 2)) / 2 cancels to 0"
        " where 0.5 * erfc(-x / sqrt 2) is a normal number",
        category="edge",
    ),
    # -- the gradient formula at special points -------------------------------------------------
    Bug(
        "exp2_backward_overflow",
        "aten::exp2",
        ("float32", "bfloat16", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/192407 (also #192408; fix PR #193041 not merged)",
        _exp2_grad_overflow,
        "x just past the forward's overflow (128 to 128.5 in float32): the derivative still fits",
        _INF_DIFF,
        category="gradient",
    ),
    Bug(
        "atan2_backward_reciprocal_overflow",
        "aten::atan2",
        FLOATS,
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/193040",
        _atan2_grad_overflow,
        "both arguments tiny (a**2 + b**2 near the smallest normal): inf where b / (a**2 + b**2) fits",
        _INF_DIFF,
        category="gradient",
    ),
    Bug(
        "expm1_backward_tail_zero",
        "aten::expm1",
        FLOATS,
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/192406",
        lambda: _tail_grad_zero(torch.expm1, -40.0, math.exp(-40.0)),
        "x below about -37 (float64), -17 (float32): the gradient (result + 1) is 0, exp(x) expected",
        category="gradient",
    ),
    Bug(
        "sigmoid_backward_tail_zero",
        "aten::sigmoid",
        ("float32", "float64", "bfloat16"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/195681 (also #195527)",
        lambda: _tail_grad_zero(torch.sigmoid, 40.0, math.exp(-40.0)),
        "x where sigmoid rounds to 1 (37.5 in float64): y * (1 - y) is 0, exp(-x) expected",
        category="gradient",
    ),
    Bug(
        "tanh_backward_saturation_zero",
        "aten::tanh",
        FLOATS,
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/195685 (also #195527)",
        lambda: (
            _tail_grad_zero(torch.tanh, 20.0, 4 * math.exp(-40.0))
            and _grad_of(torch.tanh, -9.010913848876953, dtype=torch.float32)[0].item() == 0.0
        ),
        "|x| where tanh rounds to 1 (9 in float32, 19 in float64): 1 - y**2 is 0, 4 exp(-2|x|) expected",
        category="gradient",
    ),
    Bug(
        "logaddexp_backward_neg_inf_nan",
        "aten::logaddexp",
        FLOATS,
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/49724 (its first problem: logaddexp's own gradient"
        " formula, not logsumexp's of the disjoint set)",
        _logaddexp_grad_neg_inf,
        "both arguments -inf: exp(-inf - (-inf)) is NaN in the gradient",
        _NAN_DIFF,
        ("aten::logaddexp2",),
        "gradient",
    ),
    # -- the meta kernel's form ---------------------------------------------------------------
    Bug(
        "native_batch_norm_meta_eval_stats_shape",
        "aten::native_batch_norm",
        FLOATS,
        "meta_mismatch",
        "https://github.com/pytorch/pytorch/issues/100985",
        _batch_norm_meta_eval_stats,
        "evaluation mode with running statistics: save_mean/save_invstd of shape [C] on meta, [0] on the CPU",
        _SHAPE,
        ("aten::_native_batch_norm_legit",),
        "meta",
        "meta",
    ),
    Bug(
        "max_unpool2d_meta_channels_last_strides",
        "aten::max_unpool2d",
        FLOATS,
        "meta_mismatch",
        "https://github.com/pytorch/pytorch/issues/187173 (the decomposition that serves as meta kernel"
        " returns contiguous strides; fix PRs #187195 and #190189 closed, not in 2.13)",
        _max_unpool2d_meta_strides,
        "a channels_last input: the CPU result is channels_last, meta's contiguous",
        _STRIDES,
        category="meta",
        device="meta",
    ),
    Bug(
        "native_batch_norm_meta_strides",
        "aten::native_batch_norm",
        FLOATS,
        "meta_mismatch",
        "https://github.com/pytorch/pytorch/issues/192668 (fix PR #192962 closed unmerged)",
        _batch_norm_meta_strides,
        "a non-contiguous (transposed) input: the CPU returns a contiguous output, meta keeps the input's strides",
        _STRIDES,
        category="meta",
        device="meta",
    ),
]


# ---------------------------------------------------------------------------------------------
# A fourth, fresh set: ops none of the three sets names, drawn in order from the skip and
# expected-failure entries of PyTorch's own OpInfo database for the installed torch and from
# tracker searches by class, fixed before conform ran on it (docs/evaluation/real_bugs_fresh.md).
# `python benchmarks/real_bugs.py --set fresh`.
# ---------------------------------------------------------------------------------------------


def _c64(*values: complex) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.complex64)


def _pow_zero_zero(fn) -> bool:
    """0j ** 0j is 1 (NumPy, Python); the complex pow kernel gives NaN+NaNj."""
    return bool(fn(_c64(0j), _c64(0j)).isnan().all()) and (complex(0) ** complex(0)) == 1


def _add_inf_nan() -> bool:
    """(inf+infj) + (inf+infj) is inf+infj componentwise; add multiplies by alpha first: NaN+NaNj."""
    z = complex(INF, INF)
    return bool(torch.add(_c64(z), _c64(z)).isnan().all()) and not math.isnan((z + z).real)


def _addr_inf_nan() -> bool:
    """beta * input + alpha * outer(v1, v2) with v1 = inf: the real part is inf (NumPy: inf+nanj)."""
    out = torch.addr(_c64(1.1 + 0j, 1.1 + 0j).reshape(1, 2), _c64(complex(INF, 0)), _c64(1 + 0j, 2 + 0j))
    return bool(out.real.isnan().all())


def _square_by_length() -> bool:
    """(-1e20-1e20j)**2 overflows: one element (the scalar path) gives -inf+infj, a vector block
    nan+infj (the true value is 0+2e40j)."""
    z = -1e20 - 1e20j
    alone, block = torch.square(_c64(z))[0].item(), torch.square(_c64(*[z] * 32))[0].item()
    return math.isnan(alone.real) != math.isnan(block.real)


def _to_meta(a):
    if isinstance(a, (list, tuple)):
        return [_to_meta(x) for x in a]
    return a.to("meta") if isinstance(a, torch.Tensor) else a


def _meta_returns_where_cpu_raises(fn, *args) -> bool:
    try:
        fn(*args)
    except (RuntimeError, NotImplementedError):
        fn(*_to_meta(list(args)))
        return True
    return False


def _channel_shuffle_meta_strides() -> bool:
    x = torch.randn(1, 4, 3, 3).to(memory_format=torch.channels_last)
    return torch.ops.aten.channel_shuffle(x, 2).stride() != torch.ops.aten.channel_shuffle(x.to("meta"), 2).stride()


def _as_strided_scatter_grad() -> bool:
    """The input's gradient is inverted: 1 where b overwrites it, 0 where the output copies it."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(2, 2, dtype=torch.float64, generator=g, requires_grad=True)
    torch.as_strided_scatter(a, b, (2, 2), (1, 2)).sum().backward()
    return a.grad[0].item() == 1.0  # element 0 is overwritten by b: its gradient is 0


def _cumulative_out_unsafe_cast(fn) -> bool:
    """A float result into a long out= is an unsafe cast, which out= must refuse (add does);
    cumsum and cumprod truncate silently."""
    x = torch.tensor([0.5, 0.25, 0.125])
    try:
        torch.add(x, x, out=torch.empty(3, dtype=torch.long))
    except RuntimeError:
        fn(x, 0, out=torch.empty(3, dtype=torch.long))
        return True
    return False


def _convolution_meta_bias() -> bool:
    """A bias of the wrong length (3 where groups=2 makes 6 output channels)."""
    return _meta_returns_where_cpu_raises(
        lambda x, w, b: F.conv_transpose2d(x, w, b, groups=2),
        torch.randn(2, 4, 5, 5),
        torch.randn(4, 3, 3, 3),
        torch.randn(3),
    )


def _kron_transposed_raises() -> bool:
    a, b = torch.randn(3, 2).t(), torch.randn(2, 2)
    torch.kron(a.contiguous(), b)
    try:
        torch.kron(a, b)
    except RuntimeError:
        return True
    return False


OPINFO_FRESH = OPINFO + " (torch 2.13's OpInfo database"

BUGS_FRESH = [
    # -- the expectation shares the bug -----------------------------------------------------------
    Bug(
        "pow_complex_zero_to_zero_nan",
        "aten::pow.Tensor_Tensor",
        ("complex64",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/76853; " + OPINFO_FRESH + ", pow: skip TestBinaryUfuncs"
        " test_reference_numerics_small_values for complex)",
        lambda: _pow_zero_zero(torch.pow),
        "0j ** 0j (a zero base and a zero exponent): NaN+NaNj where 1 is right",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "float_power_complex_zero_to_zero_nan",
        "aten::float_power.Tensor_Tensor",
        ("complex64",),
        "mismatch",
        OPINFO_FRESH + ", float_power: skip TestBinaryUfuncs test_reference_numerics_small_values for complex)",
        lambda: _pow_zero_zero(torch.float_power),
        "0j ** 0j in complex128 (float_power's computing dtype): NaN+NaNj where 1 is right",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "add_complex_inf_nan",
        "aten::add.Tensor",
        ("complex64",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/82510; " + OPINFO_FRESH + ", add: skip TestBinaryUfuncs"
        " test_reference_numerics_extremal_values for complex)",
        _add_inf_nan,
        "complex infinities in both operands: the multiplication by alpha = 1+0j makes NaN of inf * 0",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "addr_complex_inf_nan",
        "aten::addr",
        ("complex64",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/127978",
        _addr_inf_nan,
        "an infinite vector element: the real part of beta * input + alpha * outer is NaN where inf is right",
        _NAN_DIFF,
        category="shared",
    ),
    Bug(
        "softmax_inf_nan",
        "aten::_softmax",
        ("float32", "bfloat16", "float16", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/49724 (its second and third problems: softmax([x, inf]) and"
        " softmax([inf]) are NaN)",
        lambda: bool(torch.softmax(torch.tensor([1.0, INF]), 0).isnan().all()),
        "+inf in the reduced row: NaN everywhere where the limit is 1 at the inf and 0 elsewhere",
        _NAN_DIFF,
        ("aten::softmax.int",),
        "shared",
    ),
    Bug(
        "log_softmax_inf_nan",
        "aten::_log_softmax",
        ("float32", "bfloat16", "float16", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/6864 (softmax and log_softmax with one +inf; also #49724)",
        lambda: bool(torch.log_softmax(torch.tensor([1.0, INF]), 0).isnan().all()),
        "+inf in the reduced row: NaN everywhere where the limit is -inf elsewhere and 0 at the inf",
        _NAN_DIFF,
        ("aten::log_softmax.int",),
        "shared",
    ),
    Bug(
        "cumsum_out_unsafe_cast",
        "aten::cumsum.out",
        ("float32", "float16", "bfloat16", "float64", "complex64"),
        "missing_error",
        OPINFO_FRESH + ", cumsum: expectedFailure TestCommon test_out, 'cumsum does not handle correctly out= dtypes')",
        lambda: _cumulative_out_unsafe_cast(torch.cumsum),
        "a floating result into an integer out=: truncated silently where out= must raise (an unsafe cast)",
        category="shared",
    ),
    Bug(
        "cumprod_out_unsafe_cast",
        "aten::cumprod.out",
        ("float32", "float16", "bfloat16", "float64", "complex64"),
        "missing_error",
        OPINFO_FRESH + ", cumprod: expectedFailure TestCommon test_out, 'cumprod does not handle correctly out="
        " dtypes')",
        lambda: _cumulative_out_unsafe_cast(torch.cumprod),
        "a floating result into an integer out=: truncated silently where out= must raise (an unsafe cast)",
        category="shared",
    ),
    # -- the result depends on position or length -------------------------------------------------
    Bug(
        "square_complex_overflow_by_length",
        "aten::square",
        ("complex64",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/52549; " + OPINFO_FRESH + ", square: skip TestUnaryUfuncs"
        " test_reference_numerics_large for complex)",
        _square_by_length,
        "complex values whose square overflows (1e20 in complex64): -inf+infj alone, nan+infj in a vector block",
        category="position",
    ),
    # -- a layout the generator must draw ---------------------------------------------------------
    Bug(
        "kron_transposed_raises",
        "aten::kron",
        FLOATS + ("int64", "int32", "complex64"),
        "device_error",
        OPINFO_FRESH + ", kron: expectedFailure TestMeta test_dispatch_symbolic_meta_outplace_all_strides,"
        " 'RuntimeError: view size is not compatible with input tensor's size and stride')",
        _kron_transposed_raises,
        "a transposed operand: kron raises (a view of a non-contiguous result) where the contiguous copy works",
        category="layout",
    ),
    # -- the gradient formula ---------------------------------------------------------------------
    Bug(
        "as_strided_scatter_grad",
        "aten::as_strided_scatter",
        FLOATS,
        "grad_mismatch",
        OPINFO_FRESH + ", as_strided_scatter: expectedFailure TestBwdGradients test_fn_grad)",
        _as_strided_scatter_grad,
        "any scatter: the input's gradient is inverted, 1 at the overwritten elements (0 is right) and 0 elsewhere",
        category="gradient",
    ),
    # -- the meta kernel's form -------------------------------------------------------------------
    # two tensors of different dtypes, which the documentation of each op forbids
    *[
        Bug(
            f"{name}_mixed_dtype_meta_no_error",
            f"aten::{name}",
            dtypes,
            "missing_error",
            OPINFO_FRESH + f", {name}: expectedFailure TestMeta test_binary_ufuncs_mixed_dtype)",
            lambda fn=fn: _meta_returns_where_cpu_raises(fn, torch.ones(3), torch.ones(3, dtype=torch.float64)),
            cls,
            category="meta",
            device="meta",
        )
        for name, fn, dtypes, cls in (
            (
                "polar",
                torch.polar,
                ("float32", "float64"),
                "float32 abs with float64 angle: the CPU raises, meta returns a complex128 tensor",
            ),
            (
                "complex",
                torch.complex,
                ("float32", "float64", "float16"),
                "real and imaginary parts of different dtypes: the CPU raises, meta returns a complex128 tensor",
            ),
        )
    ],
    Bug(
        "channel_shuffle_meta_channels_last_strides",
        "aten::channel_shuffle",
        FLOATS + ("int64", "int32"),
        "meta_mismatch",
        OPINFO_FRESH + ", nn.functional.channel_shuffle: expectedFailure TestMeta"
        " test_dispatch_symbolic_meta_outplace_all_strides)",
        _channel_shuffle_meta_strides,
        "a channels_last input: the CPU result is channels_last, meta's contiguous",
        _STRIDES,
        category="meta",
        device="meta",
    ),
    Bug(
        "convolution_meta_bias_no_error",
        "aten::convolution",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/178128 (conv_transpose3d; the meta kernel of convolution"
        " skips the bias check for every convolution)",
        _convolution_meta_bias,
        "a bias whose length is not the output's channels: the CPU raises, meta returns a tensor",
        also=("aten::conv_transpose3d.input",),
        category="meta",
        device="meta",
    ),
]


# ---------------------------------------------------------------------------------------------
# A fifth set: ops none of the four sets names, drawn in order from sources the fresh set did not
# use (PyTorch's test/test_meta.py expected-failure tables, OpInfo entries of test families the
# fresh set did not read, tracker searches with new queries), fixed before conform ran on it
# (docs/evaluation/real_bugs_fifth.md). `python benchmarks/real_bugs.py --set fifth`.
# ---------------------------------------------------------------------------------------------


def _other_dtype(dtype: torch.dtype) -> torch.dtype:
    """An out= dtype the exact-dtype contract refuses: float64 for a float32 result, int32 for an
    int64 one, float32 for a bool one."""
    return {torch.float64: torch.float32, torch.int64: torch.int32, torch.bool: torch.float32}.get(dtype, torch.float64)


def _meta_out_dtype_accepted(fn, *args, **kwargs) -> bool:
    """An out= of another dtype than the result: the CPU raises (out= must have the result's dtype
    for these ops), meta writes it."""
    result = fn(*args, **kwargs)
    results = result if isinstance(result, tuple) else (result,)

    def outs(device):
        o = tuple(torch.empty(r.shape, dtype=_other_dtype(r.dtype), device=device) for r in results)
        return o if isinstance(result, tuple) else o[0]

    try:
        fn(*args, **kwargs, out=outs("cpu"))
    except RuntimeError:
        fn(*_to_meta(list(args)), **kwargs, out=outs("meta"))
        return True
    return False


def _logcumsumexp_complex_jvp_nan() -> bool:
    """The forward-mode derivative of a complex logcumsumexp is NaN where the value is finite: the
    tangent uses exp without the running maximum (no complex max kernel), which overflows."""
    x = _c64(100 + 1j, 200 - 2j)
    y, dy = torch.func.jvp(lambda a: torch.logcumsumexp(a, 0), (x,), (torch.ones_like(x),))
    return bool(y.isfinite().all()) and bool(dy.isnan().any())


def _triangular_solve_fwd_over_rev() -> bool:
    """Forward-over-reverse (the derivative of the backward) of triangular_solve disagrees with
    finite differences of the backward with respect to the triangular matrix."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, dtype=torch.float64, generator=g).triu() + 3 * torch.eye(3, dtype=torch.float64)
    b = torch.randn(3, 1, dtype=torch.float64, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # triangular_solve's deprecation note
        try:
            torch.autograd.gradgradcheck(
                lambda b, a: torch.triangular_solve(b, a).solution,
                (b.requires_grad_(), a.requires_grad_()),
                check_fwd_over_rev=True,
                check_rev_over_rev=False,
                check_undefined_grad=False,
            )
        except RuntimeError as e:  # GradcheckError
            return "mismatch" in str(e)
    return False


def _det_float32_orthogonal_zero() -> bool:
    """The float32 determinant of a 400x400 orthogonal matrix is 0 (|det| is 1, and float64 of the same
    matrix gives it): the product of the LU diagonal leaves float32's range partway."""
    g = torch.Generator().manual_seed(0)
    w = torch.linalg.qr(torch.randn(400, 400, generator=g)).Q
    return abs(torch.linalg.det(w.double()).item()) > 0.99 and abs(torch.linalg.det(w).item()) < 0.5


_F32 = (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),)
OUT_META = "https://github.com/pytorch/pytorch/issues/138399 (out= dtype on meta; '{}' in its list)"

BUGS_FIFTH = [
    # -- the meta kernel's form: out= of the wrong dtype accepted on meta, refused on the CPU ------
    *[
        Bug(
            f"{name}_out_dtype_meta_no_error",
            op,
            dtypes,
            "missing_error",
            OUT_META.format(name),
            lambda fn=fn, args=args, kw=kw: _meta_out_dtype_accepted(fn, *args, **kw),
            cls,
            also=also,
            category="meta",
            device="meta",
        )
        for name, op, also, fn, args, kw, dtypes, cls in (
            (
                "all",
                "aten::all.all_out",
                (),
                torch.all,
                _F32,
                {},
                FLOATS + ("int64", "int32", "bool"),
                "a float out= for all's bool result: the CPU raises, meta writes it",
            ),
            (
                "amax",
                "aten::amax.out",
                (),
                torch.amax,
                _F32 + (0,),
                {},
                FLOATS + ("int64", "int32"),
                "a float64 out= for a float32 amax: the CPU raises (out= must match), meta writes it",
            ),
            (
                "amin",
                "aten::amin.out",
                (),
                torch.amin,
                _F32 + (0,),
                {},
                FLOATS + ("int64", "int32"),
                "a float64 out= for a float32 amin: the CPU raises (out= must match), meta writes it",
            ),
            (
                "aminmax",
                "aten::aminmax.out",
                (),
                torch.aminmax,
                _F32,
                {"dim": 0},
                FLOATS + ("int64", "int32"),
                "float64 min and max out= for a float32 aminmax: the CPU raises, meta writes them",
            ),
            (
                "any",
                "aten::any.all_out",
                (),
                torch.any,
                _F32,
                {},
                FLOATS + ("int64", "int32", "bool"),
                "a float out= for any's bool result: the CPU raises, meta writes it",
            ),
            (
                "bucketize",
                "aten::bucketize.Tensor_out",
                (),
                torch.bucketize,
                _F32 + (torch.tensor([0.0, 1.0]),),
                {},
                FLOATS + ("int64", "int32"),
                "an int32 out= without out_int32=True for bucketize's int64 result: the CPU raises, meta writes it",
            ),
            (
                "conj_physical",
                "aten::conj_physical.out",
                (),
                torch.conj_physical,
                _F32,
                {},
                FLOATS + ("complex64",),
                "a float64 out= for a float32 conj_physical: the CPU raises, meta writes it",
            ),
            (
                "cross",
                "aten::linalg_cross.out",
                ("aten::cross.out",),
                torch.linalg.cross,
                (torch.randn(3, 3, generator=torch.Generator().manual_seed(0)),) * 2,
                {},
                FLOATS + ("int64", "int32", "complex64"),
                "a float64 out= for a float32 cross product: the CPU raises, meta writes it",
            ),
        )
    ],
    # -- values at the op's own edges -------------------------------------------------------------
    Bug(
        "det_float32_orthogonal_underflow",
        "aten::linalg_det",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/34061",
        _det_float32_orthogonal_zero,
        "a large well-conditioned matrix (orthogonal, 350x350 and up): det is 0 or -173 where |det| is 1,"
        " the product of the LU diagonal under- or overflowing float32 partway",
        also=("aten::det",),
        category="edge",
    ),
    # -- the gradient formula ---------------------------------------------------------------------
    Bug(
        "logcumsumexp_complex_forward_ad_nan",
        "aten::logcumsumexp",
        ("complex64",),
        "grad_mismatch",
        OPINFO + " (torch 2.13's OpInfo database, logcumsumexp: expectedFailure TestFwdGradients"
        " test_forward_mode_AD for complex, 'max_values_cpu not implemented for ComplexDouble; falling back"
        " to non-numerically stabilized exp, causing nan in the results')",
        _logcumsumexp_complex_jvp_nan,
        "complex values with a large real part (100 in complex64): the forward-mode derivative is NaN where"
        " the value and the derivative are finite",
        category="gradient",
    ),
    Bug(
        "triangular_solve_fwd_over_rev_grad",
        "aten::triangular_solve",
        ("float32", "complex64"),
        "grad_mismatch",
        OPINFO + " (torch 2.13's OpInfo database, triangular_solve: expectedFailure TestFwdGradients"
        " test_fn_fwgrad_bwgrad, 'Gradcheck fails')",
        _triangular_solve_fwd_over_rev,
        "any upper-triangular system: the forward-mode derivative of the backward with respect to the matrix"
        " disagrees with finite differences (a second-order derivative)",
        category="gradient",
    ),
]


# ---------------------------------------------------------------------------------------------
# A sixth set: ops none of the five sets names, drawn in order from tracker searches the fifth set
# did not use (integer and half-precision results, meta shapes and errors, reductions, sampling
# and pooling, linear algebra), fixed before conform ran on it
# (docs/evaluation/real_bugs_sixth.md). `python benchmarks/real_bugs.py --set sixth`.
# ---------------------------------------------------------------------------------------------


def _convolution_backward_meta_bias() -> bool:
    """convolution_backward's bias gradient: the CPU sizes it by grad_output's channels (2), meta
    by bias_sizes (4)."""
    g = torch.Generator().manual_seed(0)
    args = [
        torch.rand(1, 2, 4, 4, generator=g),
        torch.rand(1, 2, 8, 8, generator=g),
        torch.rand(2, 2, 3, 3, generator=g),
    ]
    kw = dict(
        bias_sizes=[4],
        stride=[2, 2],
        padding=[1, 1],
        dilation=[1, 1],
        transposed=False,
        output_padding=[0, 0],
        groups=1,
        output_mask=[True, True, True],
    )
    cpu = torch.ops.aten.convolution_backward(*args, **kw)
    meta = torch.ops.aten.convolution_backward(*_to_meta(args), **kw)
    return cpu[2].shape != meta[2].shape


def _conv_transpose1d_meta_output_padding() -> bool:
    """An output_padding (2) not smaller than the stride (2): the CPU raises, meta returns a shape."""
    x, w = torch.randn(2, 16, 10), torch.randn(16, 33, 5)
    kw = dict(stride=2, padding=[0], output_padding=2, groups=2)
    return _meta_returns_where_cpu_raises(lambda a, b: torch.conv_transpose1d(a, b, **kw), x, w)


def _conv_transpose2d_half_nan() -> bool:
    """A float16 transposed convolution whose true outputs lie beyond float16's range: NaN where
    -inf is right (the report's inputs)."""
    import numpy as np

    rng = np.random.default_rng(2186)
    x = torch.tensor(rng.uniform(-3.998, 5.0, (6, 7, 15, 23)), dtype=torch.float16)
    w = torch.tensor(rng.uniform(-9990.0, -9990.0, (7, 3, 15, 18)), dtype=torch.float16)
    got = F.conv_transpose2d(x, w, stride=1, padding=2)
    want = F.conv_transpose2d(x.float(), w.float(), stride=1, padding=2)
    return bool((got.isnan() & want.isfinite()).any())


def _grid_sampler_inf_nan() -> bool:
    """An infinite grid coordinate with zeros padding: NaN where the out-of-range sample is 0."""
    image = torch.arange(9.0, 0.0, -1.0).view(1, 1, 3, 3)
    grid = torch.zeros(1, 1, 1, 2)
    grid[..., 0] = float("inf")
    return bool(F.grid_sample(image, grid, padding_mode="zeros", align_corners=False).isnan().any())


def _mean_float32_overflow() -> bool:
    """The float32 mean of three values of 3e38 is inf: the sum overflows before the division."""
    x = torch.full((3,), 3e38)
    return bool(x.mean().isinf()) and math.isfinite(x.double().mean().item())


def _var_float32_overflow() -> bool:
    """The float32 variance of equal values of 3e38 is inf where 0 is right."""
    x = torch.full((3,), 3e38)
    return bool(x.var().isinf()) and x.double().var().item() == 0.0


def _histc_min_equal_max() -> bool:
    """histc with min == max != 0 bins the data's own range: values outside [7, 7] are counted."""
    t = torch.tensor([1.0, 2, 3, 3, 4, 5, 6, 7, 8])
    return torch.histc(t, 5, 7, 7).sum().item() > 1


def _embedding_bag_last_offset() -> bool:
    """include_last_offset=True with a last offset short of the end: mean divides the first bag's sum
    by a count that includes the trailing index (2 where 3 is right)."""
    w = torch.tensor([[1.0, 1.0], [5.0, 5.0], [9.0, 9.0]])
    got = F.embedding_bag(torch.tensor([0, 1, 2]), w, torch.tensor([0, 2]), mode="mean", include_last_offset=True)
    return got[0, 0].item() != 3.0


BUGS_SIXTH = [
    # -- the meta kernel's form -------------------------------------------------------------------
    Bug(
        "convolution_backward_meta_bias_grad_size",
        "aten::convolution_backward",
        FLOATS,
        "meta_mismatch",
        "https://github.com/pytorch/pytorch/issues/119407",
        _convolution_backward_meta_bias,
        "bias_sizes that differ from grad_output's channel count: the CPU's bias gradient has grad_output's"
        " channels, meta's has bias_sizes",
        category="meta",
        device="meta",
    ),
    Bug(
        "conv_transpose1d_meta_output_padding_no_error",
        "aten::conv_transpose1d",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/178125",
        _conv_transpose1d_meta_output_padding,
        "an output_padding not smaller than stride or dilation: the CPU raises, meta returns a shape",
        category="meta",
        device="meta",
    ),
    # -- values at the op's own edges -------------------------------------------------------------
    Bug(
        "conv_transpose2d_half_overflow_nan",
        "aten::conv_transpose2d.input",
        ("float16",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/153700",
        _conv_transpose2d_half_nan,
        "float16 inputs whose true outputs lie beyond float16's range (large weights, inputs of both signs):"
        " NaN where -inf is right",
        category="edge",
    ),
    Bug(
        "mean_float32_sum_overflow",
        "aten::mean",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/44350",
        _mean_float32_overflow,
        "values near float32's maximum (3e38): the sum overflows, the mean is inf where 3e38 is right",
        also=("aten::mean.dim",),
        category="edge",
    ),
    Bug(
        "var_float32_overflow",
        "aten::var.correction",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/44350",
        _var_float32_overflow,
        "values near float32's maximum (3e38): the variance is inf where 0 (equal values) or a finite value is right",
        also=("aten::var",),
        category="edge",
    ),
    # -- the expectation shares the bug -----------------------------------------------------------
    Bug(
        "grid_sampler_2d_inf_coordinate_nan",
        "aten::grid_sampler_2d",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/24823",
        _grid_sampler_inf_nan,
        "an infinite grid coordinate with zeros padding: NaN where the out-of-range sample is 0 (float64 too)",
        category="shared",
    ),
    Bug(
        "histc_min_equal_max_counts_outside",
        "aten::histc",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/126021",
        _histc_min_equal_max,
        "min == max != 0: the data's own range is binned, values outside [min, max] are counted (the"
        " documented fallback is for min == max == 0 only)",
        category="shared",
    ),
    Bug(
        "embedding_bag_last_offset_trailing_indices",
        "aten::_embedding_bag",
        FLOATS,
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/191965",
        _embedding_bag_last_offset,
        "include_last_offset=True with a last offset before the end of the indices: mean counts the trailing"
        " indices in its divisor and max takes them, sum leaves them out",
        also=("aten::_embedding_bag_forward_only", "aten::embedding_bag"),
        category="shared",
    ),
]


# ---------------------------------------------------------------------------------------------
# A seventh set: ops none of the six sets names, drawn in order from tracker searches by op family
# that no earlier set used (pooling, padding, losses, linear algebra, FFT, special functions,
# indexing, integer arithmetic), fixed before conform ran on it
# (docs/evaluation/real_bugs_seventh.md). `python benchmarks/real_bugs.py --set seventh`.
# ---------------------------------------------------------------------------------------------


def _dies_with_signal(code: str) -> bool:
    """The snippet kills its (child) process with a signal (SIGFPE, SIGSEGV)."""
    proc = subprocess.run([sys.executable, "-c", "import torch\n" + code], capture_output=True)
    return proc.returncode < 0


def _lstsq_gelsy_rank() -> bool:
    """The default gelsy driver of a rank-4 5x5 system: some calls report rank 0 and return a
    solution whose residual is 5 where 1 is right (the report's input)."""
    a = torch.eye(5)
    a[0, :] = 0
    b = torch.ones(5, 1)
    return any(int(torch.linalg.lstsq(a, b).rank) != 4 for _ in range(200))


def _triu_inplace_overlap() -> bool:
    """triu_ on an expanded (self-overlapping) tensor writes through the overlap where every other
    in-place op raises."""
    x = torch.full((3,), 5.0).expand(3, 3)
    try:
        x.add_(0)
    except RuntimeError:
        pass
    else:
        return False  # the overlap check itself is gone
    x = torch.full((3,), 5.0).expand(3, 3)
    try:
        x.triu_()
    except RuntimeError:
        return False
    return True


def _max_pool2d_window_in_padding() -> bool:
    """A dilated window that only covers padding (height 1, kernel 3, dilation 2, padding 1,
    ceil_mode): the CPU returns a row of -inf where the arguments are invalid."""
    x = torch.rand(1, 1, 1, 224)
    y = F.max_pool2d(x, 3, stride=6, padding=1, dilation=2, ceil_mode=True)
    return bool(y.isinf().all())


def _gcd_int_min() -> bool:
    """gcd with the signed minimum: abs(INT_MIN) overflows, gcd(-128, 124) is -4 in int8 and
    gcd(INT64_MIN, 215) is -1, where 4 and 1 are right."""
    i8 = torch.gcd(torch.tensor([-128], dtype=torch.int8), torch.tensor([124], dtype=torch.int8))
    i64 = torch.gcd(torch.tensor([-(2**63)]), torch.tensor([215]))
    return i8.item() == -4 or i64.item() == -1


def _lcm_int_min_fpe() -> bool:
    """lcm(INT64_MIN, 215) kills the process with SIGFPE: gcd is -1 and INT64_MIN / -1 traps."""
    return _dies_with_signal("torch.lcm(torch.tensor([-(2**63)]), torch.tensor([215]))")


def _eigvals_nan_crash() -> bool:
    """float32 eigvals of a matrix with NaN entries: MKL rejects the argument and the process
    dies (heap corruption)."""
    return _dies_with_signal("torch.linalg.eigvals(torch.tensor([[1.13, float('nan')], [float('nan'), float('nan')]]))")


def _svdvals_hessian_overflow() -> bool:
    """The second derivative of svdvals at a matrix of scale 1e19 in float32 is NaN where 2e-20 is
    right: the derivative forms sigma_i^2 - sigma_j^2, which overflows (float64 is finite)."""
    a = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]) * 1e19

    def f(m):
        return torch.linalg.svdvals(m).sum()

    h32 = torch.func.hessian(f)(a)
    h64 = torch.func.hessian(f)(a.double())
    return bool(h32.isnan().any()) and bool(h64.isfinite().all())


def _take_along_dim_wraps() -> bool:
    """take_along_dim with dim=0 and index 9 into a size-3 dimension returns x[9 % 3] where
    gather, take and take_along_dim without dim raise."""
    x = torch.tensor([10.0, 20.0, 30.0])
    try:
        torch.take_along_dim(x, torch.tensor([9]), dim=0)
    except (RuntimeError, IndexError):
        return False
    return True


def _zeta_q_inf() -> bool:
    """Hurwitz zeta(2, +inf) is NaN where 0 is the limit (SciPy gives 0)."""
    return bool(torch.special.zeta(torch.tensor([2.0]), torch.tensor([float("inf")])).isnan().all())


def _fft_c2r_meta_strides() -> bool:
    """_fft_c2r's meta kernel returns contiguous strides; the CPU keeps the input's layout
    (strides (12, 60, 1) on the CPU, (72, 12, 1) on meta), as hfft2 over dims (0, -1) makes it."""
    x = torch.randn(6, 7, 5, dtype=torch.complex64).permute(2, 0, 1)
    cpu = torch.ops.aten._fft_c2r(x, [2], 0, 12)
    meta = torch.ops.aten._fft_c2r(x.to("meta"), [2], 0, 12)
    return cpu.shape == meta.shape and cpu.stride() != meta.stride()


def _adaptive_avg_pool3d_backward_channels() -> bool:
    """A grad_output with fewer channels than the input is accepted (the kernel reads past it)
    where a size check must raise."""
    x = torch.ones((1, 2, 1, 1, 1))
    g = torch.ones((1, 1, 1, 1, 1))
    try:
        torch.ops.aten._adaptive_avg_pool3d_backward(g, x)
    except RuntimeError:
        return False
    return True


BUGS_SEVENTH = [
    # -- the expectation shares the bug -----------------------------------------------------------
    Bug(
        "linalg_lstsq_gelsy_rank_zero",
        "aten::linalg_lstsq",
        ("float32", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/92537",
        _lstsq_gelsy_rank,
        "a rank-deficient matrix (an identity with its first row zeroed) with the default gelsy driver:"
        " about half the calls report rank 0 and return a solution of residual 5 where 1 is right",
        category="shared",
    ),
    Bug(
        "max_pool2d_window_only_padding_no_error",
        "aten::max_pool2d",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/114216",
        _max_pool2d_window_in_padding,
        "a dilated kernel larger than the padded input (height 1, kernel 3, dilation 2, padding 1, ceil_mode):"
        " the CPU returns -inf where the arguments are invalid and must raise",
        also=("aten::max_pool2d_with_indices",),
        category="shared",
    ),
    Bug(
        "take_along_dim_out_of_range_wraps",
        "aten::take_along_dim",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/196106",
        _take_along_dim_wraps,
        "an index beyond the dimension with an explicit dim: the value at index % size is returned where"
        " gather, take and take_along_dim without dim raise",
        category="shared",
    ),
    Bug(
        "special_zeta_q_inf_nan",
        "aten::special_zeta",
        ("float32", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/187294",
        _zeta_q_inf,
        "q = +inf with s > 1: NaN where the limit 0 is right (float64 too)",
        category="shared",
    ),
    Bug(
        "adaptive_avg_pool3d_backward_channel_mismatch_no_error",
        "aten::_adaptive_avg_pool3d_backward",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194800",
        _adaptive_avg_pool3d_backward_channels,
        "a grad_output with fewer batch or channel entries than the input: accepted, the kernel reads past"
        " grad_output's end, where a size check must raise",
        category="shared",
    ),
    # -- a layout not drawn -----------------------------------------------------------------------
    Bug(
        "triu_inplace_overlapping_self_no_error",
        "aten::triu_",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/165987",
        _triu_inplace_overlap,
        "an expanded (internally overlapping) self: triu_ and tril_ write through the overlap where in-place"
        " ops raise 'more than one element of the written-to tensor refers to a single memory location'",
        also=("aten::tril_",),
        category="layout",
    ),
    # -- values at the op's own edges -------------------------------------------------------------
    Bug(
        "gcd_int_min_negative",
        "aten::gcd",
        ("int8", "int16", "int32", "int64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/187338 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/187544)",
        _gcd_int_min,
        "the signed minimum as an operand: abs() overflows, gcd(-128, 124) is -4 in int8 and"
        " gcd(INT_MIN, 215) is -1 where 4 and 1 are right",
        category="edge",
    ),
    Bug(
        "lcm_int_min_sigfpe",
        "aten::lcm",
        ("int32", "int64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/121343 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/185959)",
        _lcm_int_min_fpe,
        "the signed minimum with an odd operand (INT_MIN, 215): gcd is -1 and INT_MIN / -1 kills the process"
        " with SIGFPE",
        category="edge",
    ),
    Bug(
        "linalg_eigvals_nan_crash",
        "aten::linalg_eigvals",
        ("float32",),
        "crash",
        "https://github.com/pytorch/pytorch/issues/93124",
        _eigvals_nan_crash,
        "a float32 matrix with NaN entries: MKL rejects an argument (SGEBAL) and the process dies",
        also=("aten::linalg_eig",),
        category="edge",
    ),
    # -- the gradient formula at special points ---------------------------------------------------
    Bug(
        "linalg_svdvals_second_derivative_overflow",
        "aten::linalg_svdvals",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/194705",
        _svdvals_hessian_overflow,
        "a matrix of scale beyond sqrt of the dtype's maximum (1e19 in float32): the second derivative forms"
        " sigma_i^2 - sigma_j^2, which overflows to NaN where 2e-20 is right",
        also=("aten::_linalg_svd", "aten::linalg_svd"),
        category="gradient",
    ),
    # -- the meta kernel's form -------------------------------------------------------------------
    Bug(
        "fft_c2r_meta_strides",
        "aten::_fft_c2r",
        ("float32", "float64", "complex64", "complex128"),
        "meta_mismatch",
        "https://github.com/pytorch/pytorch/issues/106623",
        _fft_c2r_meta_strides,
        "a complex input that is not contiguous (as hfft2 over dims (0, -1) leaves it): meta returns"
        " contiguous strides (72, 12, 1) where the CPU's are (12, 60, 1)",
        also=("aten::fft_hfft2", "aten::fft_hfftn"),
        category="meta",
        device="meta",
    ),
]


# ---------------------------------------------------------------------------------------------
# An eighth set: ops none of the seven sets names, drawn in order from tracker searches by op
# family and by symptom that no earlier set used (recurrent cells, distances, sorting and
# selection, cumulative and masked ops, special functions, forward-mode and second-order
# derivatives, missing shape checks), fixed before conform ran on it
# (docs/evaluation/real_bugs_eighth.md). `python benchmarks/real_bugs.py --set eighth`.
# ---------------------------------------------------------------------------------------------


def _jvp2(f, t: torch.Tensor) -> torch.Tensor:
    """The nested forward-mode second derivative of a scalar function of one scalar."""

    def first(s):
        return torch.func.jvp(f, (s,), (torch.ones_like(s),))[1]

    return torch.func.jvp(first, (t,), (torch.ones_like(t),))[1]


def _gru_cell_hidden_rank() -> bool:
    """gru_cell with a 5-d hidden state for a (1, 1) input: the kernel reads out of bounds and the
    process dies where a shape check must raise (nn.GRUCell checks in Python, the op does not)."""
    return _dies_with_signal(
        "torch.gru_cell(torch.ones(1, 1), torch.ones(1, 1, 5, 127, 1), torch.ones(3, 1), torch.ones(3, 1), None, None)"
    )


def _rnn_cell_backward_gates() -> bool:
    """The differentiable GRU cell backward with (1, 1) gate tensors: unsafe_chunk(3, 1) gives one
    chunk, the kernel indexes three, and the process dies where a shape check must raise."""
    return _dies_with_signal(
        "torch.ops.aten._thnn_differentiable_gru_cell_backward("
        "torch.ones(1, 1), torch.ones(1, 1), torch.ones(1, 3), torch.ones(1, 1), None, None)"
    )


def _pdist_backward_zero_rows() -> bool:
    """The backward of pdist on an input with zero rows divides by the row count and the process
    dies, where the forward returns an empty result and the gradient is an empty (0, d) tensor."""
    return _dies_with_signal("x = torch.zeros(0, 3, requires_grad=True)\ntorch.nn.functional.pdist(x).sum().backward()")


def _cholesky_inverse_jvp() -> bool:
    """The JVP of cholesky_inverse at a valid lower factor [[t + 1, 0], [1, 2]], t = 0.7: -0.4988
    where the derivative of the explicit inverse, -0.33584, is right (reverse mode agrees)."""

    def f(t):
        one, zero = torch.ones((), dtype=t.dtype), torch.zeros((), dtype=t.dtype)
        return torch.cholesky_inverse(torch.stack((t + one, zero, one, 2 * one)).reshape(2, 2)).sum()

    t = torch.tensor(0.7, dtype=torch.float64)
    return abs(torch.func.jvp(f, (t,), (torch.ones_like(t),))[1].item() - -0.3358436800325667) > 1e-6


def _householder_product_jvp2() -> bool:
    """The nested-JVP second derivative of householder_product for v = [1, t], tau = 2 / (1 + t^2)
    at t = 0.7: -0.7533 where 1.55625 is right (the forward value matches)."""

    def f(t):
        a = torch.stack((torch.ones((), dtype=t.dtype), t)).reshape(2, 1)
        return torch.linalg.householder_product(a, (2 / (1 + t * t)).reshape(1)).sum()

    return abs(_jvp2(f, torch.tensor(0.7, dtype=torch.float64)).item() - 1.556251320682393) > 1e-6


def _sinc_second_derivative_zero() -> bool:
    """The second derivative of sinc at 0 is NaN where -pi^2 / 3 is right (the removable
    singularity; the first derivative, 0, is right)."""
    x = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.sinc(x), x, create_graph=True)
    return bool(torch.autograd.grad(g, x)[0].isnan())


def _nanmedian_empty_int() -> bool:
    """nanmedian of an empty integer tensor returns the dtype's minimum (int32) or 0 (int8) where
    the reduction must raise, as nanmedian with a dim does."""
    try:
        v = torch.nanmedian(torch.tensor([], dtype=torch.int32))
    except (RuntimeError, IndexError):
        return False
    return v.item() == -(2**31)


def _slogdet_jvp2() -> bool:
    """The nested-JVP second derivative of slogdet's logabsdet for [[t + 2, 1], [1, 3]] at t = 0.7:
    0.0 where -9 / (3t + 5)^2 = -0.17854 is right (reverse mode agrees with the formula)."""

    def f(t):
        a = torch.stack((t + 2, torch.ones_like(t), torch.ones_like(t), 3 * torch.ones_like(t))).reshape(2, 2)
        return torch.linalg.slogdet(a)[1]

    return abs(_jvp2(f, torch.tensor(0.7, dtype=torch.float64)).item() - -0.17853600476096013) > 1e-6


def _cholesky_solve_jvp() -> bool:
    """The JVP of cholesky_solve through the factor (a batch of two lower factors with t in them,
    t = -7): -410.22 where -11/3 is right (reverse mode gives -11/3)."""

    def f(t):
        one, zero = torch.ones((), dtype=t.dtype), torch.zeros((), dtype=t.dtype)
        factor = torch.stack((2 * one, zero, t, 3 * one, 3 * one, zero, 2 * t + 1, 2 * one)).reshape(2, 2, 2)
        b = torch.tensor([[1, 2], [-1, 3]], dtype=t.dtype)
        w = torch.tensor([[[1, 2], [3, 4]], [[2, -1], [4, 3]]], dtype=t.dtype)
        return (torch.cholesky_solve(b, factor, upper=False) * w).sum()

    t = torch.tensor(-7.0, dtype=torch.float64)
    return abs(torch.func.jvp(f, (t,), (torch.ones_like(t),))[1].item() - -11 / 3) > 1e-6


def _segment_reduce_empty_offsets() -> bool:
    """segment_reduce with a 5-d offsets tensor of zero elements: the process dies where the
    arguments are invalid and an error is due."""
    return _dies_with_signal(
        "data = torch.full((6, 9, 1, 1, 8), 7.0, dtype=torch.double)\n"
        "offsets = torch.zeros((5, 0, 0, 9, 2), dtype=torch.long)\n"
        "torch.segment_reduce(data, 'max', offsets=offsets, axis=4, unsafe=False, initial=7.0)"
    )


def _fbgemm_pack_empty() -> bool:
    """fbgemm_pack_gemm_matrix_fp16 of a 5-d input with a zero dimension: the process dies where a
    rank or size check must raise."""
    return _dies_with_signal("torch.fbgemm_pack_gemm_matrix_fp16(torch.rand(12, 10, 0, 8, 7))")


def _weight_norm_empty() -> bool:
    """_weight_norm of v and g with a zero dimension (shape (3, 0, 4)): the process dies where an
    empty result or an error is due."""
    return _dies_with_signal("v = torch.ones(3, 0, 4)\ntorch._weight_norm(v, v, 0)")


def _weight_int8pack_mm_rank() -> bool:
    """_weight_int8pack_mm with a 4-d int8 weight where a 2-d one is required: the process dies
    where a shape check must raise."""
    return _dies_with_signal(
        "torch._weight_int8pack_mm(torch.ones(2, 3, dtype=torch.bfloat16),"
        " torch.full((3, 3, 3, 3), -1, dtype=torch.int8), torch.zeros(3, dtype=torch.bfloat16))"
    )


def _max_pool1d_huge_kernel() -> bool:
    """max_pool1d with a kernel size near 2^63 and huge padding and dilation: the output-size
    arithmetic overflows and the process dies where max_pool1d_with_indices raises."""
    return _dies_with_signal(
        "x = torch.full((1, 2, 3), 0.5, dtype=torch.float64)\n"
        "torch.max_pool1d(x, [8608480567731124087], [], [1250999896764], [1250999896764], True)"
    )


def _embedding_backward_empty_grad() -> bool:
    """embedding_backward with an empty grad and indices far past num_weights (scale_grad_by_freq):
    the process dies where an index check must raise."""
    return _dies_with_signal(
        "grad = torch.zeros(2, 0)\nindices = torch.tensor([10**12, 10**12])\n"
        "torch.ops.aten.embedding_backward(grad, indices, 5, -1, True, False)"
    )


BUGS_EIGHTH = [
    # -- the expectation shares the bug -----------------------------------------------------------
    Bug(
        "gru_cell_hidden_rank_segfault",
        "aten::gru_cell",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/106769",
        _gru_cell_hidden_rank,
        "a hidden state of another rank than the input's (5-d hx for a (1, 1) input): the kernel reads out of"
        " bounds and the process dies where a shape check must raise (nn.GRUCell checks in Python since)",
        category="shared",
    ),
    Bug(
        "rnn_cell_backward_undersized_gates_segfault",
        "aten::_thnn_differentiable_gru_cell_backward",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/194049 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/194095)",
        _rnn_cell_backward_gates,
        "gate tensors whose second dim is not a multiple of 3 (GRU) or 4 (LSTM): unsafe_chunk gives fewer"
        " chunks than the kernel indexes and the process dies where a shape check must raise",
        also=("aten::_thnn_differentiable_lstm_cell_backward",),
        category="shared",
    ),
    Bug(
        "weight_int8pack_mm_rank_segfault",
        "aten::_weight_int8pack_mm",
        ("bfloat16",),
        "crash",
        "https://github.com/pytorch/pytorch/issues/136709",
        _weight_int8pack_mm_rank,
        "a 4-d int8 weight where a 2-d (N, K) one is required: the process dies where a shape check must raise",
        category="shared",
    ),
    # -- values at the op's own edges -------------------------------------------------------------
    Bug(
        "pdist_backward_zero_rows_segfault",
        "aten::_pdist_backward",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/197099 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/197152)",
        _pdist_backward_zero_rows,
        "an input with zero rows: the forward returns an empty result, the backward divides by the row count"
        " and the process dies where an empty (0, d) gradient is right",
        also=("aten::pdist",),
        category="edge",
    ),
    Bug(
        "nanmedian_empty_integer_no_error",
        "aten::nanmedian",
        ("int8", "int16", "int32", "int64"),
        "missing_error|mismatch",
        "https://github.com/pytorch/pytorch/issues/95756",
        _nanmedian_empty_int,
        "an empty integer input reduced over all elements: the dtype's minimum (int32, int64) or 0 (int8,"
        " int16) is returned where the reduction must raise, as nanmedian with a dim does",
        category="edge",
    ),
    Bug(
        "segment_reduce_empty_offsets_segfault",
        "aten::segment_reduce",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/141481",
        _segment_reduce_empty_offsets,
        "an offsets tensor of zero elements and more dims than data's leading ones: the process dies where an"
        " error is due",
        category="edge",
    ),
    Bug(
        "fbgemm_pack_gemm_matrix_fp16_empty_segfault",
        "aten::fbgemm_pack_gemm_matrix_fp16",
        ("float32",),
        "crash",
        "https://github.com/pytorch/pytorch/issues/88036",
        _fbgemm_pack_empty,
        "a 5-d input with a zero dimension: the process dies where a rank or size check must raise",
        category="edge",
    ),
    Bug(
        "weight_norm_empty_segfault",
        "aten::_weight_norm",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/136709",
        _weight_norm_empty,
        "v and g with a zero dimension: the process dies where an empty result or an error is due",
        also=("aten::_weight_norm_interface",),
        category="edge",
    ),
    Bug(
        "max_pool1d_huge_kernel_segfault",
        "aten::max_pool1d",
        FLOATS,
        "crash",
        "https://github.com/pytorch/pytorch/issues/142454",
        _max_pool1d_huge_kernel,
        "a kernel size near 2^63 with huge padding and dilation: the output-size arithmetic overflows and the"
        " process dies where max_pool1d_with_indices raises",
        category="edge",
    ),
    Bug(
        "embedding_backward_index_past_end_segfault",
        "aten::embedding_backward",
        ("float32",),
        "crash",
        "https://github.com/pytorch/pytorch/issues/143482",
        _embedding_backward_empty_grad,
        "an empty grad with indices far past num_weights and scale_grad_by_freq: the process dies where an"
        " index check must raise",
        also=("aten::embedding_dense_backward",),
        category="edge",
    ),
    # -- the gradient formula at special points ---------------------------------------------------
    Bug(
        "cholesky_inverse_jvp_wrong",
        "aten::cholesky_inverse",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196682",
        _cholesky_inverse_jvp,
        "forward mode at a valid lower factor with a non-symmetric tangent: the JVP is -0.4988 where -0.3358 is"
        " right (the reverse-mode gradient is right)",
        category="gradient",
    ),
    Bug(
        "cholesky_solve_jvp_wrong",
        "aten::cholesky_solve",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196694",
        _cholesky_solve_jvp,
        "forward mode with a tangent through the Cholesky factor (a batch of lower factors): -410.2 where -11/3"
        " is right (the reverse-mode gradient is right)",
        category="gradient",
    ),
    Bug(
        "householder_product_second_jvp_wrong",
        "aten::linalg_householder_product",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196698",
        _householder_product_jvp2,
        "a forward-over-forward second derivative at a valid reflector (v = [1, t], tau = 2 / (1 + t^2)):"
        " -0.7533 where 1.5563 is right; the first derivative is right",
        category="gradient",
    ),
    Bug(
        "linalg_slogdet_second_jvp_zero",
        "aten::linalg_slogdet",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196697",
        _slogdet_jvp2,
        "a forward-over-forward second derivative of logabsdet at a positive definite matrix: 0.0 where"
        " -9 / (3t + 5)^2 is right; reverse-over-reverse is right",
        also=("aten::_linalg_slogdet",),
        category="gradient",
    ),
    Bug(
        "sinc_second_derivative_nan_at_zero",
        "aten::sinc",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196703 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/196885)",
        _sinc_second_derivative_zero,
        "the removable singularity x = 0 in a second derivative: NaN where -pi^2 / 3 is right (the first"
        " derivative, 0, is right)",
        category="gradient",
    ),
]


# ---------------------------------------------------------------------------------------------
# A ninth set: ops none of the eight sets names, drawn in order from tracker searches by op family
# and by symptom that no earlier set used (sparse and quantized tensors, linear algebra
# factorizations, padding, transforms, meta kernels, losses), fixed before conform ran on it
# (docs/evaluation/real_bugs_ninth.md). `python benchmarks/real_bugs.py --set ninth`.
# ---------------------------------------------------------------------------------------------


def _sparse_mask_csr_drops_zeros() -> bool:
    """sparse_mask of a CSR tensor by a CSR mask keeps only the masked-in elements that are
    non-zero in self (2 of 3) where every element of the mask's pattern is due, as the strided
    and COO paths give."""
    mask = torch.tensor([[0, 1], [1, 1]], dtype=torch.bool).to_sparse_csr()
    data = torch.tensor([[1, 2], [3, 0]])
    return data.to_sparse_csr().sparse_mask(mask)._nnz() != data.sparse_mask(mask)._nnz()


def _sparse_broadcast_to_coalesced_flag() -> bool:
    """_sparse_broadcast_to of an uncoalesced 0-d COO tensor (ten values at one index) marks its
    result coalesced while the result repeats each index ten times."""
    s = torch.sparse_coo_tensor(torch.zeros(0, 10, dtype=torch.int64), torch.ones(10), ())
    b = torch._sparse_broadcast_to(s, (2, 2))
    return b.is_coalesced() and b._indices().unique(dim=1).shape[1] < b._indices().shape[1]


def _quantized_view_dtype() -> bool:
    """view(torch.float32) of a qint8 tensor returns a float32-typed tensor over quantized storage
    where the view must raise; printing it kills the process."""
    return _dies_with_signal(
        "q = torch.quantize_per_tensor(torch.ones(32), 0.5, 0, torch.qint8)\nrepr(q.view(torch.float32))"
    )


def _dequantize_qint32_overflow() -> bool:
    """dequantize of a qint32 value 2^31 - 1 with zero point -2^31: q - zero_point overflows int32
    and the result is -1 where 2^32 - 1 is right."""
    q = torch._make_per_tensor_quantized_tensor(torch.tensor([2**31 - 1], dtype=torch.int32), 1.0, -(2**31))
    return torch.dequantize(q).item() != 2**32 - 1


def _fused_fake_quant_axis() -> bool:
    """fused_moving_avg_obs_fake_quant with per-row quantization and an axis near -2^40: the
    process dies where an axis check must raise."""
    return _dies_with_signal(
        "x = torch.full((1,), 0.5)\n"
        "on = torch.ones(1, dtype=torch.int32)\n"
        "torch.fused_moving_avg_obs_fake_quant(x, on, on.long(), x.clone(), x.clone(), x.clone(),"
        " torch.zeros(1, dtype=torch.int32), 0.01, 0, 255, -1250999896764, True, True)"
    )


def _quantize_per_channel_float_zero_points() -> bool:
    """quantize_per_channel to qint32 with floating zero points: the process dies (a division by
    zero in the float-qparams kernel) where a result or an error is due."""
    return _dies_with_signal(
        "torch.quantize_per_channel(torch.ones(1, 1), torch.tensor([0.5], dtype=torch.float64),"
        " torch.tensor([0.0]), 0, dtype=torch.qint32)"
    )


def _ldl_factor_singular_raises() -> bool:
    """linalg_ldl_factor of the singular symmetric [[0]]: an internal assert ("Unknown error code:
    1") where the factorization exists and ldl_factor_ex returns it."""
    a = torch.zeros(1, 1)
    torch.linalg.ldl_factor_ex(a)
    try:
        torch.linalg.ldl_factor(a)
    except RuntimeError:
        return True
    return False


def _replication_pad2d_huge() -> bool:
    """replication_pad2d with a padding of 2^63 - 1: the output size overflows and the process
    dies where an error is due."""
    return _dies_with_signal("torch._C._nn.replication_pad2d(torch.ones(1, 3, 10, 10), [2**63 - 1] * 4)")


def _ifft2_2048_scaled_twice() -> bool:
    """ifft2 of a complex64 2048 x 2048 delta of height 2048^2: 1 / 2048^2 where 1 is right (the
    1/n scale applied twice; 2048 x 1024 and complex128 are right)."""
    x = torch.zeros(2048, 2048, dtype=torch.complex64)
    x[0, 0] = 2048 * 2048
    return abs(torch.fft.ifft2(x)[0, 0].item() - 1) > 1e-3


def _conv1d_meta_groups() -> bool:
    """conv1d with groups=6 and a weight of 3 output channels: the CPU raises, meta returns a
    shape."""
    return _meta_returns_where_cpu_raises(
        lambda x, w: F.conv1d(x, w, groups=6), torch.randn(2, 12, 30), torch.randn(3, 2, 3)
    )


def _masked_scatter_inplace_meta() -> bool:
    """masked_scatter_ of a one-element self with a (2, 1, 2, 1) mask: the CPU raises (the mask
    does not broadcast to self), meta returns self."""
    return _meta_returns_where_cpu_raises(
        lambda s, m, src: s.masked_scatter_(m, src), torch.zeros(1), torch.ones(2, 1, 2, 1) < 0.5, torch.ones(4)
    )


def _multi_margin_loss_backward_empty() -> bool:
    """multi_margin_loss_backward with an empty grad_output (reduction none, one sample): the
    process dies where a shape check must raise."""
    return _dies_with_signal(
        "torch.ops.aten.multi_margin_loss_backward(torch.tensor([]), torch.tensor([64.0]), torch.tensor([0]),"
        " 2, 1.0, None, 0)"
    )


def _nll_loss2d_backward_target_past_end() -> bool:
    """nll_loss2d_backward with reduction none and a target equal to the class count: it returns
    (writing past grad_input) where the mean and sum reductions raise "Target 1 is out of bounds"."""
    args = (torch.zeros(1, 1, 1, 1), torch.tensor([[[1]]]), None)
    try:
        torch.ops.aten.nll_loss2d_backward(torch.tensor(1.0), *args, 1, -100, torch.tensor(1.0))
    except (RuntimeError, IndexError):
        torch.ops.aten.nll_loss2d_backward(torch.ones(1, 1, 1), *args, 0, -100, torch.tensor(1.0))
        return True
    return False


BUGS_NINTH = [
    # -- the expectation shares the bug -----------------------------------------------------------
    Bug(
        "quantized_view_dtype_segfault",
        "aten::view.dtype",
        ("qint8",),
        "missing_error|crash",
        "https://github.com/pytorch/pytorch/issues/86848",
        _quantized_view_dtype,
        "a quantized tensor viewed as another dtype: no error, and using the returned tensor (printing it) kills"
        " the process, where the view must raise",
        category="shared",
    ),
    Bug(
        "quantize_per_channel_float_zero_points_crash",
        "aten::quantize_per_channel",
        ("float32",),
        "crash",
        "https://github.com/pytorch/pytorch/issues/116351",
        _quantize_per_channel_float_zero_points,
        "floating zero points with a qint32 result: the process dies (a division by zero) where a result or an"
        " error is due",
        category="shared",
    ),
    # -- the result depends on position or length ------------------------------------------------
    Bug(
        "ifft2_2048_square_scaled_twice",
        "aten::fft_ifft2",
        ("complex64",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/169670",
        _ifft2_2048_scaled_twice,
        "a complex64 2048 x 2048 transform with a 1/n or 1/sqrt(n) scale: the scale is applied with an extra"
        " 1/n (ifft2(fft2(a)) is a / 2048^2); other sizes and complex128 are right",
        also=("aten::_fft_c2c", "aten::fft_ifftn", "aten::fft_fft2"),
        category="position",
    ),
    # -- a layout not drawn -----------------------------------------------------------------------
    Bug(
        "sparse_mask_csr_drops_zero_values",
        "aten::sparse_mask",
        ("int64", "float32", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/107381",
        _sparse_mask_csr_drops_zeros,
        "a sparse CSR self and mask: masked-in elements whose value in self is zero are dropped, where the"
        " result must have the mask's indices (the strided and COO paths keep them)",
        category="layout",
    ),
    Bug(
        "sparse_broadcast_to_false_coalesced",
        "aten::_sparse_broadcast_to",
        ("float32", "float64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/162482",
        _sparse_broadcast_to_coalesced_flag,
        "an uncoalesced 0-d COO input: the broadcast result repeats its indices yet is flagged coalesced",
        category="layout",
    ),
    # -- values at the op's own edges -------------------------------------------------------------
    Bug(
        "dequantize_qint32_zero_point_overflow",
        "aten::dequantize.self",
        ("qint32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/153358",
        _dequantize_qint32_overflow,
        "a qint32 value of 2^31 - 1 with a zero point of -2^31: q - zero_point wraps in int32 and -1 is"
        " returned where 2^32 - 1 is right",
        category="edge",
    ),
    Bug(
        "fused_moving_avg_obs_fake_quant_axis_segfault",
        "aten::fused_moving_avg_obs_fake_quant",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/128693",
        _fused_fake_quant_axis,
        "per-row quantization with an axis far out of range (-1250999896764): the process dies where an axis"
        " check must raise",
        category="edge",
    ),
    Bug(
        "ldl_factor_singular_internal_assert",
        "aten::linalg_ldl_factor",
        ("float32", "float64"),
        "device_error",
        "https://github.com/pytorch/pytorch/issues/121683",
        _ldl_factor_singular_raises,
        "a singular symmetric matrix (an exactly zero pivot): an internal assert where the factorization exists"
        " (LAPACK completes it; ldl_factor_ex returns it)",
        category="edge",
    ),
    Bug(
        "replication_pad2d_huge_padding_segfault",
        "aten::replication_pad2d",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/169741 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/185948)",
        _replication_pad2d_huge,
        "a padding of 2^63 - 1: the output-size sum overflows int64 and the process dies where an error is due",
        category="edge",
    ),
    Bug(
        "multi_margin_loss_backward_empty_grad_segfault",
        "aten::multi_margin_loss_backward",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/146790",
        _multi_margin_loss_backward_empty,
        "an empty grad_output for one sample with reduction none: the process dies where a shape check must raise",
        category="edge",
    ),
    Bug(
        "nll_loss2d_backward_target_past_end_no_error",
        "aten::nll_loss2d_backward",
        ("bfloat16", "float32", "float64"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194802",
        _nll_loss2d_backward_target_past_end,
        "reduction none with a target equal to the class count: no error (an out-of-bounds write) where the"
        " other reductions raise",
        category="edge",
    ),
    # -- the meta kernel's form -------------------------------------------------------------------
    Bug(
        "conv1d_meta_groups_unchecked",
        "aten::conv1d",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/178472",
        _conv1d_meta_groups,
        "groups that the weight's output channels do not fit: the CPU raises, meta returns a shape",
        category="meta",
        device="meta",
    ),
    Bug(
        "masked_scatter_inplace_meta_unchecked",
        "aten::masked_scatter_",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/72650",
        _masked_scatter_inplace_meta,
        "a mask that does not broadcast to self: the CPU raises, meta returns self",
        category="meta",
        device="meta",
    ),
]


# A tenth set: ops none of the nine sets names, drawn in order from tracker searches by op family and
# by symptom that no earlier set used (five groups of queries) and from the expected-failure entries of
# PyTorch's OpInfo database walked in file order, fixed before conform ran on it
# (docs/evaluation/real_bugs_tenth.md). `python benchmarks/real_bugs.py --set tenth`.


def _isin_promotion_false_positive() -> bool:
    """isin of int32 elements [4097, 4098] in float16 test_elements 1..20 (the sorting path):
    [True, False] where [False, False] is right; both elements round to 4096 in float16 and the
    deduplication, done before the promotion, takes the collapsed pair for a match."""
    elements = torch.tensor([4097, 4098], dtype=torch.int32)
    test_elements = torch.arange(1, 21, dtype=torch.float16)
    return bool(torch.isin(elements, test_elements).any())


def _upsample_nearest2d_meta_empty_batch() -> bool:
    """upsample_nearest2d of a zero-batch (0, 3, 4, 4) input to 8 x 8 on meta raises a TypeError
    ("cond must be a bool") where the CPU returns an empty (0, 3, 8, 8) result."""
    x = torch.zeros(0, 3, 4, 4)
    if torch.ops.aten.upsample_nearest2d(x, [8, 8]).shape != (0, 3, 8, 8):
        return False
    try:
        torch.ops.aten.upsample_nearest2d(x.to("meta"), [8, 8])
    except TypeError:
        return True
    return False


_OPINFO_CMI = "https://github.com/pytorch/pytorch/blob/main/torch/testing/_internal/common_methods_invocations.py"
_OPINFO_FFT = "https://github.com/pytorch/pytorch/blob/main/torch/testing/_internal/opinfo/definitions/fft.py"


def _ceil_meta_complex_no_error() -> bool:
    """ceil of a complex64 tensor [0.5+1.5j, -1.2-0.3j]: the CPU raises "ceil is not supported for
    complex inputs" while the meta kernel returns a complex result where the same error is due."""
    x = torch.tensor([0.5 + 1.5j, -1.2 - 0.3j], dtype=torch.complex64)
    return _meta_returns_where_cpu_raises(torch.ops.aten.ceil.default, x)


def _clamp_min_meta_complex_no_error() -> bool:
    """clamp_min of a complex64 tensor [1+2j, 3-1j] by 0.5: the CPU raises "clamp is not supported for
    complex types" while the meta kernel returns a complex result where the same error is due."""
    x = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    return _meta_returns_where_cpu_raises(lambda t: torch.ops.aten.clamp_min(t, 0.5), x)


def _max_dim_meta_complex_no_error() -> bool:
    """max over dim 0 of a complex128 tensor [1+2j, 3-1j]: the CPU raises "max(): does not support
    complex input" while the meta kernel returns (values, indices) where the same error is due."""
    x = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128)
    return _meta_returns_where_cpu_raises(lambda t: torch.ops.aten.max.dim(t, 0), x)


def _foreach_norm_meta_integer_no_error() -> bool:
    """_foreach_norm of [int64 tensor [1, 2, 3]]: the CPU raises "Expected a floating point or complex
    tensor as input. Got Long" while the meta kernel returns an int64 0-d norm where the error is due."""
    x = torch.tensor([1, 2, 3])
    return _meta_returns_where_cpu_raises(lambda t: torch.ops.aten._foreach_norm.Scalar([t], 2), x)


def _binary_cross_entropy_meta_weight_broadcast() -> bool:
    """binary_cross_entropy of a 0-d input and target with a (5, 5) weight (reduction none): the CPU
    raises "output with shape [] doesn't match the broadcast shape [5, 5]" while the meta kernel
    returns a (5, 5) result where the same error is due."""
    x = torch.tensor(0.3)
    y = torch.tensor(0.6)
    w = torch.full((5, 5), 0.5)
    return _meta_returns_where_cpu_raises(lambda a, b, c: torch.ops.aten.binary_cross_entropy(a, b, c, 0), x, y, w)


def _view_copy_meta_transposed_raises() -> bool:
    """view_copy of the transpose of a (3, 4) tensor to [12]: the CPU returns the 12 elements (a
    copy, in the transposed tensor's logical order) while the meta kernel raises "view size is not
    compatible with input tensor's size and stride" where a (12,) result is due."""
    x = torch.arange(12.0).reshape(3, 4).t()
    if not torch.equal(torch.ops.aten.view_copy(x, [12]), x.reshape(12)):
        return False
    try:
        torch.ops.aten.view_copy(x.to("meta"), [12])
    except RuntimeError:
        return True
    return False


def _split_with_sizes_copy_out_requires_grad_no_error() -> bool:
    """split_with_sizes_copy of a (3, 4) float32 tensor that requires grad, sizes [1, 2], into out=
    tensors, with grad mode on: no error, where "functions with out=... arguments don't support
    automatic differentiation" is due (as torch.add(x, x, out=...) raises)."""
    x = torch.ones(3, 4, requires_grad=True)
    outs = [torch.empty(1, 4), torch.empty(2, 4)]
    try:
        torch.ops.aten.split_with_sizes_copy.out(x, [1, 2], 0, out=outs)
    except RuntimeError:
        return False
    return True


def _fft_ihfftn_out_one_dim_unwritten() -> bool:
    """fft.ihfftn of the 1-d float32 arange(6) with out= a zeroed complex64 (4,) tensor: out stays all
    zeros where [2.5, -0.5-0.866j, -0.5-0.289j, -0.5] (the result without out=) is right."""
    x = torch.arange(6.0)
    out = torch.zeros(4, dtype=torch.complex64)
    torch.ops.aten.fft_ihfftn.out(x, None, None, None, out=out)
    return not torch.allclose(out, torch.fft.ihfftn(x))


def _fft_r2c_out_of_range_dim_crash() -> bool:
    """_fft_r2c of a (2, 3) float tensor over dim [1250999896764] (far out of range): the process
    dies by SIGSEGV (the dim is used unwrapped to index the sizes), where an IndexError ("Dimension
    out of range") is due, as every other dim-taking op raises."""
    return _dies_with_signal("torch._fft_r2c(torch.ones(2, 3, dtype=torch.float64), [1250999896764], 0, True)")


BUGS_TENTH = [
    Bug(
        "isin_promotion_collapse_false_positive",
        "aten::isin.Tensor_Tensor",
        ("int16", "int32", "int64"),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/194725 (fix proposed in"
        " https://github.com/pytorch/pytorch/pull/195425)",
        _isin_promotion_false_positive,
        "integer elements tested against a narrower floating test_elements (float16, bfloat16; int64 against"
        " float32 or float64 with values past 2^24 or 2^53) on the sorting path (test_elements not tiny): distinct"
        " elements that round to one value in the common dtype are reported present, where False is right",
        category="edge",
    ),
    Bug(
        "upsample_nearest2d_meta_empty_batch_type_error",
        "aten::upsample_nearest2d",
        ("float32", "float64", "float16", "bfloat16", "uint8"),
        "device_error",
        "https://github.com/pytorch/pytorch/pull/195376 (open, not in 2.13)",
        _upsample_nearest2d_meta_empty_batch,
        "a zero-element input (a batch of 0) to nearest upsampling: the meta kernel's non-empty check passes an"
        " int to torch._check and raises TypeError, where the CPU returns an empty result of the upsampled shape",
        also=(
            "aten::upsample_nearest2d.vec",
            "aten::upsample_nearest1d",
            "aten::upsample_nearest3d",
            "aten::_upsample_nearest_exact1d",
            "aten::_upsample_nearest_exact2d",
            "aten::_upsample_nearest_exact3d",
        ),
        category="meta",
        device="meta",
    ),
    Bug(
        "ceil_meta_complex_no_error",
        "aten::ceil",
        ("complex64", "complex128"),
        "missing_error",
        _OPINFO_CMI + " (_foreach_ceil, ForeachFuncInfo 'ceil': expectedFailure TestMeta.test_meta_outplace,"
        " dtypes=complex_types_and(torch.bool))",
        _ceil_meta_complex_no_error,
        "a complex input on the meta device: the meta kernel returns a complex result, where the CPU's error"
        " 'ceil is not supported for complex inputs' is due",
        also=("aten::_foreach_ceil",),
        category="meta",
        device="meta",
    ),
    Bug(
        "clamp_min_meta_complex_no_error",
        "aten::clamp_min",
        ("complex64", "complex128"),
        "missing_error",
        _OPINFO_CMI + " (_foreach_clamp_min, ForeachFuncInfo 'clamp_min': expectedFailure TestMeta.test_meta_outplace,"
        " dtypes=complex_types_and(torch.bool))",
        _clamp_min_meta_complex_no_error,
        "a complex input with a scalar bound on the meta device: the meta kernel returns a complex result, where"
        " the CPU's error 'clamp is not supported for complex types' is due (clamp_max behaves alike)",
        also=("aten::_foreach_clamp_min.Scalar",),
        category="meta",
        device="meta",
    ),
    Bug(
        "max_meta_complex_no_error",
        "aten::max.dim",
        ("complex64", "complex128"),
        "missing_error",
        _OPINFO_CMI + " (_foreach_max, ForeachFuncInfo 'max': expectedFailure TestMeta.test_meta_outplace,"
        " dtypes=(torch.complex128, torch.complex64), 'no complex support for ordering ops like max')",
        _max_dim_meta_complex_no_error,
        "a complex input on the meta device (full or per-dim max): the meta kernel returns a result, where the"
        " CPU's error (complex numbers have no order: 'max(): does not support complex input') is due",
        also=("aten::max", "aten::_foreach_max"),
        category="meta",
        device="meta",
    ),
    Bug(
        "foreach_norm_meta_integer_no_error",
        "aten::_foreach_norm.Scalar",
        ("int8", "int16", "int32", "int64", "uint8", "bool"),
        "missing_error",
        _OPINFO_CMI + " (_foreach_norm, ForeachFuncInfo 'norm': expectedFailure TestMeta.test_meta_outplace,"
        " dtypes=integral_types_and(torch.bool))",
        _foreach_norm_meta_integer_no_error,
        "integer tensors on the meta device: the meta kernel returns integer 0-d norms, where the CPU's error"
        " 'Expected a floating point or complex tensor as input' is due",
        category="meta",
        device="meta",
    ),
    Bug(
        "binary_cross_entropy_meta_weight_broadcast",
        "aten::binary_cross_entropy",
        ("float32", "float64", "bfloat16"),
        "missing_error",
        _OPINFO_CMI + " (nn.functional.binary_cross_entropy: expectedFailure TestMeta.test_dispatch_meta_outplace,"
        " 'RuntimeError: output with shape [] doesn't match the broadcast shape [5, 5]')",
        _binary_cross_entropy_meta_weight_broadcast,
        "a weight of more elements (a larger broadcast shape) than input and target, e.g. 0-d input with a"
        " (5, 5) or (5,) weight, any reduction: the meta kernel returns a result, where the CPU's error (the"
        " weighted loss cannot be written into an input-shaped output) is due",
        category="meta",
        device="meta",
    ),
    Bug(
        "view_copy_meta_non_viewable_raises",
        "aten::view_copy",
        ("float32", "float64", "int64"),
        "device_error",
        _OPINFO_CMI + " (view_copy: expectedFailure TestMeta.test_dispatch_symbolic_meta_outplace_all_strides,"
        " 'RuntimeError: view size is not compatible with input tensor's size and stride')",
        _view_copy_meta_transposed_raises,
        "a non-contiguous input (transposed, permuted) whose requested shape is not expressible as a view: the"
        " meta kernel raises the view error, where the CPU returns the copied result",
        category="meta",
        device="meta",
    ),
    Bug(
        "split_with_sizes_copy_out_requires_grad_no_error",
        "aten::split_with_sizes_copy.out",
        ("float32", "float64", "complex64", "complex128"),
        "missing_error",
        _OPINFO_CMI
        + " (split_with_sizes_copy: expectedFailure TestCommon.test_out_requires_grad_error, 'No error raised')",
        _split_with_sizes_copy_out_requires_grad_no_error,
        "an input that requires grad with out= tensors (a list of outs) under grad mode: the op writes the outs"
        " without the autograd error that every out= function must raise (split_copy.Tensor_out and"
        " unbind_copy.int_out, the other list-out copy ops, behave alike)",
        category="layout",
    ),
    Bug(
        "fft_ihfftn_out_one_dim_unwritten",
        "aten::fft_ihfftn.out",
        ("float32", "float64", "int64", "bool"),
        "mismatch",
        _OPINFO_FFT + " (fft.ihfftn: expectedFailure TestCommon.test_out, 'Mismatched elements!')",
        _fft_ihfftn_out_one_dim_unwritten,
        "an out= tensor with a transform over a single dim (a 1-d input, or s/dim of length one): out keeps"
        " its prior contents, where the transform's values are due; two or more dims are right",
        category="layout",
    ),
    Bug(
        "fft_r2c_out_of_range_dim_crash",
        "aten::_fft_r2c",
        ("float32", "float64"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/141449",
        _fft_r2c_out_of_range_dim_crash,
        "a dim argument out of the input's range (huge positive or negative, e.g. 2^40 or 100000 on a 2-d input):"
        " the CPU (MKL) kernel indexes the sizes with the unwrapped dim and the process dies, where a dimension"
        " out of range error is right",
        category="edge",
    ),
]


# An eleventh set: ops none of the ten sets names, drawn in order from the expected-failure entries of
# PyTorch's test files outside the OpInfo database, from tracker searches on nine topics and from the
# most recent tracker reports; fixed before conform ran on any of them
# (docs/evaluation/real_bugs_eleventh.md). `python benchmarks/real_bugs.py --set eleventh`.


def _norm_float32_long_accumulation() -> bool:
    """The 2-norm of 4,000,000 float32 values uniform in [0, 1): relative error about 7e-5 (the CPU
    norm kernel adds the squares in float32 accumulators, so the error grows with the length) where
    the float64 norm, and the float32 pairwise sum of squares, agree to about 1e-9."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4_000_000, generator=g)
    ref = x.double().norm().item()
    got = torch.ops.aten.norm.Scalar(x, 2).item()
    return abs(got - ref) / ref > 1e-5


def _linalg_solve_second_jvp() -> bool:
    """Forward-over-forward second derivative of solve(A, b) with A = [[t + 2]], b = [[1]] at t = 0:
    0.125 where 2 / (t + 2)^3 = 0.25 is right (the JVP rule reuses the primal's LU as a constant);
    the first derivative (-0.25) and reverse-over-reverse (0.25) are right."""

    def f(t):
        return torch.linalg.solve((t + 2).reshape(1, 1), torch.ones(1, 1, dtype=t.dtype)).sum()

    def d1(t):
        return torch.func.jvp(f, (t,), (torch.ones_like(t),))[1]

    t = torch.tensor(0.0, dtype=torch.float64)
    d2 = torch.func.jvp(d1, (t,), (torch.ones_like(t),))[1]
    return abs(d2.item() - 0.25) > 1e-6


def _sdpa_flash_cpu_meta_unchecked() -> bool:
    """_scaled_dot_product_flash_attention_for_cpu of 5-d query/key/value: the CPU kernel raises
    ("Accept only 4 dims inputs"), the meta kernel checks nothing and returns a 5-d output."""
    q = torch.randn(1, 1, 2, 1, 8)
    k = torch.randn(1, 1, 2, 2, 8)
    v = torch.randn(1, 1, 2, 2, 8)
    return _meta_returns_where_cpu_raises(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, q, k, v)


def _masked_softmax_backward_short_output() -> bool:
    """_masked_softmax_backward of a (1, 16) grad and mask with a (1, 1) output over dim 1: no error
    and a (1, 16) result of uninitialized-looking values (the kernel reads past the output), where a
    shape-mismatch error is due."""
    grad = torch.ones(1, 16)
    output = torch.full((1, 1), 0.5)
    mask = torch.zeros(1, 16, dtype=torch.bool)
    try:
        torch.ops.aten._masked_softmax_backward(grad, output, mask, 1)
    except RuntimeError:
        return False
    return True


def _adaptive_avg_pool2d_backward_channel_mismatch() -> bool:
    """_adaptive_avg_pool2d_backward of a (1, 2, 1, 1) grad_output for a (1, 1, 1, 1) input: no error
    and a (1, 1, 1, 1) result, where an error for the mismatched channel count is due (the kernel
    walks the larger tensor's channels out of bounds)."""
    grad = torch.ones(1, 2, 1, 1)
    x = torch.ones(1, 1, 1, 1)
    try:
        torch.ops.aten._adaptive_avg_pool2d_backward(grad, x)
    except RuntimeError:
        return False
    return True


def _log_softmax_backward_data_short_output() -> bool:
    """_log_softmax_backward_data of a (1, 16) grad_output with a (1, 1) output over dim 1: no error
    and a (1, 16) result computed from memory past the output, where a shape-mismatch error is due."""
    grad = torch.ones(1, 16)
    output = torch.zeros(1, 1)
    try:
        torch.ops.aten._log_softmax_backward_data(grad, output, 1, torch.float32)
    except RuntimeError:
        return False
    return True


def _unfold_backward_scalar_grad() -> bool:
    """unfold_backward of a 0-d grad_in with input_sizes [4], dim 0, size 2, step 1: no error and a
    (4,) result holding uninitialized values, where an error is due (grad_in of that unfold has
    shape (3, 2))."""
    try:
        torch.ops.aten.unfold_backward(torch.tensor(1.0), [4], 0, 2, 1)
    except (RuntimeError, IndexError):
        return False
    return True


def _replication_pad1d_backward_zero_channel_grad() -> bool:
    """replication_pad1d_backward of a (2, 0, 6) grad_output for a (2, 2, 4) input with padding
    [1, 1]: the process dies by SIGSEGV (the channel count is never checked, so the kernel reads the
    empty grad_output), where an error for the mismatched channel count is due."""
    return _dies_with_signal(
        "g = torch.full((2, 0, 6), 1.0)\n"
        "s = torch.full((2, 2, 4), 1.0)\n"
        "torch.ops.aten.replication_pad1d_backward(g, s, [1, 1])"
    )


def _batch_norm_update_stats_short_running_stats() -> bool:
    """batch_norm_update_stats of a (4, 64) input with one-element running_mean and running_var
    (momentum 0.1): the process dies by SIGSEGV (the kernel writes 64 running-stat entries into
    one-element tensors), where an error for the mismatched running-stat size is due."""
    return _dies_with_signal(
        "x = torch.ones(4, 64)\ntorch.ops.aten.batch_norm_update_stats(x, torch.zeros(1), torch.ones(1), 0.1)"
    )


def _cummin_empty_invalid_dim() -> bool:
    """cummin of an empty (0, 3) float32 tensor over dim -46: no error and an empty (0, 3) result,
    where "Dimension out of range" is due (the same dim raises for a (2, 3) tensor; the kernel returns
    before it wraps the dim)."""
    try:
        torch.ops.aten.cummin(torch.ones(2, 3), -46)
    except IndexError:
        pass
    else:
        return False
    try:
        torch.ops.aten.cummin(torch.empty(0, 3), -46)
    except IndexError:
        return False
    return True


_TEST_TORCH = "https://github.com/pytorch/pytorch/blob/main/test/test_torch.py"
_TEST_POOLING = "https://github.com/pytorch/pytorch/blob/main/test/nn/test_pooling.py"


def _copy_meta_internal_overlap() -> bool:
    """copy_ into a self whose elements share memory (a (1,) tensor expanded to (3, 3)): the CPU raises
    "unsupported operation: more than one element of the written-to tensor refers to a single memory
    location", the meta kernel returns self without the check."""
    src = torch.randn(3, 3)
    dst = torch.randn(1).expand(3, 3)
    try:
        dst.copy_(src)
    except RuntimeError:
        dst_meta = torch.empty(1, device="meta").expand(3, 3)
        dst_meta.copy_(src.to("meta"))
        return True
    return False


def _adaptive_max_pool2d_meta_integer_input() -> bool:
    """adaptive_max_pool2d of an integer (int64) input: the CPU raises '"adaptive_max_pool2d" not implemented
    for 'Long'', the meta kernel returns an int64 output and indices instead of refusing the dtype."""
    return _meta_returns_where_cpu_raises(
        lambda x: torch.ops.aten.adaptive_max_pool2d(x, [2, 2]),
        torch.arange(16, dtype=torch.int64).reshape(1, 4, 4),
    )


BUGS_ELEVENTH = [
    Bug(
        "norm_float32_long_accumulation",
        "aten::norm.Scalar",
        ("float32",),
        "mismatch",
        "https://github.com/pytorch/pytorch/issues/68326 (again in"
        " https://github.com/pytorch/pytorch/issues/169237; fix proposed in"
        " https://github.com/pytorch/pytorch/pull/169996, closed unmerged)",
        _norm_float32_long_accumulation,
        "a long float32 vector (about 1e6 elements and up): the 2-norm's relative error grows with the length"
        " (7e-5 at 4e6, 6e-3 at 1e8) where the float64 norm is right",
        category="position",
    ),
    Bug(
        "linalg_solve_second_jvp_wrong",
        "aten::linalg_solve",
        ("float32", "float64"),
        "grad_mismatch",
        "https://github.com/pytorch/pytorch/issues/196695 (member of https://github.com/pytorch/pytorch/issues/198017)",
        _linalg_solve_second_jvp,
        "a forward-over-forward second derivative at a nonsingular A (A = [[t + 2]], b = [[1]], t = 0): 0.125"
        " where 0.25 is right; the first derivative and reverse-over-reverse are right",
        also=("aten::_linalg_solve_ex", "aten::linalg_solve_ex"),
        category="gradient",
    ),
    Bug(
        "sdpa_flash_cpu_meta_unchecked",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        FLOATS,
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/195743",
        _sdpa_flash_cpu_meta_unchecked,
        "5-d (or 3-d) operands, mismatched head sizes or dropout_p > 0: the CPU raises, meta returns an output",
        category="meta",
        device="meta",
    ),
    Bug(
        "masked_softmax_backward_short_output_no_error",
        "aten::_masked_softmax_backward",
        ("float32", "float64", "float16", "bfloat16"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194801",
        _masked_softmax_backward_short_output,
        "an output smaller than grad_output and mask: no error (an out-of-bounds read) where a shape check must raise",
        category="edge",
    ),
    Bug(
        "adaptive_avg_pool2d_backward_channel_mismatch_no_error",
        "aten::_adaptive_avg_pool2d_backward",
        ("float32", "float64", "float16", "bfloat16"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194803",
        _adaptive_avg_pool2d_backward_channel_mismatch,
        "a grad_output whose channel count differs from the input's: no error (an out-of-bounds access)"
        " where a shape check must raise",
        category="edge",
    ),
    Bug(
        "log_softmax_backward_data_short_output_no_error",
        "aten::_log_softmax_backward_data",
        ("float32", "float64", "float16", "bfloat16"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194799",
        _log_softmax_backward_data_short_output,
        "an output smaller than grad_output: no error (an out-of-bounds read) where a shape check must raise",
        category="edge",
    ),
    Bug(
        "unfold_backward_scalar_grad_no_error",
        "aten::unfold_backward",
        ("float32", "float64", "float16", "bfloat16", "int64", "complex64"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/194807",
        _unfold_backward_scalar_grad,
        "a 0-d grad_in for a 1-d input of length 4 (size 2, step 1): no error and uninitialized values"
        " where a shape check must raise",
        category="edge",
    ),
    Bug(
        "replication_pad1d_backward_zero_channel_grad_segfault",
        "aten::replication_pad1d_backward",
        ("float32", "float64", "float16", "bfloat16"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/140945 (the same missing channel check in the 2-d"
        " kernel: https://github.com/pytorch/pytorch/issues/142834; fix proposed in"
        " https://github.com/pytorch/pytorch/pull/189463)",
        _replication_pad1d_backward_zero_channel_grad,
        "a grad_output with 0 channels for an input with 2: the process dies where a channel check must raise",
        also=("aten::replication_pad2d_backward",),
        category="edge",
    ),
    Bug(
        "batch_norm_update_stats_short_running_stats_segfault",
        "aten::batch_norm_update_stats",
        ("float32", "float64", "float16", "bfloat16"),
        "crash",
        "https://github.com/pytorch/pytorch/issues/153967 (the same class reported again as"
        " https://github.com/pytorch/pytorch/issues/194798)",
        _batch_norm_update_stats_short_running_stats,
        "running_mean and running_var with fewer elements than the input has channels: the process dies"
        " (an out-of-bounds write) where a size check must raise",
        category="edge",
    ),
    Bug(
        "cummin_empty_invalid_dim_no_error",
        "aten::cummin",
        ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"),
        "missing_error",
        "https://github.com/pytorch/pytorch/issues/188224 (fix PR"
        " https://github.com/pytorch/pytorch/pull/188361; not in 2.13)",
        _cummin_empty_invalid_dim,
        "an empty tensor with an out-of-range dim (-46 for 2 dims): no error where the IndexError that a"
        " non-empty tensor gets is due",
        also=("aten::cummax",),
        category="edge",
    ),
    Bug(
        "copy_meta_internal_overlap_unchecked",
        "aten::copy_",
        ("float32", "float64", "float16", "bfloat16", "complex64", "int64", "bool"),
        "missing_error",
        _TEST_TORCH + " (TestTorchDeviceType.test_copy_mem_overlap: @expectedFailureMeta, 'RuntimeError not raised')",
        _copy_meta_internal_overlap,
        "an in-place copy into an expanded (stride-0) self: the CPU raises the internal-overlap error, meta"
        " returns self",
        category="meta",
        device="meta",
    ),
    Bug(
        "adaptive_max_pool2d_meta_integer_input_no_error",
        "aten::adaptive_max_pool2d",
        ("int64", "int32", "int16", "int8", "uint8", "bool"),
        "missing_error",
        _TEST_POOLING + " (TestPoolingNNDeviceType.test_adaptive_pooling_no_suppot_input: @expectedFailureMeta,"
        " 'Runtime Error not raised for meta')",
        _adaptive_max_pool2d_meta_integer_input,
        "an integer or bool input: the CPU raises 'not implemented for' the dtype, meta returns an output and indices",
        category="meta",
        device="meta",
    ),
]


SETS = {
    "original": BUGS,
    "disjoint": BUGS_DISJOINT,
    "heldout": BUGS_HELDOUT,
    "fresh": BUGS_FRESH,
    "fifth": BUGS_FIFTH,
    "sixth": BUGS_SIXTH,
    "seventh": BUGS_SEVENTH,
    "eighth": BUGS_EIGHTH,
    "ninth": BUGS_NINTH,
    "tenth": BUGS_TENTH,
    "eleventh": BUGS_ELEVENTH,
    "all": BUGS
    + BUGS_DISJOINT
    + BUGS_HELDOUT
    + BUGS_FRESH
    + BUGS_FIFTH
    + BUGS_SIXTH
    + BUGS_SEVENTH
    + BUGS_EIGHTH
    + BUGS_NINTH
    + BUGS_TENTH
    + BUGS_ELEVENTH,
}

FAILING = ("mismatch", "grad_mismatch", "crash", "timeout", "device_error", "missing_error", "meta_mismatch")


def reproduces(bug: Bug) -> bool | str:
    try:
        return bool(bug.repro())
    except Exception as e:  # noqa: BLE001 - a repro that raises does not reproduce
        return f"{type(e).__name__}: {e}"


def _conform_run(
    bugs: list[Bug], device: str, db: Path, seed: int, workers: str, cwd: str, examples: int | None = None
) -> float:
    """One default `conform run` over the bugs' ops on one device, into db; its wall time.
    `examples`: conform's --examples (None: its default)."""
    ops = ",".join(sorted({op for b in bugs for op in (b.op, *b.also)}))
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
            device,
            "--db",
            str(db),
            "-n",
            workers,
            "-q",
            "--no-bench",  # timing is not what this measures
            "--seed",
            str(seed),
            *(["--examples", str(examples)] if examples else []),
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
    return time.monotonic() - t


def _rows(db: Path) -> list[tuple]:
    """(op, dtype, outcome, message, case JSON) of every failure of every cell: its verdict, and
    the failures of other kinds it found after it (failures.further_failures)."""
    with sqlite3.connect(db) as c:
        further = any(r[1] == "further_failures" for r in c.execute("PRAGMA table_info(failures)"))
        rows = c.execute(
            'SELECT o.qualname, r.dtype, r.outcome, r.message, f."case", '
            + ("f.further_failures" if further else "NULL")
            + " FROM results r JOIN ops o ON o.id = r.op_id LEFT JOIN failures f ON f.result_id = r.id"
        ).fetchall()
    out = []
    for op, dtype, outcome, message, case, more in rows:
        out.append((op, dtype, outcome, message, case))
        for f in (json.loads(more) if more else None) or ():
            out.append((op, dtype, f["outcome"], f["message"], json.dumps(f["case"])))
    return out


def check_repros(bugs: list[Bug]) -> int:
    """Run each bug's repro only (no conform run): which reproduce on the installed torch."""
    live = 0
    header = ("bug", "device", "op", "category", "reproduces")
    table = []
    for b in bugs:
        r = reproduces(b)
        live += r is True
        table.append((b.name, b.device, b.op, b.category or "-", "yes" if r is True else f"NO ({r})"))
    widths = [max(len(str(r[i])) for r in table + [header]) for i in range(len(header))]
    print(f"torch {torch.__version__}, repros only (no conform run)")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |")
    print(f"{live} of {len(bugs)} listed bugs reproduce")
    return 0 if live == len(bugs) else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--set",
        dest="bug_set",
        choices=sorted(SETS),
        default="original",
        help="which bugs: the original set, the disjoint one, the held-out one, the fresh one, or all (default: original)",
    )
    ap.add_argument("--only", default="", help="comma list of bug names")
    ap.add_argument("--seed", type=int, default=None, help="run seed (default: random, printed)")
    ap.add_argument("--workers", default="1")
    ap.add_argument("--examples", type=int, default=None, help="conform's --examples (default: its own)")
    ap.add_argument("--db", default=None, help="reuse an existing run's database instead of running")
    ap.add_argument(
        "--keep",
        default=None,
        help="copy the run's database here (to audit the cells afterwards; one file per device, suffixed"
        " .DEVICE, when the bugs need more than one)",
    )
    ap.add_argument(
        "--check-repros", action="store_true", help="run the repros only and say which reproduce; no conform run"
    )
    args = ap.parse_args()
    bugs = [b for b in SETS[args.bug_set] if not args.only or b.name in args.only.split(",")]
    if args.check_repros:
        sys.exit(check_repros(bugs))
    live = []
    for b in bugs:
        r = reproduces(b)
        if r is not True:
            print(f"{b.name}: does not reproduce on torch {torch.__version__} ({r})", file=sys.stderr)
        else:
            live.append(b)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    # a bug of the meta kernel shows in the cells of a run on the meta device: one run per device
    devices = sorted({b.device for b in live}) or ["cpu"]
    cells: dict[tuple[str, str], list[tuple[str, str, str, dict]]] = {}
    secs = 0.0
    with tempfile.TemporaryDirectory(prefix="real-bugs-") as tmp:
        for device in devices:
            if args.db:
                db = Path(args.db)
            else:
                db = Path(tmp) / ("run.db" if len(devices) == 1 else f"run-{device}.db")
                secs += _conform_run(
                    [b for b in live if b.device == device], device, db, seed, args.workers, tmp, args.examples
                )
                if args.keep:
                    shutil.copyfile(db, args.keep if len(devices) == 1 else f"{args.keep}.{device}")
            for op, dtype, outcome, message, case in _rows(db):
                cells.setdefault((device, op), []).append(
                    (dtype, outcome, message or "", json.loads(case) if case else {})
                )
    table = []
    found = 0
    for b in live:
        hits = [
            (d, o, m)
            for op in (b.op, *b.also)
            for d, o, m, case in cells.get((b.device, op), [])
            if d in b.dtypes and o in b.outcome.split("|") and (b.evidence is None or b.evidence(m, case))
        ]
        found += bool(hits)
        other = [
            (d, o, m)
            for d, o, m, _ in cells.get((b.device, b.op), [])
            if d in b.dtypes and o in b.outcome.split("|") and not hits
        ]
        note = (
            f"{hits[0][0]}: {hits[0][2][:110]}"
            if hits
            else f"{other[0][0]} failed on another input class: {other[0][2][:80]}"
            if other
            else ", ".join(sorted({f"{d} {o}" for d, o, _, _ in cells.get((b.device, b.op), []) if o in FAILING}))
            or "all cells pass"
        )
        table.append((b.name, b.op, "yes" if hits else "NO", b.category or "-", b.cls, note))
    header = ("bug", "op", "found", "category", "inputs that reach it", "cell / what the op's cells said")
    widths = [max(len(str(r[i])) for r in table + [header]) for i in range(len(header))]
    runs = (
        f"the cells of {args.db}"
        if args.db
        else "one conform run"
        if len(devices) == 1
        else f"{len(devices)} conform runs ({', '.join(devices)})"
    )
    print(
        f"torch {torch.__version__}, seed {seed}, {runs} over {len({op for b in live for op in (b.op, *b.also)})} ops in {secs:.0f} s"
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
