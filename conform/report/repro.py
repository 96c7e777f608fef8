"""Copy-paste reproduction: a standalone script for one case of one op on one device.

The script needs torch only: it carries the code of `generators.tensor` verbatim, its comment
lines left out (the module is torch-only by design), so every tensor is rebuilt by the very code conform tested it with:
seeded CPU values, quantization, explicit values, structured matrices, and the strided or sparse
layout built on the device. A backend developer can paste it into a bug report without
installing conform. It runs the op on the CPU and on the device, and prints both results and
where they differ.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import json
import math
import tokenize

import torch

from conform.judge import formulas, gradients, limits, references, widening
from conform.judge.compare import _spacing
from generators import tensor as tensor_module
from generators.case import Case, TensorSpec, shared_specs
from opdb.hints import hint

_DEVICES = {"mps": "mps", "cuda": "cuda", "xpu": "xpu", "cpu": "cpu", "meta": "meta"}

_PRELUDE = '''\
DEVICE = torch.device({device!r})
# What conform compared: "golden" holds the device against the CPU in float64 (the plain CPU under
# test); "parity" holds it against the CPU in the case's dtypes first, and float64 judges where
# the two disagree (README, "The verdict rule").
MODE = {mode!r}
PHASE = {phase!r}  # where conform's verdict was decided
CONFORM_VERDICT = {verdict!r}
GOLDEN_JUDGES = {golden_judges!r}  # False where opdb says float64 cannot be this op's expectation (nextafter)
RTOL, ATOL = {rtol!r}, {atol!r}  # the tolerance conform used for the failing output
SEED = {seed!r}
# A metamorphic relation or finite differences, where conform's verdict came from one (else None):
# the device against itself on another case of the same values (README, "Oracles")
RELATION = {relation!r}
SIGN = {sign!r}  # signed zeros told apart
PAST_END = {past_end!r}  # an index past the end of what it indexes, which the op must refuse (else None)
# an in-place self whose elements share memory, which the op must refuse (else None), and its values
OVERLAPPING_SELF = {overlapping!r}
OVERLAPPING_BEFORE = lambda: {overlapping_before}  # noqa: E731
# output elements the kernel never wrote, which conform found by filling every allocation and out
UNWRITTEN = {unwritten!r}
_FILLED = False  # True while the run with every allocation and out filled builds and runs the call
_GUARD = None  # the value beside each floating input (guarded_copy) in the unwritten-element runs
_GOLDEN = False  # True while the float64 golden run builds its inputs
_WIDE = None  # the dtype narrow integer inputs take in a widened run (int64, or float64 to confirm it)
NARROW = (torch.int8, torch.int16, torch.int32, torch.uint8)


def make(shape, dtype, device="cpu", **fields):
    """The case's tensor: values drawn on the CPU from its seed, its layout built on `device`
    (in float64, or complex128, for the golden run; a narrow integer in _WIDE for a widened run)."""
    spec = TensorSpec(tuple(shape), dtype, **fields)
    up = None
    if _GOLDEN and (spec.torch_dtype.is_floating_point or spec.torch_dtype.is_complex):
        up = torch.complex128 if spec.torch_dtype.is_complex else torch.float64
    if _WIDE is not None and spec.torch_dtype in NARROW:
        up = _WIDE
    if _GUARD is not None and torch.device(device).type == "cpu":
        return spec.materialize(guarded_copy(_GUARD), dtype=up)
    return spec.materialize(lambda t: t.to(device), dtype=up)


def D(dtype):
    """A dtype argument: float64 in the golden run, as conform's golden run has it."""
    return torch.float64 if _GOLDEN and dtype.is_floating_point else dtype


