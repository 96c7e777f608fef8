"""The family rules that give every op with a kernel here valid cases: each rule's
drawn cases are valid for the CPU reference, not by luck, and so is the form hypothesis shrinks
them to (a failure found on a device shrinks through such forms)."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings

import opdb
from generators import from_schema
from generators.coverage_probe import probe

CPU = torch.device("cpu")

# (op, cell): one cell where the rule makes every case valid
RULES = [
    ("aten::float_power_.Scalar", "float32"),  # a float64 self: the result's dtype
    ("aten::float_power.Scalar_out", "float32"),  # the out's dtype from the functional with the same types
    ("aten::tril_indices.out", "none"),  # an int64 out, from tril_indices' default dtype
    ("aten::stft", "float32"),  # return_complex given for real input
    ("aten::stft.center", "complex64"),
    ("aten::bincount", "int64"),  # 1-d non-negative integers
    ("aten::repeat_interleave.Tensor", "int64"),
    ("aten::repeat_interleave.self_Tensor", "float32"),
    ("aten::_int_mm", "int32"),  # int8 matrices in the cell of the result
    ("aten::_scaled_mm", "float32"),  # float8 matrices with per-tensor scales
    ("aten::native_group_norm_backward.out", "float32"),  # every output unmasked, a weight
    ("aten::native_layer_norm_backward.out", "float32"),
    ("aten::_to_sparse.out", "float32"),  # a sparse out of the result's shape
    ("aten::_to_sparse_csr.out", "float32"),  # a CSR out with the result's elements
    ("aten::to_sparse_bsr", "float32"),  # a block size that divides the matrix
    ("aten::_coalesce", "float32"),  # an uncoalesced input
    ("aten::__getitem__.Dict_Tensor", "float32"),  # the key is the dict's own key tensor
    ("aten::pop.Dict_str", "none"),
    ("aten::einsum.sublist", "float32"),  # operands and subscript lists as varargs
    ("aten::_fused_adamw.out", "float32"),  # one-element step counts
    ("aten::_nested_tensor_from_mask", "float32"),  # nested-tensor constructors
    ("aten::_nested_from_padded", "float32"),
    ("aten::_nested_view_from_buffer", "float32"),
    ("aten::split.sizes", "float32"),  # sizes that sum to the dim's size
    ("aten::split_with_sizes_copy.out", "float32"),  # one out per piece
    ("aten::renorm", "float32"),  # a positive norm and max norm
    ("aten::chain_matmul", "float32"),  # chained inner sizes
    ("aten::diagonal_scatter", "float32"),  # src of the diagonal's shape
    ("aten::glu_jvp", "float32"),  # halved along dim 1
    ("aten::batch_norm_update_stats", "float32"),  # (N, C, *) with per-channel running stats
    ("aten::im2col", "float32"),  # an image at least as large as the dilated kernel
    ("aten::empty_permuted", "float32"),  # a physical layout that permutes the dims
    ("aten::dsplit.int", "float32"),  # three dims, sections that divide the third
    # internal kernels that crashed the process on inconsistent arguments: what their caller passes
    ("aten::_cummax_helper", "float32"),  # values and indices of self's shape
    ("aten::_thnn_differentiable_lstm_cell_backward", "float32"),  # gates of 4 hidden sizes
    ("aten::_thnn_differentiable_gru_cell_backward", "float32"),
    ("aten::_transform_bias_rescale_qkv", "float32"),  # num_heads divides D
    ("aten::_weight_norm_interface", "float32"),  # g of norm_except_dim's shape, contiguous
    ("aten::_weight_norm_interface_backward", "float32"),
    ("aten::segment_reduce", "float32"),  # lengths that sum to the axis
    ("aten::_segment_reduce_backward", "float32"),
    ("aten::embedding_dense_backward.out", "float32"),  # indices below num_weights
    ("aten::_chunk_cat", "float32"),  # tensors of one dim or more
    ("aten::_nested_compute_contiguous_strides_offsets", "int64"),  # a non-empty sizes table
    ("aten::_convert_indices_from_coo_to_csr", "int64"),  # sorted 1-d row indices
    ("aten::_convert_indices_from_csr_to_coo", "int32"),  # a valid crow/col pair
    ("aten::mkldnn_rnn_layer", "float32"),  # one LSTM layer's weights and states
    # ops that had no valid case
    ("aten::_fft_c2r", "float32"),  # a complex half spectrum and its last dim's size
    ("aten::_foreach_mm", "float32"),  # lists of matrices that multiply
    ("aten::_no_grad_embedding_renorm_", "float32"),  # rows of an embedding and indices into it
    ("aten::_sobol_engine_initialize_state_", "int64"),  # a (dimension, 30) int64 state
    ("aten::_sparse_mm", "float32"),
    ("aten::fbgemm_pack_quantized_matrix.KN", "float32"),  # an int8 matrix and its sizes
    ("aten::copy_sparse_to_sparse_", "float32"),  # COO self and src of one shape
    ("aten::histogramdd.TensorList_bins", "float32"),  # one edge tensor per coordinate
    ("aten::histogramdd", "float32"),  # one bin count per coordinate
    ("aten::_histogramdd_from_bin_tensors", "float32"),
    ("aten::_grid_sampler_2d_cpu_fallback_backward", "float32"),  # a grid of (x, y) pairs
    ("aten::__upsample.size_list", "float32"),  # (N, C, *spatial) and a size per spatial dim
    ("aten::percentFormat", "none"),  # one %d per value
    ("aten::_dyn_quant_pack_4bit_weight", "float32"),  # uint8 pairs of 4-bit weights, scales per block
    ("aten::_dyn_quant_matmul_4bit", "float32"),  # weights packed by _dyn_quant_pack_4bit_weight
    ("aten::_sparse_compressed_tensor_with_dims", "float32"),  # a compressed layout given
    ("aten::_convert_weight_to_int4pack_for_cpu", "float32"),  # (16N, K) 4-bit values
    ("aten::_weight_int4pack_mm_for_cpu", "float32"),  # a weight from that packing, groups of 32/64
    ("aten::_sparse_mask_projection", "float32"),  # a COO mask of self's shape
    ("aten::_ncf_view", "float32"),  # one value per leading entry of input_shape
    # ops whose valid cases were luck in default sweeps (a cell of one or two valid cases)
    ("aten::channel_shuffle", "float32"),  # (N, C, *) and groups dividing C
    ("aten::native_channel_shuffle", "int64"),
    ("aten::channel_shuffle.out", "bool"),
    ("aten::split_copy.Tensor_out", "float32"),  # one out per piece, of the piece's shape
    ("aten::one_hot", "int64"),  # class indices below num_classes
    ("aten::vander", "complex64"),  # a 1-d x
    ("aten::histogram.bins_tensor", "float32"),  # 1-d increasing bin edges
    ("aten::gradient.tensorarray", "float32"),  # one coordinate tensor per dim, as long as it
    ("aten::gradient.tensorarrayint", "int64"),
    ("aten::sparse_bsr_tensor.crow_col_value", "int32"),  # (nnz, 1, 1) values, their dtype given
    ("aten::sparse_bsc_tensor.ccol_row_value", "float16"),
    ("aten::_sparse_csr_tensor_unsafe", "bool"),
    ("aten::_to_sparse_bsr.out", "float32"),  # a block-sparse out of self's blocks
    ("aten::_to_sparse_bsc.out", "int64"),
    ("aten::_set_item.t", "none"),  # an index within the list
    ("aten::select.t", "none"),  # list[idx]: an index within the list
    ("aten::__getitem__.t", "none"),  # the same for list[idx] and list.pop(idx) (seed 23 drew 5 of 5 out of range)
    ("aten::pop.t", "none"),
    ("aten::dequantize.any", "none"),  # a tuple of quantized tensors
    ("aten::IntImplicit", "int32"),  # a 0-d integer tensor
    ("aten::count", "none"),  # a string and a substring
    ("aten::_unsafe_index.Tensor_hacked_twin", "float32"),  # an in-range index per leading dim
    ("aten::_unsafe_index_put.hacked_twin", "bfloat16"),
    ("aten::_index_put_impl_.hacked_twin", "int32"),  # in range: its unsafe=True skips the check
    ("aten::sparse_mask", "float32"),  # a COO mask
    ("aten::sparse_mask.out", "complex64"),  # and a COO out
    # whole counts but in edges cases (a huge count ran past the case timeout); the functional, since
    # sizing binomial.out's out runs it as its case is drawn, NaN counts included
    ("aten::binomial", "float32"),
    # what each kernel's one caller passes, since these internal kernels check nothing themselves
    ("aten::_embedding_bag_backward", "float32"),  # the forward's offset2bag, bag_size, maximum_indices
    ("aten::_embedding_bag_dense_backward.out", "float32"),
    ("aten::_embedding_bag_per_sample_weights_backward", "float32"),  # the sum mode
    ("aten::_embedding_bag_sparse_backward", "float32"),  # no scale_grad_by_freq with sparse
    ("aten::_scaled_mm_v2", "float32"),  # list scales, tensor- or row-wise recipes, no swizzle
    ("aten::_scaled_mm_v2.out", "bfloat16"),
    ("aten::_slow_conv2d_backward.grad_input", "float32"),  # contiguous operands, the output's gradient
    ("aten::_slow_conv2d_backward.output_mask_out", "float32"),
    ("aten::_convolution_double_backward", "float32"),  # gradients of input, weight, bias and output
    ("aten::_compute_linear_combination.out", "float32"),  # a zero-filled out of the result's shape
    ("aten::_grouped_mm", "float32"),  # offs and 16-byte-aligned strides
    ("aten::_grouped_mm", "bfloat16"),
    ("aten::_fused_moving_avg_obs_fq_helper", "float32"),  # an observer's finite running range
    ("aten::_fused_moving_avg_obs_fq_helper.out", "bfloat16"),  # the observer off outside float32
    ("aten::_fake_quantize_learnable_per_tensor_affine", "float32"),  # one-element scale and zero point
    ("aten::_fake_quantize_learnable_per_tensor_affine_backward", "float32"),
    ("aten::linalg_multi_dot.out", "float32"),  # two or more chained tensors
    ("aten::_make_per_channel_quantized_tensor", "int32"),  # qint32 storage, per-channel parameters
    ("aten::_amp_foreach_non_finite_check_and_unscale_", "float16"),  # 0-d float32 flag and scale
    ("aten::_ncf_unsqueeze", "float32"),  # a 1-d self and an ndim of 2 or more
    ("aten::_rowwise_prune", "float32"),  # a 2-d weight and a bool mask per row
    ("aten::to_mkldnn.out", "float32"),  # an mkldnn out of the result's size (it cannot be resized)
    ("aten::to_mkldnn.out", "bfloat16"),
    # a tensor taken as one number: 0-d (opdb/rules/shapes.toml); valid only as the simplest case
    ("aten::Bool.Tensor", "int64"),
    ("aten::Complex.int_Tensor", "float32"),
    ("aten::item", "complex64"),
    ("aten::_assert_async.msg", "bool"),  # and nonzero
    ("aten::_foreach_add.Tensor", "float32"),
    ("aten::_foreach_div_.Tensor", "bfloat16"),
    ("aten::linspace.Tensor_Tensor_out", "float32"),
    ("aten::logspace.Scalar_Tensor", "int32"),
    ("aten::randint_like.Tensor", "bool"),  # and a whole high of 1 or more
    ("aten::eq.Tensor_list", "float32"),
    ("aten::remove.Tensor", "float32"),  # and the element one of the list's
    ("aten::index.list_Tensor", "complex64"),
    # likewise: valid only by luck in default sweeps
    ("aten::linalg_matrix_norm", "float32"),  # an order the norm has
    ("aten::linalg_matrix_norm.str_ord", "complex64"),
    ("aten::tensordot", "float32"),  # contracted dims of one size, lists of one length
    ("aten::tensordot.out", "int64"),
    ("aten::glu", "float32"),  # an even halving dim
    ("aten::glu_backward.grad_input", "bfloat16"),  # and a gradient of half its length
    ("aten::glu_backward_jvp", "float32"),
    ("aten::multi_margin_loss_backward", "float32"),  # p of 1 or 2
    ("aten::embedding_sparse_backward", "float32"),  # no scale_grad_by_freq, indices below num_weights
    ("aten::unflatten_dense_tensors", "int64"),  # a flat buffer of the tensors' length
    ("aten::normal.float_Tensor", "float32"),  # std >= 0
    ("aten::poisson", "float32"),  # a rate >= 0
    ("aten::einsum", "float32"),  # an equation of the tensors' subscripts
    ("aten::unfold_backward", "int64"),  # the gradient of unfold's windows, a positive step
    ("aten::unfold_backward.out", "float32"),
    ("aten::scaled_dot_product_attention", "float32"),  # (B, H, L, E) query, (B, H, S, E) key and value
    ("aten::sparse_resize", "float32"),  # a COO self grown, its own sparse and dense dims
    ("aten::sparse_resize.out", "complex64"),
    ("aten::sparse_resize_and_clear", "bool"),
    ("aten::resize_as_sparse_", "float16"),  # a larger COO template
    ("aten::embedding_renorm", "float32"),  # indices below the rows
    ("aten::embedding_renorm.out", "complex64"),
    ("aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", "float32"),  # one-element qparams
    ("aten::fused_moving_avg_obs_fake_quant", "float32"),  # the observer's state, as its helper gets it
    ("aten::slice_scatter", "bfloat16"),  # src of the slice's shape
    ("aten::slice_scatter.out", "int64"),
    ("aten::gradient.scalarrayint", "float32"),  # one number per dim taken along
    ("aten::gradient.scalarint", "complex64"),  # dims at least edge_order + 1 long
    ("aten::_sparse_log_softmax", "float32"),  # a COO self, no half_to_float
    ("aten::_sparse_softmax.out", "float32"),
    ("aten::tensor_split.tensor_indices_or_sections", "bool"),  # an int64 count or indices, 0-d or 1-d
    ("aten::_transformer_encoder_layer_fwd", "float32"),  # one embedding size throughout
    ("aten::_masked_softmax_backward", "bfloat16"),  # a bool mask of the gradient's shape
    ("aten::fake_quantize_per_channel_affine_cachemask_backward", "int64"),  # and the same for the cached mask
    ("aten::_trilinear", "float32"),  # bilinear's expansions of input1, weight, input2
    ("aten::_weight_norm_differentiable_backward", "float16"),  # dim 0 or last, a contiguous grad_w
    ("aten::as_strided_scatter", "int64"),  # a non-overlapping view inside self, src of its size
    ("aten::as_strided_scatter.out", "float16"),
    ("aten::normal.Tensor_float_out", "float32"),  # an out of the result's shape: an empty one is not resized
    ("aten::clamp", "bfloat16"),  # at least one bound
    ("aten::clamp.Tensor_out", "float16"),
    ("aten::clip_.Tensor", "float16"),
    ("aten::divmod.int_float", "none"),  # a non-zero divisor (ZeroDivisionError otherwise)
    ("aten::divmod.float", "none"),
    ("aten::_nnpack_spatial_convolution.out", "float32"),  # 4-d input: its SymInt[2] per-dim lists
]

# ops whose only tensor is 0-d by definition: no case has a tensor of two elements
_ZERO_DIM_ONLY = {
    "aten::IntImplicit", "aten::Bool.Tensor", "aten::Complex.int_Tensor", "aten::item", "aten::_assert_async.msg",
    "aten::linspace.Tensor_Tensor_out", "aten::logspace.Scalar_Tensor", "aten::eq.Tensor_list", "aten::remove.Tensor",
    "aten::index.list_Tensor",
}  # fmt: skip


def _runs(op, case) -> bool:
    args, kwargs = case.materialize(lambda t: t, CPU)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op.resolve()(*args, **kwargs)
    except Exception:
        return False
    return True


def _has_empty_tensor(case) -> bool:
    return any(s.numel == 0 for s in case.tensor_specs())


def _hangs(case) -> bool:
    """A case a known CPU bug never returns from: an empty substring for str.count, a NaN
    count for binomial (docs/evaluation/audit/other.toml; drawn on purpose, see their families)."""
    args, kwargs = case.materialize(lambda t: t, CPU)
    if "substr" in kwargs or len(args) > 1 and isinstance(args[1], str):
        return (kwargs.get("substr") if "substr" in kwargs else args[1]) == ""
    counts = kwargs.get("count", args[0] if args else None)
    return isinstance(counts, torch.Tensor) and bool(torch.isnan(counts).any())


# cases this test, which runs them in its own process, must not run (a sweep isolates them and
# reports the crash or the timeout): the CPU kernel kills the process on an empty input
# (masked-softmax-empty-segfault), or never returns
_KNOWN_TO_KILL = {"aten::_masked_softmax_backward": _has_empty_tensor, "aten::count": _hangs, "aten::binomial": _hangs}


@pytest.mark.parametrize("name,cell", RULES, ids=[f"{n}[{c}]" for n, c in RULES])
def test_every_drawn_case_is_valid_on_cpu(name, cell):
    op = opdb.lookup(name)
    skip = _KNOWN_TO_KILL.get(name)
    valid, reason = probe(op, cell, examples=8, seed=0, skip=skip)
    assert valid == 8, reason


@pytest.mark.parametrize("name,cell", RULES, ids=[f"{n}[{c}]" for n, c in RULES])
def test_the_shrunk_case_stays_valid(name, cell):
    op = opdb.lookup(name)
    strategy = from_schema(op, cell)
    quick = settings(
        max_examples=30,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    # the simplest case of all, and the simplest with a tensor of two elements or more: what a
    # shrinker ends at when a failure needs a little data
    kills = _KNOWN_TO_KILL.get(name, lambda case: False)  # a known CPU hang is not run here
    simplest = find(strategy, lambda case: True, settings=quick)
    assert kills(simplest) or _runs(op, simplest), simplest.describe()
    if op.has_tensor_inputs and name not in _ZERO_DIM_ONLY:
        larger = find(strategy, lambda case: any(t.numel >= 2 for t in case.tensor_specs()), settings=quick)
        assert kills(larger) or _runs(op, larger), larger.describe()


def test_the_builtin_dict_key_is_the_dict_key_tensor():
    """Dict[Tensor, t] hashes by identity: the key must be the very tensor the dict holds."""
    op = opdb.lookup("aten::__getitem__.Dict_Tensor")
    case = find(from_schema(op, "float32"), lambda c: True, settings=settings(database=None, max_examples=5))
    (d, key), _ = case.materialize(lambda t: t, CPU)
    assert any(k is key for k in d)


@pytest.mark.parametrize("name,cell", [("aten::_fused_adam_", "float16"), ("aten::_fused_sgd_", "bfloat16")])
def test_fused_optimizers_reach_past_one_cpu_vector_in_half_precision(name, cell):
    """A published bug of the 16-bit fused steps skipped whole vector blocks: only parameters
    longer than one vector (16 or 32 lanes) reach it, and the case must stay valid."""
    op = opdb.lookup(name)
    quick = settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    case = find(from_schema(op, cell), lambda c: min(t.numel for t in c.args[0]) > 16, settings=quick)
    assert _runs(op, case), case.describe()


@pytest.mark.parametrize("name", ["aten::smooth_l1_loss_backward", "aten::mkldnn_rnn_layer"])
def test_floating_only_kernels_skip_their_other_cells_with_the_reason(name):
    """Kernels that kill the process on integer tensors (opdb/rules/dtypes.toml) are not drawn
    in those cells; their floating cells still are."""
    from generators import Untestable

    op = opdb.lookup(name)
    with pytest.raises(Untestable, match="floating tensors only"):
        from_schema(op, "int32")
    from_schema(op, "float32")


@pytest.mark.parametrize("name", ["aten::index_put_.hacked_twin", "aten::index_put.hacked_twin"])
def test_checked_hacked_twins_are_valid_but_for_the_deliberate_out_of_bounds_index(name):
    """The checked index_put twins point their first index past the end in one case in six on
    purpose (a device that accepts it is a missing_error); every other case is valid."""
    op = opdb.lookup(name)
    valid, reason = probe(op, "float32", examples=24, seed=3)
    assert valid >= 16, reason


@pytest.mark.parametrize("name,cell", [("aten::_add_batch_dim", "float32"), ("aten::_conj", "complex64")])
def test_ops_whose_result_the_runner_must_unwrap_pass_on_the_cpu(name, cell):
    """_add_batch_dim returns a legacy vmap BatchedTensor (taken out with _remove_batch_dim, opdb
    hint result = legacy_batched), _conj a conjugate view (compared after resolve_conj): both
    were 'no valid case' or a conform internal error."""
    from conform.backends import CPUBackend
    from conform.run.execute import run_case

    op = opdb.lookup(name)
    quick = settings(max_examples=5, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    outcomes = []

    @quick
    @given(from_schema(op, cell))
    def run(case):
        outcomes.append(run_case(op, case, CPUBackend()))

    run()
    assert outcomes and all(r.outcome.value == "pass" and not r.invalid for r in outcomes), [
        (r.outcome, r.message) for r in outcomes
    ]


def test_a_block_sparse_spec_keeps_its_block_size_through_json():
    from generators.case import Case, TensorSpec

    spec = TensorSpec(shape=(4, 6), dtype="float32", layout="sparse_bsr", blocksize=(2, 3))
    back = Case.from_json(Case(op="aten::x", args=(spec,)).to_json()).args[0]
    assert back == spec
    t = back.materialize(lambda t: t)
    assert t.layout == torch.sparse_bsr and t.values().shape[1:] == (2, 3)
    with pytest.raises(ValueError, match="blocksize"):
        TensorSpec(shape=(4, 5), dtype="float32", layout="sparse_bsr", blocksize=(2, 3))


@pytest.mark.parametrize("name", ["aten::_amp_update_scale_", "aten::_amp_update_scale.out"])
def test_the_grad_scaler_update_gets_its_zero_d_state(name):
    """Every tensor of the grad scaler's update is 0-d by contract (a scale, an int32 growth
    tracker, a found_inf flag), so the larger shrunk form of the rule tests above has no meaning
    here: every drawn case and the simplest one are valid."""
    op = opdb.lookup(name)
    valid, reason = probe(op, "float32", examples=8, seed=0)
    assert valid == 8, reason
    quick = settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    simplest = find(from_schema(op, "float32"), lambda case: True, settings=quick)
    assert _runs(op, simplest), simplest.describe()


def test_a_per_channel_quantized_result_is_judged_not_an_internal_error():
    """A qint32 per-channel result met golden's distance measure as a cast to float64, which
    quantized tensors refuse: the cell stopped with "conform internal error" after one example."""
    from conform.backends import resolve
    from conform.run import execute

    op = opdb.lookup("aten::_make_per_channel_quantized_tensor")
    quick = settings(max_examples=5, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    case = find(from_schema(op, "int32"), lambda c: True, settings=quick)
    r = execute.run_case(op, case, resolve("cpu"), grad=False)
    assert r.outcome.value == "pass", r.message


@pytest.mark.parametrize("name", ["aten::_scaled_mm", "aten::_scaled_mm_v2"])
def test_float8_operands_are_compared_not_an_internal_error(name):
    """The tolerance's input scale asked isfinite of the float8 operands, which has no kernel:
    every cell of the scaled matmuls stopped with "conform internal error" after one example."""
    from conform.backends import resolve
    from conform.run import execute

    op = opdb.lookup(name)
    quick = settings(max_examples=5, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    case = find(from_schema(op, "float32"), lambda c: True, settings=quick)
    r = execute.run_case(op, case, resolve("cpu"), grad=False)
    assert r.outcome.value == "pass", r.message


def test_conv_tbc_backward_gets_the_gradient_of_its_output():
    """conv_tbc_backward's self is the gradient of conv_tbc's output (T + 2 * pad - kernel + 1
    steps, C_out channels), not a second input: drawn as one, one case in ten was valid. The
    kernel views its operands, so a non-contiguous layout is still rejected now and then ("view
    size is not compatible"): most cases, and the shrunk one, are valid."""
    op = opdb.lookup("aten::conv_tbc_backward")
    valid, reason = probe(op, "float32", examples=16, seed=3)
    assert valid >= 12, reason
    quick = settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    assert _runs(op, find(from_schema(op, "float32"), lambda case: True, settings=quick))


def test_a_per_dim_list_of_fixed_length_sets_the_spatial_rank():
    """_nnpack_spatial_convolution's SymInt[2] padding: a 4-d input (N, C, H, W), as its kernel
    requires ("NNPack convolutionOutput expects 4D input Tensor"), not one to three drawn dims."""
    from types import SimpleNamespace

    from generators.families.conv import _spatial_rank

    def never(*a, **k):
        raise AssertionError("the rank is the schema's, not drawn")

    for name in ("aten::_nnpack_spatial_convolution", "aten::_nnpack_spatial_convolution.out", "aten::im2col"):
        assert _spatial_rank(SimpleNamespace(op=opdb.lookup(name), draw=never)) == 2
    drawn = SimpleNamespace(op=opdb.lookup("aten::convolution"), draw=lambda s, label: 3)
    assert _spatial_rank(drawn) == 3  # SymInt[] lists: any rank


def test_strides_follow_an_optional_size_drawn_as_none():
    # _assert_tensor_metadata(a, SymInt[]? size=None, SymInt[]? stride=None, ...): its stride
    # once followed a None size into a TypeError, lost as a conform internal error in sweeps
    op = opdb.lookup("aten::_assert_tensor_metadata")
    quick = settings(max_examples=1000, database=None, deadline=None, suppress_health_check=list(HealthCheck))

    def size_and_stride(case):
        return (list(case.args[1:3]) + [None, None])[:2]

    case = find(
        from_schema(op, "float32"),
        lambda c: size_and_stride(c)[0] is None and size_and_stride(c)[1] is not None,
        settings=quick,
    )
    assert size_and_stride(case)[1] == list(torch.empty(case.args[0].shape).stride())


@pytest.mark.parametrize(
    "name", ["aten::_weight_norm_interface_backward", "aten::_weight_norm_differentiable_backward"]
)
def test_weight_norm_backwards_get_the_norms_their_forward_saved(name):
    # norms drawn apart from saved_v (a subnormal under a column of norm 3.9) made the backward
    # divide by zero where golden did not: a generator's invention, not the kernel's fault. The
    # interface's backward takes them from its caller's forward run on exact inputs: the norms of
    # v, rounded once to float32 (a bfloat16 forward's own overflow is not passed on)
    op = opdb.lookup(name)
    exact = name == "aten::_weight_norm_interface_backward"

    @settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(op, "bfloat16"))
    def check(case):
        grad_w, v, g, norms, dim = case.materialize(lambda t: t, CPU)[0]
        if exact:
            expected = torch.ops.aten._weight_norm_interface(v.double(), g.double(), dim)[1].float()
        else:
            expected = torch.ops.aten._weight_norm_interface(v, g, dim)[1]
        assert norms.dtype == torch.float32 and torch.equal(norms.nan_to_num(1, 2, 3), expected.nan_to_num(1, 2, 3))

    check()


def test_weight_norm_backward_without_a_forward_kernel_for_the_dtype_says_no_kernel():
    # the forward that gives the norms has no int64 kernel: the cell says so, as the backward
    # would, instead of a generator error stored as a conform internal error (sweeps G2/H2)
    from conform.backends import CPUBackend
    from conform.config import CellSettings
    from conform.run.cell import run_cell

    op = opdb.lookup("aten::_weight_norm_interface_backward")
    r = run_cell(op, "int64", CPUBackend(), CellSettings(seed=3, hypothesis_db=None))
    assert r.skip_reason == "no_kernel", r.message
