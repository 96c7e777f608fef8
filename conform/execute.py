"""Run one case on the reference and on the device under test, and judge it.

`run_case(op, case, backend)` is the whole contract: it never raises (except
KeyboardInterrupt / SystemExit) and returns a `CaseResult` whose `outcome` is one of DESIGN.md's.

Sides. Every case runs on up to three sides, each with freshly materialised tensors so that
nothing (in-place results, out= tensors, autograd graphs) is shared:

* ``ref``: the CPU, in the case's own dtypes. It decides whether the input is valid at all.
* ``golden``: the CPU in float64 (complex128), for cases with floating inputs. It is the truth
  used to attribute a mismatch (device wrong, CPU wrong, or an ill-conditioned case), and it is
  *the* reference when the device under test is the CPU itself (results are cast back to the
  CPU's output dtypes and compared with that dtype's tolerance).
* ``device``: the backend under test, materialised with ``case.materialize(backend.to_device,
  backend.device)``.

Validity. If the reference raises and so does the device, the case is not a valid case
(``invalid=True``, outcome pass, not counted). If the reference raises and the device does not,
the device is ``missing_error`` — unless the reference's error is a kernel gap of the CPU
("not implemented for 'Half'"): then golden float64 stands in as the reference.

Optional backend hook: ``backend.device_context()`` returning a context manager, entered around
everything run_case does on the device side (materialising, the op, synchronising, backward).
Backends that inject faults (tests/faulty.py) or set device-specific modes use it; backends
without it are unaffected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import traceback as _traceback
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from .compare import Record, _sparse_valid, compare, failures, summary
from .outcomes import Outcome
from .tolerances import is_inexact, tolerance_for


@dataclass
class CaseResult:
    outcome: Outcome
    phase: str = ""  # "forward" | "backward" | ""
    message: str = ""
    invalid: bool = False  # reference and device both rejected the input: not a valid case
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    max_ulp_err: float | None = None
    rtol: float | None = None
    atol: float | None = None
    device_golden_err: float | None = None  # max abs error of the device's output vs float64 golden
    ref_golden_err: float | None = None  # max abs error of the CPU reference vs float64 golden
    traceback: str = ""  # of the device-side exception, if any

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["outcome"] = str(self.outcome)
        return d


# -- error classification ------------------------------------------------------------------

# A device (or the CPU) has no kernel for this op / dtype.
NOT_IMPLEMENTED_PATTERNS = (
    r"not implemented for '",
    r"Could not run '.*' with arguments from the '.*' backend",
    r"\bno kernel\b",
    r"is not (currently )?implemented",
    r"not currently implemented",
    r"derivative for .* is not implemented",
    r"does not have a kernel",
    r"attempted to run this operator with Meta tensors",
)
_NOT_IMPLEMENTED_RE = re.compile("|".join(NOT_IMPLEMENTED_PATTERNS), re.IGNORECASE | re.DOTALL)


def is_kernel_gap(exc: BaseException) -> bool:
    """The error says "no kernel for this", not "your input is wrong"."""
    return isinstance(exc, NotImplementedError) or bool(_NOT_IMPLEMENTED_RE.search(str(exc)))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def classify_device_error(exc: BaseException, backend) -> Outcome:
    text = str(exc)
    for pat in getattr(backend, "unsupported_dtype_patterns", ()) or ():
        if pat in text:
            return Outcome.UNSUPPORTED_DTYPE
    if is_kernel_gap(exc):
        return Outcome.NOT_IMPLEMENTED
    return Outcome.DEVICE_ERROR


# -- output size --------------------------------------------------------------------------

# Elements the reference's outputs may hold, all together, for a case to be compared. The input
# cap keeps inputs small, but some ops' outputs grow as a power of their input (diagflat n -> n^2,
# cartesian_prod and meshgrid: the product of the sizes): one such case took a minute of the
# sweep and gigabytes to compare. Larger cases are declined like invalid ones, before the golden
# and device runs; hypothesis then draws another. Likewise for the number of output tensors
# (unbind of a [1334, 2] tensor: 1334 comparisons, over a second for one case).
MAX_OUTPUT_NUMEL = 1 << 18
MAX_OUTPUT_TENSORS = 256


def output_size(value) -> tuple[int, int]:
    """(tensors, elements) in all the tensors of a result (nested tuples and lists)."""
    if isinstance(value, torch.Tensor):
        sparse = value.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
        return 1, value._nnz() if sparse else value.numel()
    if isinstance(value, (list, tuple)):
        sizes = [output_size(v) for v in value]
        return sum(t for t, _ in sizes), sum(n for _, n in sizes)
    return 0, 0


def _oversized(value) -> str:
    tensors, numel = output_size(value)
    if numel > MAX_OUTPUT_NUMEL:
        return f"the output has {numel} elements, over conform's cap of {MAX_OUTPUT_NUMEL}"
    if tensors > MAX_OUTPUT_TENSORS:
        return f"the output has {tensors} tensors, over conform's cap of {MAX_OUTPUT_TENSORS}"
    return ""


# -- sides ---------------------------------------------------------------------------------


@dataclass
class _Side:
    """What one side produced: the return value and the tensors the op wrote to."""

    result: Any = None
    written: dict[str, Any] | None = None  # name -> tensor/list for mutated and out= arguments
    inputs: tuple = ()  # (args, kwargs) after the call, for gathering tie indices
    error: BaseException | None = None
    warnings: list[str] | None = None

    @property
    def traceback(self) -> str:
        # formatted only when a verdict needs it: most errors are the reference rejecting an
        # invalid input, and formatting every one of them was a large share of a sweep's time
        return _format_tb(self.error)


class _NoContext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _device_context(backend):
    hook = getattr(backend, "device_context", None)
    if hook is None:
        return _NoContext()
    return hook()


def _bind(op, args, kwargs) -> dict[str, Any]:
    """Schema argument name -> value, for positional and keyword arguments alike."""
    bound = {}
    names = [a.name for a in op.arguments]
    for name, v in zip(names, args):
        bound[name] = v
    bound.update(kwargs)
    return bound


def _written_names(op) -> list[str]:
    return [a.name for a in op.arguments if a.is_write or a.is_out]


def _to_cpu(x, to_cpu):
    if isinstance(x, torch.Tensor):
        return to_cpu(x.detach())
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        items = [_to_cpu(v, to_cpu) for v in x]
        return items if isinstance(x, list) else tuple(items)
    return x


def _run_side(op, case, *, to_device, device, dtype=None, to_cpu=lambda t: t, sync=None, ctx=None, grad=False):
    side = _Side()
    caught: list[warnings.WarningMessage] = []
    try:
        with contextlib.ExitStack() as stack:
            caught = stack.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always")
            if ctx is not None:
                # warn-once C++ warnings (the MPS fallback's among them) must fire for every case
                prev = torch.is_warn_always_enabled()
                torch.set_warn_always(True)
                stack.callback(torch.set_warn_always, prev)
                stack.enter_context(ctx)
            if not grad:
                stack.enter_context(torch.no_grad())
            args, kwargs = case.materialize(to_device, device, dtype=dtype)
            _seed(op, case.seed)
            result = op.resolve()(*args, **kwargs)
            if sync is not None:
                sync()
            bound = _bind(op, args, kwargs)
            written = {n: bound[n] for n in _written_names(op) if n in bound}
            side.inputs = (args, kwargs)
            if grad:
                side.result, side.written = result, written
            else:
                side.result = _to_cpu(result, to_cpu)
                side.written = {n: _to_cpu(v, to_cpu) for n, v in written.items()}
                side.inputs = (_to_cpu(args, to_cpu), {k: _to_cpu(v, to_cpu) for k, v in kwargs.items()})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - anything a kernel raises is a verdict
        side.error = e
    side.warnings = [str(w.message) for w in caught]
    return side


def _dense(t: torch.Tensor) -> torch.Tensor:
    return t if t.layout == torch.strided else t.to_dense()


def _input_scale(inputs) -> float:
    """The largest finite magnitude among floating input tensors (see tolerances.tolerance_for)."""
    best = 0.0
    for t in _leaves(inputs):
        if isinstance(t, torch.Tensor) and is_inexact(t.dtype) and t.numel() and t.device.type != "meta":
            a = _dense(t).detach().abs()
            a = a[torch.isfinite(a)]
            if a.numel():
                best = max(best, float(a.max()))
    return best


def _format_tb(e: BaseException | None) -> str:
    return "".join(_traceback.format_exception(e)) if e is not None else ""


def _seed(op, seed: int) -> None:
    """Seed the global generators only for ops that draw random numbers: torch.manual_seed seeds
    every device's generator and costs milliseconds, which adds up over a sweep's cases."""
    if _nondeterminism(op) == "seeded":
        torch.manual_seed(seed)


def _has_floating_inputs(case) -> bool:
    if any(is_inexact(s.torch_dtype) for s in case.tensor_specs()):
        return True

    def walk(v):
        if isinstance(v, dict) and len(v) == 1 and "dtype" in v:
            return is_inexact(getattr(torch, str(v["dtype"]), torch.int64))
        if isinstance(v, (list, tuple)):
            return any(walk(x) for x in v)
        return False

    return any(walk(v) for v in list(case.args) + list(case.kwargs.values()))


# Ops that return indices of order statistics: when values tie, any of the tied indices is
# right, so unless a rule says otherwise their index outputs are checked by what they select.
TIE_OPS = frozenset({"sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "max", "min", "argmax", "argmin", "cummax", "cummin"})


# Outputs that are not unique mathematically: eigenvectors and singular vectors are defined up to
# sign (or phase), and a general matrix's eigenvalues come in no defined order. Two correct
# kernels (float32 and float64 LAPACK, CPU and MPS) may legitimately differ there, so these
# outputs are compared by shape and dtype only; the unique ones (eigh's sorted eigenvalues,
# singular values) by value. Keys are base names; values: output positions, out= names.
AMBIGUOUS_OUTPUTS = {
    "linalg_eig": ({0, 1}, {"eigenvalues", "eigenvectors"}),
    "linalg_eigvals": ({0}, {"out"}),
    "linalg_eigh": ({1}, {"eigvecs", "eigenvectors"}),
    "_linalg_eigh": ({1}, {"eigenvectors"}),
    "linalg_svd": ({0, 2}, {"U", "Vh"}),
    "_linalg_svd": ({0, 2}, {"U", "Vh"}),
    "svd": ({0, 2}, {"U", "V"}),
}


def _split_ambiguous(op, pairs):
    """(pairs compared by value, pairs compared by metadata only)."""
    spec = AMBIGUOUS_OUTPUTS.get(op.base_name)
    if spec is None:
        return pairs, []
    positions, names = spec
    exact, meta = [], []
    for actual, expected, path in pairs:
        if path == "output" and isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)) and len(actual) == len(expected):
            for i, (a, e) in enumerate(zip(actual, expected)):
                (meta if i in positions else exact).append((a, e, f"output[{i}]"))
        elif path == "output" and not isinstance(expected, (tuple, list)) and 0 in positions:
            meta.append((actual, expected, path))
        elif path.split(" ", 1)[0] in names:
            meta.append((actual, expected, path))
        else:
            exact.append((actual, expected, path))
    return exact, meta


def _nondeterminism(op) -> str:
    kind = getattr(op.rules, "nondeterminism", "") or ""
    if not kind and "nondeterministic_seeded" in (op.tags or ()):
        kind = "seeded"
    if not kind and op.base_name in TIE_OPS:
        kind = "ties"
    return kind


def _index_outputs(op) -> set[int]:
    """Positions of the outputs that are indices into the input ("indices" in the schema)."""
    if op.base_name in ("argmax", "argmin", "argsort"):
        return {0}
    ret = op.schema.rsplit("->", 1)[-1].strip().strip("()")
    names = [part.strip().split(" ")[-1] for part in ret.split(",")] if ret else []
    return {i for i, n in enumerate(names) if n in ("indices", "index")}


def _cast_like(golden, template):
    """Golden float64 results cast to the reference's dtypes, leaf by leaf; None if shapes differ."""
    if isinstance(golden, torch.Tensor) and isinstance(template, torch.Tensor):
        if golden.shape != template.shape:
            raise ValueError("golden shape differs")
        return golden.to(template.dtype)
    if isinstance(golden, (list, tuple)) and isinstance(template, (list, tuple)) and not isinstance(golden, torch.Size):
        if len(golden) != len(template):
            raise ValueError("golden structure differs")
        items = [_cast_like(g, t) for g, t in zip(golden, template)]
        return items if isinstance(template, list) else tuple(items)
    if isinstance(golden, float) and isinstance(template, (int, bool)) and not isinstance(template, float):
        return type(template)(golden)
    return golden


