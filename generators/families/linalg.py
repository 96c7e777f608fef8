"""Linear algebra: well-conditioned (batched) square matrices, factorisations and their solves."""

from __future__ import annotations

import dataclasses

from generators import memo
from generators.case import TensorSpec
from generators.families.common import _tensor
from generators.families.registry import _FAMILY_BUILDERS, family

# Ops that must refuse a matrix they cannot factor (torch raises: "linalg.cholesky: The factorization
# could not be completed because the input is not positive-definite", "linalg.inv: The diagonal
# element 2 is zero ... singular"), and the kind of matrix each must refuse. One case in four draws
# one, so that a device that returns a result for it (a dropped LAPACK info) is a missing_error;
# the _ex overloads report the status instead and return undefined factors: not drawn there.
MUST_REFUSE = {
    "cholesky": "indefinite",
    "linalg_cholesky": "indefinite",
    "inverse": "singular",
    "linalg_inv": "singular",
    "linalg_lu_factor": "singular",
}
_refused = memo.sampled_from((False,) * 3 + (True,))


def _linalg_default(ctx):
    """Square (batched) matrices, well-conditioned; symmetric positive definite where the op
    needs a Cholesky factorisation or a Hermitian eigenproblem; one case in four a matrix the op
    must refuse (MUST_REFUSE)."""
    name = ctx.op.base_name
    kind = "spd" if any(w in name for w in ("cholesky", "eigh", "eigvalsh", "ldl")) else "invertible"
    if name in MUST_REFUSE and ctx.draw(_refused, label="a matrix it must refuse"):
        kind = MUST_REFUSE[name]
    n = ctx.draw(memo.integers(1, 4), label="n")
    batch = ctx.draw(memo.lists(memo.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, n, n)
    if ctx.values in ("real", "", None):
        ctx.values = kind


_FAMILY_BUILDERS["linalg"] = _linalg_default


@family("linalg_cond")
def linalg_cond(ctx):
    """Square invertible matrices; the string norms are the matrix norms "fro" and "nuc"."""
    _linalg_default(ctx)
    p = next((a for a in ctx.op.arguments if a.name == "p"), None)
    if p is not None and p.type.startswith("str"):
        ctx.fixed["p"] = ctx.draw(memo.sampled_from(("fro", "nuc")), label="p")


@family("linalg_ldl_solve")
def linalg_ldl_solve(ctx):
    """LD and pivots from linalg_ldl_factor of a symmetric (not definite) matrix; B (n, k)."""
    import torch

    n = ctx.draw(memo.integers(1, 4), label="n")
    k = ctx.draw(memo.integers(1, 3), label="k")
    batch = tuple(ctx.draw(memo.lists(memo.integers(1, 2), max_size=1), label="batch"))
    hermitian = ctx.draw(memo.booleans(), label="hermitian") if ctx.dtype.startswith("complex") else False
    # finite: a non-finite entry would reach LD as values, judged as values (see execute.nonfinite_matrix)
    matrix = _tensor(ctx, batch + (n, n), values="invertible", label="matrix")
    x = dataclasses.replace(matrix, edges=None).materialize(lambda t: t)
    a = x + (x.mH if hermitian else x.mT)
    try:
        ld, pivots, _ = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    except RuntimeError:  # the cell's dtype has no LDL factorisation: draw a plain LD for the reference to reject
        ld, pivots = a, torch.ones(batch + (n,), dtype=torch.int32)
    ctx.shape = tuple(ld.shape)
    ctx.fixed["LD"] = TensorSpec(shape=ctx.shape, dtype=ctx.dtype, data=tuple(ld.flatten().tolist()))
    ctx.fixed["pivots"] = TensorSpec(shape=tuple(pivots.shape), dtype="int32", data=tuple(pivots.flatten().tolist()))
    ctx.fixed["B"] = _tensor(ctx, batch + (n, k), label="B")
    ctx.fixed["hermitian"] = hermitian


# -- kernels with one fixed calling convention ------------------------------------------------------


@family("linalg_check_errors")
def linalg_check_errors(ctx):
    """LAPACK info codes (int32; 0 = success, so that a valid case passes the check)."""
    n = ctx.draw(memo.integers(0, 3), label="batch")
    ctx.shape = (n,)
    ctx.fixed["info"] = TensorSpec(shape=(n,), dtype="int32", data=(0,) * n)
    ctx.fixed["api_name"] = ctx.draw(memo.sampled_from(("torch.linalg.inv", "torch.linalg.cholesky")), label="api_name")


@family("chain_matmul")
def chain_matmul(ctx):
    """Matrices whose inner sizes chain: (n0, n1), (n1, n2), ..."""
    k = ctx.draw(memo.integers(1, 3), label="matrices")
    sides = [ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(k + 1)]
    ctx.shape = (sides[0], sides[1])
    ctx.fixed["matrices"] = [_tensor(ctx, (sides[i], sides[i + 1]), label=f"matrices[{i}]") for i in range(k)]


@family("foreach_mm")
def foreach_mm(ctx):
    """Lists of matrices whose pairs multiply: self[i] (n, k), mat2[i] (k, m)."""
    pairs = len(ctx.list_shapes)
    n, k, m = (ctx.draw(memo.integers(1, 4), label=x) for x in ("n", "k", "m"))
    ctx.shape = (n, k)
    ctx.fixed["self"] = [_tensor(ctx, (n, k), label=f"self[{i}]") for i in range(pairs)]
    ctx.fixed["mat2"] = [_tensor(ctx, (k, m), label=f"mat2[{i}]") for i in range(pairs)]


@family("compute_linear_combination")
def compute_linear_combination(ctx):
    """input (k, *rest), non-empty, and coefficients (m, k): the result's row i is the sum over j
    of coefficients[i, j] * input[j] (LinearAlgebra.cpp; matrix_exp's one caller). The out=
    overload adds into its out without resizing it, and its caller, the functional, hands it a
    zero-filled one of the result's shape: so is the out drawn here."""
    k, m = (ctx.draw(memo.integers(1, 4), label=x) for x in ("k", "m"))
    rest = tuple(ctx.draw(memo.lists(memo.integers(1, 4), min_size=0, max_size=2), label="rest"))
    ctx.shape = (k, *rest)
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    ctx.fixed["coefficients"] = _tensor(ctx, (m, k), label="coefficients")
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=(m, *rest), dtype=ctx.dtype, values="index", low=0, high=1)


