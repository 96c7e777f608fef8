"""Compare a device's results with the reference's: pair up, compare each pair, return records.

Three steps, as in ``torch.testing._comparison``:

1. pair: walk `actual` and `expected` together through tuples, lists (and torch's structseq
   return types), giving each leaf an id path such as ``output[1]``;
2. compare each pair of leaves (tensors, Python scalars, None, dtypes, strings);
3. return one `Record` per leaf. Nothing here raises: a pair that cannot be compared becomes a
   record of kind "structure" (or "error"), because the store needs a verdict, not a traceback.

The rules for values are clauses (8f)-(8i) of docs/verdict-rule.md.
"""

# Every record carries the measured error (greatest absolute, relative and ULP difference) and
# the tolerance used, whether or not the pair passed: the store keeps both.

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conform.judge.tolerances import LeafTolerance, default_tolerance, is_inexact, leaf_scale
from conform.judge.trees import bind_arguments, leaves

KINDS = ("ok", "structure", "shape", "dtype", "strides", "values", "nan", "inf", "sign", "error")

Tolerance = Callable[[torch.dtype], tuple[float, float]]


@dataclass
class Record:
    """The verdict on one pair of leaves."""

    path: str  # "output[1]", "self (mutated)", "grad[self]"
    kind: str = "ok"  # one of KINDS
    message: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    index: tuple[int, ...] | None = None  # where the greatest absolute difference is
    mismatched: int = 0
    total: int = 0
    rtol: float | None = None
    atol: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def failures(records: list[Record]) -> list[Record]:
    return [r for r in records if not r.ok]


def compare(
    actual,
    expected,
    *,
    tolerance: Tolerance | tuple[float, float] | None = None,
    check_sign_of_zero: bool = False,
    metadata_only: bool = False,
    path: str = "output",
) -> list[Record]:
    """Records for every leaf of `actual` (device, already on the CPU) against `expected`.

    `tolerance` maps a dtype to (rtol, atol); a fixed pair applies to every floating leaf;
    None uses the per-dtype table. `metadata_only` compares structure, shape and dtype only.
    """
    if tolerance is None:
        tol_fn: Tolerance = default_tolerance
    elif callable(tolerance):
        tol_fn = tolerance
    else:
        fixed = (float(tolerance[0]), float(tolerance[1]))
        tol_fn = lambda dt: fixed if is_inexact(dt) else (0.0, 0.0)  # noqa: E731
    records: list[Record] = []
    try:
        _pair(actual, expected, path, records, tol_fn, check_sign_of_zero, metadata_only)
    except Exception as e:  # never raise: a comparison bug must not hide the case
        records.append(Record(path, "error", f"cannot compare: {type(e).__name__}: {e} [{path}]"))
    return records


# -- pairing -------------------------------------------------------------------------------


def _is_seq(x) -> bool:
    return isinstance(x, (tuple, list)) and not isinstance(x, torch.Size)


def _pair(a, e, path, out, tol_fn, sign, meta_only):
    if _is_seq(a) and _is_seq(e):
        if len(a) != len(e):
            out.append(Record(path, "structure", f"sequence lengths differ: {len(a)} vs {len(e)} expected [{path}]"))
            return
        for i, (x, y) in enumerate(zip(a, e)):
            _pair(x, y, f"{path}[{i}]", out, tol_fn, sign, meta_only)
        return
    if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and (a.is_nested or e.is_nested):
        # a nested tensor has no single shape: it is compared as the list of its components
        if a.is_nested != e.is_nested:
            out.append(
                Record(
                    path,
                    "structure",
                    f"{'nested' if a.is_nested else 'plain'} tensor vs {'nested' if e.is_nested else 'plain'} expected [{path}]",
                )
            )
            return
        _pair(list(a.unbind()), list(e.unbind()), path, out, tol_fn, sign, meta_only)
        return
    if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
        out.append(
            compare_tensors(
                a, e, path=path, tolerance=_leaf_tolerance(tol_fn, e), check_sign_of_zero=sign, metadata_only=meta_only
            )
        )
        return
    if a is None and e is None:
        out.append(Record(path))
        return
    if _is_scalar(a) and _is_scalar(e):
        out.append(_compare_scalars(a, e, path, tol_fn, meta_only))
        return
    if isinstance(a, dict) and isinstance(e, dict):
        # TorchScript dicts keep insertion order: keys and values pair up by position
        if len(a) != len(e):
            out.append(Record(path, "structure", f"dict sizes differ: {len(a)} vs {len(e)} expected [{path}]"))
            return
        for i, ((ka, va), (ke, ve)) in enumerate(zip(a.items(), e.items())):
            _pair(ka, ke, f"{path}.key[{i}]", out, tol_fn, sign, meta_only)
            _pair(va, ve, f"{path}[{i}]", out, tol_fn, sign, meta_only)
        return
    if type(a) is not type(e):
        out.append(Record(path, "structure", f"{_kind_name(a)} vs {_kind_name(e)} expected [{path}]"))
        return
    if isinstance(a, torch.device):
        out.append(Record(path))  # the two sides run on different devices by design
        return
    if a == e:
        out.append(Record(path))
    else:
        out.append(Record(path, "values", f"{a!r} vs {e!r} expected [{path}]", mismatched=1, total=1))