def _golden_pair(golden: "_Side", ref_result, ref_written):
    """(golden result, golden written) as expectations shaped like the reference's (see
    _golden_expected); (None, None) where the structures differ."""
    try:
        cast = _golden_expected(golden.result, ref_result)
        written = {k: _golden_expected(v, (ref_written or {}).get(k)) for k, v in (golden.written or {}).items()}
    except (ValueError, TypeError, RuntimeError):
        return None, None
    return cast, written


_F64_MAX = torch.finfo(torch.float64).max


def _range_patch(golden, cast):
    """Where golden float64 is exactly +-finfo(float64).max, the op produced its dtype's largest
    finite value by construction (nan_to_num's default posinf/neginf, nextafter(-inf, 0)), which
    in the case's dtype is +-finfo(dtype).max, not the infinity a cast of float64's maximum
    gives. Those elements are expected at the case dtype's extreme. An overflow to infinity is
    left alone: exp(100) in float32 is inf, and a kernel that saturates it is wrong."""
    if isinstance(cast, torch.Tensor) and isinstance(golden, torch.Tensor):
        if is_inexact(cast.dtype) and cast.dtype != torch.complex32 and cast.is_complex() == golden.is_complex() and cast.shape == golden.shape and cast.layout == golden.layout == torch.strided and cast.numel():
            c, g = cast, golden.detach()
            if c.is_complex():  # real and imaginary parts separately
                c, g = torch.view_as_real(c.resolve_conj()), torch.view_as_real(g.resolve_conj())
            extreme = g.to(torch.float64).abs() == _F64_MAX
            if bool(extreme.any()) and c.dtype != torch.float64:
                big = torch.finfo(c.dtype).max
                patched = torch.where(extreme, torch.sign(g).to(c.dtype) * big, c)
                return torch.view_as_complex(patched.contiguous()) if cast.is_complex() else patched
        return cast
    if isinstance(cast, (list, tuple)) and isinstance(golden, (list, tuple)) and len(cast) == len(golden):
        items = [_range_patch(g, c) for g, c in zip(golden, cast)]
        return items if isinstance(cast, list) else tuple(items)
    return cast


