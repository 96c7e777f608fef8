"""Helpers for testing generators without the full catalog: an `OpSpec` from a schema string.

opdb builds the real catalog (families, tags, rules); this is the minimal parse a test or the
coverage benchmark needs when opdb is absent.
"""

from __future__ import annotations

import torch

from opdb.spec import ArgSpec, OpRules, OpSpec


def opspec(schema: str | torch._C.FunctionSchema, *, rules: OpRules | None = None, **rule_fields) -> OpSpec:
    """OpSpec for `schema` ("aten::log(Tensor self) -> Tensor", or a torch FunctionSchema)."""
    if isinstance(schema, str):
        schema = torch._C.parse_schema(schema)
    native = _torchgen_types(schema)
    args = []
    for a in schema.arguments:
        ai = a.alias_info
        args.append(
            ArgSpec(
                name=a.name,
                type=native.get(a.name) or _native_type(a.type),
                default=None if not a.has_default_value() else repr(a.default_value),
                kwarg_only=a.kwarg_only,
                is_write=bool(ai and ai.is_write),
                is_out=a.is_out,
            )
        )
    name = schema.name
    base = name.split("::", 1)[1]
    if any(a.is_out for a in args):
        variant = "out"
    elif base.endswith("_") and args and args[0].is_write:
        variant = "inplace"
    else:
        variant = "functional"
    return OpSpec(
        name=name,
        overload=schema.overload_name,
        schema=str(schema),
        arguments=tuple(args),
        returns=tuple(str(r.type) for r in schema.returns),
        variant=variant,
        tags=(),
        family="",
        kernels=(),
        rules=rules or OpRules(**rule_fields),
    )


def _torchgen_types(schema) -> dict[str, str]:
    """Argument name -> native spelling ("int[2]", "ScalarType?"), where torchgen can parse the schema."""
    try:
        from torchgen.model import FunctionSchema

        f = FunctionSchema.parse(str(schema).split("::", 1)[1])
    except Exception:  # TorchScript builtins: the JIT spelling is all there is
        return {}
    return {a.name: str(a.type) for a in f.arguments.flat_all}


def _native_type(t) -> str:
    """torch's JIT type -> native_functions.yaml spelling where one exists."""
    s = str(t)
    kind = t.kind()
    if kind == "OptionalType":
        return _native_type(t.getElementType()) + "?"
    if kind == "ListType":
        return _native_type(t.getElementType()) + "[]"
    return {"number": "Scalar"}.get(s, s)


def aten_catalog() -> list[OpSpec]:
    """Every aten overload of the installed torch, parsed minimally (no rules, no families)."""
    out = []
    for s in torch._C._jit_get_all_schemas():
        if s.name.startswith("aten::"):
            try:
                out.append(opspec(s))
            except Exception:  # a schema this minimal parser cannot read
                continue
    return out
