"""Gradients held against finite differences and forward-mode AD, not autograd's formulas alone.

Golden's gradient is autograd's backward formula run in float64: a wrong formula is wrong in
every dtype, and golden shares it. gradcheck's fast mode needs no formula: for one random
direction u of the inputs and v of the outputs, v^T J u is a number that central differences
of the forward in float64 give as well as the backward (<J^T v, u>) and forward-mode AD
(<v, J u>). The forward is what conform already judges; if it is right, so is this number.
"""

# Conditioning (the ∇Fuzz filter): finite differences are read at two steps, each both ways
# (f(x + h u) - f(x) and f(x) - f(x - h u)). At a kink or a jump the two one-sided differences
# part; near a pole the two steps do. A formula is called wrong only when its value is far from
# the central difference compared with all that spread, and the forward is finite at every
# point read. A complex tensor is a pair of real ones (its real and imaginary parts): u and v
# are complex, and every product of two of them is the real inner product Re(conj(a) b), which
# is what autograd's complex convention computes (the gradient of a real loss L is dL/dx + i
# dL/dy, and a grad_output v weighs a result f by Re(conj(v) f)), holomorphic or not.
#
# `directional` needs torch only: reproduction scripts embed its source.

from __future__ import annotations

import math

import numpy
import torch
import torch.utils._pytree as pytree

from conform.judge import references
from conform.judge.compare import leaves as result_leaves
from conform.judge.trees import bind_arguments
from conform.judge.verdict import RANGE_TOP

_WIDE = (torch.float64, torch.complex128)  # golden's dtypes: the tensors finite differences move
STEPS = (1e-6, 1e-5)  # relative to each element's magnitude (at least 1)
SPREAD = 10.0  # a formula is off when its error exceeds this many times the differences' spread
FLOOR = 1e-5  # ... and this share of the sum of |v_j| |f_j'| (float64 rounding never gets near it)
HERMITIAN_KINDS = ("spd", "indefinite")  # generators.tensor's Hermitian (symmetric) matrices
# elements beyond this are not moved: a relative step there spans integers, and floor, the identity
# on float64's integers at 1e22, would difference to a slope of 1 where its derivative is 0
LARGEST_MOVED = 2.0**16