def _special_class(t: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +inf, 3 -inf, elementwise (complex: by real and imaginary parts)."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    t = t.detach().to(torch.float64)
    cls = torch.zeros(t.shape, dtype=torch.int8)
    cls = torch.where(t.isnan(), 1, cls)
    cls = torch.where(t == math.inf, 2, cls)
    return torch.where(t == -math.inf, 3, cls).to(torch.int8)


def _specials_patch(expected, golden, mid, actual, *, both_nonfinite=False):
    """`expected` with the device's values where the float32 run (`mid`) and golden float64
    disagree on which special value (or none) an element holds (see _run_case); with
    `both_nonfinite`, where `golden` and `mid` are both non-finite."""
    if isinstance(expected, torch.Tensor):
        ok = all(isinstance(t, torch.Tensor) and t.shape == expected.shape and t.layout == torch.strided for t in (golden, mid, actual))
        if not ok or not is_inexact(expected.dtype) or actual.dtype != expected.dtype:
            return expected
        cg, cm = _special_class(golden), _special_class(mid)
        pick = ((cg != 0) & (cm != 0)) if both_nonfinite else (cg != cm)
        if not bool(pick.any()):
            return expected
        if expected.is_complex():
            e, a = torch.view_as_real(expected.resolve_conj()), torch.view_as_real(actual.detach().resolve_conj())
            return torch.view_as_complex(torch.where(pick, a, e).contiguous())
        return torch.where(pick, actual.detach(), expected)
    if isinstance(expected, (list, tuple)) and all(isinstance(t, (list, tuple)) and len(t) == len(expected) for t in (golden, mid, actual)):
        items = [_specials_patch(e, g, m, a, both_nonfinite=both_nonfinite) for e, g, m, a in zip(expected, golden, mid, actual)]
        return items if isinstance(expected, list) else tuple(items)
    return expected


def _has_nonfinite(inputs) -> bool:
    return any(is_inexact(t.dtype) and t.numel() and t.device.type != "meta" and not bool(torch.isfinite(_dense(t)).all()) for t in _leaves(inputs))


def _leaves(x):
    if isinstance(x, torch.Tensor) and x.is_nested:
        yield from x.unbind()  # no single shape: its components are the leaves
    elif isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        for v in x:
            yield from _leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)


def _numeric(x) -> bool:
    """A floating or complex value: a leaf whose golden float64 value is a valid expectation."""
    if isinstance(x, torch.Tensor):
        return True  # tensors are cast back to the reference's dtype, bool and integer included
    return isinstance(x, (float, complex)) and not isinstance(x, bool)


def _golden_expected(golden, ref):
    """The expected values when the CPU is the device under test: golden float64, cast to the
    reference's dtypes, for tensors and floating Python scalars; the reference's own run for
    everything else. Integers, ScalarTypes, strings and sizes that an op returns are metadata
    (element_size, promote_types, result_type, str): the float64 rewrite changes them by
    construction (8 bytes, Double, "CPUDoubleType"), so golden is no expectation for them.
    Raises ValueError where the structures differ."""
    if isinstance(golden, dict) and isinstance(ref, dict):
        if len(golden) != len(ref):
            raise ValueError("golden structure differs")
        return {_golden_expected(gk, rk): _golden_expected(gv, rv) for (gk, gv), (rk, rv) in zip(golden.items(), ref.items())}
    if isinstance(golden, (list, tuple)) and isinstance(ref, (list, tuple)) and not isinstance(ref, torch.Size):
        if len(golden) != len(ref):
            raise ValueError("golden structure differs")
        items = [_golden_expected(g, r) for g, r in zip(golden, ref)]
        return items if isinstance(ref, list) else tuple(items)
    if _numeric(ref) and _numeric(golden):
        return _cast_like(golden, ref)
    return ref


# Python scalars ("Scalar" in a schema) reach a low-precision kernel in one of two ways, and
# both conform: TensorIterator's binary ops wrap them as numbers and cast them to the tensor's
# dtype (ne(bf16, 1.562) compares with bfloat16(1.562) = 1.5625: add, sub, eq, fmod, remainder,
# isin, hardshrink), while other kernels read them in their float32 math type (softshrink,
# hardtanh_backward, threshold, lerp, addcmul's value). Golden float64 with the scalar as given
# is right for the second; for the first, golden is run again with the scalars rounded to the
# case's dtype, and the device passes if it matches either.
def _rounding_dtype(case) -> torch.dtype | None:
    dts = [sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)]
    if not dts:
        return None
    dt = dts[0]
    for d in dts[1:]:
        dt = torch.promote_types(dt, d)
    return dt.to_real() if dt.is_complex else dt


