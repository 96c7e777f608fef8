"""`conform model`: a model's trace, its ops judged as cases, the whole model, the culprit, the verdict.

On the emulated device: the ops a model's step sends to the fallback are listed by name; a seeded
1% error in one native kernel is named as the culprit, and no other op; with no fault, nothing
diverges. On the CPU: torchvision, timm and transformers models (tiny, offline) trace and judge.
"""

from __future__ import annotations

import json

import pytest
import torch

import opdb
from cli_helpers import conform_here
from conform.model import backendbench, cases, spec, trace, whole
from conform.model.verdict import check_model
from conform.outcomes import Outcome


@pytest.fixture(scope="module")
def emu_available():
    from conform.backends import emulated

    try:
        emulated.load()
    except emulated.EmulatorUnavailable as e:
        if "compiler" in str(e) or "ninja" in str(e):
            pytest.skip(f"the emulated device cannot be built here: {e}")
        raise


@pytest.fixture
def fallback_on(monkeypatch):
    monkeypatch.setenv("CONFORM_EMU_FALLBACK", "1")


# -- the emulated device -------------------------------------------------------------------


def test_the_ops_emu_serves_by_the_fallback_are_listed_by_name(emu_available, fallback_on):
    from conform.backends.emulated import EmulatedBackend

    r = check_model("emu_model_kernels:tanh_mlp", EmulatedBackend(), timing=False)
    # emu computes add, mul, div, tanh, sum natively (emu.cpp's kNativeComputeOps); the linear
    # layers' addmm and mm, tanh's backward and the loss's pow and mean reach its fallback
    assert sorted(r.fallback_ops) == [
        "aten::addmm",
        "aten::mean",
        "aten::mm",
        "aten::pow.Tensor_Scalar",
        "aten::tanh_backward",
    ]
    assert r.verdict == "runs_with_fallback"
    assert not r.whole.diverges and r.whole.divergence is None
    tanh = next(o for o in r.ops if o.op == "aten::tanh")
    assert tanh.outcome is Outcome.PASS and tanh.module == "Sequential.1"


def test_without_the_fallback_the_model_fails_at_the_first_op_emu_lacks(emu_available, monkeypatch):
    from conform.backends.emulated import EmulatedBackend

    monkeypatch.delenv("CONFORM_EMU_FALLBACK", raising=False)
    r = check_model("emu_model_kernels:tanh_mlp", EmulatedBackend(), timing=False)
    assert r.verdict == "fails"
    assert r.fails_at["op"] == "aten::addmm" and r.fails_at["module"] == "Sequential.0"
    assert "not currently implemented for the emu device" in r.fails_at["error"]
    assert r.trace.where.startswith("cpu")  # the device's trace stopped: the ops are the CPU's
    assert next(o for o in r.ops if o.op == "aten::addmm").outcome is Outcome.NOT_IMPLEMENTED


def test_a_failing_step_names_an_op_the_model_calls_not_the_recorders_own(emu_available, monkeypatch):
    # the recorder read integer inputs' ranges with min and max on the device: emu has no such
    # kernel, and the step failed at "an unknown op" the model never calls
    from conform.backends.emulated import EmulatedBackend

    monkeypatch.delenv("CONFORM_EMU_FALLBACK", raising=False)
    r = check_model("emu_model_kernels:embedding_mlp", EmulatedBackend(), timing=False)
    assert r.verdict == "fails"
    # (the embedding runs; the loss's square is the first op emu has no kernel for)
    assert r.fails_at["op"] == "aten::pow.Tensor_Scalar", r.fails_at
    assert "aten::min" not in r.fails_at["error"] and "aten::max" not in r.fails_at["error"]


def test_a_seeded_one_percent_error_is_named_as_the_culprit_and_no_other_op(emu_available, fallback_on):
    from emu_model_kernels import EmuWrongSigmoid

    r = check_model("emu_model_kernels:sigmoid_mlp", EmuWrongSigmoid(), timing=False)
    assert r.verdict == "diverges"
    d = r.whole.divergence
    assert d is not None and d.op == "aten::sigmoid" and d.module == "Sequential.1" and d.phase == "forward"
    assert d.device_err > 100 * max(d.cpu_err, 1e-9)
    assert "aten.sigmoid.default" in d.repro
    # the replayed cases agree: the sigmoid's values mismatch, and no other op's
    assert {o.op for o in r.ops if o.outcome is Outcome.MISMATCH} == {"aten::sigmoid"}
    doc = json.loads(__import__("conform.model.verdict", fromlist=["render"]).render(r, "json"))
    assert doc["verdict"] == "diverges" and doc["divergence"]["op"] == "aten::sigmoid"


