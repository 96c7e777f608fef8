"""Symbolic shapes: `symbolic(ctx, {"self": "n k", ...})` and the table of ops whose tensors
share named sizes (matrix products, solves, losses, grid sampling, ...)."""

from __future__ import annotations

from generators import memo
from generators.argtypes import draw_index
from generators.families.common import _tensor
from generators.families.registry import register_builder
from generators.strategies import draw_tensor

# -- symbolic shapes -------------------------------------------------------------------------------


def symbolic(ctx, spec: dict[str, str], *, min_size: int = 1, max_size: int = 4) -> None:
    """Pre-draw the tensors of `spec`, {arg name: "b n k"}: each letter is one size, drawn once.

    A digit is a literal size; ":kind" after the dims sets the value kind ("invertible", "spd",
    "index<letter>" for indices below that size, "pivots"); a leading "?" marks an argument that
    may be None. Arguments the op does not have are skipped, so one spec serves several overloads.
    """
    names = {a.name: a for a in ctx.op.arguments}
    sizes: dict[str, int] = {}

    def size(token: str) -> int:
        digits = token[: len(token) - len(token.lstrip("0123456789"))]
        letter = token[len(digits) :]
        if not letter:
            return int(digits)
        if letter not in sizes:
            sizes[letter] = ctx.draw(memo.integers(min_size, max_size), label=f"size {letter}")
        return int(digits or 1) * sizes[letter]

    first = True
    for name, text in spec.items():
        arg = names.get(name)
        if arg is None or not arg.type.startswith("Tensor"):
            continue
        maybe_none = text.startswith("?")
        text = text.lstrip("?")
        dims_text, _, kind = text.partition(":")
        shape = tuple(size(x) for x in dims_text.split())
        if maybe_none and ctx.draw(memo.booleans(), label=f"{name} none"):
            ctx.fixed[name] = None
            continue
        if kind.startswith("index"):
            high = size(kind[5:]) if kind[5:] else 1
            ctx.fixed[name] = draw_index(ctx, high=high, shape=shape, label=name)
        elif kind == "pivots":
            ctx.fixed[name] = draw_tensor(
                ctx.draw,
                dtype="int32",
                shape=shape,
                values="index",
                low=1,
                high=shape[-1] + 1 if shape else 2,
                layout="contiguous",
                label=name,
            )
        else:
            ctx.fixed[name] = _tensor(ctx, shape, values=kind or None, label=name, writable=arg.is_write)
        if first:
            ctx.shape = shape
            first = False


def table(entries: dict[str, dict[str, str] | list[dict[str, str]]]):
    """Register a `symbolic` builder per op name; a list of specs is a choice of alternatives."""
    for op_name, spec in entries.items():

        def build(ctx, spec=spec):
            chosen = ctx.draw(memo.sampled_from(spec), label="shape family") if isinstance(spec, list) else spec
            symbolic(ctx, chosen)

        build.provides = ()
        register_builder(op_name, build)


