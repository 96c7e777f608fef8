"""Independent references: a second expectation that does not run the op's own ATen kernel.

Golden is the op's own kernel in float64: it shares every bug of the algorithm or of the
semantics (the sign of zero through a cumulative sum, NaN inside sorted boundaries). An
independent reference is NumPy, SciPy, Python's math or a `torch._decomp` decomposition into
other kernels, run on the case's inputs in float64, and held against golden:

1. the reference is an expression over the op's schema argument names (`numpy.arctan2(self,
   other)`), written in opdb/rules/references.toml (hints `reference`, `reference_ignore`,
   `reference_sign_of_zero`, `reference_output`, each with its reason) or found by name: an
   op named like a NumPy ufunc or a `scipy.special` function of as many inputs (`discovered`);
   the keyword `decomposition` runs `torch._decomp`'s decomposition of the overload, and is
   used only where that decomposition never calls the op itself (`_independent`); an op with
   neither gets its decomposition as found (`decomposition_found`), which speaks only on
   finite, non-empty, real inputs with real floating results;
2. elements are compared as the verdict compares (special values exactly, the sign of zero
   where the entry says the op defines it, finite values with the cell's tolerance), and an
   element is excused where the reference itself moves that far, or changes class, when the
   inputs move by one unit of the case's dtype (the case's conditioning, reference side);
3. golden disagreeing with the reference is a fact about the CPU kernel: on the plain CPU the
   CPU's own result disagreeing too is the cell's alarm; on an accelerator a device that the
   CPU and golden fail, and that matches the reference, passes with a "CPU wrong" finding.

`second_opinion` is the verdict's one entry point; `evaluate` is what the repro script
recomputes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings
from dataclasses import dataclass

import numpy
import torch

import opdb
from conform.judge import factorizations, invariants
from conform.judge import verdict as oracle
from conform.judge.compare import Record, _spacing, bind_arguments, failures, leaves
from conform.judge.tolerances import is_inexact, leaf_scale, tolerance_at
from generators.case import TensorSpec

DECOMPOSITION = "decomposition"

# torch base name -> (module, function) where the name differs or the function is not a ufunc
# of the same name; reviewed: each maps a function of the same mathematical definition
ALIASES: dict[str, str] = {
    "atan2": "numpy.arctan2",
    "arctan2": "numpy.arctan2",
    "mul": "numpy.multiply",
    "multiply": "numpy.multiply",
    "sub": "numpy.subtract",
    "subtract": "numpy.subtract",
    "div": "numpy.true_divide",
    "divide": "numpy.true_divide",
    "neg": "numpy.negative",
    "eq": "numpy.equal",
    "ne": "numpy.not_equal",
    "lt": "numpy.less",
    "le": "numpy.less_equal",
    "gt": "numpy.greater",
    "ge": "numpy.greater_equal",
    "greater": "numpy.greater",
    "greater_equal": "numpy.greater_equal",
    "less": "numpy.less",
    "less_equal": "numpy.less_equal",
    "not_equal": "numpy.not_equal",
    "erf": "scipy.special.erf",
    "erfc": "scipy.special.erfc",
    "erfinv": "scipy.special.erfinv",
    "lgamma": "scipy.special.gammaln",
    "digamma": "scipy.special.psi",
    "special_psi": "scipy.special.psi",
    "special_gammaln": "scipy.special.gammaln",
    "i0": "scipy.special.i0",
    "sigmoid": "scipy.special.expit",
    "special_expit": "scipy.special.expit",
    "xlogy": "scipy.special.xlogy",
    "special_xlogy": "scipy.special.xlogy",
    "igamma": "scipy.special.gammainc",
    "igammac": "scipy.special.gammaincc",
    "special_gammainc": "scipy.special.gammainc",
    "special_gammaincc": "scipy.special.gammaincc",
    "special_bessel_j0": "scipy.special.j0",
    "special_bessel_j1": "scipy.special.j1",
    "special_bessel_y0": "scipy.special.y0",
    "special_bessel_y1": "scipy.special.y1",
    "special_modified_bessel_i0": "scipy.special.i0",
    "special_modified_bessel_i1": "scipy.special.i1",
    "special_modified_bessel_k0": "scipy.special.k0",
    "special_modified_bessel_k1": "scipy.special.k1",
    "special_scaled_modified_bessel_k0": "scipy.special.k0e",
    "special_scaled_modified_bessel_k1": "scipy.special.k1e",
    "special_airy_ai": "scipy.special.airy",  # ufunc of four outputs: reference_output picks Ai
    "sinc": "numpy.sinc",
    "special_sinc": "numpy.sinc",
    "special_round": "numpy.round",
    "special_exp2": "numpy.exp2",
    "special_expm1": "numpy.expm1",
    "special_log1p": "numpy.log1p",
}

# Names that match a NumPy or SciPy function yet mean something else in torch: never discovered.
NOT_THE_SAME = {
    "round": "numpy.round is a Python function, not a ufunc; torch.round's decimals overload scales first",
    "sign": "see references.toml: torch defines sign(NaN)",
    "positive": "torch.positive is a view of its input; nothing to compute",
    "conj": "torch.conj is a lazy view (conj bit); numpy computes it",
    "abs": "references.toml: the absolute value of a signed integer minimum wraps in both, by different rules",
    "absolute": "references.toml: as abs",
    "matmul": "not elementwise: numpy.matmul's broadcasting of 1-d operands differs from the schema's",
    "divmod": "torch has no divmod op",
    "modf": "torch has no modf op",
    "float_power": "numpy.float_power promotes to float64 like torch, yet rejects torch's complex mixes",
    "nextafter": "the next representable value depends on the dtype: in float64 it is another number",
    "spacing": "as nextafter",
    "equal": "torch.equal is one Python bool for the whole tensors; numpy.equal is elementwise",
    "bitwise_left_shift": "torch shifts by the bit width or more to 0; numpy leaves such shifts to C (masked on x86)",
    "bitwise_right_shift": "as bitwise_left_shift",
}

_UNARY_NAMES = (("self",),)
_BINARY_NAMES = (("self", "other"), ("input", "other"), ("self", "exponent"), ("x", "y"), ("self", "end"))


@dataclass(frozen=True)
class Reference:
    expression: str  # Python over the schema's argument names, with numpy, scipy, math, torch
    origin: str  # what a message names: "numpy.arctan2", "torch._decomp"
    ignore: str = ""  # an expression giving a mask of elements the reference does not decide
    sign_of_zero: bool = False
    output: int | None = None  # compare this output of a tuple result only
    why: str = ""  # the reason of the entry (its documented semantic difference)
    finite: bool = False  # speaks only where every floating input is finite
    floating: bool = False  # speaks only where every tensor of values is floating (or complex)
    discovered: bool = False  # found by name, not written in references.toml

    @functools.cached_property
    def elementwise(self) -> bool:
        """A NumPy or SciPy ufunc: each result element from the inputs at its own position."""
        return isinstance(_function(self.origin), numpy.ufunc)

    @property
    def uses_numpy(self) -> bool:
        return any(m in self.expression for m in ("numpy.", "scipy.", "math.", "formulas."))


def _value_inputs(op) -> tuple[str, ...] | None:
    """The names of a pointwise op's inputs when its schema has nothing else (out= aside), or None."""
    names = tuple(a.name for a in op.arguments if not a.is_out)
    types = [a.base_type for a in op.arguments if not a.is_out]
    if names in _UNARY_NAMES + _BINARY_NAMES and all(t in ("Tensor", "Scalar") for t in types):
        return names
    return None