def test_with_no_fault_nothing_diverges(emu_available, fallback_on):
    from emu_model_kernels import EmuRightSigmoid

    r = check_model("emu_model_kernels:sigmoid_mlp", EmuRightSigmoid(), timing=False)
    assert r.verdict == "runs_with_fallback"
    assert not r.whole.diverges and r.whole.divergence is None
    assert r.whole.ratio is not None and r.whole.ratio <= 2
    assert next(o for o in r.ops if o.op == "aten::sigmoid").outcome is Outcome.PASS


def test_the_shadow_pass_alone_names_nothing_on_a_right_device(emu_available, fallback_on):
    from emu_model_kernels import EmuRightSigmoid, sigmoid_mlp

    built = spec.Built("mlp", *_split(sigmoid_mlp()))
    assert whole.shadow_pass(built, EmuRightSigmoid(), train=True) is None


def _split(got):
    model, x = got
    return model, (x,), {}


# -- the trace ---------------------------------------------------------------------------------


def test_the_trace_keeps_metadata_and_no_tensor():
    import emu_model_kernels

    built = spec.Built("mlp", *_split(emu_model_kernels.tanh_mlp()))
    tr = trace.trace_on(built, "cpu", train=True)
    ops = tr.ops()
    assert {"aten::addmm", "aten::tanh", "aten::tanh_backward", "aten::mm"} <= set(ops)
    addmm = ops["aten::addmm"][0]
    assert addmm.module == "Sequential.0" and addmm.phase == "forward"
    assert ops["aten::tanh_backward"][0].phase == "backward"
    # the weight's transpose is a view with swapped strides: kept, not made contiguous
    t_args = [a for c in ops["aten::mm"] for a in c.args if isinstance(a, trace.TensorMeta) and not a.contiguous]
    assert t_args
    for c in tr.calls:  # metadata only: no tensor anywhere
        for leaf in torch.utils._pytree.tree_leaves((c.args, c.kwargs)):
            assert not isinstance(leaf, torch.Tensor)


def test_size_one_strides_are_canonical():
    a = torch.empty(4, 1, 3)
    b = torch.empty(4, 3, 1).transpose(1, 2)  # size-1 dim with another stride: the same layout
    assert trace.meta_of(a) == trace.meta_of(b)
    assert trace.meta_of(torch.empty(3, 4).t()).stride == (1, 4)


def test_integer_ranges_are_recorded_and_cases_draw_within_them():
    emb = torch.nn.Embedding(50, 4)
    built = spec.Built("emb", emb, (torch.tensor([[3, 7, 12]]),), {})
    tr = trace.trace_on(built, "cpu", train=True)
    call = tr.ops()["aten::embedding"][0]
    assert call.int_ranges[1] == (3, 12)
    case = cases.to_case(call)
    args, _ = case.materialize(lambda t: t, torch.device("cpu"))
    assert 3 <= int(args[1].min()) and int(args[1].max()) <= 12


def test_labels_padded_with_the_ignore_index_are_replayed_as_classes():
    # a causal LM shifts its labels and pads them with -100 (cross-entropy's ignore_index): the
    # recorded range [-100, 9] made almost every replayed label out of bounds, and the loss was
    # never judged
    logits = torch.randn(6, 10)
    labels = torch.tensor([3, 9, 0, -100, 5, -100])
    built = spec.Built("ce", _CrossEntropy(), (logits, labels), {})
    tr = trace.trace_on(built, "cpu", train=False)
    call = tr.ops()["aten::nll_loss_forward"][0]
    assert call.int_ranges[1] == (-100, 9)
    op = opdb.lookup("aten::nll_loss_forward")
    args, _ = cases.to_case(call, op).materialize(lambda t: t, torch.device("cpu"))
    assert 0 <= int(args[1].min()) and int(args[1].max()) <= 9
    from conform.backends import resolve

    judged = {o.op: o.outcome for o in cases.judge_trace(tr, resolve("cpu"), timing=False)}
    assert judged["aten::nll_loss_forward"] is Outcome.PASS, judged