def directional(fn, xs, vs, seed, hermitian=(), within=None, derivative=False):
    """v^T J u of `fn` at `xs` (float64 tensors) three ways. `fn(list of tensors)` returns the
    outputs (float64) that `vs` weigh. Returns a dict: "fd" (central difference), "spread" (how
    far the one-sided differences and the two steps disagree), "scale", "vjp" and "jvp" (None
    where forward-mode AD is not supported), "bad" (a reason, or "" when all agree), or None
    where the forward is not finite at a point read. `hermitian[i]`: input i is a Hermitian
    (symmetric) matrix, and its direction stays one: an op that reads one triangle of it defines
    its gradient as the Hermitian part (cholesky, eigvalsh), which only such directions meet.
    `within`: the function whose ignored triangles the directions leave alone (`fn` by default;
    the forward, where `fn` is its backward). `derivative`: `fn` is itself a derivative (the
    backward, the forward-mode formula), whose every output counts, and one autograd does not
    track is taken as constant (a formula computed from detached values has a zero derivative
    there, which finite differences then contradict); else outputs autograd does not track are
    not differentiable, and not read."""

    def dot(a, b):  # the real inner product: a complex tensor is its real and imaginary parts
        a, b = a.detach(), b.detach()
        if a.is_complex() or b.is_complex():
            a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
        return float((a * b).sum())

    base, us = directions(within or fn, xs, seed, hermitian)
    leaves = [x.requires_grad_(True) for x in (b.clone() for b in base)]
    with torch.enable_grad():
        outs = fn(leaves)
    keep = list(range(len(outs))) if derivative else [i for i, o in enumerate(outs) if o.requires_grad]
    if not keep:
        return None
    # `vs` weigh every output, or the differentiable ones only
    vs = [vs[i] for i in keep] if len(vs) == len(outs) else list(vs)
    if len(vs) != len(keep) or any(outs[i].shape != v.shape for i, v in zip(keep, vs)):
        return None  # the result's structure depends on the values (nonzero, unique)
    tracked = [(outs[i], v) for i, v in zip(keep, vs) if outs[i].requires_grad]
    grads = (
        torch.autograd.grad([o for o, _ in tracked], leaves, [v for _, v in tracked], allow_unused=True)
        if tracked
        else [None] * len(leaves)  # (a derivative autograd does not track is constant: zero)
    )
    whole = fn

    def fn(ins):  # the differentiable outputs only
        found = whole(ins)
        return [found[i] for i in keep]

    with torch.no_grad():
        f0 = fn(base)
        if not all(bool(torch.isfinite(f).all()) for f in f0):
            return None
        diffs = []
        for h in STEPS:
            fp = fn([x + h * u for x, u in zip(base, us)])
            fm = fn([x - h * u for x, u in zip(base, us)])
            if not all(bool(torch.isfinite(f).all()) for f in fp + fm):
                return None
            plus = sum(dot(v, a - b) for v, a, b in zip(vs, fp, f0)) / h
            minus = sum(dot(v, b - c) for v, b, c in zip(vs, f0, fm)) / h
            scale = sum(float((v.abs() * (a - c).abs()).sum()) for v, a, c in zip(vs, fp, fm)) / (2 * h)
            diffs.append((plus, minus, scale))
    central = [(p + m) / 2 for p, m, _ in diffs]
    # float64 rounding of f itself, magnified by the smaller step: below it a difference is noise
    # (atan2 of 1e30s moves f by less than its ulp, and the difference reads 0)
    rounding = 8 * torch.finfo(torch.float64).eps * sum(float((v.abs() * f.abs()).sum()) for v, f in zip(vs, f0))
    spread = sum(abs(p - m) for p, m, _ in diffs) + abs(central[0] - central[1]) + rounding / STEPS[0]
    scale = max(s for _, _, s in diffs)
    out = {"fd": central[0], "spread": spread, "scale": scale, "vjp": None, "jvp": None, "bad": "", "us": us}

    out["vjp"] = sum(dot(gr[u != 0], u[u != 0]) if gr is not None else 0.0 for gr, u in zip(grads, us))
    tangents = None
    try:
        # inside the function: reproduction scripts embed its source (conform.report.repro)
        import torch.autograd.forward_ad as fwAD

        with fwAD.dual_level():
            duals = [fwAD.make_dual(x, u) for x, u in zip(base, us)]
            tangents = [fwAD.unpack_dual(o).tangent for o in fn(duals)]
    except (RuntimeError, NotImplementedError):
        pass  # no forward-mode formula for some op on the way
    if derivative and (tangents is None or any(t is None for t in tangents)):
        try:  # forward AD nests in torch.func.jvp only (the forward-mode formula's own derivative)
            tangents = list(torch.func.jvp(lambda *ins: tuple(fn(list(ins))), tuple(base), tuple(us))[1])
        except (RuntimeError, NotImplementedError):
            pass
    if tangents is not None and all(t is not None for t in tangents):
        out["jvp"] = sum(dot(v, t) for v, t in zip(vs, tangents))

    def off(value):
        if value is None:
            return False
        if not math.isfinite(value):
            return spread <= 1e-3 * scale  # a NaN or inf formula where the differences are smooth
        err = abs(value - central[0])
        # the differences must agree with themselves first (a step spanning periods of sin(1e22)
        # gives noise of the function's own size)
        return spread <= 1e-2 * scale and err > SPREAD * spread and err > FLOOR * scale

    if off(out["vjp"]):
        out["bad"] = "vjp"
    elif off(out["jvp"]):
        out["bad"] = "jvp"
    return out


def directions(fn, xs, seed, hermitian=()):
    """(point, direction) of `directional` at `xs`: the inputs, a matrix `fn` reads one triangle
    of given as that triangle (_read_triangles), and a random direction u (one tensor per input,
    scaled by the input's magnitude), Hermitian for the Hermitian inputs, inside the triangles
    `fn` reads, zero at elements that are not finite or beyond LARGEST_MOVED."""
    g = torch.Generator().manual_seed(seed)
    us = []
    for i, x in enumerate(xs):
        u = torch.randn(x.shape, generator=g, dtype=x.dtype) * x.detach().abs().clamp_min(1.0)
        if i < len(hermitian) and hermitian[i] and x.dim() >= 2 and x.shape[-1] == x.shape[-2]:
            u = (u + u.mT.conj()) / 2
        moved = torch.isfinite(x.detach()) & (x.detach().abs() <= LARGEST_MOVED)
        us.append(torch.where(moved, u, torch.zeros_like(u)))
    base = [x.detach() for x in xs]
    _read_triangles(fn, base, us, hermitian)
    return base, us