_MM = {"self": "n k", "mat2": "k m"}
_ADDMM = {"self": "n m", "mat1": "n k", "mat2": "k m"}
table(
    {
        "mm": _MM,
        "bmm": {"self": "b n k", "mat2": "b k m"},
        "addmm": [_ADDMM, {"self": "m", "mat1": "n k", "mat2": "k m"}],
        "addmm_activation": _ADDMM,
        "baddbmm": {"self": "b n m", "batch1": "b n k", "batch2": "b k m"},
        "addbmm": {"self": "n m", "batch1": "b n k", "batch2": "b k m"},
        "addmv": {"self": "n", "mat": "n k", "vec": "k"},
        "addr": {"self": "n m", "vec1": "n", "vec2": "m"},
        "mv": {"self": "n k", "vec": "k"},
        "dot": {"self": "k", "tensor": "k"},
        "vdot": {"self": "k", "other": "k"},
        "outer": {"self": "n", "vec2": "m"},
        "ger": {"self": "n", "vec2": "m"},
        "inner": {"self": "n k", "other": "m k"},
        "linear": {"input": "b k", "weight": "m k", "bias": "?m"},
        "mkldnn_linear": {"self": "b k", "weight": "m k", "bias": "?m"},
        "matmul": [
            {"self": "n k", "other": "k m"},
            {"self": "b n k", "other": "k m"},
            {"self": "k", "other": "k m"},
            {"self": "b n k", "other": "b k m"},
            {"self": "n k", "other": "k"},
        ],
        "bilinear": {"input1": "b i", "input2": "b j", "weight": "o i j", "bias": "?o"},
        "cross": {"self": "n 3", "other": "n 3"},
        "linalg_cross": {"self": "n 3", "other": "n 3"},
        "cdist": {"x1": "b p m", "x2": "b r m"},
        "cdist_forward": {"x1": "b p m", "x2": "b r m"},
        "euclidean_dist": {"x1": "p m", "x2": "r m"},
        "prelu": {"self": "n c", "weight": "c"},
        "prelu_kernel": {"self": "n c", "weight": "c"},
        "cholesky_solve": {"self": "n k", "input2": "n n:invertible"},
        "cholesky_solve_helper": {"self": "n k", "A": "n n:invertible"},
        "linalg_solve": [{"A": "b n n:invertible", "B": "b n k"}, {"A": "n n:invertible", "B": "n"}],
        "linalg_solve_ex": {"A": "b n n:invertible", "B": "b n k"},
        "triangular_solve": {"self": "n k", "A": "n n:invertible"},
        "linalg_solve_triangular": {"self": "n n:invertible", "B": "n k"},
        "lu_solve": {"self": "n k", "LU_data": "n n:invertible", "LU_pivots": "n:pivots"},
        "linalg_lu_solve": {"LU": "n n:invertible", "pivots": "n:pivots", "B": "n k"},
        "lu_unpack": {"LU_data": "n n:invertible", "LU_pivots": "n:pivots"},
        "linalg_lstsq": {"self": "m n", "b": "m k"},
        "orgqr": {"self": "4 2", "input2": "2"},
        "linalg_householder_product": {"input": "4 2", "tau": "2"},
        "ormqr": {"self": "4 2", "input2": "2", "input3": "4 k"},
        "linalg_vecdot": {"x": "n k", "y": "n k"},
        "embedding": {"weight": "v d", "indices": "b:indexv"},
        "quantile": [{"self": "n", "q": "k:probability"}, {"self": "n", "q": ":probability"}],
        "nanquantile": [{"self": "n", "q": "k:probability"}, {"self": "n", "q": ":probability"}],
        "searchsorted": {"sorted_sequence": "n", "self": "k"},
        "bucketize": {"self": "k", "boundaries": "n"},
        "pixel_unshuffle": {"self": "n c 2h 2w"},
        "pixel_shuffle": {"self": "n 4c h w"},
        "view_as_complex": {"self": "n 2"},
        "view_as_complex_copy": {"self": "n 2"},
        "grid_sampler_2d": {"input": "n c h w", "grid": "n h w 2:coordinate"},
        "grid_sampler_3d": {"input": "n c d h w", "grid": "n d h w 3:coordinate"},
        "grid_sampler": {"input": "n c h w", "grid": "n h w 2:coordinate"},
        "grid_sampler_2d_cpu_fallback": {"input": "n c h w", "grid": "n h w 2:coordinate"},
        "grid_sampler_2d_cpu_fallback_backward": {
            "grad_output": "n c g k",
            "input": "n c h w",
            "grid": "n g k 2:coordinate",
        },
        "sparse_mm": {"sparse": "n k", "dense": "k m"},
        "gru_cell": {"input": "n i", "hx": "n h", "w_ih": "3h i", "w_hh": "3h h", "b_ih": "?3h", "b_hh": "?3h"},
        "rnn_tanh_cell": {"input": "n i", "hx": "n h", "w_ih": "h i", "w_hh": "h h", "b_ih": "?h", "b_hh": "?h"},
        "rnn_relu_cell": {"input": "n i", "hx": "n h", "w_ih": "h i", "w_hh": "h h", "b_ih": "?h", "b_hh": "?h"},
        "nll_loss": [
            {"self": "n c", "target": "n:indexc", "weight": "?c"},
            {"self": "c", "target": ":indexc", "weight": "?c"},
        ],
        "nll_loss_nd": {"self": "n c", "target": "n:indexc", "weight": "?c"},
        "nll_loss_forward": {"self": "n c", "target": "n:indexc", "weight": "?c"},
        "nll_loss2d": {"self": "n c h w", "target": "n h w:indexc", "weight": "?c"},
        "nll_loss2d_forward": {"self": "n c h w", "target": "n h w:indexc", "weight": "?c"},
        "cross_entropy_loss": [
            {"self": "n c", "target": "n:indexc", "weight": "?c"},
            {"self": "n c", "target": "n c:probability"},
        ],
        "multilabel_margin_loss": {"self": "n c", "target": "n c:indexc"},
        "multilabel_margin_loss_forward": {"self": "n c", "target": "n c:indexc"},
        "binary_cross_entropy": {"self": "n c:probability", "target": "n c:probability", "weight": "?n c"},
        "cosine_embedding_loss": {"input1": "n d", "input2": "n d", "target": "n"},
        "margin_ranking_loss": {"input1": "n", "input2": "n", "target": "n"},
        "hinge_embedding_loss": {"self": "n", "target": "n"},
        "triplet_margin_loss": {"anchor": "n d", "positive": "n d", "negative": "n d"},
    }
)
