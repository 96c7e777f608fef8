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
    for layout in ("contiguous", "transposed", "sliced", "offset"):
        t = TensorSpec((2, 3), "int64", layout=layout, data=tuple(range(6))).materialize(lambda x: x)
        assert torch.equal(t, torch.arange(6).reshape(2, 3)), layout


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
        assert len(hx) == 2 and hx[0].shape == hx[1].shape == (num_layers * dirs, input.shape[0 if batch_first else 1], params[1].shape[1])
        torch.ops.aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)

    check()
    for name in ("aten::gru.data", "aten::rnn_relu.input", "aten::lstm_cell"):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"
