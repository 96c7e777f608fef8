"""Malformed arguments (an input one longer, empty, of one more or one fewer dim; integers at their
extremes) must be refused or computed with: a kernel that dies on them is a `crash`, recorded with
the call that died, and one that loops over an extreme count is not judged."""

from __future__ import annotations

import ctypes
import json
import math
import os
import sqlite3
import subprocess
import sys
import time

import torch

import opdb
from cli_helpers import conform, conform_env
from conform.backends import CPUBackend
from conform.run import execute
from conform.run.contained import Disposable
from generators.case import Case, TensorSpec
from generators.variants import (
    EXTREME_FLOATS,
    EXTREME_INTEGERS,
    JOINT_MALFORMED_SHAPES,
    MALFORMED_SHAPES,
    malformed_dtypes,
    malformed_inputs,
    malformed_numbers,
)


def test_each_input_is_malformed_in_every_way_one_at_a_time():
    case = Case(
        "aten::addmm.out",
        (TensorSpec((3,), "float32"), TensorSpec((2, 4), "float32"), TensorSpec((4, 3), "float32")),
        {"out": TensorSpec((0,), "float32")},
    )
    found = malformed_inputs(case, {"out"})
    assert len(found) == 3 * len(MALFORMED_SHAPES) + len(JOINT_MALFORMED_SHAPES)
    shapes = [tuple(tuple(a.shape) for a in c.args) for _, c in found[: len(MALFORMED_SHAPES)]]
    assert shapes == [((4,), (2, 4), (4, 3)), ((0,), (2, 4), (4, 3)), ((2, 3), (2, 4), (4, 3)), ((), (2, 4), (4, 3))]
    assert all(c.kwargs["out"].shape == (0,) for _, c in found)  # the out is not an input
    assert found[0][0] == "argument 1 one longer in its last dim"
    # and every input at once: two arguments empty together pass a check of one against the other
    (what, joint), (_, batched) = found[-2:]
    assert what == "every input empty in its first dim"
    assert [tuple(a.shape) for a in joint.args] == [(0,), (0, 4), (0, 3)]
    assert [tuple(a.shape) for a in batched.args] == [(2, 3), (2, 2, 4), (2, 4, 3)]


def test_the_first_tensor_of_a_list_is_malformed_too():
    case = Case("aten::cat", ([TensorSpec((2, 3), "float32"), TensorSpec((2, 3), "float32", seed=2)], 0))
    found = dict(malformed_inputs(case))
    assert len(found) == len(MALFORMED_SHAPES)  # one input (the list): nothing joint
    tensors = found["the first tensor of argument 1 empty in its first dim"].args[0]
    assert isinstance(tensors, list) and [t.shape for t in tensors] == [(0, 3), (2, 3)]
    assert tensors[1] is case.args[0][1]


def test_a_0d_input_is_malformed_as_an_empty_vector_and_as_two_numbers():
    case = Case("aten::mul.Tensor", (TensorSpec((), "float32"), TensorSpec((2, 3), "float32")))
    found = dict(malformed_inputs(case))
    assert found["argument 1 empty, of shape (0,) in place of 0-d"].args[0].shape == (0,)
    assert found["argument 1 of shape (2,) in place of 0-d"].args[0].shape == (2,)
    # nothing longer or with fewer dims than 0-d; the 0-d one in the joint variants too
    assert not [w for w in found if w.startswith("argument 1") and ("longer" in w or "fewer" in w)]
    assert [a.shape for a in found["every input empty in its first dim"].args] == [(0,), (0, 3)]
    assert len(found) == 2 + len(MALFORMED_SHAPES) + len(JOINT_MALFORMED_SHAPES)


