"""Arguments that must come from another op's result: max-pooling backwards take the indices
their forward returned, max unpooling takes a pooling's indices, recurrent ops a parameter list
of the right count and shapes."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings

from generators import TensorSpec, from_schema
from generators.coverage_probe import probe
from opdb import lookup

_settings = settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
_cpu = torch.device("cpu")


def _real(case):
    return case.materialize(lambda t: t, _cpu)


def test_explicit_values_survive_layouts():
    for layout in ("contiguous", "transposed", "sliced", "sliced_last", "offset"):
        t = TensorSpec((2, 3), "int64", layout=layout, data=tuple(range(6))).materialize(lambda x: x)
        assert torch.equal(t, torch.arange(6).reshape(2, 3)), layout
        assert layout != "sliced_last" or t.stride() == (6, 2)


def test_max_pool_backward_indices_are_the_forward_indices():
    op = lookup("aten::max_pool2d_with_indices_backward")

    @_settings
    @given(from_schema(op, "float32"))
    def check(case):
        args, kwargs = _real(case)
        grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices = args
        out, expected = torch.ops.aten.max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
        assert torch.equal(indices, expected)
        assert grad_output.shape == out.shape

    check()
    for name in ("aten::adaptive_max_pool3d_backward", "aten::fractional_max_pool3d_backward"):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_max_unpool_indices_are_distinct_and_inside_the_output():
    op = lookup("aten::max_unpool2d")

    @_settings
    @given(from_schema(op, "float32"))
    def check(case):
        (self, indices, output_size), _ = _real(case)
        assert indices.shape == self.shape
        planes = indices.flatten(0, -3) if indices.dim() == 4 else indices
        for plane in planes:
            flat = plane.flatten()
            assert len(set(flat.tolist())) == flat.numel(), "two values sent to one place"
            assert 0 <= flat.min() and flat.max() < output_size[0] * output_size[1]

    check()


def test_recurrent_ops_get_a_full_parameter_list():
    op = lookup("aten::lstm.input")

    @_settings
    @given(from_schema(op, "float32"))
    def check(case):
        (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first), _ = _real(case)
        dirs = 2 if bidirectional else 1
        assert len(params) == num_layers * dirs * (4 if has_biases else 2)
        assert len(hx) == 2 and hx[0].shape == hx[1].shape == (
            num_layers * dirs,
            input.shape[0 if batch_first else 1],
            params[1].shape[1],
        )
        torch.ops.aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)

    check()
    for name in ("aten::gru.data", "aten::rnn_relu.input", "aten::lstm_cell"):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_ldl_solve_takes_a_factorisation_and_ctc_backward_the_forward_results():
    op = lookup("aten::linalg_ldl_solve")

    @_settings
    @given(from_schema(op, "float64"))
    def check(case):
        (ld, pivots, b), kwargs = _real(case)
        # LD and pivots factor a nonsingular symmetric matrix: a finite right-hand side has a
        # finite solution (random LD and pivots give inf, nan or an error)
        x = torch.linalg.ldl_solve(ld, pivots, torch.ones_like(b), hermitian=kwargs.get("hermitian", False))
        assert x.shape == b.shape and torch.isfinite(x).all()

    check()
    op = lookup("aten::_ctc_loss_backward")

    @_settings
    @given(from_schema(op, "float32"))
    def check_ctc(case):
        args, _ = _real(case)
        grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank = args[:8]
        expected = torch.ops.aten._ctc_loss(log_probs, targets, input_lengths, target_lengths, blank)
        assert torch.allclose(nll, expected[0], rtol=0, atol=0, equal_nan=True)
        assert torch.allclose(log_alpha, expected[1], rtol=0, atol=0, equal_nan=True)
        assert not (targets == blank).any(), "the blank is no target class"

    check_ctc()


def test_values_that_must_be_exact_survive_json():
    spec = TensorSpec((3,), "complex64", data=(1 + 2j, float("nan"), 3))
    from generators.case import Case

    back = Case.from_json(Case(op="x", args=(spec,)).to_json()).args[0]
    assert back.data[0] == 1 + 2j and back.data[1] != back.data[1]


def test_sparse_outs_stay_sparse_in_every_out_variant():
    from generators.case import Case
    from generators.variants import out_variants

    out = TensorSpec((2, 3), "float32", layout="sparse_coo")
    for variant in out_variants(Case(op="aten::hspmm.out", kwargs={"out": out}), {"out": (2, 3)}).values():
        assert variant.kwargs["out"].materialize(lambda x: x).layout == torch.sparse_coo
    # a blocked out stays a whole number of blocks, even wrongly sized (a sweep once lost
    # _to_sparse_bsc.out cells to a (2, 7) out with (1, 2) blocks)
    out = TensorSpec((2, 6), "float32", layout="sparse_bsc", blocksize=(1, 2))
    for variant in out_variants(Case(op="aten::_to_sparse_bsc.out", kwargs={"out": out}), {"out": (2, 6)}).values():
        assert variant.kwargs["out"].materialize(lambda x: x).layout == torch.sparse_bsc
    for name in (
        "aten::hspmm.out",
        "aten::sspaddmm",
        "aten::narrow.Tensor",
        "aten::col2im",
        "aten::istft",
        "aten::linalg_cond.p_str",
        "aten::affine_grid_generator_backward",
        "aten::multilabel_margin_loss_backward",
    ):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_packed_sequences_have_batch_sizes_that_never_grow():
    op = lookup("aten::_pad_packed_sequence")

    @_settings
    @given(from_schema(op, "float32"))
    def check(case):
        (data, batch_sizes, batch_first, padding_value, total_length), _ = _real(case)
        sizes = batch_sizes.tolist()
        assert sizes == sorted(sizes, reverse=True) and data.shape[0] == sum(sizes)
        assert total_length >= len(sizes)

    check()
    for name in (
        "aten::_pack_padded_sequence_backward",
        "aten::_scaled_dot_product_attention_math",
        "aten::_spdiags.out",
        "aten::_upsample_lanczos2d_aa.vec",
    ):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_sobol_state_is_the_engines_own():
    from torch.quasirandom import SobolEngine

    op = lookup("aten::_sobol_engine_draw")

    @_settings
    @given(from_schema(op, "float32"))
    def check(case):
        args, kwargs = _real(case)
        quasi, n, state, dimension = args[:4]
        assert torch.equal(state, SobolEngine(dimension).sobolstate)
        # SobolEngine's first point is the origin; the kernel continues from it
        engine = SobolEngine(dimension)
        engine.draw(1)
        points, _ = torch._sobol_engine_draw(quasi, n, state, dimension, 0, torch.float32)
        assert torch.equal(points, engine.draw(n))

    check()
    for name in (
        "aten::_sobol_engine_scramble_",
        "aten::_native_multi_head_attention",
        "aten::_jagged_to_padded_dense_forward",
        "aten::_padded_dense_to_jagged_forward",
        "aten::_weight_int8pack_mm",
        "aten::_reshape_from_tensor",
        "aten::_linalg_check_errors",
    ):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"
