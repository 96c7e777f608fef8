"""Copy-paste reproduction: a standalone script for one case of one op on one device.

The script needs torch only: it carries the source of `generators.tensor` verbatim (the module
is torch-only by design), so every tensor is rebuilt by the very code conform tested it with:
seeded CPU values, quantization, explicit values, structured matrices, and the strided or sparse
layout built on the device. A backend developer can paste it into a bug report without
installing conform. It runs the op on the CPU and on the device, and prints both results and
where they differ.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math

from generators import tensor as tensor_module
from generators.case import Case, TensorSpec

_DEVICES = {"mps": "mps", "cuda": "cuda", "xpu": "xpu", "cpu": "cpu", "meta": "meta"}

_PRELUDE = '''\
DEVICE = torch.device({device!r})


def make(shape, dtype, device="cpu", **fields):
    """The case's tensor: values drawn on the CPU from its seed, its layout built on `device`."""
    return TensorSpec(tuple(shape), dtype, **fields).materialize(lambda t: t.to(device))


def show(name, x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        print(f"{{name}}: {{x.dtype}} {{list(x.shape)}}")
        print(x.cpu() if x.device.type != "meta" else "(meta: no values)")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            show(f"{{name}}[{{i}}]", v)
    else:
        print(f"{{name}}: {{x!r}}")


def difference(a, b, name="output"):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"{{name}}: {{a.dtype}}{{list(a.shape)}} on the device vs {{b.dtype}}{{list(b.shape)}} on the CPU")
            return
        if a.device.type == "meta":
            return
        a, b = a.detach().cpu(), b.detach()
        if a.is_floating_point() or a.is_complex():
            close = torch.isclose(a, b, equal_nan=True)
            print(f"{{name}}: {{int((~close).sum())}} / {{a.numel()}} elements differ; "
                  f"max abs difference {{(a - b).abs().nan_to_num(0.0).max().item() if a.numel() else 0.0}}")
        else:
            print(f"{{name}}: {{int((a != b).sum())}} / {{a.numel()}} elements differ")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            difference(x, y, f"{{name}}[{{i}}]")
    elif a != b:
        print(f"{{name}}: {{a!r}} on the device vs {{b!r}} on the CPU")


def run(device):
    """The op on `device`; returns (result, the arguments after the call)."""
{body}
'''

_EPILOGUE = '''

try:
    expected, expected_args = run(torch.device("cpu"))
except Exception as e:
    expected = expected_args = None
    print(f"CPU raised {{type(e).__name__}}: {{e}}")
try:
    actual, actual_args = run(DEVICE)
    if DEVICE.type == "mps":
        torch.mps.synchronize()
    elif DEVICE.type == "cuda":
        torch.cuda.synchronize()
except Exception as e:
    actual = actual_args = None
    print(f"{{DEVICE}} raised {{type(e).__name__}}: {{e}}")
if expected is not None:
    show("cpu", expected)
if actual is not None:
    show(str(DEVICE), actual)
if expected is not None and actual is not None:
    difference(actual, expected)
    difference(actual_args, expected_args, "arguments after the call")
'''


def _expr(v, *, device_var: str = "device") -> str:
    """Python source that rebuilds one case argument on `device_var`."""
    if isinstance(v, TensorSpec):
        parts = [repr(list(v.shape)), repr(v.dtype)]
        for f in dataclasses.fields(TensorSpec):
            val = getattr(v, f.name)
            if f.name in ("shape", "dtype") or val == f.default:
                continue
            parts.append(f"{f.name}={_expr(val, device_var=device_var)}")
        parts.append(f"device={device_var}")
        return f"make({', '.join(parts)})"
    if isinstance(v, tuple):
        inner = ", ".join(_expr(x, device_var=device_var) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(_expr(x, device_var=device_var) for x in v) + "]"
    if isinstance(v, dict) and len(v) == 1:
        ((k, x),) = v.items()
        if k == "dtype":
            return f"torch.{x}"
        if k in ("layout", "memory_format"):
            return f"torch.{x}"
        if k == "device":
            return device_var if x == "target" else f"torch.device({x!r})"
        if k == "dict":
            items = ", ".join(f"{_expr(key, device_var=device_var)}: {_expr(val, device_var=device_var)}" for key, val in x)
            return "{" + items + "}"
    if isinstance(v, float) and v != v:
        return 'float("nan")'
    if isinstance(v, float) and math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    if isinstance(v, complex) and not (math.isfinite(v.real) and math.isfinite(v.imag)):
        return f"complex({_expr(v.real)}, {_expr(v.imag)})"
    return repr(v)


def _tensor_builder_source() -> str:
    """generators/tensor.py as script text: its imports and definitions, without its docstring."""
    src = inspect.getsource(tensor_module)
    body = src.split("from __future__ import annotations\n", 1)[1]
    return "# -- conform's tensor builder: generators/tensor.py, verbatim " + "-" * 28 + "\n" + body.strip() + "\n\n\n"


def repro_script(op, case: Case, backend_name: str) -> str:
    """A standalone script (torch only) that runs `case` of `op` on the CPU and the device.

    `op` is an OpSpec or a qualname ("aten::add.Tensor"); `backend_name` the device under test
    ("mps", "cuda:1", ...): a name torch does not know as a device runs on the CPU with a note.
    """
    qualname = op if isinstance(op, str) else op.qualname
    base, _, overload = qualname.split("::", 1)[-1].partition(".")
    call = f"torch.ops.aten.{base}.{overload or 'default'}"
    device = _DEVICES.get(backend_name.split(":", 1)[0], None)
    note = ""
    if device is None:
        note = f"# {backend_name!r} is not a torch device name: set DEVICE to the device it tests.\n"
        device = "cpu"
    elif ":" in backend_name:
        device = backend_name
    args = ", ".join(_expr(a) for a in case.args)
    kwargs = ", ".join(f"{k}={_expr(v)}" for k, v in case.kwargs.items())
    body_lines = [
        f"    torch.manual_seed({case.seed})",
        f"    args = ({args}{',' if len(case.args) == 1 else ''})",
        f"    kwargs = dict({kwargs})",
        f"    result = {call}(*args, **kwargs)",
        "    return result, (args, kwargs)",
    ]
    header = (
        f'"""Reproduce {case.describe()} on {backend_name} (generated by conform).\n\n'
        f"Case: {json.dumps(case.to_json())}\n"
        '"""\n'
    )
    prelude = _PRELUDE.format(device=device, body="\n".join(body_lines))
    return header + "from __future__ import annotations\n\n" + note + _tensor_builder_source() + prelude + _EPILOGUE.format()