def _read_triangles(reads, base, us, hermitian) -> None:
    """A matrix input the op reads one triangle of (cholesky_inverse's factor, triangular_solve's
    matrix) is given as that triangle, and its direction stays in it, as PyTorch's own gradient
    tests wrap such inputs in triu or tril: the other triangle's gradient is a convention, and a
    backward may read entries its forward ignores. In place on `base` and `us`; `reads` is the
    function whose results must not move (the forward)."""
    with torch.no_grad():
        r0 = None
        for i, x in enumerate(base):
            if x.dim() < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2 or i < len(hermitian) and hermitian[i]:
                continue
            n = x.shape[-1]
            every = torch.ones(n, n, dtype=torch.bool)
            # (the diagonal too: a unitriangular solve reads ones there)
            for mask in (every.triu(1), every.tril(-1), torch.eye(n, dtype=torch.bool)):
                off = torch.where(mask, us[i], torch.zeros_like(us[i]))
                if not bool(off.any()):
                    continue
                r0 = reads(base) if r0 is None else r0
                # (a result that is the input's copy, triangular_solve's cloned_coefficient, reads all)
                results = [k for k, o in enumerate(r0) if o.shape != x.shape or not torch.equal(o, x)]
                moved = list(base)
                moved[i] = base[i] + STEPS[1] * off
                found = reads(moved)
                if not all(torch.equal(r0[k], found[k]) for k in results):
                    continue
                us[i] = us[i] - off
                moved[i] = torch.where(mask, torch.zeros_like(base[i]), base[i])
                found = reads(moved)
                if all(torch.equal(r0[k], found[k]) for k in results):
                    base[i] = moved[i]


def message(r) -> str:
    """What a finding says, for a result of `directional` that is off."""
    fd, vjp, jvp = r["fd"], r["vjp"], r["jvp"]
    if r["bad"] == "vjp":
        head = "float64 finite differences disagree with autograd's formula"
        got = vjp
    else:
        head = "float64 finite differences disagree with forward-mode AD"
        got = jvp
    return (
        f"{head}: v^T J u is {fd:.6g} by central differences (spread {r['spread']:.2g} over steps "
        f"{STEPS[0]:g} and {STEPS[1]:g}, both ways) and {got:.6g} by the "
        f"{'backward (vjp)' if r['bad'] == 'vjp' else 'forward-mode (jvp)'} formula"
        + (f"; forward-mode AD gives {jvp:.6g}" if r["bad"] == "vjp" and jvp is not None else "")
    )


def case_function(op, case, vs=None):
    """(fn, xs, vs) for `directional` on one case of `op`, in float64 (complex128) on the CPU,
    or None where the check does not apply (no floating input or output)."""

    if _documented_gradient(op, case):
        return None
    args, kwargs = case.materialize(lambda t: t.clone(), torch.device("cpu"), dtype=torch.float64)
    flat, spec = pytree.tree_flatten((args, kwargs))
    slots = [
        i for i, t in enumerate(flat) if isinstance(t, torch.Tensor) and t.dtype in _WIDE and t.layout == torch.strided
    ]
    if not slots or op.family == "linalg" and any(flat[i].is_complex() for i in slots):
        # complex linear algebra differentiates on a manifold no random complex direction stays on:
        # a Hermitian input read through one triangle (cholesky's gradient is the Hermitian part),
        # a Cholesky factor's real diagonal, eigenvectors and singular vectors up to a phase
        return None
    call = op.resolve()

    def fn(xs):
        values = list(flat)
        for i, x in zip(slots, xs):
            values[i] = x
        a, k = pytree.tree_unflatten(values, spec)
        result = call(*a, **k)
        return [t for t in result_leaves(result) if isinstance(t, torch.Tensor) and t.dtype in _WIDE]

    xs = [flat[i].detach() for i in slots]
    try:
        with torch.no_grad():
            outs = fn(xs)
    except (RuntimeError, NotImplementedError, ValueError, TypeError, IndexError):
        # no float64 kernel (mkldnn and NNPACK convolutions, quantize_per_tensor_dynamic): the
        # golden run found its own expectation; finite differences have no opinion
        return None
    if not outs:
        return None
    if vs is None:
        g = torch.Generator().manual_seed(case.seed + 2)
        vs = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
    return fn, xs, vs, hermitian_inputs(case, slots)