@family("linalg_multi_dot")
def linalg_multi_dot(ctx):
    """Two or more tensors whose inner sizes chain: the first and the last may be vectors (1-d),
    the others are matrices (torch.linalg.multi_dot's contract)."""
    k = ctx.draw(memo.integers(2, 4), label="tensors")
    sides = [ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(k + 1)]
    shapes = [(sides[i], sides[i + 1]) for i in range(k)]
    if ctx.draw(memo.booleans(), label="first is a vector"):
        shapes[0] = shapes[0][1:]
    if ctx.draw(memo.booleans(), label="last is a vector"):
        shapes[-1] = shapes[-1][:1]
    ctx.shape = shapes[0]
    ctx.fixed["tensors"] = [_tensor(ctx, s, label=f"tensors[{i}]") for i, s in enumerate(shapes)]


@family("grouped_mm")
def grouped_mm(ctx):
    """Groups of matrix products as torch.nn.functional.grouped_mm (MoE layers) calls it: a batch of
    (M, K) @ (K, N) (3-d by 3-d, no offs), or rows of a 2-d mat_a split into groups by offs (int32
    cumulative ends) against a 3-d mat_b, or a shared K split by offs (2-d by 2-d). Every stride
    is a multiple of 16 bytes, as _grouped_mm_validate_inputs (GroupedMMUtils.h) checks: K and N
    are multiples of 16 bytes' worth of elements, the operands contiguous, mat_b row- or
    column-major."""
    from generators.strategies import draw_tensor

    size = {"float16": 2, "bfloat16": 2}.get(ctx.dtype, 4)
    align = 16 // size
    g, m = (ctx.draw(memo.integers(1, 3), label=x) for x in ("groups", "rows"))
    k, n = (align * ctx.draw(memo.integers(1, 2), label=x) for x in ("K / align", "N / align"))
    form = ctx.draw(memo.sampled_from(("3d x 3d", "2d x 3d", "2d x 2d")), label="form")
    ends = sorted(ctx.draw(memo.integers(0, m * g), label=f"end {i}") for i in range(g - 1))

    def operand(shape, label, column_major=False):
        if column_major:  # the transpose of a contiguous (..., N, K): K has unit stride
            return draw_tensor(ctx.draw, dtype=ctx.dtype, shape=shape, layout="transposed", label=label)
        return draw_tensor(ctx.draw, dtype=ctx.dtype, shape=shape, layout="contiguous", label=label)

    column_major = ctx.draw(memo.booleans(), label="mat_b column-major")
    offs = None
    if form == "3d x 3d":
        a, b = operand((g, m, k), "self"), operand((g, k, n), "mat2", column_major)
    elif form == "2d x 3d":
        a, b = operand((m * g, k), "self"), operand((g, k, n), "mat2", column_major)
        offs = [*ends, m * g]
    else:
        a, b = operand((m, k * g), "self"), operand((k * g, n), "mat2", column_major)
        offs = [k * (i + 1) for i in range(g)]
    ctx.shape = a.shape
    ctx.fixed.update(self=a, mat2=b, bias=None, out_dtype=None)
    ctx.fixed["offs"] = None if offs is None else TensorSpec(shape=(len(offs),), dtype="int32", data=tuple(offs))