def show(name, x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.is_neg() and x.dtype == torch.bool:
            x = torch._neg_view(x)  # a bool's negative bit has no value to print
        print(f"{{name}}: {{x.dtype}} {{list(x.shape)}}")
        print(x.cpu() if x.device.type != "meta" else "(meta: no values)")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            show(f"{{name}}[{{i}}]", v)
    else:
        print(f"{{name}}: {{x!r}}")


def leaves(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from leaves(v)


def cast_like(golden, like):
    """Golden float64 leaves in the dtypes of `like` (the CPU's own run)."""
    if isinstance(golden, torch.Tensor) and isinstance(like, torch.Tensor):
        return golden.to(like.dtype)
    if isinstance(golden, (list, tuple)) and isinstance(like, (list, tuple)):
        return type(like)(cast_like(g, x) for g, x in zip(golden, like))
    if isinstance(golden, dict) and isinstance(like, dict):
        return {{k: cast_like(v, like.get(k)) for k, v in golden.items()}}
    if isinstance(golden, (float, complex)) and isinstance(like, (float, complex)) and not isinstance(like, bool):
        return golden
    return like  # integers, dtypes, strings: metadata that the float64 rewrite changes by construction


def difference(a, b, name="output"):
    """(elements out of tolerance, shape/dtype differences), printed leaf by leaf as conform counts them."""
    bad = meta = 0
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"{{name}}: {{a.dtype}}{{list(a.shape)}} vs {{b.dtype}}{{list(b.shape)}} expected")
            return 0, 1
        if a.device.type == "meta" or b.device.type == "meta":
            return 0, 0
        a, b = a.detach().cpu(), b.detach().cpu()
        # a bool tensor's negative bit (_neg_view) has no value: compare what it stores
        a, b = (torch._neg_view(t) if t.is_neg() and t.dtype == torch.bool else t for t in (a, b))
        if a.layout != torch.strided:
            a, b = a.to_dense(), b.to_dense()
        if a.is_quantized:
            a, b = a.dequantize(), b.dequantize()
        if a.is_floating_point() or a.is_complex():
            a64 = torch.view_as_real(a.to(torch.complex128)) if a.is_complex() else a.to(torch.float64)
            b64 = torch.view_as_real(b.to(torch.complex128)) if b.is_complex() else b.to(torch.float64)
            finite = torch.isfinite(a64) & torch.isfinite(b64)
            same_special = (a64 == b64) | (a64.isnan() & b64.isnan())
            off = (~finite & ~same_special) | (finite & ((a64 - b64).abs() > ATOL + RTOL * b64.abs()))
            if SIGN and not a.is_complex():  # the relation holds the sign of zero too
                off |= finite & (a64 == 0) & (b64 == 0) & (torch.signbit(a64) != torch.signbit(b64))
            if a.is_complex():
                off = off.any(-1)
            bad = int(off.sum())
            diff = (a64 - b64).abs()
            worst = diff[finite].max().item() if bool(finite.any()) else 0.0
            print(f"{{name}}: {{bad}} / {{a.numel()}} elements differ (beyond rtol={{RTOL:g}}, atol={{ATOL:g}}); max abs difference {{worst}}")
        else:
            bad = int((a != b).sum())
            print(f"{{name}}: {{bad}} / {{a.numel()}} elements differ")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            print(f"{{name}}: {{len(a)}} values vs {{len(b)}} expected")
            return 0, 1
        for i, (x, y) in enumerate(zip(a, b)):
            n, m = difference(x, y, f"{{name}}[{{i}}]")
            bad, meta = bad + n, meta + m
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in b:
            n, m = difference(a.get(k), b[k], f"{{name}}[{{k}}]")
            bad, meta = bad + n, meta + m
    elif isinstance(a, float) and isinstance(b, float):
        bad = int(not (a == b or (a != a and b != b) or abs(a - b) <= ATOL + RTOL * abs(b)))
    elif a != b and not isinstance(a, torch.device):
        print(f"{{name}}: {{a!r}} vs {{b!r}} expected")
        bad = 1
    return bad, meta


def call(device, requires_grad=False, replace=None, args_only=False):
    """The op on `device`; returns (result, the arguments it wrote to), or with `args_only` the
    arguments it would be called with. `replace`: tensors to use instead of the floating inputs,
    in order (finite differences)."""
{body}


def scribble(device):
    """Fill and free memory, as conform does before its runs: a kernel that reads memory it never
    wrote then reads NaN or a pattern rather than a fresh process's zeros."""
    for n in (64, 4096, 1 << 16, 1 << 20):
        for dt in (torch.float32, torch.int64):
            t = torch.full((n,), float("nan") if dt.is_floating_point else 0x5A5A5A5A, dtype=dt, device=device)
            del t


def run(device, golden=False, using=None):
    global _GOLDEN
    _GOLDEN = golden
    try:
        if device.type != "meta":
            scribble(device)
        with torch.no_grad():
            return (using or call)(device)
    finally:
        _GOLDEN = False


def fill_outs(kwargs, names):
    """In the filled run, each out filled as torch fills an allocation (NaN; an integer dtype's largest)."""
    for t in leaves([kwargs.get(n) for n in names]) if _FILLED else ():
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dtype != torch.bool and not t.is_quantized:
            t.fill_(float("nan") if t.is_floating_point() or t.is_complex() else torch.iinfo(t.dtype).max)


def run_guarded(device, filled):
    """run() on inputs with zeros beside them (guarded_copy); `filled`: NaN beside them instead,
    with torch's fill of uninitialised memory on (every allocation NaN or its dtype's largest
    value) and every out filled alike."""
    global _FILLED, _GUARD
    import torch.utils.deterministic

    was = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    if filled:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
    _FILLED, _GUARD = filled, math.nan if filled else 0.0
    try:
        return run(device)
    finally:
        _FILLED, _GUARD = False, None
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
        torch.utils.deterministic.fill_uninitialized_memory = was[2]


def unwritten_elements(first, filled):
    """Elements that hold the fill in the filled run and not in the first: never written, or read
    from past an input's end."""
    a_all = [t for t in leaves(first) if isinstance(t, torch.Tensor)]
    b_all = [t for t in leaves(filled) if isinstance(t, torch.Tensor)]
    for i, (a, b) in enumerate(zip(a_all, b_all)):
        if a.shape != b.shape or a.dtype != b.dtype or a.dtype == torch.bool or a.is_quantized or not a.numel():
            continue
        a, b = a.detach().cpu().resolve_conj().resolve_neg(), b.detach().cpu().resolve_conj().resolve_neg()
        if a.is_floating_point() or a.is_complex():
            holes = b.isnan() & ~a.isnan()
        else:
            top = torch.iinfo(a.dtype).max
            holes = (b == top) & (a != top)
        if bool(holes.any()):
            n = int(holes.sum())
            return f"{{n}} of {{a.numel()}} elements of output leaf {{i}} were never written or were read from past an input's end"
    return ""


def run_backward(device, golden=False, grad_outputs=None):
    """Gradients of every floating input (in argument order), with conform's seeded grad_outputs."""
    global _GOLDEN
    _GOLDEN = golden
    try:
        with torch.enable_grad():
            result, inputs = call(device, requires_grad=True)
            outs = [t for t in leaves(result) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
            if grad_outputs is None:
                g = torch.Generator().manual_seed(SEED + 1)
                grad_outputs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
            gos = [go.to(o.dtype).to(device) for go, o in zip(grad_outputs, outs)]
            grads = torch.autograd.grad(outs, inputs, gos, allow_unused=True)
            return [gr.detach().cpu() if gr is not None else torch.zeros(t.shape, dtype=t.dtype) for gr, t in zip(grads, inputs)], grad_outputs
    finally:
        _GOLDEN = False
'''

_EPILOGUE = '''

def attempt(fn, *a, **k):
    try:
        return fn(*a, **k), None
    except Exception as e:
        return None, e


def differ(actual, expected):
    """difference() summed over the return value and each argument the op wrote to (forward:
    (result, written) pairs) or each gradient (backward: lists)."""
    if isinstance(expected, tuple):
        pairs = [(actual[0], expected[0], "output")] + [(actual[1].get(k), v, f"{{k}} (written)") for k, v in expected[1].items()]
    else:
        pairs = [(a, e, f"grad[{{i}}]") for i, (a, e) in enumerate(zip(actual, expected))]
    bad = meta = 0
    for a, e, name in pairs:
        n, m = difference(a, e, name)
        bad, meta = bad + n, meta + m
    return bad, meta


def judge(actual, cpu, golden):
    """conform's verdict rule on one phase: "pass", "pass (CPU is wrong here)", "meta" or "fail"."""
    if MODE == "golden" and golden is not None:
        print("-- the device against float64 golden, cast to the case's dtypes --")
        bad, meta = differ(actual, cast_like(golden, cpu))
        return "meta" if meta else "fail" if bad else "pass"
    print("-- the device against the CPU --")
    bad, meta = differ(actual, cpu)
    if meta:
        return "meta"
    if not bad:
        return "pass"
    if golden is not None:
        print("-- they disagree: float64 golden judges the device --")
        g_bad, g_meta = differ(actual, cast_like(golden, cpu))
        if not g_bad and not g_meta:
            return "pass (CPU is wrong here)"
    return "fail"


def wrote(before, after):
    """Whether an in-place call changed an element of its self (NaN left NaN is unchanged)."""
    if not isinstance(after, torch.Tensor) or after.shape != before.shape or after.dtype != before.dtype:
        return False
    after = after.cpu()
    if not (before.dtype.is_floating_point or before.dtype.is_complex):
        return not torch.equal(after, before)
    return not (torch.equal(after.isnan(), before.isnan()) and torch.equal(after.nan_to_num(), before.nan_to_num()))


def run_synchronized(device):
    out = run(device)
    if device.type == "mps":
        torch.mps.synchronize()
    elif device.type == "cuda":
        torch.cuda.synchronize()
    return out


def verdict():
    v = parity_verdict()
    if v == "pass" and REFERENCE and MODE == "golden":
        v = independent_verdict()
    return v


def independent_verdict():
    """conform's independent reference: the same inputs in float64 through another library. The
    CPU fails where golden (its own kernel in float64) and its result both disagree with it."""
    global _GOLDEN
    import numpy
    _GOLDEN = True
    try:
        args, kwargs = call(torch.device("cpu"), args_only=True)
    finally:
        _GOLDEN = False
    cpu, _ = run(torch.device("cpu"))
    gold, _ = run(torch.device("cpu"), golden=True)
    want = [t for t in leaves(cpu if REFERENCE_OUTPUT is None else cpu[REFERENCE_OUTPUT]) if isinstance(t, torch.Tensor)]
    result_dtype = want[0].dtype if want else None

    def kernel_reads(t):  # torch's promotion, which numpy does not make (see conform's references)
        if not isinstance(t, torch.Tensor) or t.is_floating_point() or t.is_complex():
            return t
        if result_dtype is not None and (result_dtype.is_floating_point or result_dtype.is_complex):
            return t.to(result_dtype.to_real() if result_dtype.is_complex else result_dtype).to(torch.float64)
        return t.to(INT_DTYPE) if INT_DTYPE is not None and t.dtype != torch.bool else t

    def to_numpy(v):
        if isinstance(v, torch.Tensor):
            v = kernel_reads(v.detach())
            return v.resolve_conj().numpy() if REFERENCE_NUMPY else v
        if isinstance(v, (list, tuple)):
            return type(v)(to_numpy(x) for x in v)
        return v

    bound = dict(DEFAULTS)
    bound.update(zip(NAMES, args))
    bound.update(kwargs)
    for name in OUTS:
        bound.pop(name, None)
    values = {{k: to_numpy(v) for k, v in bound.items()}}
    import scipy.special
    ns = {{"numpy": numpy, "scipy": type("scipy", (), {{"special": scipy.special}}), "math": math, "torch": torch}}
    if globals().get("FORMULAS"):
        # the documented formulas (conform.judge.formulas) the reference names, as conform has them
        ns["formulas"] = type(numpy)("formulas")
        exec(FORMULAS, ns["formulas"].__dict__)
    with numpy.errstate(all="ignore"):
        if REFERENCE == "decomposition":
            # torch._decomp's decomposition of the overload, on the same float64 inputs
            from torch._decomp import decomposition_table

            space, _, name = REFERENCE_OP.partition("::")
            packet, _, overload = name.partition(".")
            fn = decomposition_table[getattr(getattr(getattr(torch.ops, space), packet), overload or "default")]
            with torch.no_grad():
                ref = fn(*args, **{{k: v for k, v in kwargs.items() if k not in OUTS}})
        else:
            ref = eval(REFERENCE, ns, values)
        ignore = eval(REFERENCE_IGNORE, ns, values) if REFERENCE_IGNORE else None
    if ref is None:
        return "pass"
    if REFERENCE_OUTPUT is not None:
        ref, cpu, gold = ref[REFERENCE_OUTPUT], cpu[REFERENCE_OUTPUT], gold[REFERENCE_OUTPUT]
    if isinstance(ref, (tuple, list)):  # several outputs (a decomposition's): held leaf by leaf
        pairs = [(r, c, g) for r, c, g in zip(ref, leaves(cpu), leaves(gold)) if isinstance(r, torch.Tensor)]
    else:
        pairs = [(torch.as_tensor(numpy.asarray(ref)) if not isinstance(ref, torch.Tensor) else ref, cpu, gold)]
    print(f"-- the independent reference {{REFERENCE!r}} --")
    g_n = c_n = b_n = 0
    for k, (r, c, g) in enumerate(pairs):
        show("reference" if len(pairs) == 1 else f"reference[{{k}}]", r)
        g_off = disagree(g, r, ignore)
        c_off = disagree(c, r, ignore)
        g_n, c_n, b_n = g_n + int(g_off.sum()), c_n + int(c_off.sum()), b_n + int((g_off & c_off).sum())
    print(f"golden float64 disagrees with it at {{g_n}} elements, the CPU at {{c_n}}, both at {{b_n}}")
    return "mismatch (the independent reference disagrees with golden and the CPU)" if b_n else "pass"


def disagree(a, r, ignore):
    """Elements of `a` that hold another special value, another sign of zero (where the op defines
    it) or a value beyond RTOL/ATOL than the reference `r` rounded to a's dtype."""
    a = a.detach()
    if a.is_complex() or r.is_complex():
        if a.is_complex() and r.is_complex():
            r = r.to(a.dtype)  # rounded to the result's dtype, as conform compares it
        a64, r64 = a.to(torch.complex128), r.to(torch.complex128)
        af, rf = torch.isfinite(a64), torch.isfinite(r64)
        # an elementwise reference tells C99's classes apart: an infinity (an infinite part, even
        # beside a NaN) from a NaN; otherwise a number is finite or not
        c99 = lambda t: torch.where(t.real.isinf() | t.imag.isinf(), 2, torch.where(t.isnan(), 1, 0))  # noqa: E731
        cls = c99 if REFERENCE_C99 else torch.isfinite
        off = (cls(a64) != cls(r64)) | (af & rf & ((a64 - r64).abs() > ATOL + RTOL * r64.abs()))
    elif not (a.is_floating_point() or r.is_floating_point()):
        off = a != r.to(torch.int64).to(a.dtype)  # stored into the result's dtype, as the kernel stores it
    elif not a.is_floating_point():
        off = (a != (r != 0)) if a.dtype == torch.bool else (torch.isfinite(r) & (a.double() != r.double()))
    else:
        rc = r.double().to(a.dtype).double()
        a64 = a.double()
        cls = lambda t: torch.where(t.isnan(), 1, torch.where(t == math.inf, 2, torch.where(t == -math.inf, 3, 0)))  # noqa: E731
        finite = torch.isfinite(a64) & torch.isfinite(rc)
        off = (cls(a64) != cls(rc)) | (finite & ((a64 - rc).abs() > ATOL + RTOL * rc.abs()))
        if REFERENCE_SIGN:
            off |= finite & (a64 == 0) & (rc == 0) & (torch.signbit(a64) != torch.signbit(rc))
    if ignore is not None:
        off &= ~torch.broadcast_to(torch.as_tensor(numpy_bool(ignore)), off.shape)
    return off


def numpy_bool(x):
    import numpy
    return numpy.asarray(x, dtype=bool)


def parity_verdict():
    cpu, cpu_err = attempt(run, torch.device("cpu"))
    dev, dev_err = attempt(run_synchronized, DEVICE)
    if dev_err is not None:
        print(f"{{DEVICE}} raised {{type(dev_err).__name__}}: {{dev_err}}")
    if cpu_err is not None:
        print(f"CPU raised {{type(cpu_err).__name__}}: {{cpu_err}}")
        return "pass (invalid case)" if dev_err is not None else "missing_error"
    if dev_err is not None:
        gap = isinstance(dev_err, NotImplementedError) or "not implemented" in str(dev_err).lower() or "Could not run" in str(dev_err)
        return "not_implemented" if gap else "device_error"
    if PAST_END and MODE == "golden":
        print(f"the CPU returned a result though {{PAST_END}}, past the end of what they index")
        return "missing_error"
    if UNWRITTEN and MODE == "golden":
        (zeros, err), (filled, err2) = attempt(run_guarded, DEVICE, False), attempt(run_guarded, DEVICE, True)
        holes = unwritten_elements(zeros, filled) if err is None and err2 is None else ""
        if holes:
            print(f"the CPU computed {{UNWRITTEN}}, and {{holes}}")
            return CONFORM_VERDICT
    if OVERLAPPING_SELF and MODE == "golden" and wrote(OVERLAPPING_BEFORE(), next(iter(cpu[1].values()), None)):
        print(f"the CPU wrote into {{OVERLAPPING_SELF}} without an error: in-place ops refuse a self whose elements share memory")
        return "missing_error"
    golden, _ = attempt(run, torch.device("cpu"), golden=True) if GOLDEN_JUDGES else (None, None)
    show("cpu", cpu[0])
    show(str(DEVICE), dev[0])
    v = judge(dev, cpu, golden)
    if v in ("meta", "fail") and PHASE == "backward":
        # conform's verdict came from the backward: its forward passed, through the oracle's
        # excuses (specials, conditioning) that this script does not recompute
        print("(the forward differs here; conform passed it with excuses this script does not recompute)")
    elif v in ("meta", "fail"):
        return {{"meta": "meta_mismatch", "fail": "mismatch"}}[v]
    if PHASE != "backward":
        return v
    print("-- backward --")
    (cpu_g, gos), err = attempt(run_backward, torch.device("cpu"))
    if err is not None:
        return v
    dev_g, err = attempt(run_backward, DEVICE, grad_outputs=gos)
    if err is not None:
        print(f"{{DEVICE}} backward raised {{type(err).__name__}}: {{err}}")
        return "device_error"
    gold_g, _ = attempt(run_backward, torch.device("cpu"), golden=True, grad_outputs=[g.double() if not g.is_complex() else g.to(torch.complex128) for g in gos])
    gv = judge(dev_g[0], cpu_g, gold_g[0] if gold_g else None)
    return "grad_mismatch" if gv in ("meta", "fail") else gv


{relation_code}


TRIES = 8  # a kernel that reads memory it never wrote (or races) fails on some runs only


try:
    CHECK = relation_verdict if RELATION is not None else verdict
    VERDICT = CHECK()
    for k in range(2, TRIES + 1):
        if not VERDICT.startswith("pass") or CONFORM_VERDICT in ("pass", "crash", "timeout"):
            break
        print(f"-- attempt {{k}} of {{TRIES}}: conform said {{CONFORM_VERDICT}}; the same calls again --")
        VERDICT = CHECK()
        if not VERDICT.startswith("pass"):
            VERDICT += f" (on attempt {{k}} of {{TRIES}}: the result varies from run to run)"
except Exception as e:  # a bug of this script, not a verdict
    VERDICT = f"error ({{type(e).__name__}}: {{e}})"
print(f"verdict: {{VERDICT.split(' ')[0]}}  ({{VERDICT}}; conform said {{CONFORM_VERDICT}})")
'''  # noqa: E501 - a line of the generated repro script, kept whole


def _expr(v, *, device_var: str = "device", names: dict[int, str] | None = None) -> str:
    """Python source that rebuilds one case argument on `device_var`; `names` maps the id of a
    spec the case holds twice (a Dict[Tensor, t] key) to the variable that holds its one tensor."""
    if names and id(v) in names:
        return names[id(v)]
    if isinstance(v, TensorSpec):
        parts = [repr(list(v.shape)), repr(v.dtype)]
        for f in dataclasses.fields(TensorSpec):
            val = getattr(v, f.name)
            if f.name in ("shape", "dtype") or val == f.default:
                continue
            parts.append(f"{f.name}={_expr(val, device_var=device_var, names=names)}")
        parts.append(f"device={device_var}")
        return f"make({', '.join(parts)})"
    if isinstance(v, tuple):
        inner = ", ".join(_expr(x, device_var=device_var, names=names) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(_expr(x, device_var=device_var, names=names) for x in v) + "]"
    if isinstance(v, dict) and len(v) == 1:
        ((k, x),) = v.items()
        if k == "dtype":
            return f"D(torch.{x})"
        if k in ("layout", "memory_format"):
            return f"torch.{x}"
        if k == "device":
            return device_var if x == "target" else f"torch.device({x!r})"
        if k == "dict":
            items = ", ".join(
                f"{_expr(key, device_var=device_var, names=names)}: {_expr(val, device_var=device_var, names=names)}"
                for key, val in x
            )
            return "{" + items + "}"
    if isinstance(v, float) and v != v:
        return 'float("nan")'
    if isinstance(v, float) and math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    if isinstance(v, complex) and not (math.isfinite(v.real) and math.isfinite(v.imag)):
        return f"complex({_expr(v.real)}, {_expr(v.imag)})"
    return repr(v)


@functools.cache
def _tensor_builder_source() -> str:
    """generators/tensor.py as script text: its imports and definitions, without its docstring
    and its comment lines (a quarter of the module: a script pasted into a bug report or a
    pull request's comment, whose size GitHub limits, carries the code alone). Made once per
    process: tokenizing the module for every failing cell's script was 3% of a sweep."""
    src = inspect.getsource(tensor_module)
    body = src.split("from __future__ import annotations\n", 1)[1]
    comment_lines = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(body).readline)
        if tok.type == tokenize.COMMENT and tok.line.lstrip().startswith("#")
    }
    code = "\n".join(line for n, line in enumerate(body.splitlines(), 1) if n not in comment_lines)
    header = "# -- conform's tensor builder: generators/tensor.py, its code verbatim (comments left out) "
    return header + "-" * 4 + "\n" + code.strip() + "\n\n\n"


def _given(value, default: float) -> float:
    return default if value is None else float(value)


def _body_lines(op, case: Case) -> list[str]:
    """The body of the script's call(device, requires_grad, replace) for `case`."""
    qualname = op if isinstance(op, str) else op.qualname
    base, _, overload = qualname.split("::", 1)[-1].partition(".")
    call = f"torch.ops.aten.{base}.{overload or 'default'}"
    # a spec the case holds twice is one tensor (TorchScript looks a Dict[Tensor, t] key up by identity)
    shared = {id(s): f"shared[{i}]" for i, s in enumerate(shared_specs(case))}
    args = ", ".join(_expr(a, names=shared) for a in case.args)
    kwargs = ", ".join(f"{k}={_expr(v, names=shared)}" for k, v in case.kwargs.items())
    written = [a.name for a in op.arguments if a.is_write or a.is_out] if not isinstance(op, str) else []
    outs = [a.name for a in op.arguments if a.is_out] if not isinstance(op, str) else []
    names = [a.name for a in op.arguments] if not isinstance(op, str) else []
    return [
        f"    torch.manual_seed({case.seed})",
        *([f"    shared = [{', '.join(_expr(s) for s in shared_specs(case))}]"] if shared else []),
        f"    args = ({args}{',' if len(case.args) == 1 else ''})",
        f"    kwargs = dict({kwargs})",
        *([f"    fill_outs(kwargs, {outs!r})"] if outs else []),
        "    if args_only:",
        "        return args, kwargs",
        "    if requires_grad:  # every floating input a leaf that requires grad, as conform's backward",
        "        grads = []",
        "        def prep(v):",
        "            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):",
        "                grads.append(v.detach().requires_grad_(True) if replace is None else replace[len(grads)])",
        "                return grads[-1]",
        "            if isinstance(v, (list, tuple)):",
        "                return type(v)(prep(x) for x in v)",
        "            return v",
        "        args, kwargs = tuple(prep(a) for a in args), {k: prep(v) for k, v in kwargs.items()}",
        f"    result = {call}(*args, **kwargs)",
        "    if requires_grad:",
        "        return result, grads",
        f"    bound = dict(zip({names!r}, args), **kwargs)",
        f"    return result, {{n: bound[n] for n in {written!r} if n in bound}}",
    ]


_RELATION_CODE = '''
def take(observed, index):
    """The drawn case's values at the flat positions `index` (the position relation)."""
    idx = torch.tensor(index)

    def pick(x):
        if isinstance(x, torch.Tensor):
            return x.reshape(-1)[idx]
        if isinstance(x, (list, tuple)):
            return type(x)(pick(v) for v in x)
        return x

    return pick(observed[0]), {k: pick(v) for k, v in observed[1].items()}


def cast_to(x, like):
    if isinstance(x, torch.Tensor) and isinstance(like, torch.Tensor):
        return x.to(like.dtype)
    if isinstance(x, (list, tuple)) and isinstance(like, (list, tuple)):
        return type(like)(cast_to(v, w) for v, w in zip(x, like))
    return x


def golden_at(make, vs=None):
    """float64's floating results (or, given the outputs' weights `vs`, the gradients of every
    floating input) at the inputs make(n, x) gives for each floating input x of the case."""
    global _GOLDEN
    _GOLDEN = True
    try:
        with torch.enable_grad():
            args, kwargs = call(torch.device("cpu"), args_only=True)
            xs = []  # the floating inputs in the order call(replace=) takes them

            def gather(v):
                if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
                    xs.append(v)
                elif isinstance(v, (list, tuple)):
                    for x in v:
                        gather(x)

            for v in list(args) + list(kwargs.values()):
                gather(v)
            ins = [make(n, x.detach()) for n, x in enumerate(xs)]
            if vs is not None:  # (a forward's inputs need not be differentiable: running stats)
                ins = [x.requires_grad_(True) for x in ins]
            result, _ = call(torch.device("cpu"), requires_grad=True, replace=ins)
            outs = [t for t in leaves(result) if t.is_floating_point()]
            if vs is None:
                return [o.detach() for o in outs]
            grads = torch.autograd.grad([o for o in outs if o.requires_grad], ins, vs, allow_unused=True)
            return [g.detach() if g is not None else torch.zeros_like(x) for g, x in zip(grads, ins)]
    finally:
        _GOLDEN = False


def relation_verdict():
    """The device against itself: the drawn case (or the first of two out= layouts) and another
    case of the same values, in another layout or another position."""
    global SIGN
    if RELATION["relation"] in ("finite_differences", "second_order", "forward_second_order"):
        return gradient_verdict()
    if RELATION["relation"] == "elementwise":
        return elementwise_verdict()
    if RELATION["relation"] == "limit":
        return limit_verdict()
    if RELATION["relation"] == "infinity":
        return infinity_verdict()
    if RELATION["relation"] == "widened":
        return widened_verdict()
    if RELATION["relation"] == "threads":
        return threads_verdict()
    first = call_first if RELATION.get("first") else call
    a, a_err = attempt(run, DEVICE, using=first)
    b, b_err = attempt(run, DEVICE, using=call_other)
    print(f"relation: {RELATION['relation']}")
    for name, err in (("the drawn case", a_err), ("the other case", b_err)):
        if err is not None:
            print(f"{name} raised {type(err).__name__}: {err}")
    if RELATION["relation"] == "alias" and b_err is not None:
        return "pass (the aliased call raises)"
    if (a_err is None) != (b_err is None):
        return "device_error"
    if a_err is not None:
        return "pass (both raise)"
    if RELATION.get("index") is not None:
        a = take(a, RELATION["index"])
        if RELATION["relation"] == "batch":  # the taken items in the other result's shape
            a = (type(b[0])(x.reshape(y.shape) for x, y in zip(a[0], b[0])) if isinstance(b[0], (list, tuple))
                 else a[0].reshape(b[0].shape), a[1])  # fmt: skip
    if RELATION["relation"] == "forms":  # the in-place or out= result against the functional's
        a, b = (a[0], {}), (cast_to(b[0], a[0]), {})
    if RELATION["relation"] == "alias":  # the aliased call against memory of its own
        a, b = (a[0], {}), (b[0], {})
    show("drawn", a[0])
    show("other", b[0])
    bad, meta = differ(b, a)
    return "mismatch" if bad or meta else "pass"


def with_threads(n, fn, *a, **k):
    """fn(*a, **k) with torch's intra-op thread count set to n."""
    was = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn(*a, **k)
    finally:
        torch.set_num_threads(was)


def threads_verdict():
    """The CPU kernel with one intra-op thread and with several, on the same inputs: the same
    result, and an error with both or neither."""
    n = RELATION["threads"]
    a, a_err = attempt(with_threads, 1, run, DEVICE)
    b, b_err = attempt(with_threads, n, run, DEVICE)
    print(f"relation: threads (1 and {n} intra-op threads)")
    for name, err in (("one thread", a_err), (f"{n} threads", b_err)):
        if err is not None:
            print(f"with {name} it raised {type(err).__name__}: {err}")
    if (a_err is None) != (b_err is None):
        return "device_error"
    if a_err is not None:
        return "pass (both raise)"
    show("one thread", a[0])
    show(f"{n} threads", b[0])
    bad, meta = differ(b, a)
    return "mismatch" if bad or meta else "pass"


def gradient_verdict():
    """float64 central differences against autograd's formulas in one random direction."""
    global _GOLDEN
    (_, gos), err = attempt(run_backward, torch.device("cpu"))
    if err is not None:
        return f"error (the backward raised {err})"
    vs = [g.to(torch.complex128) if g.is_complex() else g.double() for g in gos]
    _GOLDEN = True
    try:
        _, xs = call(torch.device("cpu"), requires_grad=True)
        wide = (torch.float64, torch.complex128)
        xs = [x.detach() for x in xs if x.dtype in wide]

        def fn(ins):
            result, _ = call(torch.device("cpu"), requires_grad=True, replace=list(ins))
            return [t for t in leaves(result) if t.dtype in wide]

        if RELATION["relation"] == "second_order":  # the backward's own derivatives
            g = torch.Generator().manual_seed(SEED + 5)
            ws = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in xs]
            hermitian = RELATION.get("hermitian", ())
            r = directional(backward_function(fn, vs), xs, ws, SEED + 7, hermitian, within=fn, derivative=True)
        elif RELATION["relation"] == "forward_second_order":  # the forward-mode formula's own derivative
            hermitian = RELATION.get("hermitian", ())
            us = directions(fn, xs, SEED + 9, hermitian)[1]
            r = directional(tangent_function(fn, us), xs, vs, SEED + 11, hermitian, within=fn, derivative=True)
        else:
            r = directional(fn, xs, vs, SEED + 3, RELATION.get("hermitian", ()))
    finally:
        _GOLDEN = False
    if r is None:
        return "pass (finite differences cannot conclude here)"
    print({k: v for k, v in r.items() if k != "us"})
    return "grad_mismatch" if r["bad"] else "pass"
'''


_ELEMENTWISE_CODE = '''

def moved_golden(move, vs=None):
    """float64's result (or, given the outputs' weights `vs`, its gradients) with every floating
    input moved by one unit of the case's dtype: `move` is (direction,) or (direction, bit), where
    bit 0 moves neighbours and successive inputs apart, or ("scale", factor): times 1 + factor."""
    dtype = getattr(torch, RELATION["dtype"])

    def moved(n, x):
        if move[0] == "scale":
            return x * (1 + move[1])
        step = move[0] * _spacing(x, dtype)
        if len(move) > 1:
            index = torch.arange(x.numel()).reshape(x.shape)
            step = step * (1 - 2 * (((index >> move[1]) + n) % 2)).to(step.dtype)
        return x + step

    return golden_at(moved, vs)


def elementwise_verdict():
    """Each element of the device's result (or gradient) against float64's, for an elementwise op:
    one value at exact inputs per element, where float64's is a normal number of the case's dtype
    that moves little when the inputs move by one unit of it."""
    backward = PHASE == "backward"
    if backward:
        (got, gos), err = attempt(run_backward, DEVICE)
        vs = [g.double() for g in gos] if err is None else None
        want = run_backward(torch.device("cpu"), golden=True, grad_outputs=vs)[0] if err is None else None
    else:
        found, err = attempt(run, DEVICE)
        got = [t for t in leaves(found[0]) if t.is_floating_point()] if err is None else None
        vs = None
        want = [t for t in leaves(run(torch.device("cpu"), golden=True)[0]) if t.is_floating_point()] if err is None else None
    if err is not None:
        return f"error (the device raised {err})"
    label = "grad" if backward else "result"
    tiny, huge = NORMAL_RANGE
    top = RELATION["top"] if RELATION.get("top") is not None else math.inf  # the range's top, where set
    verdict = "pass"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            continue
        mask = gross_elements(g, w, w, w, tiny, huge, top)
        for move in MOVES_BY:
            if bool(mask.any()):
                other = moved_golden(move, vs)[i]
                mask &= gross_elements(g, w, other, other, tiny, huge, top)
        if bool(mask.any()):
            k = tuple(int(j) for j in mask.nonzero()[0]) if mask.dim() else ()
            print(f"{label}[{i}] at {k}: {g[k].item()!r} on the device, {w[k].item()!r} in float64; "
                  f"{int(mask.sum())} of {mask.numel()} elements grossly off where float64's is stable")
            verdict = "grad_mismatch" if backward else "mismatch"
    return verdict
'''


_LIMIT_CODE = '''

def limit_verdict():
    """The device's result (or gradient) at an infinite input against the op's value (or
    derivative, times grad_output) at the top of the dtype's range, where float64 gives one value
    there bit for bit (saturated: its value at infinity)."""
    global _GOLDEN
    scale = None
    if PHASE == "backward":
        found, err = attempt(run_backward, DEVICE)
        if err is None:
            got, scale = found[0][0], found[1][0]
    else:
        found, err = attempt(run, DEVICE)
        if err is None:
            got = [t for t in leaves(found[0]) if t.is_floating_point()][0]
    if err is not None:
        return f"error (the device raised {err})"
    x = [t for t in leaves(call(torch.device("cpu"), args_only=True)) if isinstance(t, torch.Tensor)][0]
    _GOLDEN = True
    try:
        with torch.enable_grad():
            result, ins = call_other(torch.device("cpu"), requires_grad=True)
            at = result.detach()
            if PHASE == "backward":
                at = torch.autograd.grad(result, ins[0], torch.ones_like(result))[0]
    finally:
        _GOLDEN = False
    dtype = getattr(torch, RELATION["dtype"])
    print(f"float64 ({PHASE}) at +-max/k of {dtype}, k in {PROBE}, then at +-{MODERATE}: {at.tolist()}")
    show("input", x)
    show("device", got)
    mask = off_at_infinity(x, got, saturated(at), dtype, scale)
    return ("mismatch" if PHASE == "forward" else "grad_mismatch") if bool(mask.any()) else "pass"
'''


_INFINITY_CODE = '''

def probed(j, vs=None):
    """float64's floating results (or, given the outputs' weights `vs`, the gradients of every
    floating input) with each infinite input replaced as at_probe's probe j does."""
    dtype = getattr(torch, RELATION["dtype"])
    return golden_at(lambda n, x: at_probe(x, n, j, dtype), vs)


def infinity_verdict():
    """The device's result (or gradients) at infinite inputs against float64's with those inputs at
    +-2**e beyond the dtype's range: where float64 gives one finite value bit for bit whatever e
    each of them takes, and another at moderate values, that is the op's value there; NaN is not."""
    backward = PHASE == "backward"
    if backward:
        found, err = attempt(run_backward, DEVICE)
        got, vs = (found[0], [g.double() for g in found[1]]) if err is None else (None, None)
    else:
        found, err = attempt(run, DEVICE)
        got = [t for t in leaves(found[0]) if t.is_floating_point()] if err is None else None
        vs = None
    if err is not None:
        return f"error (the device raised {err})"
    runs = [probed(j, vs) for j in range(SPREAD + 2)]
    verdict = "pass"
    for k, (g, mask) in enumerate(zip(got, saturated_elements(runs))):
        off = off_infinity(g, runs[0][k], mask)
        if bool(off.any()):
            i = tuple(int(v) for v in off.nonzero()[0]) if off.dim() else ()
            print(f"{'grad' if backward else 'result'}[{k}] at {i}: {g[i].item()!r} on the device, where float64 "
                  f"gives {runs[0][k][i].item()!r} at every large probe; {int(off.sum())} elements off")
            verdict = "grad_mismatch" if backward else "mismatch"
    return verdict
'''


_WIDENED_CODE = '''

def widened_run(dtype):
    """The case on the CPU with its narrow integer tensors in `dtype`: ((result, written), error)."""
    global _WIDE
    _WIDE = dtype
    try:
        return attempt(run, torch.device("cpu"))
    finally:
        _WIDE = None


def widened_verdict():
    """The device's integer results against the op on the CPU with the narrow integer inputs in
    int64 (confirmed by float64 where the op takes it): where that value fits the result's dtype,
    a kernel that wraps no Python scalar into the narrow dtype gives it."""
    got, err = attempt(run, DEVICE)
    if err is not None:
        return f"error (the device raised {err})"
    wide, err = widened_run(torch.int64)
    if err is not None:
        return f"pass (the int64 run raised {err})"
    exact, err = widened_run(torch.float64)
    off = off_widened(got, wide, exact if err is None else None)
    print(off or "the device's integer results are the widened run's")
    return "mismatch" if off else "pass"
'''


def _function(name: str, op, case: Case) -> str:
    head = f"def {name}(device, requires_grad=False, replace=None, args_only=False):\n"
    return head + "\n".join(_body_lines(op, case)) + "\n\n"


def _relation_code(op, relation: dict | None) -> str:
    """What the script needs besides call() to replay a relation: the other case's call (and
    the first's, for two out= layouts), or the finite-difference check's source."""
    if relation is None:
        return ""
    code = _RELATION_CODE
    if relation.get("other"):
        other_op = relation.get("other_op") or op
        code += "\n\n" + _function("call_other", other_op, Case.from_json(relation["other"]))
    if relation.get("first"):
        code += "\n" + _function("call_first", op, Case.from_json(relation["first"]))
    if relation["relation"] == "elementwise":
        dtype = getattr(torch, relation.get("dtype") or "float32")
        code += _ELEMENTWISE_CODE + "\n\n" + inspect.getsource(gradients.gross_elements)
        code += "\n\n" + inspect.getsource(_spacing)
        code += f"\n\nGROSS, MOVES, MOVES_BY = {gradients.GROSS!r}, {gradients.MOVES!r}, {gradients.MOVES_BY!r}\n"
        code += (
            f"NORMAL_RANGE = {gradients.normal_range(dtype)!r}  # float64 gradients judged: normal numbers of {dtype}\n"
        )
    if relation["relation"] == "limit":
        code += _LIMIT_CODE + "\n\n" + inspect.getsource(limits._same) + "\n\n" + inspect.getsource(limits.saturated)
        code += "\n\n" + inspect.getsource(limits.off_at_infinity)
        code += f"\n\nPROBE, MODERATE = {limits.PROBE!r}, {limits.MODERATE!r}\n"
    if relation["relation"] == "infinity":
        code += _INFINITY_CODE
        for fn in (limits._same, limits.at_probe, limits.saturated_elements, limits.off_infinity):
            code += "\n\n" + inspect.getsource(fn)
        code += f"\n\nMODERATE, SPREAD, LEVELS = {limits.MODERATE!r}, {limits.SPREAD!r}, {limits.LEVELS!r}\n"
    if relation["relation"] == "widened":
        code += _WIDENED_CODE
        for fn in (widening._integral, widening._confirmed, widening.off_widened):
            code += "\n\n" + inspect.getsource(fn)
        code += "\n\nWIDE = torch.int64\n"
    if relation["relation"] in ("finite_differences", "second_order", "forward_second_order"):
        code += "\n\n" + inspect.getsource(gradients.directional).replace("STEPS", "FD_STEPS")
        code += "\n\n" + inspect.getsource(gradients.directions)
        code += "\n\n" + inspect.getsource(gradients.backward_function)
        code += "\n\n" + inspect.getsource(gradients.tangent_function)
        code += "\n\n" + inspect.getsource(gradients._read_triangles).replace("STEPS", "FD_STEPS")
        code += f"\n\nFD_STEPS, SPREAD, FLOOR = {gradients.STEPS!r}, {gradients.SPREAD!r}, {gradients.FLOOR!r}\n"
        code += f"LARGEST_MOVED = {gradients.LARGEST_MOVED!r}\n"
    return code


def repro_script(op, case: Case, backend_name: str, *, result=None, golden_is_expectation: bool | None = None) -> str:
    """A standalone script (torch only) that recomputes what conform compared for `case` of `op`
    and prints the verdict: the device against the CPU (and float64 golden where it judged), or
    against golden when the plain CPU is under test; backward where the gradient failed; the
    device against itself where a metamorphic relation or finite differences decided.

    `op` is an OpSpec or a qualname ("aten::add.Tensor"); `backend_name` the device under test
    ("mps", "cuda:1", ...): a name torch does not know as a device runs on the CPU with a note.
    `result` (an execute.CaseResult) gives the phase, the tolerance and conform's verdict.
    """
    device = _DEVICES.get(backend_name.split(":", 1)[0], None)
    note = ""
    if device is None:
        note = f"# {backend_name!r} is not a torch device name: set DEVICE to the device it tests.\n"
        device = "cpu"
    elif ":" in backend_name:
        device = backend_name
    body_lines = _body_lines(op, case)
    overlapping = case.args[0] if (getattr(result, "message", "") or "").startswith("[overlapping self]") else None
    header = (
        f'"""Reproduce {case.describe()} on {backend_name} (generated by conform).\n\n'
        f"Case: {json.dumps(case.to_json())}\n"
        '"""\n'
    )
    if golden_is_expectation is None:
        golden_is_expectation = backend_name == "cpu"
    outcome = getattr(getattr(result, "outcome", None), "value", getattr(result, "outcome", None)) or "unknown"
    relation = getattr(result, "relation", None)
    prelude = _PRELUDE.format(
        device=device,
        body="\n".join(body_lines),
        mode="golden" if golden_is_expectation else "parity",
        phase=getattr(result, "phase", "") or "forward",
        verdict=outcome,
        seed=case.seed,
        golden_judges=isinstance(op, str) or hint(op, "golden"),
        # 0 is a tolerance (exactly determined results): only a missing one falls back to float32's
        rtol=_given(getattr(result, "rtol", None), 1.3e-6),
        atol=_given(getattr(result, "atol", None), 1e-5),
        relation=None
        if relation is None
        else {
            "relation": relation["relation"],
            "index": relation.get("index"),
            "first": bool(relation.get("first")),
            **({"dtype": relation["dtype"], "top": relation.get("top")} if relation.get("dtype") else {}),
            **({"threads": relation["threads"]} if relation.get("threads") else {}),
        },
        sign=bool(relation and relation.get("sign")),
        past_end=next(
            (f"{s.describe()} holds indices from {s.low}" for s in case.tensor_specs() if s.values == "past_end"), None
        ),
        overlapping=overlapping.describe() if overlapping is not None else None,
        overlapping_before=_expr(overlapping, device_var="'cpu'") if overlapping is not None else "None",
        unwritten=_unwritten_what(getattr(result, "message", "") or ""),
    )
    return (
        header
        + "from __future__ import annotations\n\n"
        + "import math\n\n"
        + note
        + _tensor_builder_source()
        + prelude
        + _independent_prelude(op, case, result)
        + _EPILOGUE.format(relation_code=_relation_code(op, relation))
    )


def _unwritten_what(message: str) -> str | None:
    """What the unwritten-element run was given, where conform's verdict came from it (else None)."""
    if "[unwritten output]" in message:
        return "the out= given as drawn" if message.startswith("[out= preallocated]") else "the case"
    if message.startswith("[malformed argument]") and "unwritten" in message:
        return message.partition(":")[0].removeprefix("[malformed argument] ")
    return None


def _independent_prelude(op, case: Case, result) -> str:
    """The independent reference's settings: set where conform's verdict came from it (its
    message names it), else REFERENCE is empty and the script does not recompute it."""

    ref = None
    if not isinstance(op, str) and "independent reference" in (getattr(result, "message", "") or ""):
        ref = references.reference_for(op)
    if ref is None:
        return "\nREFERENCE = ''\n"
    defaults = {}
    for a in op.arguments:
        if a.default is not None and not a.is_out:
            v = references._default(a)
            if isinstance(v, (int, float, bool, list, tuple, str)) or v is None:
                defaults[a.name] = v
    ints = [
        sp.torch_dtype
        for sp in case.tensor_specs()
        if len(sp.shape) and not sp.torch_dtype.is_floating_point and not sp.torch_dtype.is_complex
    ]
    int_dtype = None
    for d in ints:
        int_dtype = d if int_dtype is None else __import__("torch").promote_types(int_dtype, d)
    return (
        "\n# conform's independent reference (NumPy, SciPy or another decomposition): golden float64 is the\n"
        "# op's own kernel, so a bug of its semantics is in golden too; this opinion does not share it\n"
        f"REFERENCE = {ref.expression!r}\n"
        f"REFERENCE_IGNORE = {ref.ignore!r}  # {ref.why}\n"
        f"REFERENCE_SIGN = {ref.sign_of_zero!r}\n"
        f"REFERENCE_C99 = {ref.elementwise!r}\n"
        f"REFERENCE_OUTPUT = {ref.output!r}\n"
        f"REFERENCE_NUMPY = {ref.uses_numpy!r}\n"
        f"REFERENCE_OP = {op.qualname!r}\n"
        f"NAMES = {[a.name for a in op.arguments]!r}\n"
        f"OUTS = {[a.name for a in op.out_args]!r}\n"
        f"DEFAULTS = {defaults!r}\n"
        f"INT_DTYPE = {'torch.' + str(int_dtype).removeprefix('torch.') if int_dtype is not None else None}\n"
        + (f"FORMULAS = {inspect.getsource(formulas)!r}\n" if "formulas." in ref.expression + ref.ignore else "")
    )