def _function(path: str):
    import scipy.special  # here, not at the top: scipy loads in about half a second: only cells with a SciPy reference pay it

    mod, _, name = path.rpartition(".")
    root = {"numpy": numpy, "scipy.special": scipy.special}.get(mod)
    return getattr(root, name, None) if root is not None else None


def discovered(op) -> Reference | None:
    """A reference found by name: a NumPy ufunc or scipy.special function of the op's name (or
    its reviewed alias in ALIASES) taking as many inputs as the op's schema has."""

    names = _value_inputs(op)
    if names is None or op.family in ("torchscript", "quantized", "sparse"):
        return None
    base = op.base_name.removesuffix("_")
    if base in NOT_THE_SAME or base.startswith("_"):
        return None
    candidates = [ALIASES[base]] if base in ALIASES else [f"numpy.{base}"]
    if base.startswith("special_") and base not in ALIASES:
        candidates.append(f"scipy.special.{base.removeprefix('special_')}")
    for path in candidates:
        fn = _function(path)
        if not isinstance(fn, numpy.ufunc) or fn.nin != len(names):
            continue
        n_out = len(op.returns) if not op.out_args else len(op.out_args)
        if fn.nout != n_out:
            continue
        return Reference(f"{path}({', '.join(names)})", path, discovered=True)
    return None


def reference_for(op) -> Reference | None:
    """The op's independent reference: its references.toml entry, else one found by name."""
    hints = getattr(op.rules, "hints", None) or {}
    if "reference" in hints:
        expr = hints["reference"]
        if not expr:
            return None  # an entry that says no reference applies, with its reason
        reasons = hints.get("reasons") or {}
        why = reasons.get("hints.reference", reasons.get("hints", ""))
        origin = "torch._decomp" if expr == DECOMPOSITION else _origin(expr)
        if expr == DECOMPOSITION and not _independent(op.qualname):
            return None
        return Reference(
            expr,
            origin,
            ignore=hints.get("reference_ignore", ""),
            sign_of_zero=bool(hints.get("reference_sign_of_zero", False)),
            output=hints.get("reference_output"),
            why=why,
            finite=bool(hints.get("reference_finite_inputs", False)),
            floating=bool(hints.get("reference_floating_inputs", False)),
        )
    return discovered(op) or decomposition_found(op)


# ops whose value depends on the dtype they compute in: in float64 they are other numbers
_DTYPE_RELATIVE = frozenset({"nextafter", "spacing"})


def decomposition_found(op) -> Reference | None:
    """torch._decomp's decomposition of an overload that no entry names: Python, written apart
    from the ATen kernel, of the op's meaning in other ATen ops. Not reviewed op by op, so it
    speaks only where decompositions and kernels mean the same: finite, non-empty, real inputs and
    real floating results (`_unreviewed_says_nothing`); never for random ops, nor for views of
    storage (a stride or storage offset argument: the reference's float64 copy has other
    storage)."""
    if (
        op.family in ("random", "torchscript", "quantized", "sparse")
        or op.base_name.removesuffix("_") in _DTYPE_RELATIVE
    ):
        return None
    if any(a.name in ("stride", "storage_offset") for a in op.arguments) or not _independent(op.qualname):
        return None
    return Reference(DECOMPOSITION, "torch._decomp", discovered=True)


