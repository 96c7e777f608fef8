"""Spectral ops: stft/istft windows, hops and the complex flag; fft ops take the generic draw."""

from __future__ import annotations

from generators import memo
from generators.families.common import _arg_names, _tensor
from generators.families.registry import _FAMILY_BUILDERS, family

_FAMILY_BUILDERS["fft"] = lambda ctx: None


@family("istft")
def istft(ctx):
    """A one-sided spectrogram (n_fft / 2 + 1, frames), complex of the cell's precision, with a
    hop and window that satisfy the overlap-add (NOLA) condition."""
    cell_complex = {
        "float32": "complex64",
        "float64": "complex128",
        "complex64": "complex64",
        "complex128": "complex128",
    }
    dtype = cell_complex.get(ctx.dtype, ctx.dtype)
    n_fft = ctx.draw(memo.sampled_from((4, 8, 6)), label="n_fft")
    frames = ctx.draw(memo.integers(2, 5), label="frames")
    batch = ctx.draw(memo.lists(memo.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, n_fft // 2 + 1, frames)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, dtype=dtype, label="self")
    ctx.fixed["n_fft"] = n_fft
    ctx.fixed["hop_length"] = ctx.draw(memo.sampled_from((n_fft // 4 or 1, n_fft // 2)), label="hop_length")
    ctx.fixed["win_length"] = None
    real = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
    ctx.fixed["window"] = (
        None
        if ctx.draw(memo.booleans(), label="no window")
        else _tensor(ctx, (n_fft,), dtype=real, values="positive", label="window")
    )
    ctx.fixed["center"] = True
    ctx.fixed["onesided"] = True
    ctx.fixed["return_complex"] = False


@family("stft")
def stft(ctx):
    """A real or complex signal (L,) or (B, L) with n_fft <= L (and under L when centred, which
    reflect-pads by n_fft // 2), hop and window lengths within n_fft; return_complex is given,
    which torch requires for real input. Onesided only for real input."""
    names = _arg_names(ctx)
    length = ctx.draw(memo.integers(2, 8), label="length")
    batch = ctx.draw(memo.lists(memo.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, length)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    center = "center" in names and ctx.draw(memo.booleans(), label="center")
    if "center" in names:
        ctx.fixed["center"] = center
        ctx.fixed["pad_mode"] = ctx.draw(
            memo.sampled_from(("reflect", "constant", "replicate", "circular")), label="pad_mode"
        )
    n_fft = ctx.draw(memo.integers(1, length - 1 if center else length), label="n_fft")
    ctx.fixed["n_fft"] = n_fft
    # without a hop length, torch takes n_fft // 4, which is 0 (invalid) below 4
    ctx.fixed["hop_length"] = ctx.draw(
        (memo.none() if n_fft >= 4 else memo.nothing()) | memo.integers(1, n_fft), label="hop_length"
    )
    win = ctx.draw(memo.none() | memo.integers(1, n_fft), label="win_length")
    ctx.fixed["win_length"] = win
    ctx.fixed["window"] = (
        None
        if ctx.draw(memo.booleans(), label="no window")
        else _tensor(ctx, (win or n_fft,), values="positive", label="window")
    )
    ctx.fixed["normalized"] = ctx.draw(memo.booleans(), label="normalized")
    ctx.fixed["onesided"] = (
        None if ctx.dtype.startswith("complex") else ctx.draw(memo.sampled_from((None, True, False)), label="onesided")
    )
    ctx.fixed["return_complex"] = True
    if "align_to_window" in names:
        ctx.fixed["align_to_window"] = None


@family("fft_c2r")
def fft_c2r(ctx):
    """The half spectrum irfftn passes: complex input (the complex dtype of the cell's precision),
    distinct dims to transform, the last one's output size n with n // 2 + 1 = its input size
    (torch/_refs/fft.py's irfftn, aten/src/ATen/native/SpectralOps.cpp)."""
    complex_of = {"float32": "complex64", "float64": "complex128", "complex64": "complex64", "complex128": "complex128"}
    dtype = complex_of.get(ctx.dtype, "complex64")
    shape = tuple(max(1, s) for s in ctx.shape) or (ctx.draw(memo.integers(1, 4), label="length"),)
    ctx.shape = shape
    k = ctx.draw(memo.integers(1, len(shape)), label="dims")
    dims = sorted(ctx.draw(memo.permutations(range(len(shape))), label="dim order")[:k])
    ctx.fixed["self"] = _tensor(ctx, shape, dtype=dtype, label="self")
    ctx.fixed["dim"] = dims
    ctx.fixed["normalization"] = ctx.draw(memo.integers(0, 2), label="normalization")
    last = shape[dims[-1]]
    ctx.fixed["last_dim_size"] = 2 * (last - 1) + ctx.draw(memo.integers(0, 1), label="odd length") if last > 1 else 1