def test_each_input_is_given_the_other_kind_of_number_with_its_values():
    index = TensorSpec((3,), "int64", values="index", high=4, seed=3)
    case = Case(
        "aten::index_select",
        (TensorSpec((4, 2), "float32"), 0, index),
        {"flag": TensorSpec((2,), "bool"), "z": TensorSpec((2,), "complex64")},
    )
    found = dict(malformed_dtypes(case))
    assert sorted(found) == [
        "argument 1 of an integer dtype (int64)",
        "argument 3 of a floating dtype (float32)",
        "argument 3 of an integer dtype (int32)",
    ]
    assert list(found["argument 3 of an integer dtype (int32)"].args[2].data) == index.materialize(lambda t: t).tolist()
    floated = found["argument 3 of a floating dtype (float32)"].args[2]
    assert floated.dtype == "float32" and floated.shape == (3,)
    assert list(floated.data) == index.materialize(lambda t: t).tolist()  # the values the case drew
    assert found["argument 1 of an integer dtype (int64)"].args[0].materialize(lambda t: t).dtype == torch.int64


def test_an_empty_gradient_in_place_of_a_0d_one_kills_a_real_kernel(tmp_path):
    """The real kernel (pytorch#146790): multi_margin_loss_backward reads an empty grad_output
    where its reduction makes a 0-d one due; the first case hypothesis draws has a 0-d one."""
    db = tmp_path / "m.db"
    op = "aten::multi_margin_loss_backward"
    proc = conform("run", "--ops", op, "--dtypes", "float32", "--db", db, "-q", "--no-bench", cwd=tmp_path)
    assert proc.returncode != 2, proc.stderr
    with sqlite3.connect(db) as c:
        outcome, message = c.execute("SELECT outcome, message FROM results").fetchone()
    assert outcome == "crash", message
    assert "in place of 0-d" in message, message


def test_malformed_arguments_run_again_on_the_first_case_past_the_simplest_sizes(monkeypatch):
    from conform.run import cell
    from conform.run.cell import CellSettings

    seen = []
    monkeypatch.setattr(cell.execute, "run_malformed", lambda op, case, backend, **kw: seen.append(case) or 0)
    r = cell.run_cell(
        opdb.lookup("aten::replication_pad2d"), "float32", CPUBackend(), CellSettings(seed=11, hypothesis_db=None)
    )
    assert r.outcome == "pass", r.message
    assert len(seen) == 2, [c.describe() for c in seen]
    assert not cell._wide(seen[0]) and cell._wide(seen[1])
    assert min(seen[1].args[0].shape[-2:]) >= cell.MALFORMED_WIDE
    assert all(t.layout == "contiguous" for c in seen for t in c.tensor_specs())  # the path every layout shares


def test_contiguous_inputs_keep_shapes_and_shared_specs():
    from generators.variants import contiguous_inputs

    a = TensorSpec((2, 3), "float32", layout="transposed", seed=4)
    case = Case("aten::cat", ([a, a, TensorSpec((2, 3), "float32")], 0), {"out": TensorSpec((0,), "float32")})
    made = contiguous_inputs(case)
    first, second, third = made.args[0]
    assert first.layout == "contiguous" and first is second  # one object in two places stays one
    assert third is case.args[0][2] and made.kwargs["out"] is case.kwargs["out"]  # already contiguous
    assert first.materialize(lambda t: t).is_contiguous() and first.shape == a.shape


