"""TorchScript builtins: values drawn from their JIT types run through opdb's one-node graphs."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings

from generators import Case, Untestable, cell_dtypes, from_schema
from opdb import lookup

_fast = settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _run(op, case):
    args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    return op.resolve()(*args, **kwargs)


def test_type_variable_is_bound_once_per_case():
    op = lookup("aten::append.t")

    @_fast
    @given(from_schema(op, "none"))
    def check(case):
        lst, el = case.args
        kinds = {type(x).__name__ for x in lst + [el]}
        assert len(kinds) == 1  # t[] and t agree
        assert _run(op, case)[-1] is not None

    check()


def test_dict_arguments_are_tagged_and_materialise_to_dicts():
    op = lookup("aten::keys.str")

    @_fast
    @given(from_schema(op, "none"))
    def check(case):
        (d,) = case.args
        assert set(d) == {"dict"}
        keys = [k for k, _ in d["dict"]]
        assert _run(op, case) == keys
        assert Case.from_json(case.to_json()) == case

    check()


def test_builtins_without_tensors_get_the_none_cell_and_tensor_ones_the_dtypes():
    assert cell_dtypes(lookup("aten::len.t"), ["float32", "int64"]) == ["none"]
    assert cell_dtypes(lookup("aten::dim"), ["float32", "int64"]) == ["float32", "int64"]


def test_rref_arguments_are_untestable_with_a_reason():
    try:
        from_schema(lookup("aten::to_here"), "none")
    except Untestable as e:
        assert "RRef" in str(e)
    else:
        raise AssertionError("aten::to_here takes an RRef")


def test_complex_scalars_survive_json():
    case = Case(op="aten::add.complex", args=(complex(1, -2), 3j))
    assert Case.from_json(case.to_json()) == case


def test_overloads_are_chosen_by_the_drawn_types():
    # add.default takes Scalars: an int pair must not fall through to add.int
    assert lookup("aten::add").resolve()(1, 2.5) == 3.5
    assert lookup("aten::add.int").resolve()(1, 2) == 3
    assert lookup("aten::divmod.int").resolve()(7, 2) == (3, 1)
    assert lookup("aten::format").resolve()("{}-{}", 1, "x") == "1-x"


def test_errors_inside_the_interpreter_keep_their_own_message():
    try:
        lookup("aten::__getitem__.t").resolve()([1], 5)
    except RuntimeError as e:
        assert str(e) == "list index out of range"  # not the TorchScript traceback around it
    else:
        raise AssertionError("index 5 of a one-element list")


def test_list_lookups_look_for_a_member_and_number_parsers_get_numbers():
    for name in (
        "aten::index.list_float",
        "aten::index.list_str",
        "aten::remove.float",
        "aten::Float.str",
        "aten::Int.str",
    ):
        op = lookup(name)

        @_fast
        @given(from_schema(op, "none"))
        def check(case):
            if len(case.args) == 2:
                lst, el = case.args
                assert el in lst
            _run(op, case)  # the reference accepts it: no ValueError, no stod/stoll error

        check()


def test_interpolate_builtins_get_a_batched_input_and_one_of_size_and_scale():
    op = lookup("aten::__interpolate.size_list_scale_list")

    @_fast
    @given(from_schema(op, "float32"))
    def check(case):
        args = list(case.args) + list(case.kwargs.values())
        spec, size, scale = args[:3]
        assert 3 <= len(spec.shape) <= 5
        assert (size is None) != (scale is None)
        assert _run(op, case).shape[:2] == spec.shape[:2]

    check()


def test_device_strings_name_a_device_type():
    op = lookup("aten::device")

    @_fast
    @given(from_schema(op, "none"))
    def check(case):
        assert isinstance(_run(op, case), torch.device)

    check()


def test_a_tensor_dict_key_is_one_tensor_after_json_and_in_the_repro_script(tmp_path):
    # TorchScript looks a Dict[Tensor, t] key up by identity: the key the case looks up is the
    # dictionary's own key object, and must stay one object through the JSON the runner stores
    from conform.report.repro import repro_script
    from script_runner import run_script

    op = lookup("aten::__getitem__.Dict_Tensor")
    cases = []

    @_fast
    @given(from_schema(op, "float32"))
    def draw(case):
        cases.append(case)

    draw()
    for case in cases[:3]:
        back = Case.from_json(case.to_json())
        assert back == case
        _run(op, back)  # raised KeyError when the key came back as a second object
    script = tmp_path / "repro.py"
    script.write_text(repro_script(op, cases[0], "cpu"))
    done = run_script(script)
    assert done.returncode == 0 and "verdict: pass" in done.stdout, done.stdout[-1500:] + done.stderr[-1500:]