def _round_scalar(v, dt: torch.dtype):
    if isinstance(v, bool):
        return v
    if isinstance(v, complex):
        return complex(_round_scalar(v.real, dt), _round_scalar(v.imag, dt))
    if isinstance(v, float):
        return float(torch.tensor(v, dtype=torch.float64).to(dt)) if math.isfinite(v) else v
    if isinstance(v, int):
        r = float(torch.tensor(float(v), dtype=torch.float64).to(dt))
        return int(r) if math.isfinite(r) else v
    if isinstance(v, (list, tuple)):
        items = [_round_scalar(x, dt) for x in v]
        return items if isinstance(v, list) else tuple(items)
    return v


def _scalar_rounded_case(op, case):
    """`case` with its Scalar arguments rounded to the case's dtype, or None if that changes none."""
    dt = _rounding_dtype(case)
    if dt is None or dt == torch.float64:
        return None
    scalar_names = {a.name for a in op.arguments if a.base_type in ("Scalar", "Scalar[]")}
    if not scalar_names:
        return None
    names = [a.name for a in op.arguments]
    args = tuple(_round_scalar(v, dt) if i < len(names) and names[i] in scalar_names else v for i, v in enumerate(case.args))
    kwargs = {k: _round_scalar(v, dt) if k in scalar_names else v for k, v in case.kwargs.items()}
    if args == tuple(case.args) and kwargs == dict(case.kwargs):
        return None
    return dataclasses.replace(case, args=args, kwargs=kwargs)


# Families whose every output element sums many inputs (opdb.families names): their tolerance
# grows with the largest input's size, an upper bound on the terms per output.
GROWTH_FAMILIES = ("reduction", "linalg", "conv", "norm", "loss", "attention", "scan", "fft")


def _numel_ratio(op, case, outputs) -> int:
    """How many input elements feed one output element: the error growth's `n` (at least 1)."""
    ins = [s.numel for s in case.tensor_specs() if is_inexact(s.torch_dtype)]
    outs = [t.numel() for t in _leaves(outputs)]
    if not ins:
        return 1
    biggest_in = max(ins)
    if op.family in GROWTH_FAMILIES:
        return max(1, biggest_in)
    biggest_out = max(outs) if outs else 1
    return max(1, math.ceil(biggest_in / max(1, biggest_out)))


# -- comparing ----------------------------------------------------------------------------


def _pairs(dev: _Side, ref_result, ref_written, op):
    """(actual, expected, path) to compare: the return value, then each written argument."""
    out = [(dev.result, ref_result, "output")]
    for name, val in (ref_written or {}).items():
        label = "out" if any(a.name == name and a.is_out for a in op.arguments) else "mutated"
        out.append(((dev.written or {}).get(name), val, f"{name} ({label})"))
    return out


def _compare_all(pairs, tol, *, sign, meta_only):
    records: list[Record] = []
    for actual, expected, path in pairs:
        records += compare(actual, expected, tolerance=tol, check_sign_of_zero=sign, metadata_only=meta_only, path=path)
    return records


def _max_abs_vs(actual, golden) -> float | None:
    """The greatest absolute error of `actual`'s tensor leaves against golden float64.

    Floating leaves: the greatest difference over positions where both are finite, and inf
    where the special values disagree (NaN where golden is finite or infinite, an infinity of
    the other sign, a finite value where golden is NaN or infinite), except the dtype's largest
    value where golden gives float64's (see _range_patch). Integer and bool leaves
    (indices, comparison results): the greatest difference of the values (1 for a flipped bool).
    None when no leaf could be compared."""
    worst = None
    for a, g in zip(_leaves(actual), _leaves(golden)):
        if a.shape != g.shape or a.device.type == "meta" or g.device.type == "meta" or a.numel() == 0:
            continue
        if not (_sparse_valid(a) and _sparse_valid(g)):
            continue  # indices out of bounds: densifying would read out of bounds
        if not is_inexact(a.dtype):
            if is_inexact(g.dtype) and not g.dtype.is_floating_point:
                continue
            err = float((_dense(a).detach().to(torch.float64) - _dense(g).detach().to(torch.float64)).abs().max())
            worst = err if worst is None else max(worst, err)
            continue
        a64 = _dense(a).detach().to(torch.complex128 if a.is_complex() else torch.float64)
        g64 = _dense(g).detach().to(a64.dtype)
        if a64.is_complex():
            a64, g64 = torch.view_as_real(a64), torch.view_as_real(g64)
        finite = torch.isfinite(a64) & torch.isfinite(g64)
        same_special = (a64 == g64) | (a64.isnan() & g64.isnan())
        big = float(torch.finfo(a.dtype).max)
        saturated = (g64.abs() == _F64_MAX) & (a64.abs() == big) & (torch.sign(a64) == torch.sign(g64))
        if bool((~finite & ~same_special & ~saturated).any()):
            err = math.inf
        elif bool(finite.any()):
            err = float(torch.where(finite & ~saturated, (a64 - g64).abs(), torch.zeros((), dtype=torch.float64)).max())
        else:
            err = 0.0
        worst = err if worst is None else max(worst, err)
    return worst


def _closer(ref: _Side, alt: _Side, golden: _Side) -> bool:
    """Is the reference's own result closer to `alt` than to `golden`?"""
    if ref.error is not None:
        return False
    mine = (ref.result, list((ref.written or {}).values()))
    a = _max_abs_vs(mine, (alt.result, list((alt.written or {}).values())))
    g = _max_abs_vs(mine, (golden.result, list((golden.written or {}).values())))
    return a is not None and g is not None and a < g


