"""A generated case: an op's arguments as *specs*, materialised identically on any device.

Hypothesis draws `Case` objects (cheap, shrinkable, JSON-able). A case becomes real tensors only
when the runner materialises it for one side:

* values are made on the CPU from the spec's seed, so the device under test and the reference
  see the same numbers;
* the base tensor is copied to the target device and the strided layout (transposed, sliced,
  expanded, channels_last, storage offset) is built *there*, because copying a strided CPU
  tensor to MPS or CUDA yields a contiguous one and the layout would be lost.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from generators.tensor import (  # noqa: F401  (re-exported: the case's vocabulary)
    _RANGES,
    LAYOUTS,
    PER_CHANNEL_LAYOUTS,
    QUANTIZED_DTYPES,
    QUANTIZED_STORAGE,
    QUANTIZED_STORAGE_DTYPES,
    SPARSE_LAYOUTS,
    STRIDELESS_LAYOUTS,
    STRUCTURED_KINDS,
    VALUE_KINDS,
    TensorSpec,
    dtype_from_name,
    dtype_name,
)


@dataclass(frozen=True)
class Case:
    """One call of one op: positional and keyword arguments, with TensorSpecs where tensors go.

    Argument values are JSON-able Python values (int, float, bool, str, None, lists, tuples),
    `TensorSpec`s, or tagged values for torch enums: {"dtype": "float32"}, {"layout": "strided"},
    {"memory_format": "contiguous_format"}, {"device": "target"} (replaced by the side's device),
    and {"dict": [[key, value], ...]} for a TorchScript builtin's Dict argument (a tag, because
    keys may be ints, floats or tensors, and a plain dict would read as one of the tags above).
    """

    op: str  # qualname, "aten::add.Tensor"
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def tensor_specs(self) -> list[TensorSpec]:
        found: list[TensorSpec] = []
        _walk(list(self.args) + list(self.kwargs.values()), found)
        return found

    def materialize(
        self,
        to_device: Callable[[torch.Tensor], torch.Tensor],
        device: torch.device,
        *,
        dtype: torch.dtype | None = None,
    ):
        """(args, kwargs) with real tensors on `device`. `dtype` upcasts floating tensors (golden run)."""

        built: dict[int, torch.Tensor] = {}

        def build(v):
            if isinstance(v, TensorSpec):
                # one spec object in two places is one tensor in both (a Dict[Tensor, t]'s key
                # and the key looked up in it: TorchScript hashes tensors by identity)
                if id(v) in built:
                    return built[id(v)]
                d = None
                if dtype is not None and (v.torch_dtype.is_floating_point or v.torch_dtype.is_complex):
                    d = torch.complex128 if v.torch_dtype.is_complex else dtype
                built[id(v)] = v.materialize(to_device, dtype=d)
                return built[id(v)]
            if isinstance(v, tuple):
                return tuple(build(x) for x in v)
            if isinstance(v, list):
                return [build(x) for x in v]
            if isinstance(v, dict) and len(v) == 1:
                ((k, x),) = v.items()
                if k == "dtype":
                    return dtype_from_name(x) if dtype is None or not dtype_from_name(x).is_floating_point else dtype
                if k == "layout":
                    return getattr(torch, x)
                if k == "memory_format":
                    return getattr(torch, x)
                if k == "device":
                    return device if x == "target" else torch.device(x)
                if k == "dict":
                    return {build(key): build(value) for key, value in x}
            return v

        return tuple(build(a) for a in self.args), {k: build(v) for k, v in self.kwargs.items()}

    # -- serialisation -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        # a spec object in two places (a Dict[Tensor, t]'s key and the key looked up in it) is
        # written once and referred to after, so that it is still one object when read back
        refs = {id(s): None for s in shared_specs(self)}
        return {
            "op": self.op,
            "args": _encode(list(self.args), refs),
            "kwargs": _encode(self.kwargs, refs),
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Case:
        refs: list[TensorSpec] = []
        return cls(
            op=d["op"], args=tuple(_decode(d["args"], refs)), kwargs=_decode(d["kwargs"], refs), seed=d.get("seed", 0)
        )

    def describe(self) -> str:
        """Short human form: add.Tensor(float32[3, 4], float32[4], alpha=2)."""
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        return f"{self.op.split('::', 1)[-1]}({', '.join(parts)})"


def _walk(v, found):
    if isinstance(v, TensorSpec):
        found.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _walk(x, found)
    elif isinstance(v, dict):
        for x in v.values():
            _walk(x, found)


def shared_specs(case: Case) -> list[TensorSpec]:
    """The spec objects that occur more than once in `case` (materialised as one tensor each)."""
    seen: dict[int, int] = {}
    specs = case.tensor_specs()
    for s in specs:
        seen[id(s)] = seen.get(id(s), 0) + 1
    return list({id(s): s for s in specs if seen[id(s)] > 1}.values())


_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TensorSpec))


def _encode(v, refs: dict | None = None):
    """JSON form of `v`; `refs` ({id: number or None}) names the specs written once and referred to after."""
    if isinstance(v, TensorSpec):
        if refs and id(v) in refs:
            if refs[id(v)] is not None:
                return {"__same__": refs[id(v)]}
            refs[id(v)] = sum(n is not None for n in refs.values())
        # a spec's fields are numbers, strings and tuples of them: a shallow copy is the deep one
        # dataclasses.asdict makes, without its recursion (a case is encoded before every run)
        d = {name: getattr(v, name) for name in _SPEC_FIELDS}
        d["shape"] = list(v.shape)
        if v.blocksize is None:
            del d["blocksize"]  # only block layouts have one: other specs' JSON stays as it was
        if v.stride is None:
            del d["stride"], d["storage_offset"]  # likewise the explicit layout's
        if v.data is not None:
            d["data"] = _encode(list(v.data))  # complex and non-finite values are tagged
        return {"__tensor__": d} if not refs or id(v) not in refs else {"__tensor__": d, "__ref__": refs[id(v)]}
    if isinstance(v, tuple):
        return {"__tuple__": [_encode(x, refs) for x in v]}
    if isinstance(v, list):
        return [_encode(x, refs) for x in v]
    if isinstance(v, dict):
        return {k: _encode(x, refs) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return {"__float__": repr(v)}
    if isinstance(v, complex):
        return {"__complex__": [_encode(v.real), _encode(v.imag)]}
    return v


def _decode(v, refs: list | None = None):
    """The value `_encode` wrote; `refs` collects the specs written with "__ref__" for later "__same__"."""
    refs = [] if refs is None else refs
    if isinstance(v, dict):
        if "__tensor__" in v:
            d = dict(v["__tensor__"])
            d["shape"] = tuple(d["shape"])
            if d.get("stride") is not None:
                d["stride"] = tuple(d["stride"])
            if d.get("data") is not None:
                d["data"] = tuple(_decode(d["data"]))
            spec = TensorSpec(**d)
            if "__ref__" in v:
                refs.append(spec)
            return spec
        if "__same__" in v:
            return refs[v["__same__"]]
        if "__tuple__" in v:
            return tuple(_decode(x, refs) for x in v["__tuple__"])
        if "__float__" in v:
            return float(v["__float__"])
        if "__complex__" in v:
            re_, im = (_decode(x) for x in v["__complex__"])
            return complex(re_, im)
        return {k: _decode(x, refs) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x, refs) for x in v]
    return v


def _short(v) -> str:
    if isinstance(v, TensorSpec):
        return v.describe()
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_short(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, dict) and len(v) == 1:
        ((k, x),) = v.items()
        return f"{k}:{x}"
    return json.dumps(v) if isinstance(v, str) else repr(v)
