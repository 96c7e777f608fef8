"""What conform knows about one ATen operator overload.

An `OpSpec` is plain data (picklable, JSON-able through `to_dict`) so that it can travel to
pytest-xdist workers and into the store. Everything a schema says is parsed here once; what a
schema cannot say (domains, tolerances, nondeterminism, why an op is untestable) lives in
`OpRules`, filled from `opdb/rules/*.toml`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from opdb.hints import hint

VARIANTS = ("functional", "inplace", "out")


@dataclass(frozen=True)
class ArgSpec:
    """One schema argument.

    `type` is the native_functions.yaml spelling ("Tensor", "Tensor?", "Tensor(a!)" is reported
    as type "Tensor" with `is_write`, "int[2]", "SymInt[]", "ScalarType?", "Scalar", ...).
    For TorchScript builtins that torchgen cannot parse, it is the JIT spelling ("t[]", "Dict(str, t)").
    """

    name: str
    type: str
    default: str | None = None  # schema literal, None when the argument is required
    kwarg_only: bool = False
    is_write: bool = False  # the op mutates this argument (alias annotation with "!")
    is_out: bool = False  # an out= argument

    @property
    def base_type(self) -> str:
        """The type without optional marker or list size: "int[2]?" -> "int[]", "Tensor?" -> "Tensor"."""
        t = self.type.rstrip("?")
        if "[" in t and t.endswith("]"):
            t = t[: t.index("[")] + "[]"
        return t

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def list_size(self) -> int | None:
        t = self.type.rstrip("?")
        if t.endswith("]") and "[" in t:
            inner = t[t.index("[") + 1 : -1]
            return int(inner) if inner.isdigit() else None
        return None

    @property
    def is_tensor(self) -> bool:
        return self.base_type in ("Tensor", "Tensor?")

    @property
    def is_tensor_like(self) -> bool:
        """Tensor, Tensor?, Tensor[], Tensor?[]: anything that carries tensors."""
        return self.base_type.startswith("Tensor")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class OpRules:
    """Per-op knowledge that no schema states. Every field has a reason a reviewer can read."""

    # Input value domain for the op's floating inputs, by name understood by generators:
    # "real" (default), "positive", "nonnegative", "unit" ([-1, 1]), "open_unit" ((-1, 1)),
    # "above_one" ([1, inf)), "above_minus_one" ((-1, inf)), "no_poles" (the reals away from 0 and the
    # negative integers: the gamma family's poles), "probability" ([0, 1]), "nonzero", "small" (|x| <= 3,
    # for exp-like ops).
    domain: str = "real"
    # dtype name (or "*") -> Tolerance, overriding the per-dtype table
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    tolerance_reason: str = ""
    # "seeded" (random: compare statistics), "uninitialized" (compare metadata only),
    # "ties" (sort/topk/...: compare values, check indices by gathering), "" (deterministic)
    nondeterminism: str = ""
    # set when conform cannot meaningfully test the op; the reason is shown to users
    untestable: str = ""
    # hints to conform and generators: the keys and types of opdb.hints.HINTS (checked at load),
    # and "reasons" (field -> the entry's reason); read them with `hint(name)`
    hints: dict[str, Any] = field(default_factory=dict)
    # True/False: the op's floating results are (are not) exactly determined by its inputs, so
    # they are compared exactly; None: derived from the op's family and name (opdb.families.exact_by_default)
    exact: bool | None = None

    def hint(self, name: str) -> Any:
        """The hint `name` (opdb.hints.HINTS): this rule's value, else its default."""
        return hint(self, name)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["tolerances"] = {k: [v.rtol, v.atol] for k, v in self.tolerances.items()}
        return d


def _init_nnpack() -> None:
    """NNPACK's convolution kernel assumes NNPACK was initialised: its only caller,
    Convolution.cpp's use_nnpack, asks at::_nnpack_available() first, which runs init_nnpack()
    (aten/src/ATen/native/NNPACK.cpp). Called first in a process, the op fails for every input
    ("NNPACK SpatialConvolution_updateOutput failed")."""
    import torch

    torch._nnpack_available()


# ops whose kernel assumes process state that its caller in PyTorch sets up first: that setup
_NEEDS_INIT = {"_nnpack_spatial_convolution": _init_nnpack}


@dataclass(frozen=True)
class OpSpec:
    """One ATen operator overload of the installed torch."""

    name: str  # "aten::add"
    overload: str  # "Tensor"; "" for the default overload
    schema: str  # the full schema string as torch prints it
    arguments: tuple[ArgSpec, ...]
    returns: tuple[str, ...]  # return types ("Tensor", "Tensor(a!)", "Tensor[]", "int", ...)
    variant: str  # one of VARIANTS
    tags: tuple[str, ...]  # torch.Tag names: "pointwise", "core", "nondeterministic_seeded", ...
    family: str  # "pointwise", "reduction", "linalg", "conv", "indexing", ... see opdb.families
    kernels: tuple[str, ...]  # dispatch keys with a registered kernel, where this install can tell
    parsed: bool = True  # False for TorchScript builtins whose schema torchgen cannot parse
    rules: OpRules = field(default_factory=OpRules)

    @property
    def qualname(self) -> str:
        """ "aten::add.Tensor", or "aten::relu" for a default overload (the key used everywhere)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def short_name(self) -> str:
        """ "add.Tensor": the qualname without the namespace."""
        return self.qualname.split("::", 1)[1]

    @property
    def base_name(self) -> str:
        """ "add": the operator name without namespace and overload."""
        return self.name.split("::", 1)[1]

    @property
    def exact(self) -> bool:
        """Are the op's floating results exactly determined (compared without rtol/atol)?

        Integer and bool results are always exact; this is about floating ones: values that
        are moved, selected or rounded rather than computed (views and copies, gathers, sort and
        max/min values, floor/ceil/round/trunc, clamp, arange-like sequences). An op rule
        (`exact = true/false`) decides; otherwise opdb.families.exact_by_default.
        """
        if self.rules.exact is not None:
            return self.rules.exact
        from opdb.families import exact_by_default

        return exact_by_default(self.base_name, self.family)

    @property
    def tensor_args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.arguments if a.is_tensor_like and not a.is_out)

    @property
    def out_args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.arguments if a.is_out)

    @property
    def has_tensor_inputs(self) -> bool:
        return bool(self.tensor_args)

    def resolve(self):
        """The callable `torch.ops.aten.<name>.<overload>` (an OpOverload); for a TorchScript builtin
        that the dispatcher does not know, an `opdb.script.ScriptCall`, which runs it in a one-node
        TorchScript graph (Python's argument conversion cannot bind its type variables)."""
        import torch

        if self.family == "torchscript":
            from opdb.script import script_call

            return script_call(self.name, self.overload)

        packet = getattr(torch.ops.aten, self.base_name)
        if self.base_name in _NEEDS_INIT:
            _NEEDS_INIT[self.base_name]()
        return getattr(packet, self.overload or "default")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["qualname"] = self.qualname
        d["rules"] = self.rules.to_dict()
        return d