def _statistics_records(dev_res, ref_res, path="output") -> list[Record]:
    """Seeded random ops: shapes and dtypes must match, values only statistically."""
    records = compare(dev_res, ref_res, metadata_only=True, path=path)
    if failures(records):
        return records
    for i, (a, e) in enumerate(zip(_leaves(dev_res), _leaves(ref_res))):
        p = f"{path}#{i}"
        if a.numel() == 0:
            continue
        a64, e64 = a.detach().double() if not a.is_complex() else a.abs().double(), e.detach().double() if not e.is_complex() else e.abs().double()
        af, ef = torch.isfinite(a64), torch.isfinite(e64)
        if int(af.sum()) != int(ef.sum()) and (af.all() or ef.all()):
            records.append(Record(p, "nan", f"{int((~af).sum())} non-finite values vs {int((~ef).sum())} expected [{p}]"))
            continue
        a64, e64 = a64[af], e64[ef]
        if a64.numel() == 0 or e64.numel() == 0:
            continue
        lo, hi = float(e64.min()), float(e64.max())
        span = max(hi - lo, abs(hi), abs(lo), 1e-12)
        if float(a64.min()) < lo - span or float(a64.max()) > hi + span:
            records.append(Record(p, "values", f"values span [{float(a64.min()):.4g}, {float(a64.max()):.4g}] far outside the reference's [{lo:.4g}, {hi:.4g}] [{p}]"))
            continue
        n = a64.numel()
        if n >= 64:
            std = float(e64.std()) if n > 1 else 0.0
            dm = abs(float(a64.mean()) - float(e64.mean()))
            if dm > 6 * std / math.sqrt(n) + 1e-6 * (abs(float(e64.mean())) + 1):
                records.append(Record(p, "values", f"mean {float(a64.mean()):.4g} vs {float(e64.mean()):.4g} expected (statistical check, {n} samples) [{p}]"))
                continue
            va, ve = float(a64.var()), float(e64.var())
            if ve > 0 and not (ve / 3 <= va <= ve * 3):
                records.append(Record(p, "values", f"variance {va:.4g} vs {ve:.4g} expected (statistical check, {n} samples) [{p}]"))
    return records


def _tie_dim(op, inputs):
    args, kwargs = inputs
    bound = _bind(op, args, kwargs)
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


def _tie_records(op, dev: _Side, ref_result, ref_inputs, tol) -> list[Record]:
    """Sort-like ops: values compared; integer index outputs compared by what they select."""
    records: list[Record] = []
    index_positions = _index_outputs(op)
    dev_leaves = list(_leaves(dev.result))
    ref_leaves = list(_leaves(ref_result))
    inp = next(iter(_leaves(ref_inputs[0])), None)
    dim = _tie_dim(op, ref_inputs)
    if len(dev_leaves) != len(ref_leaves) or inp is None:
        return compare(dev.result, ref_result, tolerance=tol)
    for i, (a, e) in enumerate(zip(dev_leaves, ref_leaves)):
        path = f"output[{i}]" if len(ref_leaves) > 1 else "output"
        if i in index_positions and not is_inexact(e.dtype) and a.shape == e.shape and a.dtype == e.dtype:
            try:
                want = _gather(inp, e, dim)
            except (IndexError, RuntimeError):  # not indices into the first input after all
                records += compare(a, e, tolerance=tol, path=path)
                continue
            try:
                got = _gather(inp, a, dim)
            except (IndexError, RuntimeError) as ex:
                records.append(Record(path, "values", f"device indices cannot index the input: {first_line(ex)} [{path}]"))
                continue
            r = compare(got, want, tolerance=tol, path=f"{path} (selected values)")
            records += r
        else:
            records += compare(a, e, tolerance=tol, path=path)
    return records


# -- backward ------------------------------------------------------------------------------