def test_integer_arguments_are_set_to_their_extremes_one_at_a_time():
    op = opdb.lookup("aten::max_pool2d_with_indices_backward")
    x = TensorSpec((1, 2, 4, 4), "float32")
    indices = TensorSpec((1, 2, 2, 2), "int64", values="index", high=16)
    case = Case(op.qualname, (TensorSpec((1, 2, 2, 2), "float32"), x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices))
    found = dict(malformed_numbers(op, case))
    extremes = len(EXTREME_INTEGERS)
    assert len(found) == 4 * (extremes + 2) + 2  # four int lists, the indices' two limits; not the bool
    assert found["argument 3 with every element 2**63 - 1"].args[2] == [2**63 - 1, 2**63 - 1]
    assert found["argument 4 one element shorter"].args[3] == [2]
    assert found["argument 6 one element longer"].args[5] == [1, 1, 1]
    smallest = found["argument 8 with every element its dtype's smallest"].args[7]
    assert smallest.data == (-(2**63),) * 8 and smallest.shape == (1, 2, 2, 2)
    assert found["argument 8 with every element its dtype's largest"].args[7].data == (2**63 - 1,) * 8
    assert all(c.args[6] is False for c in found.values())
    # an int by keyword, and an int32 tensor's own limits
    op = opdb.lookup("aten::bincount")
    case = Case(op.qualname, (TensorSpec((3,), "int32", values="index", high=4),), {"minlength": 2})
    found = dict(malformed_numbers(op, case))
    assert found["'minlength' set to -2**63"].kwargs["minlength"] == -(2**63)
    assert found["argument 1 with every element its dtype's largest"].args[0].data == (2**31 - 1,) * 3
    # floats and Scalars as the kind of number they are
    op = opdb.lookup("aten::upsample_nearest2d.vec")
    case = Case(op.qualname, (TensorSpec((1, 1, 2, 2), "float32"), None, [2.0, 3.0]))
    found = dict(malformed_numbers(op, case))
    assert len(found) == len(EXTREME_FLOATS) + 2
    assert math.isnan(found["argument 3 with every element nan"].args[2][1])
    op = opdb.lookup("aten::hardtanh")
    found = dict(malformed_numbers(op, Case(op.qualname, (TensorSpec((3,), "float32"), -1.0, 2))))
    assert found["argument 2 set to -inf"].args[1] == -math.inf and found["argument 3 set to 0"].args[2] == 0


def _dies(request):
    if request == "die":
        ctypes.string_at(0)  # a read of address 0: SIGSEGV
    if request == "hang":
        while True:
            pass
    if request == "exit":
        os._exit(3)
    if request == "raise":
        raise RuntimeError("refused")


def test_a_disposable_fork_names_the_call_that_killed_it_and_skips_one_that_hangs():
    fork = Disposable(_dies, timeout_s=0.5)
    try:
        started = time.monotonic()
        assert fork.run(["ok", "raise", "hang", "ok", "die", "ok"]) == (4, 1)
        assert time.monotonic() - started < 30
        # a new fork after a death; an exit that is not a death by a signal is not one
        assert fork.run(["ok", "exit", "ok"]) == (None, 0)
        assert fork.run(["ok"] * 3) == (None, 0)
    finally:
        fork.close()


def test_malformed_calls_run_on_the_plain_cpu_in_an_isolated_process_only(monkeypatch):
    op = opdb.lookup("aten::mm")
    case = Case("aten::mm", (TensorSpec((2, 3), "float32"), TensorSpec((3, 4), "float32")), {})
    # in the caller's own process (no isolation records a death): none, or a death kills the caller
    assert execute.run_malformed(op, case, CPUBackend()) == 0
    announced = []
    monkeypatch.setattr(execute, "on_variant", lambda case, name: announced.append(name))
    assert execute.run_malformed(op, case, CPUBackend()) == 2 * len(MALFORMED_SHAPES) + len(JOINT_MALFORMED_SHAPES)
    assert "a malformed argument: argument 2 with one dim fewer" in announced
    assert "a malformed argument: every input empty in its first dim" in announced
    # the second run's shapes go through the disposable fork: made here only where one died there
    announced.clear()
    made = execute.run_malformed(op, case, CPUBackend(), contain_shapes=True)
    assert made == 2 * len(MALFORMED_SHAPES) + len(JOINT_MALFORMED_SHAPES) and announced == []
    # the numbers (none here) run in a disposable fork first: only a death there is made again here
    op = opdb.lookup("aten::sum.dim_IntList")
    case = Case(op.qualname, (TensorSpec((2, 3), "float32"), [1], False))
    announced.clear()
    # six numbers (the dim list's extremes and lengths) and the input of an integer dtype
    assert execute.run_malformed(op, case, CPUBackend(), numbers=True) == len(MALFORMED_SHAPES) + 7
    assert len(announced) == 2 * len(MALFORMED_SHAPES)  # each shape, then the drawn case again

    class Other(CPUBackend):
        name = "other"

        def device_context(self):
            return None

    assert execute.run_malformed(op, case, Other()) == 0