def _unreviewed_says_nothing(bound: dict) -> str:
    """Why a found decomposition has no opinion on these arguments ("" where it has): at NaN,
    infinities, empty tensors and complex values, decompositions and kernels differ by their
    formulas' order (inf * 0, a mean of nothing, a dropped imaginary part), which only a reviewed
    entry can call a bug; without a floating tensor the case is integer arithmetic."""
    floating = False
    for v in bound.values():
        if isinstance(v, torch.dtype) and v.is_complex:
            return "a complex result"
        for t in leaves(v):
            if t.numel() == 0 or t.is_complex() or t.is_floating_point() and not bool(torch.isfinite(t).all()):
                return "an empty, complex or non-finite input"
            floating = floating or t.is_floating_point()
    # integer arithmetic (its wrap and its INT_MIN / -1, which kills the process) is the kernel's
    return "" if floating else "integer inputs alone"


def _origin(expr: str) -> str:
    """The first library function an expression names ("numpy.cumsum")."""

    found = re.findall(r"\b(?:numpy|scipy\.special|math|torch|formulas)(?:\.[A-Za-z_]\w*)+", expr)
    ns = namespace()
    for name in found:
        obj = ns.get(name.split(".")[0])
        for part in name.split(".")[1:]:
            obj = getattr(obj, part, None)
        if callable(obj) and name.rsplit(".", 1)[-1] not in _HELPERS:
            return name
    return found[0] if found else expr


# functions an expression uses around its reference, never the reference itself
_HELPERS = frozenset(
    {"isnan", "isposinf", "isfinite", "iscomplexobj", "ones_like", "zeros_like", "asarray", "signbit", "indeterminate"}
)


# -- evaluating -----------------------------------------------------------------------------


def _decomposition(qualname: str):
    import torch._decomp  # here, not at the top: torch._decomp loads every decomposition: only ops whose reference is one pay it

    name, _, overload = qualname.split("::", 1)[1].partition(".")
    packet = getattr(torch.ops.aten, name, None)
    fn = getattr(packet, overload or "default", None) if packet is not None else None
    return torch._decomp.decomposition_table.get(fn) if fn is not None else None


class _Calls(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name.split("::", 1)[-1])
        return func(*args, **(kwargs or {}))


_INDEPENDENT: dict[str, bool] = {}


def _independent(qualname: str) -> bool:
    """Whether the overload has a decomposition at all (the catalog's check); whether it calls
    the op itself is checked on the first case it runs on (`_calls_itself`)."""
    return _decomposition(qualname) is not None and _INDEPENDENT.get(qualname, True)


def _calls_itself(op, fn, args, kwargs) -> bool:
    own = {op.base_name, op.base_name.removesuffix("_"), op.base_name + "_"}
    mode = _Calls()
    with mode:
        fn(*args, **kwargs)
    return bool(own & mode.names)


def _to_numpy(v):

    if isinstance(v, torch.Tensor):
        t = v.detach()
        if t.layout != torch.strided or t.is_quantized or t.device.type != "cpu":
            raise _NoOpinion("not a dense CPU tensor")
        if t.is_complex():
            return t.resolve_conj().to(torch.complex128).numpy()
        if t.is_floating_point():
            return t.to(torch.float64).numpy()
        return t.resolve_neg().numpy().copy() if t.dtype != torch.bool else t.numpy().copy()
    if isinstance(v, (list, tuple)):
        return type(v)(_to_numpy(x) for x in v)
    if isinstance(v, numpy.ndarray):
        return v
    return v


def _to_torch(v):

    if isinstance(v, torch.Tensor):
        return v.detach()
    if isinstance(v, (tuple, list)):
        return tuple(_to_torch(x) for x in v)
    if isinstance(v, (numpy.ndarray, numpy.generic, bool, int, float, complex)):
        a = numpy.asarray(v)
        if a.dtype == object:
            raise _NoOpinion("an object array")
        return torch.from_numpy(a.copy())
    raise _NoOpinion(f"a {type(v).__name__} result")


class _NoOpinion(Exception):
    """The reference has nothing to say about this case (it raised, or cannot read it)."""


def float64_function(op, name: str):
    """numpy float64 array -> numpy float64 array for a unary op whose reference is a NumPy/SciPy
    expression of its one argument `name`; None otherwise (generators.op_ranges' threshold search)."""
    ref = reference_for(op)
    if ref is None or not ref.uses_numpy or ref.output is not None:
        return None
    ns = namespace()
    code = _compiled(ref.expression)
    return lambda a: numpy.asarray(eval(code, ns, {name: a}), dtype=numpy.float64)  # noqa: S307


@functools.cache
def namespace():
    """What an expression may name: the libraries, and conform's documented formulas (NumPy only)."""
    import scipy.special  # here, not at the top: scipy loads in about half a second: only cells with a SciPy reference pay it

    from conform.judge import formulas

    scipy_ns = type("scipy", (), {"special": scipy.special})
    return {"numpy": numpy, "scipy": scipy_ns, "math": math, "torch": torch, "formulas": formulas}