def _is_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex, torch.SymInt, torch.SymFloat, torch.SymBool))


def _kind_name(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"Tensor {_dtype_name(x.dtype)}{list(x.shape)}"
    if x is None:
        return "None"
    return type(x).__name__


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def _compare_scalars(a, e, path, tol_fn, meta_only) -> Record:
    if isinstance(e, bool) or isinstance(a, bool) or (isinstance(e, int) and isinstance(a, int)):
        if type(a) is not type(e) and (isinstance(a, bool) or isinstance(e, bool)):
            return Record(path, "dtype", f"{type(a).__name__} vs {type(e).__name__} expected [{path}]")
        if meta_only or a == e:
            return Record(path, total=1)
        return Record(
            path, "values", f"{a!r} vs {e!r} expected [{path}]", max_abs=float(abs(a - e)), mismatched=1, total=1
        )
    dt = torch.complex128 if isinstance(a, complex) or isinstance(e, complex) else torch.float64
    ta = torch.tensor(complex(a) if dt.is_complex else float(a), dtype=dt)
    te = torch.tensor(complex(e) if dt.is_complex else float(e), dtype=dt)
    # Python floats are computed by the kernel in the op's dtype; the table's float32 entry is
    # the honest default when nothing says more.
    rtol, atol = _leaf_tolerance(tol_fn, te, torch.float32)
    return compare_tensors(ta, te, path=path, tolerance=(rtol, atol), metadata_only=meta_only)


def _leaf_tolerance(tol_fn, e: torch.Tensor, dtype: torch.dtype | None = None) -> tuple[float, float]:
    """The tolerance for the expected leaf `e` (of `dtype`, e's own by default): a LeafTolerance
    reads the leaf's scale (see tolerances)."""
    dtype = e.dtype if dtype is None else dtype
    if isinstance(tol_fn, LeafTolerance):
        return tol_fn.at(dtype, leaf_scale(e))
    return tol_fn(dtype)


# -- tensors -------------------------------------------------------------------------------


def compare_tensors(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    path: str = "output",
    tolerance: tuple[float, float] | None = None,
    check_sign_of_zero: bool = False,
    metadata_only: bool = False,
) -> Record:
    """One record for one pair of tensors (actual already on the CPU)."""
    if metadata_only and actual.device.type == "meta" and actual.layout == torch.strided:
        # one the results' conversion did not reach (a tensor key of a TorchScript dict): its metadata
        actual = torch.empty_strided(actual.shape, actual.stride(), dtype=actual.dtype)
    try:
        if not (_sparse_valid(actual) and _sparse_valid(expected)):
            # densifying a sparse tensor whose indices break its invariants reads out of
            # bounds (a segfault in to_dense): such tensors are compared by parts below
            raise ValueError("sparse tensor with invalid indices")
        a, e = _plain(actual), _plain(expected)
    except Exception as ex:
        parts = _sparse_parts(actual, expected)
        if parts is None:
            return Record(path, "error", f"cannot read tensor: {type(ex).__name__}: {ex} [{path}]")
        # an unvalidated sparse tensor (the *_unsafe constructors) has no dense form: both
        # sides are compared by what they hold, component by component
        if tuple(actual.shape) != tuple(expected.shape):
            return Record(path, "shape", f"shape {list(actual.shape)} vs {list(expected.shape)} expected [{path}]")
        records = [
            compare_tensors(
                pa,
                pe,
                path=f"{path}.{name}",
                tolerance=tolerance if is_inexact(pe.dtype) else None,
                check_sign_of_zero=check_sign_of_zero,
                metadata_only=metadata_only,
            )
            for name, pa, pe in parts
        ]
        bad = [r for r in records if not r.ok]
        return (
            bad[0]
            if bad
            else Record(
                path,
                total=expected.numel() if expected.layout == torch.strided else 0,
                rtol=(tolerance or (None, None))[0],
                atol=(tolerance or (None, None))[1],
            )
        )
    if a.shape != e.shape:
        return Record(path, "shape", f"shape {list(a.shape)} vs {list(e.shape)} expected [{path}]")
    if a.dtype != e.dtype:
        return Record(path, "dtype", f"dtype {_dtype_name(a.dtype)} vs {_dtype_name(e.dtype)} expected [{path}]")
    rtol, atol = tolerance if tolerance is not None else default_tolerance(e.dtype)
    total = e.numel()
    if metadata_only:
        return Record(path, total=total, rtol=rtol, atol=atol)
    if total == 0:
        return Record(path, rtol=rtol, atol=atol)
    if not is_inexact(e.dtype):
        return _compare_exact(a, e, path)
    return _compare_inexact(a, e, path, rtol, atol, check_sign_of_zero)


_SPARSE_PARTS = {
    torch.sparse_coo: (("indices", lambda t: t._indices()), ("values", lambda t: t._values())),
    torch.sparse_csr: (
        ("crow_indices", lambda t: t.crow_indices()),
        ("col_indices", lambda t: t.col_indices()),
        ("values", lambda t: t.values()),
    ),
    torch.sparse_csc: (
        ("ccol_indices", lambda t: t.ccol_indices()),
        ("row_indices", lambda t: t.row_indices()),
        ("values", lambda t: t.values()),
    ),
    torch.sparse_bsr: (
        ("crow_indices", lambda t: t.crow_indices()),
        ("col_indices", lambda t: t.col_indices()),
        ("values", lambda t: t.values()),
    ),
    torch.sparse_bsc: (
        ("ccol_indices", lambda t: t.ccol_indices()),
        ("row_indices", lambda t: t.row_indices()),
        ("values", lambda t: t.values()),
    ),
}


def _sparse_valid(t) -> bool:
    """Does a sparse tensor satisfy its layout's invariants (True for strided tensors)?"""
    if not isinstance(t, torch.Tensor) or t.layout == torch.strided:
        return True
    try:
        if t.layout == torch.sparse_coo:
            torch._validate_sparse_coo_tensor_args(t._indices().cpu(), t._values().cpu(), t.shape)
        elif t.layout in (torch.sparse_csr, torch.sparse_bsr):
            torch._validate_sparse_compressed_tensor_args(
                t.crow_indices().cpu(), t.col_indices().cpu(), t.values().cpu(), t.shape, t.layout
            )
        elif t.layout in (torch.sparse_csc, torch.sparse_bsc):
            torch._validate_sparse_compressed_tensor_args(
                t.ccol_indices().cpu(), t.row_indices().cpu(), t.values().cpu(), t.shape, t.layout
            )
    except Exception:  # noqa: BLE001 - any violation: not safe to densify
        return False
    return True


def _sparse_parts(actual, expected):
    """[(name, actual part, expected part)] of two sparse tensors of one layout, or None."""
    if (
        not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor))
        or actual.layout != expected.layout
    ):
        return None
    getters = _SPARSE_PARTS.get(expected.layout)
    if getters is None:
        return None
    try:
        return [(name, get(actual).detach().cpu(), get(expected).detach().cpu()) for name, get in getters]
    except Exception:  # noqa: BLE001 - not readable even by parts: the caller reports it
        return None


