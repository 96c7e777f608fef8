"""Operator families: a coarse grouping of ATen overloads by what they compute.

`family_of` is a first-match-wins list of rules. The order matters and goes from the most
specific (a quantized conv is "quantized", a convolution backward is "conv") to the most general
(the `pointwise` / `reduction` tags, then shape and factory name lists, then "other").
Backward ops ("*_backward", "*_backward_input", ...) and `_foreach_*` ops take the family of the
op they derive from.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

FAMILIES: tuple[tuple[str, str], ...] = (
    ("pointwise", "elementwise math: out[i] = f(in[i], ...) with broadcasting"),
    ("reduction", "reduce over dimensions: sum, mean, std, norm, argmax, histogram ..."),
    ("linalg", "matrix products and decompositions: mm, matmul, addmm, linalg_*, svd, qr, solve ..."),
    ("attention", "fused attention kernels: scaled_dot_product_*, _flash_attention_*, _efficient_attention_*"),
    ("conv", "convolutions and their backward: convolution, conv2d, conv_transpose*, im2col ..."),
    ("pooling", "max/avg/adaptive/fractional/lp pooling and unpooling"),
    ("upsample", "resampling: upsample_*, grid_sampler*, affine_grid_generator"),
    ("norm", "normalisation layers: batch_norm, layer_norm, group_norm, instance_norm, rms_norm"),
    ("loss", "loss functions: *_loss, nll, cross_entropy, binary_cross_entropy, ctc, kl_div"),
    ("indexing", "gather/scatter by index or mask: index*, gather, scatter*, take, masked_*, embedding*"),
    ("sort", "order statistics: sort, topk, kthvalue, unique*, argsort, median, mode, searchsorted"),
    ("scan", "cumulative ops: cumsum, cumprod, cummax, cummin, logcumsumexp"),
    ("fft", "spectral ops: fft_*, _fft_*, stft, istft"),
    ("shape", "views and data movement without arithmetic: view, reshape, permute, cat, split, pad, flip ..."),
    ("factory", "tensor creation from sizes or values: empty*, zeros*, ones*, full*, rand*, arange, eye ..."),
    ("random", "random sampling on existing tensors: bernoulli, multinomial, normal, dropout, poisson ..."),
    ("rnn", "recurrent layers and cells: lstm*, gru*, rnn_*, *_cell"),
    ("activation", "activation functions: relu, gelu, silu, elu, hardtanh, leaky_relu, softmax, log_softmax ..."),
    ("quantized", "quantized tensors and fake quantization: quantize*, dequantize, q_*, fake_quantize*"),
    ("sparse", "sparse layouts: to_sparse*, sparse_*, _sparse*, coalesce, indices, values ..."),
    ("comparison", "comparisons and closeness: eq, ne, lt, le, gt, ge, allclose, equal, isclose, isin"),
    ("torchscript", "TorchScript builtins on Python values (list/dict/str/int ops), not dispatcher operators"),
    ("other", "everything else"),
)

FAMILY_NAMES: tuple[str, ...] = tuple(name for name, _ in FAMILIES)


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# (family, name regex matched with re.fullmatch against the bare op name, e.g. "add", "_foo_")
_NAME_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "quantized",
        _rx(
            r"_?quantize.*",
            r"_?dequantize.*",
            r"q_.*",
            r"_?fake_quantize.*",
            r".*quantized.*",
            r"fused_moving_avg_obs_fake_quant",
            r"_fused_moving_avg_obs_fq_helper.*",
            r"int_repr",
            r"qscheme",
            r"_?choose_qparams.*",
            r"_make_per_(tensor|channel)_quantized_tensor",
            r"fbgemm_.*(quantize|pack|int8).*",
            r"_empty_(per_channel_)?affine_quantized",
            r"_weight_int[48]pack_mm.*",
            r"_convert_weight_to_int4pack.*",
            r"_dyn_quant_.*",
            r"_saturate_weight_to_fp16",
            r"_fake_quantize_.*",
            r"_per_tensor_.*quant.*",
        ),
    ),
    (
        "sparse",
        _rx(
            r"_?to_sparse.*",
            r"sparse_.*",
            r"_sparse.*",
            r"_?coalesce",
            r"_coalesced_?",
            r"is_coalesced",
            r"_?indices",
            r"_?values",
            r"crow_indices",
            r"col_indices",
            r"ccol_indices",
            r"row_indices",
            r"_nnz",
            r"_dimI",
            r"_dimV",
            r"dense_dim",
            r"_to_dense",
            r"to_dense",
            r"sspaddmm",
            r"smm",
            r"hspmm",
            r"_spdiags",
            r"_cslt_.*",
            r"_spsolve",
            r"copy_sparse_to_sparse_?",
            r"_validate_sparse_.*",
            r"_validate_compressed_sparse_indices",
            r"_convert_indices_from_.*",
            r"_to_sparse_.*",
            r"_mask_projection",
            r"sparse_mask",
            r"_sparse_mask_projection",
            r"copy_sparse_to_sparse_",
            r"_sparse_broadcast_to.*",
            r"_nested_.*",
            r"nested_to_padded_tensor",
            r"to_padded_tensor",
            r"_jagged_to_padded_dense_forward",
            r"_padded_dense_to_jagged_forward",
            r"_nested_tensor_.*",
        ),
    ),
    ("fft", _rx(r"fft_.*", r"_fft_.*", r"stft", r"istft", r"_cufft_.*")),
    (
        "attention",
        _rx(
            r".*scaled_dot_product.*",
            r"_flash_attention.*",
            r"_efficient_attention.*",
            r"_fused_sdp_choice",
            r"_native_multi_head_attention",
            r"_transformer_encoder_layer_fwd",
            r"_transform_bias_rescale_qkv",
            r"_triton_.*attention.*",
            r"_masked_softmax.*",
            r"_cudnn_attention.*",
            r"_fused_attention.*",
            r"_safe_softmax",
        ),
    ),
    (
        "rnn",
        _rx(
            r"_?lstm.*",
            r"_?gru.*",
            r"rnn_.*",
            r".*_cell",
            r"_thnn_fused_(lstm|gru)_cell.*",
            r"_?cudnn_rnn.*",
            r"miopen_rnn.*",
            r"mkldnn_rnn.*",
            r"_use_cudnn_rnn_flatten_weight",
            r"_pack_padded_sequence.*",
            r"_pad_packed_sequence",
            r"_lstm_mps",
        ),
    ),
    (
        "conv",
        _rx(
            r"_?conv(olution)?(_.*|\d.*)?",
            r".*_convolution.*",
            r"_conv_depthwise2d.*",
            r"thnn_conv.*",
            r"slow_conv.*",
            r"_slow_conv.*",
            r"conv_tbc.*",
            r"im2col",
            r"col2im",
            r"_nnpack.*",
            r"mkldnn_convolution.*",
            r"conv_depthwise3d",
            r"mkldnn_reorder_conv\dd_weight",
        ),
    ),
    (
        "pooling",
        _rx(
            r".*max_pool.*",
            r".*avg_pool.*",
            r"_?adaptive_.*",
            r"fractional_max_pool.*",
            r".*lp_pool.*",
            r"max_unpool.*",
        ),
    ),
    (
        "upsample",
        _rx(
            r"_?upsample_.*",
            r".*grid_sampler.*",
            r".*affine_grid_generator.*",
            r"_?interpolate.*",
        ),
    ),
    (
        "norm",
        _rx(
            r".*batch_norm.*",
            r".*layer_norm.*",
            r".*group_norm.*",
            r".*instance_norm.*",
            r".*rms_norm.*",
            r"_?weight_norm.*",
            r"_batch_norm_impl_index.*",
            r"_fused_rms_norm.*",
            r"norm_except_dim",
        ),
    ),
    (
        "loss",
        _rx(
            r".*_loss.*",
            r"_?nll.*",
            r".*cross_entropy.*",
            r"_?ctc.*",
            r"kl_div.*",
            r"_?cosine_embedding.*",
        ),
    ),
    (
        "linalg",
        _rx(
            r"_?linalg_.*",
            r"mm",
            r"_?bmm",
            r"matmul",
            r"_?addmm.*",
            r"addbmm_?",
            r"baddbmm_?",
            r"pairwise_distance",
            r"_scaled_grouped_mm.*",
            r"addmv_?",
            r"mv",
            r"dot",
            r"vdot",
            r"inner",
            r"outer",
            r"ger",
            r"addr_?",
            r"_?cholesky.*",
            r"_?svd.*",
            r"qr",
            r"inverse",
            r"_?det",
            r"logdet",
            r"slogdet",
            r"solve",
            r"_?triangular_solve.*",
            r"_?lu(_.*)?",
            r"lstsq",
            r"geqrf",
            r"orgqr",
            r"ormqr",
            r"pinverse",
            r"matrix_power",
            r"_?matrix_exp.*",
            r"chain_matmul",
            r"kron",
            r"tensordot",
            r"einsum",
            r"linear",
            r"_?bilinear",
            r"_?int_mm",
            r"_scaled_mm.*",
            r"_mixed_dtypes_linear",
            r"_?grouped_mm",
            r"_scaled_grouped_mm",
            r"_?eig.*",
            r"_symeig.*",
            r"frobenius_norm",
            r"nuclear_norm",
            r"_?pdist.*",
            r"_?cdist.*",
            r"_euclidean_dist",
            r"mkldnn_linear.*",
            r"fbgemm_linear_fp16_weight.*",
            r"_linalg_.*",
            r"_addmm_activation",
            r"_?sparse_mm",
            r"trace",
            r"cross",
            r"_?cosine_similarity",
            r"_?compute_linear_combination",
            r"_trilinear",
            r"_weight_int8pack_mm",
            r"_?baddbmm.*",
            r"_fused_mm.*",
            r"_?mm_.*",
        ),
    ),
    (
        "sort",
        _rx(
            r"_?sort.*",
            r"topk",
            r"kthvalue",
            r"_?unique.*",
            r"argsort",
            r"msort",
            r"nanmedian",
            r"median",
            r"mode",
            r"searchsorted",
            r"bucketize",
            r"(nan)?quantile",
        ),
    ),
    (
        "scan",
        _rx(
            r"cumsum_?",
            r"_?cumprod_?",
            r"_?cummax.*",
            r"_?cummin.*",
            r"_?logcumsumexp",
            r"cumulative_trapezoid",
            r"_cummax_helper",
            r"_cummin_helper",
        ),
    ),
    (
        "indexing",
        _rx(
            r"_?(unsafe_)?index.*",
            r"_index_put_impl_",
            r"gather.*",
            r"scatter.*",
            r"_?scatter_reduce.*",
            r"take.*",
            r"masked_(fill|scatter|select)(_backward)?_?",
            r"put_?",
            r"_?embedding.*",
            r"_embedding_bag.*",
            r"nonzero.*",
            r"argwhere",
            r"_?unsafe_masked_index.*",
            r"fill_diagonal_",
            r"one_hot",
            r"_gather_sparse_backward",
        ),
    ),
    (
        "comparison",
        _rx(
            r"eq_?",
            r"ne_?",
            r"lt_?",
            r"le_?",
            r"gt_?",
            r"ge_?",
            r"greater(_equal)?_?",
            r"less(_equal)?_?",
            r"not_equal_?",
            r"allclose",
            r"equal",
            r"isclose",
            r"isin",
            r"_?assert_.*",
            r"_?is_all_true",
            r"_?is_any_true",
            r"__(eq|ne|lt|le|gt|ge)__",
        ),
    ),
    (
        "activation",
        _rx(
            r"relu6?_?",
            r"_?prelu.*",
            r"gelu_?",
            r"silu_?",
            r"mish_?",
            r"_?softmax",
            r"_?log_softmax",
            r"special_(log_)?softmax",
            r"softmin",
            r"hardtanh_?",
            r"elu_?",
            r"celu_?",
            r"selu_?",
            r"leaky_relu_?",
            r"softplus",
            r"softshrink",
            r"hardshrink",
            r"hardsigmoid_?",
            r"hardswish_?",
            r"glu",
            r"glu_jvp",
            r"log_sigmoid.*",
            r"threshold_?",
            r"rrelu_?",
            r"_?rrelu_with_noise.*",
            r"infinitely_differentiable_gelu_backward",
        ),
    ),
)

# Random ops that take tensors (the factory rules below catch rand/randn/randint/randperm).
_RANDOM_RX = _rx(
    r"bernoulli_?",
    r"multinomial",
    r"normal_?",
    r"_?.*dropout.*",
    r"poisson",
    r"_standard_gamma",
    r"_sample_dirichlet",
    r"binomial",
    r"_philox_.*",
    r"_sobol_engine_.*",
    r"_standard_gamma_grad",
    r"_dirichlet_grad",
    r"uniform_",
    r"random_",
    r"exponential_",
    r"geometric_",
    r"log_normal_",
    r"cauchy_",
    r"_fused_dropout",
    r"_masked_scale",
    r"rrelu.*",
)

_FACTORY_RX = _rx(
    r"_?empty.*",
    r"new_(empty|zeros|ones|full).*",
    r"zeros(_like)?",
    r"ones(_like)?",
    r"full(_like)?",
    r"rand(n|int)?(_like)?",
    r"randperm",
    r"arange",
    r"range",
    r"linspace",
    r"logspace",
    r"eye",
    r"tensor",
    r"scalar_tensor",
    r"_efficientzerotensor",
    r"(tril|triu)_indices",
    r"from_file",
    r"\w+_window",
    r"_?as_tensor",
)

_SHAPE_RX = _rx(
    r"_?view.*",
    r"_?reshape.*",
    r"_unsafe_view",
    r"permute.*",
    r"transpose_?",
    r"_?t_?",
    r"_?cat",
    r"concat(enate)?",
    r"_?stack",
    r"[hvd]stack",
    r"column_stack",
    r"row_stack",
    r"unsafe_split.*",
    r"split.*",
    r"_?chunk.*",
    r"unsafe_chunk",
    r"_chunk_cat",
    r"tensor_split",
    r"[hvd]split",
    r"unbind",
    r"expand(_as)?",
    r"squeeze_?",
    r"unsqueeze_?",
    r"narrow(_copy)?",
    r"select",
    r"slice",
    r"_?slice.*",
    r"select_backward",
    r"as_strided_?",
    r"as_strided_scatter",
    r"(select|slice|diagonal)_scatter",
    r"flip(lr|ud)?",
    r"roll",
    r"rot90",
    r"repeat(_interleave)?",
    r"_repeat_interleave",
    r"tile",
    r"pad",
    r"_?pad_.*",
    r"constant_pad_nd",
    r"(reflection|replication|circular)_pad.*",
    r"_pad_.*",
    r"diagonal",
    r"diag(_embed|flat)?",
    r"unfold",
    r"movedim",
    r"moveaxis",
    r"swap(axes|dims)_?",
    r"flatten(_dense_tensors)?",
    r"unflatten(_dense_tensors)?",
    r"ravel",
    r"broadcast_(to|tensors)",
    r"atleast_\dd",
    r"contiguous",
    r"alias",
    r"detach_?",
    r"tril_?",
    r"triu_?",
    r"pixel_(un)?shuffle",
    r"(native_)?channel_shuffle",
    r"meshgrid",
    r"block_diag",
    r"cartesian_prod",
    r"combinations",
    r"numpy_T",
    r"mT",
    r"mH",
    r"T",
    r"H",
    r"adjoint",
    r"matrix_H",
    r"_reshape_alias",
    r"_?neg_view",
    r"_conj",
    r"lift(_fresh)?",
    r"resize_.*",
    r"_resize_output_?",
    r"_?unsafe_.*view.*",
    r"align_(to|as|tensors)",
    r"refine_names",
    r"rename_?",
    r"_?fw_primal",
    r"_make_dual",
    r"_unpack_dual",
    r"real",
    r"imag",
    r"_mkldnn_(reshape|transpose_?)",
    r"_lazy_clone",
    r"resolve_(conj|neg)",
    r"type_as",
    r"chalf",
    r"data",
    r"_?conj_physical_?",
    r"_?copy_from(_and_resize)?",
    r"copy_?",
    r"clone",
    r"_to_copy",
    r"to",
    r"_?to_(cpu|mkldnn|dense)",
    r"_autocast_to_.*",
    r"_nested_view_from.*",
)

_REDUCTION_RX = _rx(
    r"sum",
    r"_?nansum",
    r"mean",
    r"nanmean",
    r"prod",
    r"amax",
    r"amin",
    r"_?aminmax",
    r"max",
    r"min",
    r"std(_mean)?",
    r"var(_mean)?",
    r"norm",
    r"_?norm",
    r"native_norm",
    r"renorm_?",
    r"all",
    r"any",
    r"count_nonzero",
    r"logsumexp",
    r"special_logsumexp",
    r"argmax",
    r"argmin",
    r"dist",
    r"trapz",
    r"trapezoid",
    r"bincount",
    r"_?histc",
    r"_?histogram.*",
    r"_histogramdd.*",
    r"_?sum_to_size",
    r"_?grad_sum_to_size",
    r"_?segment_reduce",
    r"value_selecting_reduction_backward",
    r"cov",
    r"corrcoef",
)

_BACKWARD_RX = re.compile(
    r"(?P<fwd>.+?)_(double_)?backward(_(data|input|weight|weights|bias|elemt|reduce|cpu|jvp|grad_input|out))*"
)


def _bare(name: str) -> str:
    return name.split("::", 1)[1] if "::" in name else name


def family_of(name: str, tags: Iterable[str] = (), schema: str | None = None, *, dispatcher: bool = True) -> str:
    """The family of an operator.

    `name` is "aten::add" or "add" (overload optional and ignored), `tags` the torch.Tag names,
    `schema` the schema string (None when not known). `dispatcher=False` marks a TorchScript-only
    builtin that the c10 dispatcher does not know (`aten::append.t`, `aten::chr`): "torchscript".
    """
    if not dispatcher:
        return "torchscript"
    base = _bare(name).split(".", 1)[0]
    tags = frozenset(tags)

    m = _BACKWARD_RX.fullmatch(base)
    if m:
        fam = family_of(m.group("fwd"), (), None)
        if fam != "other":
            return fam
    if base.startswith("_foreach_"):
        # _foreach_add_ -> add_; _foreach_norm -> norm; pointwise unless it names something else
        fam = family_of(base[len("_foreach_") :], (), None)
        return fam if fam != "other" else "pointwise"

    for family, rx in _NAME_RULES:
        if rx.fullmatch(base):
            return family
    if _FACTORY_RX.fullmatch(base):
        return "factory"
    if "nondeterministic_seeded" in tags or _RANDOM_RX.fullmatch(base):
        return "random"
    if "view_copy" in tags or "inplace_view" in tags:
        return "shape"
    if "reduction" in tags:
        return "reduction"
    if "pointwise" in tags:
        return "pointwise"
    if _REDUCTION_RX.fullmatch(base):
        return "reduction"
    if _SHAPE_RX.fullmatch(base) or base.endswith("_copy") and _SHAPE_RX.fullmatch(base[: -len("_copy")]):
        return "shape"
    if _POINTWISE_RX.fullmatch(base) or base.startswith("special_"):
        return "pointwise"
    return "other"


# Elementwise math that lacks the pointwise tag in some overloads (out variants, scalar overloads).
_POINTWISE_RX = _rx(
    r"_?(abs|absolute|neg|negative|sign|sgn|signbit|exp|exp2|expm1|log|log2|log10|log1p|sqrt|rsqrt|"
    r"sin|cos|tan|asin|acos|atan|atan2|arctan2|arc\w+|sinh|cosh|tanh|asinh|acosh|atanh|sinc|sigmoid|"
    r"logit|erf|erfc|erfinv|lgamma|digamma|polygamma|mvlgamma|i0|igamma|igammac|ceil|floor|round|trunc|"
    r"fix|frac|reciprocal|pow|float_power|square|add|sub|subtract|mul|multiply|div|divide|true_divide|"
    r"floor_divide|fmod|remainder|clamp|clamp_min|clamp_max|clip|lerp|addcmul|addcdiv|where|maximum|"
    r"minimum|fmax|fmin|hypot|nextafter|copysign|ldexp|frexp|logaddexp2?|xlogy|heaviside|gcd|lcm|"
    r"bitwise_\w+|logical_\w+|__\w+__|isnan|isinf|isfinite|isposinf|isneginf|isreal|nan_to_num|"
    r"deg2rad|rad2deg|angle|conj|positive|rsub|masked_fill|sgn|exponent|hardtanh|softplus|"
    r"_add_relu|fill|zero|polar|complex|view_as_real|view_as_complex|_chunk_grad_outputs_efficient_attention|_cast_\w+|"
    r"_?foobar|_amp_\w+|_fused_\w+_|_functional_\w+)_?"
)


# -- exactly determined results -----------------------------------------------------------------
# Ops whose floating results are moved, selected or rounded, never computed: every correct kernel
# returns the same bits, so they are compared exactly (an integer-valued bfloat16 result off by
# one is wrong, though it is within bfloat16's rtol of 1.6%). Derived from the family, then the
# name; opdb/rules/exactness.toml overrides either way.

# families whose ops only move or select values, with the names inside them that compute
_EXACT_FAMILIES = {
    "shape": _rx(r".*_backward.*", r"unfold_backward", r"_?to_copy", r"to", r"type_as", r"chalf", r"_autocast_to_.*"),
    "indexing": _rx(r".*(add|reduce|bag|accumulate|put).*", r".*_backward.*", r"_?embedding_renorm_?"),
    "sort": _rx(r"(nan)?quantile", r".*_backward.*"),
}
# names of other families whose results are selected or rounded: order statistics, extrema,
# rounding (floor division too), sign and selection, and sequences of exactly representable steps;
# fmod's result is exactly representable (C's fmod is exact) and remainder's is fmod's plus the
# divisor rounded once, so one correctly rounded value is right for each
_EXACT_NAMES = _rx(
    r"max",
    r"min",
    r"amax",
    r"amin",
    r"_?aminmax",
    r"cummax",
    r"cummin",
    r"_cummax_helper",
    r"_cummin_helper",
    r"maximum",
    r"minimum",
    r"fmax",
    r"fmin",
    r"clamp(_min|_max)?_?",
    r"clip_?",
    r"floor_?",
    r"ceil_?",
    r"trunc_?",
    r"fix_?",
    r"round_?",
    r"floor_divide_?",
    r"fmod_?",
    r"remainder_?",
    r"neg_?",
    r"negative_?",
    r"positive",
    r"sign_?",
    r"copysign_?",
    r"nextafter_?",
    r"heaviside_?",
    r"where",
    r"masked_fill_?",
    r"fill_?",
    r"zero_?",
    r"relu_?",
    r"relu6_?",
    r"hardtanh_?",
    r"threshold_?",
    r"hardshrink",
    r"arange",
    r"range",
    r"zeros(_like)?",
    r"ones(_like)?",
    r"full(_like)?",
    r"new_(zeros|ones|full)",
    r"eye",
    r"scalar_tensor",
)


@functools.cache
def exact_by_default(base: str, family: str) -> bool:
    """Are this op's floating results exactly determined? (see OpSpec.exact) Cached: a case asks
    several times, and the patterns' match took 60 us of each."""
    if base.startswith("_foreach_"):
        return False  # fused lists: each leaf would need its own rule
    computes = _EXACT_FAMILIES.get(family)
    if computes is not None:
        return not computes.fullmatch(base)
    return bool(_EXACT_NAMES.fullmatch(base))