@functools.cache
def _compiled(expression: str):
    """An expression compiled once: a sweep evaluates each thousands of times."""
    return compile(expression, "<reference>", "eval")


def evaluate(ref: Reference, op, args, kwargs):
    """The reference's result for the (float64) arguments, as torch tensors; raises _NoOpinion."""
    bound = bind_arguments(op, args, kwargs)
    for a in op.arguments:
        if a.name not in bound and a.default is not None and not a.is_out:
            bound[a.name] = _default(a)
    for a in op.out_args:
        bound.pop(a.name, None)
    if ref.finite and not _all_finite(bound.values()):
        raise _NoOpinion("a non-finite input: where NaN and infinity land is the algorithm's")
    if ref.expression == DECOMPOSITION:
        fn = _decomposition(op.qualname)
        if fn is None:
            raise _NoOpinion("no decomposition")
        unsaid = _unreviewed_says_nothing(bound) if ref.discovered else ""
        if unsaid:  # before the decomposition runs at all
            raise _NoOpinion(f"a decomposition found, not reviewed, says nothing of {unsaid}")
        if op.qualname not in _INDEPENDENT:
            _INDEPENDENT[op.qualname] = not _calls_itself(op, fn, args, kwargs)
        if not _INDEPENDENT[op.qualname]:
            raise _NoOpinion("the decomposition calls the op itself")
        with torch.no_grad():
            result = _to_torch(fn(*args, **kwargs))
            mask = _to_torch(eval(_compiled(ref.ignore), namespace(), dict(bound))) if ref.ignore else None  # noqa: S307
        if ref.discovered and not all(t.is_floating_point() for t in leaves(result)):
            raise _NoOpinion("a decomposition found, not reviewed, says nothing of integer or complex results")
        if ref.output is not None:
            result = _pick(result, ref.output)
            if result is None:
                raise _NoOpinion("one output where several were expected")
        return result, mask
    ns = namespace()
    values = {k: _to_numpy(v) for k, v in bound.items()} if ref.uses_numpy else dict(bound)

    with warnings.catch_warnings(), numpy.errstate(all="ignore"), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            out = eval(_compiled(ref.expression), ns, values)  # noqa: S307 - reviewed expressions from opdb's rules
        except Exception as e:  # noqa: BLE001 - the reference rejects the input: no opinion
            raise _NoOpinion(f"{type(e).__name__}: {e}") from None
        mask = None
        if ref.ignore:
            try:
                mask = _to_torch(eval(_compiled(ref.ignore), ns, values))  # noqa: S307
            except Exception as e:  # noqa: BLE001
                raise _NoOpinion(f"{type(e).__name__}: {e}") from None
    result = _to_torch(out)
    if ref.output is not None:
        if not isinstance(result, tuple):
            raise _NoOpinion("one output where several were expected")
        result = result[ref.output]
    return result, mask


def _all_finite(values) -> bool:
    return all(
        bool(torch.isfinite(t).all()) for t in leaves(list(values)) if is_inexact(t.dtype) and t.layout == torch.strided
    )


def _default(arg):
    """A schema default as the Python value the kernel gets ("None", "1", "False", "[]")."""
    text = arg.default
    if text in ("None",):
        return None
    if text in ("True", "False"):
        return text == "True"
    if text == "Mean":
        return 1
    try:
        return eval(text, {"__builtins__": {}}, {})  # noqa: S307 - schema literals: numbers and lists
    except Exception:  # noqa: BLE001 - "contiguous_format", "long": nothing an expression needs
        return text


# -- judging --------------------------------------------------------------------------------