def _plain(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        # a bool tensor has no negation (resolve_neg raises "neg_cpu not implemented for
        # 'Bool'"), so _neg_view's bit on one carries no value: its stored values are compared
        t = torch._neg_view(t) if t.dtype == torch.bool else t.resolve_neg()
    if t.device.type != "cpu":
        t = t.cpu()
    return t


def _compare_exact(a, e, path) -> Record:
    if e.dtype == torch.bool:
        diff = a != e
        absdiff = diff.to(torch.float64)
    else:
        diff = a != e
        absdiff = (a.to(torch.float64) - e.to(torch.float64)).abs()
    n = int(diff.sum())
    total = e.numel()
    flat = int(absdiff.reshape(-1).argmax()) if total else 0
    index = _unravel(flat, tuple(e.shape))
    max_abs = float(absdiff.reshape(-1)[flat]) if total else 0.0
    if n == 0:
        return Record(path, max_abs=0.0, max_rel=0.0, max_ulp=0.0, total=total, rtol=0.0, atol=0.0)
    got, want = a.reshape(-1)[flat].item(), e.reshape(-1)[flat].item()
    msg = (
        f"Mismatched elements: {n} / {total} ({100.0 * n / total:.1f}%); greatest absolute difference "
        f"{_fmt(max_abs)} at index {index} ({got!r} vs {want!r} expected; exact comparison) [{path}]"
    )
    return Record(path, "values", msg, max_abs=max_abs, index=index, mismatched=n, total=total, rtol=0.0, atol=0.0)


def _compare_inexact(a, e, path, rtol, atol, sign) -> Record:
    # in NumPy: a dozen elementwise steps on tensors of a few thousand elements at most, where a
    # NumPy ufunc costs a tenth of a torch op's dispatch (torch's took 0.3 ms a pair, 8% of a sweep)
    shape = tuple(e.shape)
    spacing_dtype = e.dtype
    if e.dtype.is_complex:
        spacing_dtype = e.dtype.to_real()
        # resolve_conj: a conjugate view (_conj's result) cannot be viewed as real
        a = torch.view_as_real((a.to(torch.complex128) if e.dtype != torch.complex128 else a).resolve_conj())
        e = torch.view_as_real((e.to(torch.complex128) if e.dtype != torch.complex128 else e).resolve_conj())
        parts = True
    else:
        a, e = a.to(torch.float64), e.to(torch.float64)
        parts = False
    a, e = a.numpy(force=True), e.numpy(force=True)
    total = math.prod(shape)
    with np.errstate(all="ignore"):
        return _inexact_record(a, e, path, rtol, atol, sign, parts, total, spacing_dtype)


def _inexact_record(a, e, path, rtol, atol, sign, parts, total, spacing_dtype) -> Record:
    # NaN positions must agree
    an, en = np.isnan(a), np.isnan(e)
    both_nan = np.zeros_like(an)
    if parts:
        # A complex number is NaN when either part is (as torch.isclose(equal_nan=True) has it):
        # the other part is whatever the arithmetic left there, (nan+0j) or (nan+nanj). And
        # without C's Annex G infinity recovery, which C++'s std::complex and vectorised kernels
        # do not promise, 1/(0+0j) or inf*(1+1j) is (inf+nanj) in one kernel and (nan+nanj) in
        # another: a non-finite number with a NaN part matches any non-finite number.
        an = np.broadcast_to(an.any(-1, keepdims=True), an.shape)
        en = np.broadcast_to(en.any(-1, keepdims=True), en.shape)
        a_nonfinite = np.broadcast_to((~np.isfinite(a)).any(-1, keepdims=True), an.shape)
        e_nonfinite = np.broadcast_to((~np.isfinite(e)).any(-1, keepdims=True), en.shape)
        both_nan = (an & e_nonfinite) | (en & a_nonfinite)
        an, en = an & ~both_nan, en & ~both_nan
    nan_bad = an != en
    # infinities must agree in position and sign
    ainf, einf = np.isinf(a), np.isinf(e)
    inf_bad = (ainf | einf) & ~(an | en | both_nan) & (a != e)
    finite = ~(an | en | ainf | einf | both_nan)
    absdiff = np.where(finite, np.abs(a - e), 0.0)
    if parts:
        # a complex result's error is relative to its modulus (torch.isclose's rule), not to
        # each part: the small imaginary part of -274.8+0.01j carries the real part's rounding
        modulus = np.sqrt(np.square(np.where(np.isfinite(e), e, 0.0)).sum(-1, keepdims=True))
        allowed = atol + rtol * np.broadcast_to(modulus, e.shape)
    else:
        allowed = atol + rtol * np.abs(e)
    val_bad = finite & (absdiff > allowed)
    sign_bad = np.zeros_like(val_bad)
    if sign:
        sign_bad = finite & (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))
    bad = nan_bad | inf_bad | val_bad | sign_bad
    if parts:  # one logical element is bad if its real or imaginary part is
        bad_el = bad.any(-1)
    else:
        bad_el = bad
    n = int(bad_el.sum())

    reldiff = np.where(finite & (e != 0), absdiff / np.maximum(np.abs(e), 1e-300), 0.0)
    ulps = absdiff / _spacing_np(e, spacing_dtype)
    max_abs = float(absdiff.max()) if absdiff.size else 0.0
    max_rel = float(reldiff.max()) if reldiff.size else 0.0
    max_ulp = float(np.where(finite, ulps, 0.0).max()) if ulps.size else 0.0
    flat = int(absdiff.reshape(-1).argmax()) if absdiff.size else 0
    rec = Record(path, max_abs=max_abs, max_rel=max_rel, max_ulp=max_ulp, total=total, rtol=rtol, atol=atol)
    full_index = _unravel(flat, tuple(a.shape))
    rec.index = full_index[:-1] if parts else full_index
    if n == 0:
        return rec
    rec.mismatched = n
    where = _part_suffix(full_index, parts)
    head = f"Mismatched elements: {n} / {total} ({100.0 * n / total:.1f}%)"
    if nan_bad.any():  # rule (8g)
        i = _unravel(int(nan_bad.reshape(-1).argmax()), tuple(a.shape))
        got, want = _element(a, i, parts), _element(e, i, parts)
        rec.kind = "nan"
        rec.index = i[:-1] if parts else i
        rec.message = (
            f"{head}; NaN mismatch at index {rec.index}{_part_suffix(i, parts)}: {got!r} vs {want!r} expected [{path}]"
        )
    elif inf_bad.any():  # rule (8h)
        i = _unravel(int(inf_bad.reshape(-1).argmax()), tuple(a.shape))
        got, want = float(a[i]), float(e[i])
        rec.kind = "inf"
        rec.index = i[:-1] if parts else i
        rec.message = f"{head}; infinity mismatch at index {rec.index}{_part_suffix(i, parts)}: {got!r} vs {want!r} expected [{path}]"
    elif val_bad.any():  # rule (8f)
        rec.kind = "values"
        ratio = np.where(val_bad, absdiff / np.maximum(allowed, 1e-300), 0.0)
        worst = int(ratio.reshape(-1).argmax())
        rec.extra["excess"] = float(ratio.reshape(-1)[worst])  # how many times the allowed difference
        wi = _unravel(worst, tuple(a.shape))
        rel_msg = ""
        if max_rel:
            rel_msg = f"; greatest relative difference {_fmt(max_rel)} (up to {_fmt(rtol)} allowed)"
        rec.message = (
            f"{head}; greatest absolute difference {_fmt(max_abs)} at index {rec.index}{where} "
            f"(up to {_fmt(atol)} allowed){rel_msg}; worst element {float(a[wi]):.6g} vs {float(e[wi]):.6g} expected"
            f" [{path}]"
        )
    else:
        i = _unravel(int(sign_bad.reshape(-1).argmax()), tuple(a.shape))
        rec.kind = "sign"  # rule (8i)
        rec.index = i[:-1] if parts else i
        rec.message = f"{head}; sign of zero differs at index {rec.index}{_part_suffix(i, parts)}: {float(a[i])!r} vs {float(e[i])!r} expected [{path}]"
    return rec


