"""Calling TorchScript builtins (`aten::len.t`, `aten::__getitem__.Dict_str`, `aten::format`).

These operators live in the JIT operator registry, not in the c10 dispatcher: every TorchScript
program runs them, but `torch.ops.aten.len.t([1, 2])` cannot, because Python's argument
conversion does not bind type variables (`t[]`) nor build typed dicts and tuples. A one-node
TorchScript graph can: `ScriptCall` infers each argument's concrete type from the value passed,
writes the graph (`%r = aten::len(%a)` with `%a : int[]`), compiles it once per type signature
and runs it in the interpreter, as a scripted program would. The node is checked to resolve to
the intended overload; a call whose values select another overload raises TypeError.
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def jit_schema(name: str, overload: str):
    """torch's FunctionSchema of `name` ("aten::len") and `overload` ("t"; "" for the default)."""
    for s in torch._C._jit_get_schemas_for_operator(name):
        if s.overload_name == overload:
            return s
    raise LookupError(f"no schema {name}.{overload}")


def annotation(t) -> str:
    """A JIT Type in the IR's spelling: "int[]", "Dict(str, int)", "(int, float)", "int?"."""
    kind = t.kind()
    if kind == "ListType":
        return annotation(t.getElementType()) + "[]"
    if kind == "DictType":
        return f"Dict({annotation(t.getKeyType())}, {annotation(t.getValueType())})"
    if kind == "TupleType":
        return "(" + ", ".join(annotation(e) for e in t.elements()) + ")"
    if kind == "OptionalType":
        return annotation(t.getElementType()) + "?"
    if kind == "NumberType":
        return "Scalar"  # str() says "number", which the IR parser reads as another type
    return str(t)


def _inferred(value) -> str | None:
    r = torch._C._jit_try_infer_type(value)
    return annotation(r.type()) if r.success() else None


def _bind(formal, value, bound: dict[str, str]) -> None:
    """Bind the type variables of `formal` ("t" in "t[]") to the types of `value`'s parts."""
    kind = formal.kind()
    if value is None:
        return
    if kind == "VarType":
        t = _inferred(value)
        if t is not None:
            bound.setdefault(str(formal), t)
    elif kind == "OptionalType":
        _bind(formal.getElementType(), value, bound)
    elif kind == "ListType" and isinstance(value, (list, tuple)) and value:
        _bind(formal.getElementType(), value[0], bound)
    elif kind == "DictType" and isinstance(value, dict) and value:
        k, v = next(iter(value.items()))
        _bind(formal.getKeyType(), k, bound)
        _bind(formal.getValueType(), v, bound)
    elif kind == "TupleType" and isinstance(value, tuple):
        for f, v in zip(formal.elements(), value):
            _bind(f, v, bound)


def _concrete(formal, value, bound: dict[str, str]) -> str:
    """The IR type of an input: the formal type with type variables bound, refined by the value."""
    kind = formal.kind()
    if value is None:
        return "NoneType"
    if kind == "VarType":
        return bound.get(str(formal)) or _inferred(value) or "int"
    if kind == "OptionalType":
        return _concrete(formal.getElementType(), value, bound)
    if kind == "ListType":
        elem = formal.getElementType()
        if isinstance(value, (list, tuple)) and value:
            return _concrete(elem, value[0], bound) + "[]"
        return _substitute(elem, bound) + "[]"
    if kind == "DictType":
        if isinstance(value, dict) and value:
            k, v = next(iter(value.items()))
            return f"Dict({_concrete(formal.getKeyType(), k, bound)}, {_concrete(formal.getValueType(), v, bound)})"
        return f"Dict({_substitute(formal.getKeyType(), bound)}, {_substitute(formal.getValueType(), bound)})"
    if kind == "TupleType" and isinstance(value, tuple):
        return "(" + ", ".join(_concrete(f, v, bound) for f, v in zip(formal.elements(), value)) + ")"
    if kind == "NumberType":
        return "Scalar"  # an int-typed input would select the int overload (add.int, not add)
    if kind == "AnyType":
        return _inferred(value) or annotation(formal)
    return annotation(formal)


def _substitute(formal, bound: dict[str, str]) -> str:
    kind = formal.kind()
    if kind == "VarType":
        return bound.get(str(formal), "int")
    if kind == "ListType":
        return _substitute(formal.getElementType(), bound) + "[]"
    if kind == "DictType":
        return f"Dict({_substitute(formal.getKeyType(), bound)}, {_substitute(formal.getValueType(), bound)})"
    if kind == "OptionalType":
        return _substitute(formal.getElementType(), bound) + "?"
    if kind == "TupleType":
        return "(" + ", ".join(_substitute(e, bound) for e in formal.elements()) + ")"
    return annotation(formal)