def test_embedding_bag_offsets_are_replayed_sorted():
    # offsets drawn at random within their recorded range were unsorted, and every replayed
    # _embedding_bag case was refused ("offsets[-1] ... got 12"): the op was never judged
    def make():
        bag = torch.nn.EmbeddingBag(20, 4, mode="mean")
        return spec.Built("bag", bag, (torch.tensor([1, 5, 7, 2, 9, 11, 3, 4, 0, 19]), torch.tensor([0, 3, 4, 8])), {})

    from conform.backends import resolve

    for fake, last in ((False, 8), (True, 10)):  # fake tensors record no range: up to len(indices)
        tr = trace.trace_on(make(), "cpu", train=False, fake=fake, builder=make)
        call = tr.ops()["aten::_embedding_bag"][0]
        op = opdb.lookup("aten::_embedding_bag")
        args, _ = cases.to_case(call, op).materialize(lambda t: t, torch.device("cpu"))
        assert args[2].tolist() == sorted(args[2].tolist()) and args[2][0] == 0 and args[2][-1] == last
        judged = {o.op: o.outcome for o in cases.judge_trace(tr, resolve("cpu"), timing=False)}
        assert judged["aten::_embedding_bag"] is Outcome.PASS, judged


class _CrossEntropy(torch.nn.Module):
    def forward(self, logits, labels):
        return torch.nn.functional.cross_entropy(logits, labels)


def test_a_strided_traced_tensor_is_replayed_with_its_strides():
    call = trace.TracedCall("aten::gelu", (trace.TensorMeta((2, 3), "float32", (1, 4), 1),), {}, calls=1)
    args, _ = cases.to_case(call).materialize(lambda t: t, torch.device("cpu"))
    assert args[0].stride() == (1, 4) and args[0].storage_offset() == 1


def test_backendbench_format_round_trips():
    call = trace.TracedCall(
        "aten::add.Tensor",
        (
            trace.TensorMeta((2, 3), "float16", (3, 1)),
            trace.TensorMeta((3, 2), "float16", (1, 3)).__class__((2, 3), "float16", (1, 2)),
        ),
        {"alpha": 2},
        calls=7,
    )
    other = trace.TracedCall(
        "aten::_to_copy", (trace.TensorMeta((4,), "int32", (1,)),), {"dtype": {"dtype": "int64"}}, calls=1
    )
    text = backendbench.dumps(trace.Trace(calls=[call, other]))
    assert "Operator: aten.add.Tensor\ncnt: 7, ((T([2, 3], f16), T([2, 3], f16, [1, 2])), {'alpha': 2})" in text
    assert "Operator: aten._to_copy.default\ncnt: 1, ((T([4], i32),), {'dtype': i64})" in text
    back = backendbench.loads(text)
    assert [(c.op, c.args, c.kwargs, c.calls) for c in back.calls] == [
        (c.op, c.args, c.kwargs, c.calls) for c in (call, other)
    ]


def test_a_backendbench_trace_line_it_cannot_read_is_one_error():
    with pytest.raises(backendbench.TraceFormatError, match="line 2"):
        backendbench.loads("Operator: aten.relu.default\ncnt: x, garbage\n")


# -- SPEC --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["resnet18", "torchvision:", ":x"])
def test_a_malformed_spec_is_one_line(text):
    with pytest.raises(spec.SpecError, match="torchvision:NAME"):
        spec.parse(text)


