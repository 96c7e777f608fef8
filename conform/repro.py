"""Copy-paste reproduction: a standalone script for one case of one op on one device.

The script needs torch only: every tensor is rebuilt inline from its spec (the same seeded CPU
generator calls `generators.case` makes, then the strided layout built on the device), so a
backend developer can paste it into a bug report without installing conform. It runs the op on
the CPU and on the device, and prints both results and where they differ.
"""

from __future__ import annotations

import json

from generators.case import Case, TensorSpec

_DEVICES = {"mps": "mps", "cuda": "cuda", "xpu": "xpu", "cpu": "cpu", "meta": "meta"}

_PRELUDE = '''\
import math

import torch

DEVICE = torch.device({device!r})
_RANGES = {ranges!r}


def make(shape, dtype, layout="contiguous", values="real", seed=0, low=None, high=None, requires_grad=False, device="cpu"):
    """The case's tensor: values drawn on the CPU from `seed`, the layout built on `device`."""
    dtype = getattr(torch, dtype)
    shape = tuple(shape)
    base_shape = list(shape)
    if layout == "transposed" and len(shape) >= 2:
        base_shape[-1], base_shape[-2] = base_shape[-2], base_shape[-1]
    elif layout == "sliced" and len(shape) >= 1:
        base_shape[0] *= 2
    elif layout == "expanded" and len(shape) >= 1:
        base_shape[0] = 1 if shape[0] > 0 else 0
    elif layout == "offset":
        base_shape = [math.prod(shape) + 1]
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        x = torch.rand(base_shape, generator=g) < 0.5
    elif values == "index":
        hi, lo = int(high if high is not None else 1), int(low if low is not None else 0)
        x = torch.randint(lo, max(hi, lo + 1), base_shape, generator=g, dtype=torch.int64).to(dtype)
    elif not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        lo = int(low) if low is not None else max(info.min, -9 if info.min < 0 else 0)
        hi = int(high) if high is not None else min(info.max, 9)
        if values in ("positive", "nonzero", "above_one"):
            lo = max(lo, 1)
        x = torch.randint(lo, hi + 1, base_shape, generator=g, dtype=torch.int64).to(dtype)
    else:
        real = dtype.to_real() if dtype.is_complex else dtype
        lo, hi = _RANGES.get(values, (-3.0, 3.0))
        lo = low if low is not None else lo
        hi = high if high is not None else hi
        x = torch.rand(base_shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        if values == "nonzero":
            x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.5), x)
        if dtype.is_complex:
            x = torch.complex(x, torch.rand(base_shape, generator=g, dtype=torch.float64) * (hi - lo) + lo)
        if values == "special" and x.numel() > 0:
            specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, torch.finfo(real).tiny / 4, 0.0], dtype=torch.float64)
            mask = torch.rand(base_shape, generator=g) < 0.25
            repl = specials[torch.randint(0, len(specials), base_shape, generator=g)]
            if dtype.is_complex:
                repl = torch.complex(repl, torch.zeros_like(repl))
            x = torch.where(mask, repl, x)
        x = x.to(dtype)
    t = x.to(device)
    if layout == "transposed" and t.dim() >= 2:
        t = t.transpose(-1, -2)
    elif layout == "sliced" and t.dim() >= 1:
        t = t[::2]
    elif layout == "expanded" and t.dim() >= 1:
        t = t.expand(shape)
    elif layout == "channels_last" and t.dim() == 4:
        t = t.contiguous(memory_format=torch.channels_last)
    elif layout == "channels_last" and t.dim() == 5:
        t = t.contiguous(memory_format=torch.channels_last_3d)
    elif layout == "offset":
        t = t[1:].view(shape)
    if requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex):
        t = t.detach().requires_grad_(True)
    return t


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
        for name, default in (("layout", "contiguous"), ("values", "real"), ("seed", 0), ("low", None), ("high", None), ("requires_grad", False)):
            val = getattr(v, name)
            if val != default:
                parts.append(f"{name}={val!r}")
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
    if isinstance(v, float) and v != v:
        return 'float("nan")'
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return 'float("inf")' if v > 0 else '-float("inf")'
    return repr(v)


def repro_script(op, case: Case, backend_name: str) -> str:
    """A standalone script (torch only) that runs `case` of `op` on the CPU and the device.

    `op` is an OpSpec or a qualname ("aten::add.Tensor"); `backend_name` the device under test
    ("mps", "cuda:1", ...): a name torch does not know as a device runs on the CPU with a note.
    """
    from generators.case import _RANGES

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
    call_args = ", ".join(p for p in (args, kwargs) if p)
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
    del call_args
    return header + note + _PRELUDE.format(device=device, ranges=_RANGES, body="\n".join(body_lines)) + _EPILOGUE.format()