def _grad_inputs(op, args, kwargs):
    """Make floating/complex tensor inputs leaves that require grad; return them with their names."""
    found: list[tuple[str, torch.Tensor]] = []
    names = [a.name for a in op.arguments]

    def prep(v, name):
        if isinstance(v, torch.Tensor):
            if is_inexact(v.dtype):
                t = v.detach().requires_grad_(True)
                found.append((name, t))
                return t
            return v
        if isinstance(v, (list, tuple)):
            items = [prep(x, f"{name}[{i}]") for i, x in enumerate(v)]
            return items if isinstance(v, list) else tuple(items)
        return v

    new_args = tuple(prep(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(args))
    new_kwargs = {k: prep(v, k) for k, v in kwargs.items()}
    return new_args, new_kwargs, found


def _run_backward(op, case, *, to_device, device, dtype=None, to_cpu=lambda t: t, sync=None, ctx=None, grad_outputs=None):
    """(grads by input name, grad_outputs used, error, traceback). `grad_outputs` None makes them."""
    try:
        with contextlib.ExitStack() as stack:
            if ctx is not None:
                stack.enter_context(ctx)
            stack.enter_context(torch.enable_grad())
            args, kwargs = case.materialize(to_device, device, dtype=dtype)
            args, kwargs, inputs = _grad_inputs(op, args, kwargs)
            _seed(op, case.seed)
            result = op.resolve()(*args, **kwargs)
            outs = [t for t in _leaves(result) if t.requires_grad and is_inexact(t.dtype)]
            if not outs or not inputs:
                return None, None, None, ""
            if grad_outputs is None:
                g = torch.Generator().manual_seed(case.seed + 1)
                grad_outputs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
            gos = [to_device(go.to(o.dtype)) for go, o in zip(grad_outputs, outs)]
            if len(gos) != len(outs):
                raise RuntimeError(f"{len(outs)} differentiable outputs vs {len(gos)} on the reference")
            grads = torch.autograd.grad(outs, [t for _, t in inputs], gos, allow_unused=True)
            if sync is not None:
                sync()
            by_name = {}
            for (name, t), gr in zip(inputs, grads):
                by_name[name] = to_cpu(gr.detach()) if gr is not None else torch.zeros(t.shape, dtype=t.dtype)
            return by_name, grad_outputs, None, ""
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001
        return None, grad_outputs, e, _format_tb(e)


# -- run_case ------------------------------------------------------------------------------


def run_case(op, case, backend, *, grad: bool = True) -> CaseResult:
    """Run `case` of `op` on the CPU reference and on `backend`; never raises (see module doc)."""
    try:
        return _run_case(op, case, backend, grad=grad)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a bug in conform must not kill the sweep
        # a bug in conform is not the device's: the cell is skipped with the reason, visibly
        return CaseResult(Outcome.SKIPPED, "", f"conform internal error: {first_line(e)}", traceback=_traceback.format_exc())


def _cpu_copy(t):
    return t.clone()


def is_plain_cpu(backend) -> bool:
    """The built-in CPU backend, with no hooks: its device side would repeat the reference side
    kernel for kernel, so that work is done once (the comparison is then against golden float64)."""
    from .backends import CPUBackend

    return type(backend) is CPUBackend and getattr(backend, "device_context", None) is None


def _run_case(op, case, backend, *, grad: bool) -> CaseResult:
    cpu = torch.device("cpu")
    device_is_cpu = torch.device(backend.device).type == "cpu"
    meta_only = bool(getattr(backend, "metadata_only", False))
    nondet = _nondeterminism(op)
    hints = getattr(op.rules, "hints", {}) or {}
    floating = _has_floating_inputs(case)
    want_golden = floating and not meta_only and nondet not in ("seeded", "uninitialized") and hints.get("golden", True)
    # sign of zero only for real dtypes: complex kernels build -0.0 parts from arithmetic the
    # reference does differently (neg of a complex64 zero part), which no contract fixes
    sign = bool(hints.get("sign_of_zero", False)) and not any(sp.torch_dtype.is_complex for sp in case.tensor_specs())

    ref = _run_side(op, case, to_device=_cpu_copy, device=cpu)
    oversized = _oversized(ref.result) if ref.error is None else ""
    if oversized:
        return CaseResult(Outcome.PASS, "forward", f"invalid case: {oversized}", invalid=True)
    # golden only helps when the reference ran, or lacks a kernel for the dtype (then golden
    # stands in for it); for an input the reference rejects, it would be wasted work
    if want_golden and (ref.error is None or is_kernel_gap(ref.error)):
        golden = _run_side(op, case, to_device=_cpu_copy, device=cpu, dtype=torch.float64)
    else:
        golden = None
    if golden is not None and golden.error is not None:
        golden = None
    if is_plain_cpu(backend):
        dev = ref  # the device under test computes exactly what the CPU reference side just did
    else:
        dev = _run_side(
            op, case, to_device=backend.to_device, device=backend.device, to_cpu=backend.to_cpu,
            sync=backend.synchronize, ctx=_device_context(backend),
        )

    # -- validity and errors -----------------------------------------------------------------
    ref_result, ref_written = ref.result, ref.written
    dtype_checked = True
    if ref.error is not None:
        gap = is_kernel_gap(ref.error) and golden is not None
        if dev.error is not None:
            if gap and device_is_cpu:
                # the CPU is the device under test and lacks the kernel golden float64 has
                return _error_result(dev, backend, "forward")
            return CaseResult(Outcome.PASS, "forward", f"invalid case: the reference rejects it ({first_line(ref.error)})", invalid=True)
        if not gap:
            return CaseResult(Outcome.MISSING_ERROR, "forward", f"the CPU reference raised {first_line(ref.error)}; the device returned a result")
        # the CPU has no kernel for this dtype: golden float64, cast to the device's dtypes, stands in
        try:
            ref_result = _cast_like(golden.result, dev.result)
            ref_written = {k: _cast_like(v, (dev.written or {}).get(k)) for k, v in (golden.written or {}).items()}
            dtype_checked = False
        except (ValueError, TypeError, RuntimeError):
            return CaseResult(Outcome.PASS, "forward", "invalid case: the CPU has no kernel to compare with", invalid=True)
    elif dev.error is not None:
        return _error_result(dev, backend, "forward")

    fallback = [w for w in dev.warnings or [] if any(p in w for p in getattr(backend, "fallback_patterns", ()) or ())]

    # -- the expected values -------------------------------------------------------------------
    golden_cast = golden_written = None
    if golden is not None and dtype_checked:
        golden_cast, golden_written = _golden_pair(golden, ref_result, ref_written)
    expected, expected_written = ref_result, ref_written
    if device_is_cpu and golden_cast is not None:
        golden_cast = _range_patch(golden.result, golden_cast)
        golden_written = {k: _range_patch((golden.written or {}).get(k), v) for k, v in golden_written.items()}
        expected, expected_written = golden_cast, golden_written

    n = _numel_ratio(op, case, ref_result)
    scale = _input_scale(ref.inputs if ref.error is None else ())
    base_tol = lambda dt: tolerance_for(op, dt, reduction_size=n, input_scale=scale)  # noqa: E731
    # a result is no more precise than its least precise input: ldexp(float32, float16) is
    # x * 2**other with 2**other rounded to float16 (see _loosest)
    tol = _loosest(base_tol, {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)})

    # -- compare the forward results ---------------------------------------------------------
    def forward_records(want, want_written):
        pairs = _pairs(dev, want, want_written, op)
        if meta_only or nondet == "uninitialized":
            out = _compare_all(pairs, tol, sign=False, meta_only=True)
        elif nondet == "seeded":
            out = []
            for actual, exp, path in pairs:
                out += _statistics_records(actual, exp, path)
        elif nondet == "ties":
            out = _tie_records(op, dev, want, ref.inputs, tol) + _compare_all(pairs[1:], tol, sign=sign, meta_only=False)
        else:
            exact, meta = _split_ambiguous(op, pairs)
            out = _compare_all(exact, tol, sign=sign, meta_only=False) + _compare_all(meta, tol, sign=False, meta_only=True)
        if not dtype_checked:
            out = [r for r in out if r.kind != "dtype"]
        return out

    records = forward_records(expected, expected_written)
    golden_checks = device_is_cpu and golden_cast is not None and not meta_only and nondet not in ("seeded", "uninitialized")
    if golden_checks and failures(records):
        # golden as given failed: the same with the Scalar arguments rounded to the case's dtype
        # (see _scalar_rounded_case); the device passes if it matches either
        rounded = _scalar_rounded_case(op, case)
        if rounded is not None:
            alt = _run_side(op, rounded, to_device=_cpu_copy, device=cpu, dtype=torch.float64)
            alt_cast, alt_written = (None, None) if alt.error is not None else _golden_pair(alt, ref_result, ref_written)
            if alt_cast is not None:
                alt_cast = _range_patch(alt.result, alt_cast)
                alt_written = {k: _range_patch((alt.written or {}).get(k), v) for k, v in alt_written.items()}
                alt_records = forward_records(alt_cast, alt_written)
                # the device passes against either; when it fails both, the one the reference
                # matches better is the truth its attribution is measured against
                if not failures(alt_records) or _closer(ref, alt, golden):
                    records, golden = alt_records, alt
                    expected, expected_written = alt_cast, alt_written
    if golden_checks and failures(records) and all(r.kind in ("nan", "inf") for r in failures(records)) and _rounding_dtype(case) in (torch.float16, torch.bfloat16):
        # Where NaN and infinity land when non-finite values meet zeros (inf * 0, implicit zeros
        # of padding, inf - inf in a blocked sum) depends on the algorithm. The CPU's float32
        # kernel is a second reference: where it and float64 disagree on a special value, that
        # position is implementation-defined and the device's value stands; where they agree, a
        # low-precision kernel that differs is inconsistent with the CPU's own (kept reported).
        mid = _run_side(op, case, to_device=_cpu_copy, device=cpu, dtype=torch.float32)
        if mid.error is None:
            want = _specials_patch(expected, golden.result, mid.result, dev.result)
            want_written = {k: _specials_patch(v, (golden.written or {}).get(k), (mid.written or {}).get(k), (dev.written or {}).get(k)) for k, v in (expected_written or {}).items()}
            again = forward_records(want, want_written)
            if not failures(again):
                records = again
    if golden_checks and failures(records) and all(r.kind in ("nan", "inf") for r in failures(records)) and op.family == "fft" and _has_nonfinite(ref.inputs):
        # An FFT's products depend on its factorisation: a twiddle factor that is exactly 0 in
        # one precision's table is 6e-17 in another's, so inf * w is NaN in one and inf in the
        # other. With non-finite inputs, NaN and infinity are interchangeable in the output;
        # a non-finite value where golden is finite (or the reverse) is still a finding.
        want = _specials_patch(expected, dev.result, expected, dev.result, both_nonfinite=True)
        want_written = {k: _specials_patch(v, (dev.written or {}).get(k), v, (dev.written or {}).get(k), both_nonfinite=True) for k, v in (expected_written or {}).items()}
        again = forward_records(want, want_written)
        if not failures(again):
            records = again

    result = CaseResult(Outcome.PASS, "forward")
    _fill_errors(result, records)
    if golden is not None:
        result.device_golden_err = _max_abs_vs((dev.result, list((dev.written or {}).values())), (golden.result, list((golden.written or {}).values())))
        result.ref_golden_err = _max_abs_vs((ref.result, list((ref.written or {}).values())), (golden.result, list((golden.written or {}).values()))) if ref.error is None else None

    bad = failures(records)
    if bad:
        meta_kinds = {"structure", "shape", "dtype", "error"}
        if any(r.kind in meta_kinds for r in bad):
            result.outcome = Outcome.META_MISMATCH
            result.message = "; ".join(r.message for r in bad if r.kind in meta_kinds)
            return result
        # a second opinion: is the device right and the CPU reference wrong?
        if not device_is_cpu and golden_cast is not None and nondet not in ("seeded",):
            if nondet == "ties":
                second = _tie_records(op, dev, golden_cast, ref.inputs, tol)
            else:
                second = _compare_all(_pairs(dev, golden_cast, golden_written, op), tol, sign=sign, meta_only=False)
            if not failures(second):
                result.message = (
                    f"matches float64 golden; the CPU reference is off (CPU error {_e(result.ref_golden_err)} vs device "
                    f"{_e(result.device_golden_err)}): {bad[0].message}"
                )
                return _with_fallback(result, fallback)
        result.outcome = Outcome.MISMATCH
        result.message = _joined(bad) + _attribution(result, bad, is_plain_cpu(backend))
        if fallback:
            result.message += f" (ran through the CPU fallback: {fallback[0].splitlines()[0]})"
        return result

    result = _with_fallback(result, fallback)
    if result.outcome is not Outcome.PASS:
        return result

    # -- backward ----------------------------------------------------------------------------
    # (gradients through sign-ambiguous outputs depend on the sign each kernel picked: not compared)
    if grad and op.variant == "functional" and floating and nondet not in ("seeded", "uninitialized") and ref.error is None and op.base_name not in AMBIGUOUS_OUTPUTS:
        back = _backward(op, case, backend, device_is_cpu=device_is_cpu, meta_only=meta_only, n=n, sign=sign, scale=scale)
        if back is not None:
            return back
    return result