@dataclass
class Opinion:
    reference: Reference
    result: object  # torch tensor(s), float64
    ignore: torch.Tensor | None
    moved: dict = dataclasses.field(default_factory=dict)  # unit dtype -> the reference on moved inputs
    _rerun: object = None  # unit dtype -> [the reference on the inputs moved up, and down]
    _rounded: object = None  # () -> the reference with the Python scalars rounded to the result's dtype

    def leaves(self, actual):
        """(actual leaf, reference leaf, position) triples that line up, or None where they do not."""
        got = actual if self.reference.output is None else _pick(actual, self.reference.output)
        if got is None:
            return None
        ga, wa = list(leaves(got)), list(leaves(self.result))
        if len(ga) != len(wa) or not ga:
            return None
        for a, r in zip(ga, wa):
            if a.shape != r.shape or a.layout != torch.strided or a.device.type == "meta":
                return None
        return [(a, r, i) for i, (a, r) in enumerate(zip(ga, wa))]

    def off(self, actual, tol, *, unit: torch.dtype | None, skip=None, values: bool = True):
        """Per leaf, the elements where `actual` disagrees with the reference beyond `tol` and
        beyond the reference's own movement when its nonzero inputs move by one unit of `unit`
        (None: not moved), except where the masks of `skip` say; None: no opinion."""
        triples = self.leaves(actual)
        if triples is None:
            return None
        moved = self._moved(unit) if unit is not None else []
        masks = []
        for a, r, i in triples:
            ms = [_leaf(m, i) for m in moved]
            scale = leaf_scale(r) if is_inexact(r.dtype) else 0.0
            rtol, atol = tolerance_at(tol, a.dtype, scale) if is_inexact(a.dtype) else (0.0, 0.0)
            c99 = self.reference.elementwise
            m = _off(a, r, ms, rtol, atol, self.reference.sign_of_zero, values=values, c99=c99)
            if bool(m.any()) and self._rounded is not None:
                # a kernel may read its Python scalars in its own dtype (eps, alpha): either reading stands
                alt = _leaf(self._alternative(), i)
                if alt is not None and alt.shape == r.shape:
                    m &= _off(a, alt, [], rtol, atol, self.reference.sign_of_zero, values=values, c99=c99)
            if self.ignore is not None and m.numel():
                try:
                    m = m & ~torch.broadcast_to(self.ignore.to(torch.bool), m.shape)
                except RuntimeError:
                    return None
            if skip is not None:
                m = m & ~skip[i]
            masks.append(m)
        return masks

    def _alternative(self):
        if not isinstance(self._rounded, tuple):
            self._rounded = (self._rounded(),)
        return self._rounded[0]

    def _moved(self, unit):
        if unit not in self.moved:
            self.moved[unit] = self._rerun(unit) if self._rerun is not None else []
        return self.moved[unit]

    def record(self, actual, masks, path: str = "output") -> Record:
        """One failing record that names the first disagreeing element."""
        triples = self.leaves(actual)
        n = sum(int(m.sum()) for m in masks)
        total = sum(m.numel() for m in masks)
        for (a, r, i), m in zip(triples, masks):
            if not bool(m.any()):
                continue
            idx = _unravel(int(m.reshape(-1).to(torch.uint8).argmax()), tuple(m.shape))
            got, want = a.detach()[idx].item(), r.detach()[idx].item()
            where = path if len(masks) == 1 else f"{path}[{i}]"
            kind = "values"
            if isinstance(got, complex) or isinstance(want, complex):
                # named by C99's classes (_complex_class): a NaN where an infinity is, or the reverse
                cg, cw = (
                    _complex_class(torch.tensor([[v.real, v.imag]])).item() for v in (complex(got), complex(want))
                )
                kind = "nan" if cg != cw and 1 in (cg, cw) else "inf" if cg != cw else "values"
            elif isinstance(got, float) and isinstance(want, float):
                if math.isnan(got) != math.isnan(want):
                    kind = "nan"
                elif math.isinf(got) or math.isinf(want):
                    kind = "inf"
                elif got == 0 and want == 0:
                    kind = "sign"
            return Record(
                where,
                kind,
                f"Mismatched elements: {n} / {total}; {_NAMED.get(kind, '')}at index {idx}: {got!r} vs {want!r} expected [{where}]",
                index=idx,
                mismatched=n,
                total=total,
            )
        return Record(path)


# what a record's message calls its kind, as the verdict's own messages do (compare.py)
_NAMED = {"nan": "NaN mismatch ", "inf": "infinity mismatch ", "sign": "sign of zero differs "}


def _pick(x, i):
    return x[i] if isinstance(x, (tuple, list)) and len(x) > i else None


def _leaf(x, i):
    if x is None:
        return None
    found = list(leaves(x))
    return found[i] if i < len(found) else None


def _unravel(flat: int, shape: tuple) -> tuple:
    out = []
    for s in reversed(shape):
        out.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return tuple(reversed(out))


def _off(
    a: torch.Tensor,
    r: torch.Tensor,
    moved: list,
    rtol: float,
    atol: float,
    sign: bool,
    *,
    values: bool = True,
    c99: bool = False,
) -> torch.Tensor:
    """Elements of `a` that disagree with the reference `r` (float64, rounded to a's dtype):
    another special value (NaN, an infinity of either sign) unless a moved reference changes
    class there too, another sign of zero where `sign`, or a finite value beyond rtol/atol and
    outside the hull of the moved references (widened by their spread). A complex number is
    finite or not; with `c99` (an elementwise reference), an infinity is told from a NaN too."""
    a, r = a.detach(), r.detach()
    if a.is_complex() or r.is_complex():
        if a.is_complex() and r.is_complex() and a.dtype != torch.complex128:
            r = r.resolve_conj().to(a.dtype)  # rounded to the result's dtype, as a real result is
        ar = torch.view_as_real(a.resolve_conj().to(torch.complex128))
        rr = torch.view_as_real(r.resolve_conj().to(torch.complex128))
        af, rf = torch.isfinite(ar).all(-1), torch.isfinite(rr).all(-1)
        modulus = torch.where(
            rf, rr.nan_to_num(0.0, 0.0, 0.0).pow(2).sum(-1).sqrt(), torch.zeros((), dtype=torch.float64)
        )
        diff = (ar - rr).abs().amax(-1)
        cls_off = _complex_class(ar) != _complex_class(rr) if c99 else af != rf
        return cls_off | (af & rf & (diff > atol + rtol * modulus) & values)
    if not is_inexact(a.dtype):
        if a.dtype == torch.bool:
            return a != (r != 0)
        if is_inexact(r.dtype):
            return torch.isfinite(r) & (a.to(torch.float64) != r.to(torch.float64))
        # the kernel computes in the promoted integer dtype and stores into its result's, which
        # wraps (int32 add_ of an int64 other, cumsum_ of int32 extremes): the reference likewise
        return a != r.to(torch.int64).to(a.dtype)
    cls = oracle._special_class
    rc = r.to(torch.float64)
    if a.dtype != torch.float64:
        rc = rc.to(a.dtype).to(torch.float64)
    a64 = a.to(torch.float64)
    ms = []
    for m in moved:
        if m is None or m.shape != r.shape or m.is_complex():
            continue
        m = m.detach().to(torch.float64)
        ms.append(m.to(a.dtype).to(torch.float64) if a.dtype != torch.float64 else m)
    edge = torch.zeros(a.shape, dtype=torch.bool)
    for m in ms:
        edge |= cls(m) != cls(rc)
    class_off = (cls(a64) != cls(rc)) & ~edge
    finite = torch.isfinite(a64) & torch.isfinite(rc)
    value_off = finite & ((a64 - rc).abs() > atol + rtol * rc.abs()) & values
    if ms:
        spread = torch.stack([(m - rc).abs() for m in ms]).amax(0).nan_to_num(0.0, 0.0, 0.0)
        lo = torch.stack([rc, *ms]).amin(0) - spread
        hi = torch.stack([rc, *ms]).amax(0) + spread
        value_off &= ~((a64 >= lo) & (a64 <= hi))
    sign_off = torch.zeros(a.shape, dtype=torch.bool)
    if sign:
        sign_off = finite & (a64 == 0) & (rc == 0) & (torch.signbit(a64) != torch.signbit(rc))
    return class_off | value_off | sign_off