def test_the_cli_rejects_a_bad_spec_with_exit_2(tmp_path):
    p = conform_here("model", "nonsense", "--db", tmp_path / "c.db", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "torchvision:NAME" in p.stderr


def test_the_cli_stores_a_verdict_and_prints_json(tmp_path):
    from conform.store import Store
    from conform.store.model_results import latest_models, model_ops

    db = tmp_path / "c.db"
    args = ("model", "emu_model_kernels:tanh_mlp", "--device", "cpu", "--format", "json", "--db", db)
    p = conform_here(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "runs" and doc["divergence"] is None
    addmm = next(o for o in doc["ops"] if o["op"] == "aten::addmm")
    assert addmm["outcome"] == "pass" and addmm["calls"] == 2 and addmm["cases"][0]["cpu_s"] > 0
    store = Store(db, readonly=True)
    (row,) = latest_models(store)
    assert row.spec == "emu_model_kernels:tanh_mlp" and row.verdict == "runs"
    assert {o.op for o in model_ops(store, row.id)} >= {"aten::addmm", "aten::tanh"}


# -- model libraries on the CPU (tiny, offline) -------------------------------------------------


def _needs(name):
    import importlib.util

    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (the models extra)")


@pytest.mark.parametrize("model_type", ["gpt2", "llama", "bert"])
def test_a_tiny_transformers_model_traces_and_judges_on_the_cpu(model_type):
    _needs("transformers")
    from conform.backends import resolve

    r = check_model(f"hf:{model_type}", resolve("cpu"), timing=False)
    assert r.verdict == "runs", r.fails_at
    assert len(r.trace.calls) > 20
    assert "aten::embedding" in {o.op for o in r.ops}
    # every op passes, attention's backward too: replayed with the out and logsumexp its forward
    # gives on the replayed q, k, v (cases.DERIVED), not with values no forward makes
    assert all(o.outcome in (Outcome.PASS, Outcome.SKIPPED) for o in r.ops), [
        (o.op, o.outcome, o.failing.message) for o in r.ops if o.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    ]


@pytest.mark.parametrize(
    "model_type, main, also",
    [
        ("t5", "input_ids", {"decoder_input_ids"}),  # an encoder-decoder needs its decoder's ids
        ("wav2vec2", "input_values", set()),  # a waveform
        ("whisper", "input_features", {"decoder_input_ids"}),  # mel frames, and a decoder
        ("vit", "pixel_values", set()),  # an image
    ],
)
def test_a_transformers_model_gets_the_inputs_it_takes(model_type, main, also):
    # every model was fed input_ids alone: t5 and wav2vec2 failed on the CPU itself, and whisper's
    # tiny config was left without its attention heads
    _needs("transformers")
    built = spec.parse(f"hf:{model_type}").build()
    assert set(built.kwargs) >= {main} | also, built.kwargs.keys()
    built.model.train()
    spec.step(built.model, built.args, built.kwargs, train=True)  # runs on the CPU
    # no random training-time change: wav2vec2's layer drop and SpecAugment masks are off
    assert not any(
        v
        for k, v in vars(built.model.config).items()
        if isinstance(v, float) and ("layerdrop" in k or k.endswith("mask_time_prob"))
    )


def test_a_torchvision_video_model_gets_a_clip():
    _needs("torchvision")
    built = spec.parse("torchvision:r3d_18").build()
    (clip,) = built.args
    assert clip.dim() == 5  # (batch, channels, frames, height, width), not an image


def test_a_tiny_timm_model_traces_and_judges_on_the_cpu():
    _needs("timm")
    from conform.backends import resolve

    r = check_model("timm:test_vit", resolve("cpu"), timing=False)
    assert r.verdict == "runs"
    assert {"aten::convolution", "aten::native_layer_norm"} <= {o.op for o in r.ops}


@pytest.mark.e2e
def test_a_timm_model_that_fake_tensors_cannot_run_is_traced_on_real_tensors():
    _needs("timm")
    vit = spec.parse("timm:vit_tiny_patch16_224")
    built = vit.build()
    with pytest.raises(Exception, match="local_scalar_dense|data-dependent|DataDependent"):
        trace.trace_on(built, "cpu", train=True, fake=True, builder=vit.builder())  # timm's init calls .item()
    from conform.backends import resolve

    tr = trace.trace_model(built, resolve("cpu"), train=True, builder=vit.builder())
    assert tr.where == "cpu" and len(tr.calls) > 50


@pytest.mark.e2e
def test_torchvision_resnet18_traces_and_judges_on_the_cpu():
    _needs("torchvision")
    from conform.backends import resolve

    r = check_model("torchvision:resnet18", resolve("cpu"), timing=False)
    assert r.verdict == "runs" and r.trace.where == "cpu (fake tensors)"
    assert {"aten::convolution", "aten::convolution_backward", "aten::native_batch_norm"} <= {o.op for o in r.ops}
    conv_back = next(o for o in r.ops if o.op == "aten::convolution_backward")
    assert conv_back.outcome is Outcome.PASS  # judged despite its 2.4-million-element weight gradients


def test_a_missing_model_library_is_one_line_naming_the_extra(monkeypatch):
    import importlib.util

    from conform.model import libraries

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "timm" else real(n, *a))
    with pytest.raises(libraries.MissingLibrary, match=r'timm is not installed.*pip install "conform\[models\]"'):
        libraries.require("timm")


# -- the gate ----------------------------------------------------------------------------------


def _stored_verdict(db, verdict, *, spec="hf:gpt2", divergence=None):
    from conform.store import Store
    from conform.store.model_results import record_model
    from test_store import ENV

    report = {
        "model": spec,
        "dtype": "float32",
        "train": True,
        "verdict": verdict,
        "fails_at": None,
        "divergence": divergence,
        "whole": None,
        "times": {},
        "traced": {},
        "ops": [
            {"op": "aten::gelu", "outcome": "pass", "calls": 2, "cases": [], "module": "h.0.mlp", "message": ""}
            | {"device_s": 1e-5, "cpu_s": 2e-5}
        ],
    }
    store = Store(db)
    record_model(store, ENV, report, repros={})
    store.close()


def _gate(*args):
    from click.testing import CliRunner

    from conform.cli.gate import gate_command

    return CliRunner().invoke(gate_command, list(args))


def test_gate_fails_a_model_that_ran_on_the_baseline_and_now_diverges(tmp_path):
    base, now = tmp_path / "base.db", tmp_path / "now.db"
    _stored_verdict(base, "runs")
    _stored_verdict(now, "diverges", divergence={"op": "aten::gelu", "module": "h.0.mlp"})
    r = _gate("--baseline", str(base), "--db", str(now), "--model", "hf:gpt2")
    assert r.exit_code == 1 and "REGRESSION hf:gpt2: runs -> diverges (diverges at aten::gelu in h.0.mlp)" in r.output
    _stored_verdict(now, "runs_with_fallback")
    r = _gate("--baseline", str(base), "--db", str(now), "--model", "hf:gpt2")
    assert r.exit_code == 0 and "gate passed" in r.output


def test_gate_on_one_database_compares_a_model_with_its_previous_verdict(tmp_path):
    db = tmp_path / "c.db"
    _stored_verdict(db, "fails")
    _stored_verdict(db, "fails")
    r = _gate("--baseline", str(db), "--db", str(db), "--model", "hf:gpt2")
    assert r.exit_code == 0  # it never ran: nothing broke


def test_a_backendbench_trace_is_judged_op_by_op(tmp_path, emu_available, monkeypatch):
    from conform.backends.emulated import EmulatedBackend

    monkeypatch.delenv("CONFORM_EMU_FALLBACK", raising=False)
    path = tmp_path / "trace.txt"
    path.write_text(
        "Operator: aten.mul.Tensor\ncnt: 3, ((T([4, 5], f32), T([4, 5], f32, [1, 4])), {})\n"
        "Operator: aten.erfinv.default\ncnt: 1, ((T([6], f32),), {})\n"
    )
    r = check_model(f"backendbench:{path}", EmulatedBackend(), timing=False)
    assert [(o.op, o.outcome) for o in r.ops] == [
        ("aten::mul.Tensor", Outcome.PASS),
        ("aten::erfinv", Outcome.NOT_IMPLEMENTED),
    ]
    assert r.verdict == "fails" and r.fails_at["op"] == "aten::erfinv"


def test_an_unwritable_database_is_said_before_the_model_runs(tmp_path):
    db = tmp_path / "not.db"
    db.write_bytes(b"this is not a database" * 100)
    p = conform_here("model", "emu_model_kernels:tanh_mlp", "--device", "cpu", "--db", db, cwd=tmp_path)
    assert p.returncode == 2 and "conform: building" not in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_merge_copies_model_verdicts_once(tmp_path):
    from conform.store import Store
    from conform.store.merging import merge_databases
    from conform.store.model_results import latest_models, model_ops

    a, out = tmp_path / "a.db", tmp_path / "all.db"
    _stored_verdict(a, "diverges", divergence={"op": "aten::gelu", "module": "h.0.mlp"})
    merge_databases([a], out)
    (stats,) = merge_databases([a], out)  # twice: nothing more
    assert stats.models == 0
    store = Store(out, readonly=True)
    (row,) = latest_models(store)
    assert row.verdict == "diverges" and row.divergence["op"] == "aten::gelu"
    assert [o.op for o in model_ops(store, row.id)] == ["aten::gelu"]