_DIRECT = object()  # marker: call torch.ops.aten.<op> directly


def _unwrapped(e: RuntimeError) -> BaseException:
    """The error an op raised inside the interpreter, without the TorchScript traceback around it."""
    text = str(e)
    if "The following operation failed in the TorchScript interpreter" not in text:
        return e
    import re

    lines = [ln for ln in text.splitlines() if re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln)]
    if not lines:
        return e
    kind, _, message = lines[-1].partition(": ")
    exc_type = {
        "IndexError": IndexError,
        "ValueError": ValueError,
        "KeyError": KeyError,
        "ZeroDivisionError": ZeroDivisionError,
        "TypeError": TypeError,
        "AssertionError": AssertionError,
        "NotImplementedError": NotImplementedError,
    }.get(kind.rsplit(".", 1)[-1], RuntimeError)
    return exc_type(message)


class ScriptCall:
    """A callable that runs one TorchScript builtin overload through a one-node graph."""

    def __init__(self, name: str, overload: str):
        self.name = name
        self.overload = overload
        self.schema = jit_schema(name, overload)
        self._compiled: dict[tuple[str, ...], object] = {}

    def __repr__(self) -> str:
        return f"ScriptCall({self.name}.{self.overload or 'default'})"

    def _values(self, args, kwargs) -> list:
        formals = self.schema.arguments
        values = list(args)
        if ", ..." in str(self.schema) or "(...)" in str(self.schema):
            # "format(str self, ...)": the extra positional values follow the declared ones
            if kwargs:
                raise TypeError(f"{self!r} takes no keyword arguments")
            return values
        if len(values) > len(formals):
            raise TypeError(f"{self!r} takes at most {len(formals)} arguments, got {len(values)}")
        for f in formals[len(values) :]:
            if f.name in kwargs:
                values.append(kwargs.pop(f.name))
            elif f.has_default_value():
                values.append(f.default_value)
            else:
                raise TypeError(f"{self!r} missing argument {f.name!r}")
        if kwargs:
            raise TypeError(f"{self!r} got unexpected keyword arguments {sorted(kwargs)}")
        return values

    def __call__(self, *args, **kwargs):
        values = self._values(args, dict(kwargs))
        formals = list(self.schema.arguments)
        bound: dict[str, str] = {}
        for f, v in zip(formals, values):
            _bind(f.type, v, bound)
        types = []
        for i, v in enumerate(values):
            if i < len(formals):
                types.append(_concrete(formals[i].type, v, bound))
            else:  # vararg
                types.append(_inferred(v) or "Tensor")
        results = [_substitute(r.type, bound) for r in self.schema.returns]
        key = tuple(types + ["->"] + results)
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = self._compile(types, results)
        if fn is _DIRECT:
            return getattr(getattr(torch.ops.aten, self.name.split("::", 1)[1]), self.overload or "default")(
                *args, **kwargs
            )
        try:
            return fn(*values)
        except RuntimeError as e:
            raise _unwrapped(e) from None

    def _compile(self, types: list[str], results: list[str]):
        n_out = len(results)
        inputs = ", ".join(f"%a{i} : {t}" for i, t in enumerate(types))
        outs = ", ".join(f"%r{i} : {t}" for i, t in enumerate(results))
        call = f"{self.name}({', '.join(f'%a{i}' for i in range(len(types)))})"
        # a function returns one value: None for an op without results, a tuple for several
        if n_out == 0:
            body = f"  {call}\n  %out : NoneType = prim::Constant()\n"
        elif n_out == 1:
            body = f"  %out : {results[0]} = {call}\n"
        else:
            body = f"  {outs} = {call}\n  %out : ({', '.join(results)}) = prim::TupleConstruct({', '.join(f'%r{i}' for i in range(n_out))})\n"
        ir = f"graph({inputs}):\n{body}  return (%out)\n"
        try:
            graph = torch._C.parse_ir(ir)
        except RuntimeError as e:
            raise TypeError(
                f"{self!r}: no TorchScript graph for argument types ({', '.join(types)}): {str(e).strip().splitlines()[0]}"
            ) from None
        node = next(n for n in graph.nodes() if n.kind() == self.name)
        try:
            chosen = node.schema()
        except RuntimeError:
            chosen = "(no schema)"
        if chosen != str(self.schema):
            # overloads that differ only in alias annotations (mT, mT.a), or by a type a graph input
            # cannot spell (Any[], Generator): Python's own argument conversion is the only way in
            return _DIRECT
        return torch._C._create_function_from_graph(f"{self.name}_{self.overload}", graph)


@functools.cache
def script_call(name: str, overload: str) -> ScriptCall:
    """The (shared, compile-caching) ScriptCall of one builtin overload."""
    return ScriptCall(name, overload)