def _element(t, index, parts: bool):
    """The value at `index` of a float64 array: for a complex number (as real/imag pairs), the
    whole number."""
    if not parts:
        return float(t[index])
    re, im = t[index[:-1]].tolist()
    return complex(re, im)


def _part_suffix(index, parts: bool) -> str:
    if not parts or not index:
        return ""
    return " (imag)" if index[-1] == 1 else " (real)"


def _spacing(e64: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The distance between `e`'s value and the next representable number of `dtype` (one ULP)."""
    fi = torch.finfo(dtype)
    bits = round(-math.log2(fi.eps))  # explicit mantissa bits: 23 for float32
    _, exp = torch.frexp(e64.nan_to_num(0.0, 0.0, 0.0))
    ulp = torch.ldexp(torch.ones_like(e64), (exp - 1 - bits).to(torch.float64))
    return ulp.clamp_min(fi.smallest_normal * fi.eps)


def _spacing_np(e64: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """_spacing of a float64 array."""
    fi = torch.finfo(dtype)
    bits = round(-math.log2(fi.eps))
    _, exp = np.frexp(np.nan_to_num(e64, nan=0.0, posinf=0.0, neginf=0.0))
    return np.maximum(np.ldexp(1.0, exp - 1 - bits), fi.smallest_normal * fi.eps)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        if s == 0:
            return tuple(0 for _ in shape)
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if math.isinf(x) or math.isnan(x):
        return repr(x)
    return f"{x:.3g}" if (abs(x) < 1e-3 or abs(x) >= 1e4) else f"{x:.4g}"


def summary(records: list[Record]) -> dict[str, float | None]:
    """The greatest errors over all records (for the store), and the tolerance of the worst pair."""
    best: dict[str, float | None] = {
        "max_abs_err": None,
        "max_rel_err": None,
        "max_ulp_err": None,
        "rtol": None,
        "atol": None,
    }
    worst_ratio = -1.0
    for r in records:
        for key, val in (("max_abs_err", r.max_abs), ("max_rel_err", r.max_rel), ("max_ulp_err", r.max_ulp)):
            if val is not None and not math.isnan(val) and (best[key] is None or val > best[key]):
                best[key] = val
        if r.rtol is not None:
            ratio = (r.max_abs or 0.0) / (r.atol or 1e-300) if r.atol else (r.max_abs or 0.0)
            if ratio > worst_ratio or best["rtol"] is None:
                worst_ratio = ratio
                best["rtol"], best["atol"] = r.rtol, r.atol
    return best


# -- comparison strategies: what each kind of op promises -------------------------------


# rule (9b): outputs that are not unique mathematically: eigenvectors and singular vectors are defined up to
# sign (or phase), and a general matrix's eigenvalues come in no defined order. Two correct
# kernels (float32 and float64 LAPACK, CPU and MPS) may legitimately differ there, so these
# outputs are compared by shape and dtype only; the unique ones (eigh's sorted eigenvalues,
# singular values) by value. Keys are base names; values: output positions, out= names.
AMBIGUOUS_OUTPUTS = {
    "linalg_eig": ({0, 1}, {"eigenvalues", "eigenvectors"}),
    "linalg_eigvals": ({0}, {"out"}),
    "_linalg_eigvals": ({0}, set()),  # linalg_eigvals' private kernel: no defined order either
    "linalg_eigh": ({1}, {"eigvecs", "eigenvectors"}),
    "_linalg_eigh": ({1}, {"eigenvectors"}),
    "linalg_svd": ({0, 2}, {"U", "Vh"}),
    "_linalg_svd": ({0, 2}, {"U", "Vh"}),
    "svd": ({0, 2}, {"U", "V"}),
}


def split_ambiguous(op, pairs):
    """(pairs compared by value, pairs compared by metadata only)."""
    spec = AMBIGUOUS_OUTPUTS.get(op.base_name)
    if spec is None:
        return pairs, []
    positions, names = spec
    exact, meta = [], []
    for actual, expected, path in pairs:
        if (
            path == "output"
            and isinstance(expected, (tuple, list))
            and isinstance(actual, (tuple, list))
            and len(actual) == len(expected)
        ):
            for i, (a, e) in enumerate(zip(actual, expected)):
                (meta if i in positions else exact).append((a, e, f"output[{i}]"))
        elif path == "output" and not isinstance(expected, (tuple, list)) and 0 in positions:
            meta.append((actual, expected, path))
        elif path.split(" ", 1)[0] in names:
            meta.append((actual, expected, path))
        else:
            exact.append((actual, expected, path))
    return exact, meta


def index_outputs(op) -> set[int]:
    """Positions of the outputs that are indices into the input ("indices" in the schema)."""
    if op.base_name in ("argmax", "argmin", "argsort"):
        return {0}
    ret = op.schema.rsplit("->", 1)[-1].strip().strip("()")
    names = [part.strip().split(" ")[-1] for part in ret.split(",")] if ret else []
    return {i for i, n in enumerate(names) if n in ("indices", "index")}


def statistics_records(dev_res, ref_res, path="output") -> list[Record]:  # rule (9c)
    """Seeded random ops: shapes and dtypes must match, values only statistically."""
    records = compare(dev_res, ref_res, metadata_only=True, path=path)
    if failures(records):
        return records
    for i, (a, e) in enumerate(zip(leaves(dev_res), leaves(ref_res))):
        p = f"{path}#{i}"
        if a.numel() == 0:
            continue
        a64, e64 = (
            a.detach().double() if not a.is_complex() else a.abs().double(),
            e.detach().double() if not e.is_complex() else e.abs().double(),
        )
        af, ef = torch.isfinite(a64), torch.isfinite(e64)
        if int(af.sum()) != int(ef.sum()) and (af.all() or ef.all()):
            records.append(
                Record(p, "nan", f"{int((~af).sum())} non-finite values vs {int((~ef).sum())} expected [{p}]")
            )
            continue
        a64, e64 = a64[af], e64[ef]
        if a64.numel() == 0 or e64.numel() == 0:
            continue
        lo, hi = float(e64.min()), float(e64.max())
        span = max(hi - lo, abs(hi), abs(lo), 1e-12)
        if float(a64.min()) < lo - span or float(a64.max()) > hi + span:
            records.append(
                Record(
                    p,
                    "values",
                    f"values span [{float(a64.min()):.4g}, {float(a64.max()):.4g}] far outside the reference's [{lo:.4g}, {hi:.4g}] [{p}]",
                )
            )
            continue
        n = a64.numel()
        if n >= 64:
            std = float(e64.std()) if n > 1 else 0.0
            dm = abs(float(a64.mean()) - float(e64.mean()))
            if dm > 6 * std / math.sqrt(n) + 1e-6 * (abs(float(e64.mean())) + 1):
                records.append(
                    Record(
                        p,
                        "values",
                        f"mean {float(a64.mean()):.4g} vs {float(e64.mean()):.4g} expected (statistical check, {n} samples) [{p}]",
                    )
                )
                continue
            va, ve = float(a64.var()), float(e64.var())
            if ve > 0 and not (ve / 3 <= va <= ve * 3):
                records.append(
                    Record(
                        p, "values", f"variance {va:.4g} vs {ve:.4g} expected (statistical check, {n} samples) [{p}]"
                    )
                )
    return records


def _tie_dim(op, inputs):
    args, kwargs = inputs
    bound = bind_arguments(op, args, kwargs)
    if "dim" in bound:
        return bound["dim"]
    for a in op.arguments:
        if a.name == "dim":
            if a.default in (None, "None"):
                return None
            try:
                return int(a.default)
            except ValueError:
                return None
    return None


def _gather(inp: torch.Tensor, idx: torch.Tensor, dim):
    if dim is None or inp.dim() == 0:
        return inp.reshape(-1)[idx.reshape(-1)].reshape(idx.shape)
    if idx.dim() == inp.dim():
        return torch.take_along_dim(inp, idx, dim)
    return torch.take_along_dim(inp, idx.unsqueeze(dim), dim).squeeze(dim)


def tie_records(op, dev_result, ref_result, ref_inputs, tol, path: str = "output") -> list[Record]:  # rule (9a)
    """Sort-like ops: values compared; integer index outputs compared by what they select.
    `path`: what the results are ("output", or "out" for an out= variant's outs in order)."""
    records: list[Record] = []
    index_positions = index_outputs(op)
    dev_leaves = list(leaves(dev_result))
    ref_leaves = list(leaves(ref_result))
    inp = next(iter(leaves(ref_inputs[0])), None)
    dim = _tie_dim(op, ref_inputs)
    if len(dev_leaves) != len(ref_leaves) or inp is None:
        return compare(dev_result, ref_result, tolerance=tol, path=path)
    whole = path
    for i, (a, e) in enumerate(zip(dev_leaves, ref_leaves)):
        path = f"{whole}[{i}]" if len(ref_leaves) > 1 else whole
        if i in index_positions and not is_inexact(e.dtype) and a.shape == e.shape and a.dtype == e.dtype:
            try:
                want = _gather(inp, e, dim)
            except (IndexError, RuntimeError):  # not indices into the first input after all
                records += compare(a, e, tolerance=tol, path=path)
                continue
            try:
                got = _gather(inp, a, dim)
            except (IndexError, RuntimeError) as ex:
                records.append(
                    Record(
                        path,
                        "values",
                        f"device indices cannot index the input: {type(ex).__name__}: {str(ex).strip().splitlines()[0] if str(ex).strip() else ''} [{path}]",
                    )
                )
                continue
            r = compare(got, want, tolerance=tol, path=f"{path} (selected values)")
            records += r
        else:
            records += compare(a, e, tolerance=tol, path=path)
    return records


def tie_group_sums(grad: torch.Tensor, inp: torch.Tensor, dim) -> torch.Tensor | None:  # rule (9a)
    """`grad` with each element replaced by the sum of the gradient over its tie group: the
    elements of `inp` that hold the same value in the same slice along `dim` (the whole tensor
    when `dim` is None; NaNs tie with each other). A tie-dependent gradient (topk, sort, kthvalue,
    median, mode, cummax over tied values: the gradient lands on whichever tied index the
    forward chose) is right when these sums are, just as the forward's indices are judged by
    what they select (tie_records). None when `inp` cannot be lined up with `grad`."""
    if (
        not isinstance(grad, torch.Tensor)
        or not isinstance(inp, torch.Tensor)
        or grad.shape != inp.shape
        or grad.layout != torch.strided
        or inp.layout != torch.strided
    ):
        return None
    if not inp.dtype.is_floating_point or grad.is_complex() or grad.numel() == 0:
        return None
    x, g = inp.detach().to(torch.float64), grad.detach().to(torch.float64)
    if dim is None or x.dim() == 0:
        x, g = x.reshape(1, -1), g.reshape(1, -1)

        def back(t):
            return t.reshape(grad.shape)
    else:
        d = dim % x.dim()
        x, g = x.movedim(d, -1), g.movedim(d, -1)
        moved = x.shape
        x, g = x.reshape(-1, moved[-1]), g.reshape(-1, moved[-1])

        def back(t):
            return t.reshape(moved).movedim(-1, d)

    xs, perm = x.sort(dim=-1, stable=True)  # NaNs sort last, together
    same = (xs[:, 1:] == xs[:, :-1]) | (xs[:, 1:].isnan() & xs[:, :-1].isnan())
    starts = torch.cat([torch.ones(xs.shape[0], 1, dtype=torch.bool), ~same], dim=1)
    group = starts.reshape(-1).cumsum(0) - 1  # row-major: groups never span rows
    gs = g.gather(1, perm).reshape(-1)
    sums = torch.zeros(int(group[-1]) + 1, dtype=torch.float64).index_add_(0, group, gs)
    out = torch.empty_like(g).scatter_(1, perm, sums[group].reshape(g.shape))
    return back(out).to(grad.dtype)


def tie_gradient_records(op, case, name: str, got, want, compare_fn) -> list[Record] | None:
    """A tie op's gradient of input `name` judged by its tie-group sums (tie_group_sums): None
    when that cannot be done (no such tensor input), else `compare_fn` on the sums. The input's
    values as the case holds them decide the groups: golden's float64 run ties where they do."""
    try:
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - cannot tell: judge element by element
        return None
    inp = bind_arguments(op, args, kwargs).get(name)
    dim = _tie_dim(op, (args, kwargs))
    if isinstance(dim, (list, tuple)):
        return None
    a, e = tie_group_sums(got, inp, dim), tie_group_sums(want, inp, dim)
    if a is None or e is None:
        return None
    return compare_fn(a, e)


def stride_records(actual, expected, path: str = "output") -> list[Record]:
    """Output strides: each strided tensor leaf of `actual` against `expected`'s, on the
    significant dimensions only (size > 1: a size-1 dimension's stride is arbitrary, as
    torch._prims_common.check_significant_strides has it). A view, an expanded or a
    channels_last result whose strides differ from the reference's behaves differently under
    .view(), in-place writes and further kernels, whatever its values."""
    out: list[Record] = []
    a_l, e_l = list(leaves(actual)), list(leaves(expected))
    if len(a_l) != len(e_l):
        return out
    for i, (a, e) in enumerate(zip(a_l, e_l)):
        p = path if len(e_l) == 1 else f"{path}[{i}]"
        if (
            a.layout != torch.strided
            or e.layout != torch.strided
            or a.shape != e.shape
            or e.numel() <= 1
            or a.is_nested
            or e.is_nested
        ):
            continue
        bad = [d for d in range(e.dim()) if e.shape[d] > 1 and a.stride(d) != e.stride(d)]
        if bad:

            def fmt(t):
                return (
                    "channels_last"
                    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
                    else "contiguous"
                    if t.is_contiguous()
                    else "strided"
                )

            out.append(
                Record(
                    p,
                    "strides",
                    f"strides {list(a.stride())} ({fmt(a)}) vs {list(e.stride())} ({fmt(e)}) expected for shape {list(e.shape)} [{p}]",
                )
            )
    return out