def _complex_class(parts: torch.Tensor) -> torch.Tensor:
    """C99's classes of complex numbers (Annex G.3), given as (..., 2) real/imaginary pairs: 2
    for an infinity (a part infinite, even beside a NaN), 1 for a NaN (a part NaN, none
    infinite), 0 for a finite number. The parts beyond the class are not compared: without Annex
    G's recovery, which neither NumPy's arithmetic nor C++'s std::complex promises, the other
    part of an infinity is whatever the formula left there (inf*(1+1j) is nan+infj). Told apart
    only against an elementwise reference (a ufunc: each number from the same position's
    inputs, as C99 defines them): a product of many complex numbers with infinities among them
    (prod, cumprod, a matrix solve) is a NaN or an infinity by the order of its products."""
    inf = parts.isinf().any(-1)
    return torch.where(inf, 2, torch.where(parts.isnan().any(-1), 1, 0))


def _moved_inputs(dt: torch.dtype, direction: float):
    """A case transform: every nonzero finite floating input moved by one unit of `dt`. Zeros
    stay: a zero input is exact, and what an op gives at it (atan2(+0, -0) = pi) is semantics."""

    def move(t):
        if not isinstance(t, torch.Tensor) or not is_inexact(t.dtype) or t.is_complex() or t.layout != torch.strided:
            return t
        d = t.detach()
        unit = _spacing(d.to(torch.float64), dt).to(d.dtype)
        keep = (d == 0) | ~torch.isfinite(d)
        return torch.where(keep, d, d + direction * unit)

    return move


def _as_the_kernel_reads(case, result_dtype):
    """A transform of the float64 inputs into what the kernel computes with, by torch's promotion:
    an integer or bool input of a floating result is first that floating dtype (sin of int32
    2147483631 is sin(2147483648.0) in float32), a 0-dim integer tensor beside dimensioned
    integer ones is first their dtype (int32 % 0-dim int64 wraps the divisor to int32), and a
    dimensioned integer tensor is first the dimensioned ones' common dtype (int64 + alpha * int32
    forms alpha * other in int64, where NumPy's int32 product wraps); NumPy promotes none of
    these ways. The result is then the op's own integer dtype, wrapped (see _off)."""
    specs = case.tensor_specs()
    ints = [sp.torch_dtype for sp in specs if len(sp.shape) and not is_inexact(sp.torch_dtype)]
    dimmed = None
    for d in ints:
        dimmed = d if dimmed is None else torch.promote_types(dimmed, d)

    def tx(t):
        if not isinstance(t, torch.Tensor) or is_inexact(t.dtype) or t.layout != torch.strided:
            return t
        if result_dtype is not None and is_inexact(result_dtype):
            # a complex result (fft of int32) reads its integers in the real dtype under it
            return t.to(result_dtype.to_real() if result_dtype.is_complex else result_dtype).to(torch.float64)
        if dimmed is not None and t.dtype != torch.bool and dimmed != torch.bool and t.dtype != dimmed:
            return t.to(dimmed)
        return t

    return tx


# integer arguments of these names are positions, whatever values kind the case drew them with
# (a backward captured from its forward gets the forward's indices as plain integers)
INDEX_ARGUMENTS = frozenset({"index", "indices", "offsets", "pivots", "LU_pivots"})