def _documented_gradient(op, case) -> bool:
    """Whether the op's documentation defines its gradient for these arguments as something other
    than the derivative (opdb hint `documented_gradient`, an expression over the case's non-tensor
    arguments: embedding's padding_idx row "does not contribute to the gradient", though the
    forward reads it): finite differences have no say there."""
    expr = (op.rules.hints or {}).get("documented_gradient")
    if not expr:
        return False
    bound = {k: v for k, v in bind_arguments(op, case.args, case.kwargs).items() if not hasattr(v, "shape")}
    defaults = {a.name: None for a in op.arguments if a.name not in bound}
    try:
        return bool(eval(expr, {"__builtins__": {}}, {**defaults, **bound}))  # noqa: S307 - reviewed opdb rules
    except (NameError, TypeError):
        return False


def hermitian_inputs(case, slots) -> list[bool]:
    """Per floating input (`slots`: their positions among the materialized case's leaves), whether
    it was drawn Hermitian (symmetric): the kinds generators.tensor makes as m m^H + n I."""
    drawn = pytree.tree_leaves((case.args, case.kwargs))
    return [i < len(drawn) and getattr(drawn[i], "values", None) in HERMITIAN_KINDS for i in slots]


def check(op, case, vs=None):
    """`directional` on one case (`vs`: the outputs' weights, seeded ones by default), or None
    where it does not apply or cannot conclude."""
    made = case_function(op, case, vs)
    if made is None:
        return None
    fn, xs, vs, hermitian = made
    try:
        return _either_convention(lambda h: directional(fn, xs, vs, case.seed + 3, h), hermitian)
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None  # a perturbed input the op rejects (out of a domain it checks): no opinion


def _either_convention(run, hermitian):
    """`run(hermitian)` with Hermitian directions for the Hermitian inputs, and where that is off,
    with directions in the triangle the op reads instead, whose verdict stands: an op that reads
    one triangle of a Hermitian input may define its gradient by either convention (cholesky's is
    the Hermitian part, cholesky_inverse's lives in the factor's triangle). The result says which
    it used ("hermitian"), so that a reproduction script draws the same directions."""
    r = run(hermitian)
    if r is not None and r["bad"] and any(hermitian):
        other = run(())
        if other is None or not other["bad"]:  # (off both ways: the Hermitian run is the one shown)
            r, hermitian = other, ()
    if r is not None:
        r["hermitian"] = list(hermitian)
    return r


# -- the derivative of the backward ---------------------------------------------------------------
#
# A backward formula is itself differentiated when a model takes a Hessian-vector product, a
# gradient penalty or a meta-gradient, and its derivative (double backward, forward-over-reverse)
# is another formula written by hand (OpInfo keeps expected failures of both). The first-order
# gradient x -> J(x)^T v, which `directional` has just held to finite differences, is a function
# like any other: `directional` of it holds its reverse-mode and forward-mode derivatives to
# central differences of it, in float64, with the same conditioning.


def backward_function(fn, vs):
    """x -> autograd's J(x)^T v of `fn` (the gradient of each input that has one, zeros where an
    input is unused), differentiable in both modes: `directional`'s function of the backward.
    `vs` weigh every output, or the differentiable ones only (as in `directional`)."""

    def backward(xs):
        taped = torch.is_grad_enabled()  # finite differences read it under no_grad: values alone
        with torch.enable_grad():
            ys = [x if x.requires_grad else x.clone().requires_grad_(True) for x in xs]
            outs = fn(ys)
            differentiable = [o for o in outs if o.requires_grad]
            weights = [v for o, v in zip(outs, vs) if o.requires_grad] if len(vs) == len(outs) else list(vs)
            if len(weights) != len(differentiable):
                raise ValueError("the outputs' weights do not match the differentiable outputs")
            if not differentiable:
                return [torch.zeros_like(y) for y in ys]
            gs = torch.autograd.grad(differentiable, ys, weights, create_graph=True, allow_unused=True)
        return [torch.zeros_like(y.detach()) if g is None else g if taped else g.detach() for g, y in zip(gs, ys)]

    return backward