def test_a_kernel_that_dies_on_an_empty_argument_is_a_crash_with_that_call(tmp_path):
    """The real kernel (pytorch#136709): _weight_norm of an empty v dies in the CPU kernel."""
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::_weight_norm", "--dtypes", "float32", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode != 2, proc.stderr
    with sqlite3.connect(db) as c:
        outcome, message = c.execute("SELECT outcome, message FROM results").fetchone()
        case, repro = c.execute('SELECT f."case", f.repro FROM failures f').fetchone()
    assert outcome == "crash", message
    assert "a malformed argument: argument 1 empty in its first dim" in message, message
    assert json.loads(case)["args"][0]["__tensor__"]["shape"][0] == 0
    # its script replays the call that died
    script = tmp_path / "repro.py"
    script.write_text(repro)
    replay = subprocess.run([sys.executable, script], capture_output=True, text=True, env=conform_env(), timeout=120)
    assert replay.returncode < 0 or replay.returncode > 128, (replay.returncode, replay.stdout[-500:])


def test_a_structured_matrix_loses_its_edge_pattern_where_its_shape_is_no_longer_square():
    # an entry of a square invertible matrix at an extreme: the malformed shapes are not square
    a = TensorSpec((3, 3), "float32", values="invertible", edges=1)
    found = dict(malformed_inputs(Case("aten::linalg_inv", (a,))))
    assert found["argument 1 one longer in its last dim"].args[0].edges is None
    assert found["argument 1 with one more leading dim"].args[0].edges == 1  # (2, 3, 3): still square
    assert all(c.args[0].values == "invertible" for c in found.values())


def test_a_death_on_a_malformed_argument_keeps_what_the_cell_found_before_it(tmp_path):
    """The real kernels: the CPU's flash attention dies on an empty key and computes wrong values
    for an input whose last dim is strided (pytorch PR #187506). The malformed arguments run last,
    so the cell is a `crash` whose further failure is the layout relation's mismatch."""
    row = _only_cell(tmp_path, "aten::_scaled_dot_product_flash_attention_for_cpu", "--seed", "2")
    assert row["outcome"] == "crash" and "a malformed argument" in row["message"], row["message"]
    kinds = [(f["outcome"], f["message"].split("]")[0]) for f in json.loads(row["further_failures"])]
    assert ("mismatch", "[layout relation") in kinds, kinds


def _only_cell(tmp_path, op: str, *options: str) -> dict:
    """The one float32 cell of `op` that a run stores, its failure row's columns with it."""
    db = tmp_path / "one.db"
    proc = conform("run", "--ops", op, "--dtypes", "float32", *options, "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode != 2, proc.stderr
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        row = c.execute(
            "SELECT r.outcome, r.message, f.further_failures FROM results r LEFT JOIN failures f ON f.result_id = r.id"
        ).fetchone()
    return dict(row)


def test_the_malformed_arguments_run_after_the_cells_other_cases(monkeypatch):
    from conform.run import cell
    from conform.run.cell import CellSettings

    order = []
    monkeypatch.setattr(cell.execute, "run_malformed", lambda op, case, backend, **kw: order.append("malformed") or 0)
    r = cell.run_cell(
        opdb.lookup("aten::replication_pad2d"),
        "float32",
        CPUBackend(),
        CellSettings(seed=11, hypothesis_db=None),
        on_case=lambda case: order.append("case"),
        on_malformed=lambda case, earlier: order.append(("armed", len(earlier["failures"]))),
    )
    assert r.outcome == "pass", r.message
    first = order.index(("armed", 0))
    assert "case" not in order[first:] and order[first:].count("malformed") == 2, order