def _promoted(case, promote, args, kwargs, op=None):
    """`promote` (_as_the_kernel_reads) applied to the arguments, except the tensors the case draws
    as indices or passes to an index argument: the kernel reads an index as the integer it is,
    where a value would be promoted to the result's dtype (index 746 is 744 in bfloat16)."""
    names = [a.name for a in op.arguments] if op is not None else []

    def index(spec, name) -> bool:
        if not isinstance(spec, TensorSpec):
            return False
        return spec.values == "index" or (name in INDEX_ARGUMENTS and not is_inexact(spec.torch_dtype))

    def name_at(i):
        return names[i] if i < len(names) else ""

    args = tuple(
        a if i < len(case.args) and index(case.args[i], name_at(i)) else oracle._map_tensors(a, promote)
        for i, a in enumerate(args)
    )
    return args, {k: v if index(case.kwargs.get(k), k) else oracle._map_tensors(v, promote) for k, v in kwargs.items()}


def _upcast(t):
    if isinstance(t, torch.Tensor) and is_inexact(t.dtype) and t.layout == torch.strided and not t.is_quantized:
        return t.detach().to(torch.complex128 if t.is_complex() else torch.float64)
    return t


def opinion(
    op, case, ref: Reference | None = None, result_dtype: torch.dtype | None = None, inputs=None
) -> Opinion | None:
    """The reference on `case` (float64 inputs); None where the op has no reference or it has
    nothing to say about this case. The reference on moved inputs is computed on first use."""
    ref = ref if ref is not None else reference_for(op)
    if ref is None:
        return None
    if ref.floating and any(
        sp.values != "index" and not is_inexact(sp.torch_dtype) for sp in case.tensor_specs()
    ):  # the kernel's integer arithmetic (its wrap) before a floating result is its own
        return None
    cpu = torch.device("cpu")
    promote = _as_the_kernel_reads(case, result_dtype)
    try:
        if inputs:
            # the case's inputs as the CPU reference received them, upcast as golden's are (its
            # tensors are drawn in the case's dtype and then cast): no second materialisation
            args, kwargs = (
                oracle._map_tensors(inputs[0], _upcast),
                {k: oracle._map_tensors(v, _upcast) for k, v in inputs[1].items()},
            )
        else:
            args, kwargs = case.materialize(lambda t: t.clone(), cpu, dtype=torch.float64)
        args, kwargs = _promoted(case, promote, args, kwargs, op)
        result, mask = evaluate(ref, op, args, kwargs)
    except Exception:  # noqa: BLE001 - a case the reference cannot be run on: no opinion, never a crash
        return None

    def run(c, tx=None):
        a2, k2 = c.materialize(lambda t: t.clone(), cpu, dtype=torch.float64)
        a2, k2 = _promoted(c, promote, a2, k2, op)
        if tx is not None:
            a2, k2 = oracle._map_tensors(a2, tx), {k: oracle._map_tensors(v, tx) for k, v in k2.items()}
        return evaluate(ref, op, a2, k2)[0]

    def rerun(dt):
        out = []
        for s in (1.0, -1.0):
            try:
                out.append(run(case, _moved_inputs(dt, s)))
            except Exception:  # noqa: BLE001 - no movement known there
                out.append(None)
        return out

    def rounded():
        dt = result_dtype if result_dtype is not None and result_dtype.is_floating_point else None
        c = _scalars_rounded(op, case, dt) if dt is not None and dt != torch.float64 else None
        try:
            return run(c) if c is not None else None
        except Exception:  # noqa: BLE001
            return None

    return Opinion(ref, result, mask, _rerun=rerun, _rounded=rounded)


def _scalars_rounded(op, case, dt):
    """`case` with its floating Python scalars (Scalar, float) rounded to `dt`, or None."""
    names = {a.name for a in op.arguments if a.base_type in ("Scalar", "float", "Scalar?", "float?")}
    if not names:
        return None
    arg_names = [a.name for a in op.arguments]
    fix = lambda n, v: oracle._round_scalar(v, dt) if n in names and isinstance(v, float) else v  # noqa: E731
    args = tuple(fix(arg_names[i] if i < len(arg_names) else "", v) for i, v in enumerate(case.args))
    kwargs = {k: fix(k, v) for k, v in case.kwargs.items()}
    if args == tuple(case.args) and kwargs == dict(case.kwargs):
        return None
    return dataclasses.replace(case, args=args, kwargs=kwargs)


# -- the second opinion in the verdict -------------------------------------------------------