def second_order(op, case, vs=None):
    """`directional` of the backward of one case (`vs`: the outputs' weights of the first-order
    check), or None where it does not apply or cannot conclude: where the backward does not
    depend on the inputs (a linear op), or has no derivative (once-differentiable formulas raise)."""
    made = case_function(op, case, vs)
    if made is None:
        return None
    fn, xs, vs, hermitian = made
    g = torch.Generator().manual_seed(case.seed + 5)
    ws = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in xs]
    try:
        return _either_convention(
            lambda h: directional(backward_function(fn, vs), xs, ws, case.seed + 7, h, within=fn, derivative=True),
            hermitian,
        )
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None  # no derivative of the backward, or a perturbed input out of the op's domain


def second_order_message(r) -> str:
    """What a finding of `second_order` or `forward_second_order` says."""
    text = message(r).replace("v^T J u", "w^T H u")
    if not r.get("forward"):
        return "the derivative of the backward: " + text
    text = text.replace("autograd's formula", "autograd's derivative of it").replace(
        "forward-mode AD gives", "forward-over-forward gives"
    )
    return "the derivative of the forward-mode formula (its J u): " + text.replace(
        "the backward (vjp) formula", "autograd through forward-mode AD (reverse-over-forward)"
    ).replace("the forward-mode (jvp) formula", "forward-over-forward")


# The forward-mode formula (jvp) is a third one written by hand, and its own derivative is what a
# Hessian by forward-over-forward or reverse-over-forward meets (torch.func.hessian is jacfwd of
# jacrev; torch.func.jvp of jvp). The first-order jvp x -> J(x) u is a function like the backward:
# `directional` holds its reverse-mode derivative (autograd through torch.func.jvp,
# reverse-over-forward) and its forward-mode one (torch.func.jvp of it, forward-over-forward:
# torch.autograd.forward_ad does not nest) to central differences of it.


def tangent_function(fn, us):
    """x -> forward-mode AD's J(x) u of `fn` (one tangent per output), differentiable by autograd:
    `directional`'s function of the forward-mode formula."""

    def tangent(xs):
        _, tangents = torch.func.jvp(lambda *ins: tuple(fn(list(ins))), tuple(xs), tuple(us))
        return list(tangents)

    return tangent


def forward_second_order(op, case, vs=None):
    """`directional` of the forward-mode formula of one case along a random direction (`vs`: the
    outputs' weights of the first-order check), or None where it does not apply or cannot
    conclude: no forward-mode formula, or one that does not depend on the inputs (a linear op)."""
    made = case_function(op, case, vs)
    if made is None:
        return None
    fn, xs, vs, hermitian = made

    def run(h):
        tangent = tangent_function(fn, directions(fn, xs, case.seed + 9, h)[1])
        r = directional(tangent, xs, vs, case.seed + 11, h, within=fn, derivative=True)
        if r is not None:
            r["forward"] = True
        return r

    try:
        return _either_convention(run, hermitian)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None  # no forward-mode formula, or a perturbed input out of the op's domain


def device_agrees(r, grads: list, rtol: float) -> bool:
    """Whether gradients (one per input `directional` perturbed, in its order) give the central
    difference in its direction within `rtol` of its scale (and the differences' spread)."""
    if len(grads) != len(r["us"]):
        return False
    value = 0.0
    for g, u in zip(grads, r["us"]):
        g = g.detach().to(u.dtype)[u != 0]
        if g.is_complex():
            g, w = torch.view_as_real(g), torch.view_as_real(u[u != 0])
        else:
            w = u[u != 0]
        value += float((g * w).sum())
    return math.isfinite(value) and abs(value - r["fd"]) <= rtol * r["scale"] + SPREAD * r["spread"]


# -- an equivalent API's gradient, where finite differences cannot reach ------------------------
#
# At an infinite input no difference moves the forward, so `directional` has no opinion, and
# golden's gradient is autograd's own formula: d logsumexp([inf, 1]) is (nan, 0) by the formula
# (inf - inf inside it), where softmax, logsumexp's gradient, has the limit (1, 0). The opdb hint
# `gradient_equivalent` gives, per input, the vector-Jacobian product by another API (an
# expression over the schema's argument names and `grad`, the output's weights, evaluated in
# float64 like an independent reference): held against golden's gradient elementwise, special
# values exactly, where some input is infinite and the equivalent is not NaN there.

EQUIVALENT_RTOL = 1e-6  # both sides are float64: far above their rounding, far below a wrong formula