def _with_fallback(result: CaseResult, fallback: list[str]) -> CaseResult:
    if fallback:
        result.outcome = Outcome.FALLBACK
        result.message = fallback[0].splitlines()[0]
    return result


def _e(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _joined(bad: list[Record]) -> str:
    """The first three findings, each text once: an out= argument is the returned tensor itself,
    and the same finding at both is said once with both places ("... expected [output, out (out)]")."""
    places: dict[str, list[str]] = {}
    for r in bad[:3]:
        body, sep, tail = r.message.rpartition(" [")
        if not (sep and r.message.endswith("]")):
            body, tail = r.message, ""
        places.setdefault(body, []).append(tail[:-1])
    return "; ".join(f"{b} [{', '.join(p)}]" if all(p) else b for b, p in places.items())


def _attribution(result: CaseResult, bad: list[Record], plain_cpu: bool = False) -> str:
    d, r = result.device_golden_err, result.ref_golden_err
    if d is None or r is None:
        return ""
    if plain_cpu:  # the device side is the reference side: one CPU, measured against golden
        return f"; CPU error {_e(d)} vs golden float64"
    worst = bad[0]
    if worst.kind != "values":  # NaN, inf and sign-of-zero findings: inf where the specials disagree
        return f"; device error {_e(d)} vs CPU {_e(r)} (golden float64)"
    allowed = (worst.atol or 0.0) + (worst.rtol or 0.0)
    if r > max(allowed, 10 * d if d else allowed) and d > allowed:
        return f"; both far from golden: ill-conditioned case (device error {_e(d)} vs CPU {_e(r)}, golden float64)"
    return f"; device error {_e(d)} vs CPU {_e(r)} (golden float64)"


def _fill_errors(result: CaseResult, records: list[Record]) -> None:
    s = summary(records)
    result.max_abs_err, result.max_rel_err, result.max_ulp_err = s["max_abs_err"], s["max_rel_err"], s["max_ulp_err"]
    result.rtol, result.atol = s["rtol"], s["atol"]


def _error_result(side: _Side, backend, phase: str) -> CaseResult:
    outcome = classify_device_error(side.error, backend)
    return CaseResult(outcome, phase, first_line(side.error), traceback=side.traceback)


def _gradient_tolerance(tol, want: torch.Tensor):
    """A gradient's absolute tolerance is at least rtol times its largest element.

    Backward formulas reuse the forward's *rounded* outputs (tanh' = 1 - y*y, sigmoid' =
    y * (1 - y)), so a small gradient element inherits an absolute error of a few ulps of the
    gradient's scale, not of its own size: elementwise relative checks would flag every
    correct half-precision backward. A wrong formula is off by the gradient's scale itself.
    """
    rtol, atol = tol(want.dtype)
    if not is_inexact(want.dtype) or want.numel() == 0:
        return (rtol, atol)
    w = want.detach().abs()
    w = w[torch.isfinite(w)]
    scale = float(w.max()) if w.numel() else 0.0
    return (rtol, max(atol, rtol * scale))


def _loosest(tol, dtypes):
    """The per-dtype tolerance, no tighter than that of any dtype in `dtypes` (see _backward)."""

    def pick(dt):
        rtol, atol = tol(dt)
        if is_inexact(dt):
            for other in dtypes:
                r, a = tol(other)
                rtol, atol = max(rtol, r), max(atol, a)
        return rtol, atol

    return pick


def _backward(op, case, backend, *, device_is_cpu, meta_only, n, sign, scale=0.0) -> CaseResult | None:
    """None when backward passes or cannot be checked; else the failing CaseResult."""
    cpu = torch.device("cpu")
    ref_grads, gos, ref_err, _ = _run_backward(op, case, to_device=_cpu_copy, device=cpu)
    if ref_err is not None or ref_grads is None:
        return None  # not differentiable, or the reference cannot do it: nothing to compare
    expected, gold = ref_grads, None
    gold_gos = [g.double() if not g.is_complex() else g.to(torch.complex128) for g in gos]

    def golden_grads(c):
        found, _, err, _ = _run_backward(op, c, to_device=_cpu_copy, device=cpu, dtype=torch.float64, grad_outputs=gold_gos)
        return found if err is None and found is not None and set(found) == set(ref_grads) else None

    if device_is_cpu and not meta_only:
        gold = golden_grads(case)
        if gold is not None:
            expected = {k: gold[k].to(ref_grads[k].dtype) for k in ref_grads}
    if is_plain_cpu(backend):
        dev_grads, dev_err, tb = ref_grads, None, ""
    else:
        dev_grads, _, dev_err, tb = _run_backward(
            op, case, to_device=backend.to_device, device=backend.device, to_cpu=backend.to_cpu,
            sync=backend.synchronize, ctx=_device_context(backend), grad_outputs=gos,
        )
    if dev_err is not None:
        outcome = classify_device_error(dev_err, backend)
        return CaseResult(outcome, "backward", first_line(dev_err), traceback=tb)
    if dev_grads is None:
        return CaseResult(Outcome.GRAD_MISMATCH, "backward", "the device's outputs do not require grad; the reference's do")
    # gradients sum over output elements: their error grows with the outputs' size too
    out_n = max([n] + [max(1, math.ceil(t.numel() / max(1, g.numel()))) for t in gos for g in expected.values()])
    # a gradient is grad_output times local derivatives of the inputs: its rounding error scales
    # with both magnitudes (see tolerances.tolerance_for's input_scale)
    go_scale = max([1.0] + [float(g.detach().abs().max()) for g in gos if g.numel() and torch.isfinite(g).all()])
    base = lambda dt: tolerance_for(op, dt, reduction_size=out_n, input_scale=scale * go_scale)  # noqa: E731
    # backward computes in the outputs' dtype: the gradient of a float32 0-d tensor multiplied
    # into a float16 tensor is a float16 sum cast to float32, as precise as float16, not float32;
    # and, as forward, no gradient is more precise than the least precise input
    tol = _loosest(base, {g.dtype for g in gos if is_inexact(g.dtype)} | {sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)})

    def grad_records(want_all):
        out: list[Record] = []
        for name, want in want_all.items():
            got = dev_grads.get(name)
            out += compare(got, want, tolerance=_gradient_tolerance(tol, want), check_sign_of_zero=sign, metadata_only=meta_only, path=f"grad[{name}]")
        return out

    records = grad_records(expected)
    if failures(records) and gold is not None:
        # Scalar arguments rounded to the case's dtype, as for the forward (see _scalar_rounded_case)
        rounded = _scalar_rounded_case(op, case)
        alt = golden_grads(rounded) if rounded is not None else None
        if alt is not None:
            alt_records = grad_records({k: alt[k].to(ref_grads[k].dtype) for k in ref_grads})
            mine = [ref_grads[k] for k in sorted(ref_grads)]
            if not failures(alt_records) or (_max_abs_vs(mine, [alt[k] for k in sorted(ref_grads)]) or 0.0) < (_max_abs_vs(mine, [gold[k] for k in sorted(ref_grads)]) or 0.0):
                records, gold = alt_records, alt
    bad = failures(records)
    if not bad:
        return None
    result = CaseResult(Outcome.GRAD_MISMATCH, "backward", _joined(bad))
    _fill_errors(result, records)
    if gold is not None:
        names = sorted(ref_grads)
        result.device_golden_err = _max_abs_vs([dev_grads.get(k) for k in names if dev_grads.get(k) is not None], [gold[k] for k in names if dev_grads.get(k) is not None])
        result.ref_golden_err = _max_abs_vs([ref_grads[k] for k in names], [gold[k] for k in names])
        result.message += _attribution(result, bad, is_plain_cpu(backend))
    return result