def second_opinion(phase, device, v, *, tol, plain: bool, inputs=None):
    """`v`, the verdict of the forward phase on `device`'s observed value, with the documented
    invariants (conform.judge.invariants) and the independent reference's say (see the module
    docstring, 3). The reference runs where it can change the
    verdict: every case on the plain CPU; on an accelerator, where the device failed or passed
    only as a precision edge."""
    op, case = phase.op, phase.case
    bad = failures(v.records)
    if any(r.kind in oracle.META_KINDS for r in bad):
        return v
    broken = invariants.records(op, inputs, device[0])
    if broken:
        if not plain and not bad and phase.reference is not None and invariants.records(op, inputs, phase.reference[0]):
            # parity first (rule (1a)): the device gave what the CPU's kernel gives, which breaks it too
            shared = oracle.Finding(oracle.REFERENCE, phase.name, f"the CPU's kernel too: {broken[0].message}")
            return dataclasses.replace(v, finding=shared)
        return dataclasses.replace(v, records=list(v.records) + broken, finding=None)
    edge = v.finding is not None and v.finding.kind == oracle.PRECISION_EDGE
    if not plain and not bad and not edge:
        return v
    ref = reference_for(op)
    if ref is None or phase.reference is None:
        return v
    dts = [t.dtype for t in leaves(phase.reference[0]) if isinstance(t, torch.Tensor)]
    op_ = opinion(op, case, ref, dts[0] if dts else None, inputs=inputs)
    if op_ is None:
        return v
    golden = phase.golden
    expectation = golden[0] if golden is not None else phase.reference[0]
    result_dtype = dts[0] if dts else None
    unit = oracle.rounding_dtype(case) or (
        result_dtype if result_dtype is not None and result_dtype.is_floating_point else None
    )
    # golden (float64) against the reference: first without movement (cheap, and enough where
    # they agree), then with the reference's movement over one float64 unit of the inputs
    # golden upcasts floating inputs only: for integer inputs it computes in the result's dtype,
    # whose rounding (an FFT of int32 values near 2**31) the reference's moved inputs do not
    # model; there only special values and signs of zero speak
    in_float64 = golden is not None and _floating_inputs(op, case, inputs)
    values = in_float64 or not any(is_inexact(t.dtype) for t in leaves(expectation) if isinstance(t, torch.Tensor))
    quick = op_.off(expectation, tol, unit=None, values=values)
    if quick is None:
        return v
    if not any(bool(m.any()) for m in quick):
        if not plain and edge and not bad:
            # golden and the reference agree, and golden's conditioning excused the device: the
            # reference's own conditioning keeps zero inputs exact (atan2(+0, -0) is pi, whatever
            # a nudge across zero gives), and the device must match it where golden does
            off = op_.off(device[0], tol, unit=unit or torch.float64)
            if off is not None and any(bool(m.any()) for m in off):
                rec = op_.record(device[0], off)
                msg = f"the device disagrees with golden float64 and the independent reference ({ref.origin}) alike"
                rec = dataclasses.replace(rec, message=f"{msg}: {rec.message}")
                return dataclasses.replace(v, records=list(v.records) + [rec], finding=None)
        return v
    wide = torch.float64 if in_float64 else unit
    golden_off = op_.off(expectation, tol, unit=wide, values=values)
    if golden_off is None or not any(bool(m.any()) for m in golden_off):
        return v
    said = f"independent reference ({ref.origin})"
    golden_rec = op_.record(expectation, golden_off)
    why = f" ({ref.why})" if ref.why else ""
    # the side under judgement against the reference, where golden disagrees with it; moved by
    # one unit of the case's dtype (the conditioning of a result computed in that dtype)
    agree = [~m for m in golden_off]
    device_off = op_.off(device[0], tol, unit=unit or torch.float64, skip=agree, values=values)
    if device_off is None:
        return v
    device_wrong = any(bool(m.any()) for m in device_off)
    if plain:
        if device_wrong:
            rec = op_.record(device[0], device_off)
            rec = dataclasses.replace(rec, message=f"{said} disagrees with the CPU kernel: {rec.message}")
            out = dataclasses.replace(v, records=list(v.records) + [rec])
            if not bad:
                out.attribution = f"; golden float64 (the same kernel) sides with the CPU{why}"
            return out
        if bad:
            return v
        f = oracle.Finding(
            oracle.REFERENCE,
            phase.name,
            f"golden float64 disagrees with the {said}; the CPU in the case's dtype agrees with it: "
            f"{golden_rec.message}{why}",
            v.device_golden_err,
            v.ref_golden_err,
        )
        return dataclasses.replace(v, finding=f)
    if device_wrong:
        return v
    # the device is right where golden is not: checked everywhere else too (golden decided
    # those elements, and the verdict's records say how the device fared there)
    everywhere = op_.off(device[0], tol, unit=unit or torch.float64)
    if everywhere is None or any(bool(m.any()) for m in everywhere):
        return v
    f = oracle.Finding(
        oracle.CPU_WRONG,
        phase.name,
        f"the CPU kernel is wrong here: the device matches the {said}, golden float64 (the CPU's "
        f"kernel) does not: {golden_rec.message}{why}",
        v.device_golden_err,
        v.ref_golden_err,
    )
    return dataclasses.replace(v, records=[r for r in v.records if r.ok], finding=f, attribution="")


def _floating_inputs(op, case, inputs) -> bool:
    """Whether some floating tensor is an input of the case (not an out= argument): golden runs
    those in float64; with integer inputs alone it computes in the result's own dtype."""
    outs = {a.name for a in op.out_args}
    if inputs:
        bound = bind_arguments(op, *inputs)
        return any(
            isinstance(t, torch.Tensor) and is_inexact(t.dtype)
            for name, v in bound.items()
            if name not in outs
            for t in leaves(v)
        )
    return any(is_inexact(sp.torch_dtype) for sp in case.tensor_specs())


@functools.cache
def origin_of(qualname: str) -> str:
    """The origin of `qualname`'s reference ("numpy.arctan2"), or "" (coverage's column). A
    factorization without one is held to its documented contract (conform.judge.factorizations),
    a second opinion of its own."""
    try:
        op = opdb.lookup(qualname)
        ref = reference_for(op)
    except Exception:  # noqa: BLE001 - an op of another torch: none known
        return ""
    if ref is None and op.base_name in factorizations.NAMES:
        return "factorizations (documented contract)"
    return ref.origin if ref is not None else ""