def equivalent(op, case, vs=None):
    """{"bad": a message or "", "grads": {input name: the equivalent's gradient}} for a case of
    an op with the `gradient_equivalent` hint and an infinite input; None where it does not apply
    or cannot be evaluated."""
    hint = (getattr(op.rules, "hints", None) or {}).get("gradient_equivalent")
    if not hint:
        return None
    args, kwargs = case.materialize(lambda t: t.clone(), torch.device("cpu"), dtype=torch.float64)
    bound = bind_arguments(op, args, kwargs)
    for a in op.arguments:
        if a.name not in bound and a.default is not None and not a.is_out:
            bound[a.name] = references._default(a)
    names = [n for n in hint if isinstance(bound.get(n), torch.Tensor) and bound[n].dtype == torch.float64]
    if not names or not any(bool(torch.isinf(bound[n]).any()) for n in names):
        return None  # finite inputs: finite differences decide
    leaves_ = {n: bound[n].detach().clone().requires_grad_(True) for n in names}
    swap = {id(bound[n]): leaves_[n] for n in names}  # the case's own tensors, by identity
    call = op.resolve()
    try:
        with torch.enable_grad():
            out = call(*[swap.get(id(a), a) for a in args], **{k: swap.get(id(v), v) for k, v in kwargs.items()})
            outs = [t for t in result_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
            if vs is None or not outs or outs[0].shape != vs[0].shape:
                return None
            golden = torch.autograd.grad(outs[0], list(leaves_.values()), vs[0], allow_unused=True)
    except (RuntimeError, TypeError, ValueError):
        return None
    values = {k: references._to_numpy(v) for k, v in bound.items()}
    values["grad"] = vs[0].detach().to(torch.float64).numpy()
    grads, bad = {}, ""
    for (name, gold), want_leaf in zip(zip(names, golden), leaves_.values()):
        try:
            with numpy.errstate(all="ignore"):
                want = eval(hint[name], references.namespace(), dict(values))  # noqa: S307 - reviewed opdb rules
            want = torch.as_tensor(numpy.asarray(want, dtype=numpy.float64))
            want = torch.broadcast_to(want, want_leaf.shape)
        except Exception:  # noqa: BLE001 - the expression rejects the case: no opinion
            return None
        grads[name] = want
        gold = torch.zeros_like(want) if gold is None else gold.detach()
        off = _equivalent_off(gold, want)
        if not bad and bool(off.any()):
            idx = tuple(int(i) for i in off.nonzero()[0]) if off.dim() else ()
            bad = (
                f"autograd's formula disagrees with the gradient of an equivalent API ({hint[name]}) at an "
                f"infinite input, where finite differences cannot move the forward: "
                f"{gold[idx].item()!r} vs {want[idx].item()!r} expected at index {idx} [grad[{name}]]"
            )
    return {"bad": bad, "grads": grads}


def _equivalent_off(gold: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Where golden's gradient and the equivalent's part: another special value, or finite values
    beyond EQUIVALENT_RTOL of the gradient's scale; nothing where the equivalent is NaN."""
    decided = ~torch.isnan(want)
    special = torch.isnan(gold) | (torch.isinf(gold) != torch.isinf(want))
    special |= torch.isinf(gold) & torch.isinf(want) & (torch.sign(gold) != torch.sign(want))
    finite = torch.isfinite(gold) & torch.isfinite(want)
    value = finite & ((gold - want).abs() > EQUIVALENT_RTOL * max(_finite_scale(want), 1e-300))
    return (special | value) & decided


def _finite_scale(t: torch.Tensor) -> float:
    finite = t[torch.isfinite(t)]
    return float(finite.abs().max()) if finite.numel() else 0.0


def equivalent_agrees(r, grads: dict, rtol: float) -> bool:
    """Whether a device's gradients match the equivalent's within `rtol` of their scale."""
    for name, want in r["grads"].items():
        got = grads.get(name)
        if got is None:
            return False
        got = got.detach().to(torch.float64)
        if got.shape != want.shape:
            return False
        off = _equivalent_off(got, want)
        finite = torch.isfinite(got) & torch.isfinite(want)
        near = (got - want).abs() <= rtol * max(_finite_scale(want), 1e-300)
        if bool((off & ~(finite & near)).any()):
            return False
    return True


# -- each element of an elementwise op's gradient, against float64 -----------------------------
#
# The backward's comparison is scale-relative, as the forward's: a float32 gradient of 0 where
# float64 gives 4e-8 passes when the largest element is near 1. For an elementwise op each
# gradient element is one grad_output times one local derivative at the same, exactly
# representable input: rounding cannot make it zero, infinite or off by a factor of GROSS where
# the float64 value is a normal number of the case's dtype. Formulas written in terms of the
# result do (sigmoid's y (1 - y) once y rounds to 1, tanh's 1 - y**2, expm1's y + 1), and so do
# intermediates bigger than the derivative (exp2's grad * 2**x before ln 2). Golden is float64,
# where those formulas still resolve what the dtype has lost. Conditioning: an element is judged
# only where float64's gradient moves by less than MOVES of itself when the inputs move by one
# unit of the case's dtype either way (near a root of the derivative, or at a kink, it is not).
#
# `gross_elements` needs torch only: reproduction scripts embed its source.

GROSS = 4.0
MOVES = 0.25
# the moves (verdict._nudge's direction and bit): all inputs up and down, then neighbours and
# successive inputs apart (a - b, where a uniform move cancels); and all inputs scaled by
# 1 + 2**-40, no move of the dtype's: sin(pi x) read one unit of float32 away from x = 1e21 moves
# by a multiple of its period and looks stable, where float64's value is noise
MOVES_BY = ((1.0,), (-1.0,), (1.0, 0), (-1.0, 0), ("scale", 2.0**-40))


def gross_elements(got, want, up, down, tiny, huge, top=math.inf):
    """Where `got` (the result or one input's gradient, in the case's dtype) is grossly off
    float64's `want`: NaN, infinite, zero, of the other sign or beyond a factor GROSS, at the
    elements where `want` lies between `tiny` and `huge` and float64's values with the inputs
    moved (`up`, `down`) stay within MOVES of it; an infinite `got` where `want` is `top` or more
    is the range's top (the verdict rule's (5e)), not judged."""
    w, g, u, d = (t.detach().to(torch.float64).cpu() for t in (want, got, up, down))
    a = w.abs()
    decided = torch.isfinite(w) & (a >= tiny) & (a <= huge) & ~(~torch.isfinite(g) & (a >= top))
    decided &= ((u - w).abs() <= MOVES * a) & ((d - w).abs() <= MOVES * a)
    ratio = g / w
    off = ~torch.isfinite(g) | (ratio > GROSS) | (ratio < 1 / GROSS)
    return decided & off


def range_top(dtype: torch.dtype, edge_inputs: bool) -> float:
    """`gross_elements`' `top`: with inputs beyond the square root of the largest value, an
    overflow at the range's top is a precision edge, as the verdict rule's (5e) has it (in
    float16 any overflow); else none is."""
    if not edge_inputs:
        return math.inf
    return 0.0 if dtype == torch.float16 else float(torch.finfo(dtype).max) * RANGE_TOP


def normal_range(dtype: torch.dtype) -> tuple[float, float]:
    """(tiny, huge) for `gross_elements`: inside the dtype's normal numbers, where a product's
    rounding neither underflows nor overflows, and 2**20 above float32's smallest normal number,
    where the float32 arithmetic of the narrower dtypes' kernels flushes an intermediate
    (sigmoid(-88) below silu's derivative): an underflow that early is left to the forward."""
    fi = torch.finfo(dtype)
    tiny = float(fi.smallest_normal) * 2
    if dtype != torch.float64:
        tiny = max(tiny, float(torch.finfo(torch.float32).smallest_normal) * 2.0**20)
    return tiny, float(fi.max) / 2


def elementwise_message(name: str, got, want, mask, dtype: torch.dtype) -> str:
    """What a finding says for `gross_elements`' mask of the values `name` (grad[self], result)."""
    idx = tuple(int(i) for i in mask.nonzero()[0]) if mask.dim() else ()
    g, w = got.detach().cpu()[idx].item(), want.detach().cpu()[idx].item()
    where = f" at index {idx}" if idx else ""
    values = "gradient" if name.startswith("grad") else "result"
    return (
        f"{name}{where} is {g!r} where float64 gives {w!r}, a normal {str(dtype).removeprefix('torch.')} "
        f"number ({int(mask.sum())} of {mask.numel()} elements): each element of an elementwise op's "
        f"{values} depends on exact inputs at its own position, so rounding cannot make it zero, infinite, "
        f"of the other sign or off by {GROSS:g}x, and float64's moves by under {MOVES:.0%} when the inputs "
        f"move by one unit"
    )