@family("linalg_matrix_norm")
def linalg_matrix_norm(ctx):
    """An order the matrix norm has: a number among +-1, +-2, +-inf, or "fro"/"nuc" for the str
    overload ("linalg.matrix_norm: Order N not supported", LinearAlgebra.cpp's _linalg_matrix_norm_checks),
    over the last two dims (any other order was rejected: valid by luck)."""
    _linalg_default(ctx)
    ord_arg = next((a for a in ctx.op.arguments if a.name == "ord"), None)
    if ord_arg is not None:
        orders = ("fro", "nuc") if ord_arg.type.startswith("str") else (1, -1, 2, -2, float("inf"), float("-inf"))
        ctx.fixed["ord"] = ctx.draw(memo.sampled_from(orders), label="ord")
    ctx.fixed["dim"] = ctx.draw(memo.sampled_from(([-2, -1], [-1, -2])), label="dim")


@family("tensordot")
def tensordot(ctx):
    """Two tensors that share the sizes of the dims they contract, one list of dims each, of one
    length ("both dimension lists should have same length", "contracted dimensions need to match,
    but first has size N in dim N and second has size N in dim N": Linear.cpp's tensordot)."""
    k = ctx.draw(memo.integers(0, 2), label="contracted")
    shared = [ctx.draw(memo.integers(1, 3), label=f"shared[{i}]") for i in range(k)]
    free_a = [
        ctx.draw(memo.integers(1, 3), label=f"a[{i}]") for i in range(ctx.draw(memo.integers(0, 2), label="a dims"))
    ]
    free_b = [
        ctx.draw(memo.integers(1, 3), label=f"b[{i}]") for i in range(ctx.draw(memo.integers(0, 2), label="b dims"))
    ]
    # the contracted dims go after self's free dims and before other's, in matching order
    ctx.shape = (*free_a, *shared)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["other"] = _tensor(ctx, (*shared, *free_b), label="other")
    ctx.fixed["dims_self"] = [len(free_a) + i for i in range(k)]
    ctx.fixed["dims_other"] = list(range(k))


@family("trilinear")
def trilinear(ctx):
    """What bilinear passes it (aten/src/ATen/native/Linear.cpp): input1 (B, I), weight (O, I, J),
    input2 (B, J), expanded to four dims by expand1 [1, 3], expand2 [0], expand3 [1, 2] and
    summed over sumdim [2, 3]; drawn apart, the expansions left unequal dims ("dim N appears
    multiple times", "Dimension out of range"): one case in four was valid."""
    b, i, j, o = (ctx.draw(memo.integers(1, 3), label=x) for x in ("batch", "in1", "in2", "out"))
    ctx.shape = (b, i)
    ctx.fixed["i1"] = _tensor(ctx, (b, i), label="i1")
    ctx.fixed["i2"] = _tensor(ctx, (o, i, j), label="i2")
    ctx.fixed["i3"] = _tensor(ctx, (b, j), label="i3")
    ctx.fixed.update(expand1=[1, 3], expand2=[0], expand3=[1, 2], sumdim=[2, 3])
    ctx.fixed["unroll_dim"] = ctx.draw(memo.integers(0, 3), label="unroll_dim")