# -- out= variants ---------------------------------------------------------------------------


def run_out_variants(op, case, backend, *, grad: bool = False) -> tuple[bool, CaseResult | None]:
    """Run an out= case again with the out tensors preallocated, wrongly sized (the op must
    resize them) and non-contiguous (the op must write through the strides): where backends
    slip. Returns (checked, failure): checked is False when the outs are too small for the
    variants to mean anything (0-d or single elements); failure is the first failing variant's
    result, its message prefixed with the variant's name, or None."""
    from generators.variants import out_variants

    shapes = _out_shapes(op, case)
    sizes = [math.prod(sh) for v in shapes.values() for sh in (v if isinstance(v, list) else [v])]
    if not sizes or max(sizes) <= 1:
        return False, None
    for name, variant in out_variants(case, shapes).items():
        if name == "as_drawn":
            continue
        r = run_case(op, variant, backend, grad=grad)
        if r.outcome is not Outcome.PASS and not r.invalid:
            r.message = f"[out= {name}] {r.message}"
            return True, r
    return True, None


def _out_shapes(op, case) -> dict:
    """The shape the CPU reference gives each out argument of `case`."""
    names = [a.name for a in op.out_args]
    try:
        args, kwargs = case.materialize(_cpu_copy, torch.device("cpu"))
        with torch.no_grad():
            op.resolve()(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the reference rejects it: no variants to try
        return {}
    shapes = {}
    for n in names:
        v = kwargs.get(n)
        if isinstance(v, torch.Tensor):
            shapes[n] = tuple(v.shape)
        elif isinstance(v, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in v):
            shapes[n] = [tuple(t.shape) for t in v]
    return shapes
