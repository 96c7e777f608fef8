"""BackendBench's trace text format: traces move between BackendBench and conform.

    Operator: aten.add.Tensor
    cnt: 76, ((T([2, 1024, 768], f16), T([2, 1024, 768], f16)), {})

One "Operator:" line per overload, then one "cnt:" line per distinct call: its count, then its
positional arguments and keyword arguments as Python literals, with T(shape, dtype) for a tensor
(T(shape, dtype, strides) where it is not contiguous) and dtypes by short name. Storage offsets,
module paths, phases and integer ranges have no place in it: they are dropped on export and
unknown on import (cases then draw indices as for a trace on fake tensors).
"""

from __future__ import annotations

import ast

from conform.errors import ConformError
from conform.model.trace import TensorMeta, Trace, TracedCall, canonical_stride, contiguous_stride

SHORT = {
    "bfloat16": "bf16",
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "complex32": "c32",
    "complex64": "c64",
    "complex128": "c128",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "bool": "b8",
    "uint8": "u8",
}
LONG = {v: k for k, v in SHORT.items()}


class TraceFormatError(ConformError):
    pass


def _value(v) -> str:
    if isinstance(v, TensorMeta):
        dtype = SHORT.get(v.dtype, v.dtype)
        if v.stride == contiguous_stride(v.shape):
            return f"T({list(v.shape)}, {dtype})"
        return f"T({list(v.shape)}, {dtype}, {list(v.stride)})"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, tuple):
        inner = ", ".join(_value(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, dict) and len(v) == 1:
        ((k, x),) = v.items()
        if k == "dtype":
            return SHORT.get(x, x)
        if k == "device":
            return repr("cpu" if x == "cpu" else "cuda")
        if k in ("layout", "memory_format"):
            return f"torch.{x}"
    return repr(v)


def dumps(trace: Trace) -> str:
    """`trace` in BackendBench's format, ops in the order first called."""
    lines: list[str] = []
    for op, calls in trace.ops().items():
        base, _, overload = op.split("::", 1)[1].partition(".")
        lines.append(f"Operator: aten.{base}.{overload or 'default'}")
        for c in calls:
            args = "(" + ", ".join(_value(a) for a in c.args) + ("," if len(c.args) == 1 else "") + ")"
            kwargs = "{" + ", ".join(f"'{k}': {_value(v)}" for k, v in c.kwargs.items()) + "}"
            lines.append(f"cnt: {c.calls}, ({args}, {kwargs})")
    return "\n".join(lines) + "\n"


def _parse_value(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "T":
        parts = [_parse_value(a) for a in node.args]
        shape = tuple(int(n) for n in parts[0])
        dtype = parts[1]["dtype"] if isinstance(parts[1], dict) else str(parts[1])
        stride = (
            tuple(int(s) for s in parts[2]) if len(parts) > 2 and parts[2] is not None else contiguous_stride(shape)
        )
        return TensorMeta(shape, dtype, canonical_stride(shape, stride))
    if isinstance(node, ast.Name):
        if node.id in LONG:
            return {"dtype": LONG[node.id]}
        if node.id in ("inf", "nan"):
            return float(node.id)
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise TraceFormatError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("torch", "th"):
        name = node.attr
        if name in SHORT:
            return {"dtype": name}
        if name in ("strided", "sparse_coo"):
            return {"layout": name}
        if name.endswith("_format"):
            return {"memory_format": name}
        raise TraceFormatError(f"unknown torch.{name}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _parse_value(node.operand)
        return -v
    if isinstance(node, ast.List):
        return [_parse_value(x) for x in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_parse_value(x) for x in node.elts)
    if isinstance(node, ast.Dict):
        return {_parse_value(k): _parse_value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Constant):
        if node.value in ("cuda", "cpu", "mps", "xpu"):
            return {"device": "cpu" if node.value == "cpu" else "target"}
        return node.value
    raise TraceFormatError(f"cannot read {ast.dump(node)[:80]}")


def loads(text: str) -> Trace:
    """A Trace from BackendBench's format (no values: integer ranges unknown)."""
    trace = Trace(where="imported (BackendBench trace)")
    op = None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("Operator:"):
            name = line.split(":", 1)[1].strip()
            parts = name.split(".")
            if len(parts) < 2 or parts[0] != "aten":
                raise TraceFormatError(f"line {n}: not an aten operator: {name!r}")
            base, overload = parts[1], parts[2] if len(parts) > 2 else "default"
            op = f"aten::{base}" + ("" if overload == "default" else f".{overload}")
            continue
        if not line.startswith("cnt:") or op is None:
            raise TraceFormatError(f"line {n}: expected 'Operator:' or 'cnt:', got {line[:60]!r}")
        count_text, _, call_text = line[4:].partition(",")
        try:
            count = int(count_text)
            node = ast.parse(call_text.strip(), mode="eval").body
            args, kwargs = _parse_value(node)
        except (SyntaxError, ValueError, TypeError) as e:
            raise TraceFormatError(f"line {n}: cannot read the call: {e}") from None
        trace.calls.append(TracedCall(op, tuple(args), dict(kwargs), calls=count))
    return trace
