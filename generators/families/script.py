"""TorchScript builtins: list members, dictionary keys, strings, varargs."""

from __future__ import annotations

from generators import memo
from generators.context import VARARGS
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.strategies import draw_tensor

# -- TorchScript builtins --------------------------------------------------------------------------

# list element types of builtins, by the list's schema type
_LIST_ELEMENTS = {
    "float[]": memo.sampled_from((0.5, -1.5, 2.0, 0.0)),
    "int[]": memo.integers(-3, 3),
    "str[]": memo.sampled_from(("a", "b", "", "a b")),
    "bool[]": memo.booleans(),
}


@family("remove")
def list_member(ctx):
    """list.index(x) and list.remove(x) on a non-empty list that holds x (else ValueError)."""
    arg = next((a for a in ctx.op.arguments if a.name == "self"), None)
    if getattr(ctx.op, "family", "") != "torchscript" or arg is None:
        return
    if arg.type.replace("(a!)", "") == "Tensor[]":
        # 0-d tensors (opdb/rules/shapes.toml), x the list's own element: the builtin compares
        # with bool(x == el) (listIndex, listRemove in torch/csrc/jit/runtime/register_prim_ops.cpp),
        # so values without NaN, which equals nothing, not even itself
        n = ctx.draw(memo.integers(1, 3), label="list")
        items = [draw_tensor(ctx.draw, dtype=ctx.dtype, shape=(), values="unit", label=f"self[{i}]") for i in range(n)]
        ctx.fixed["self"] = items
        ctx.fixed["el"] = items[ctx.draw(memo.integers(0, n - 1), label="member")]
        return
    elements = _LIST_ELEMENTS.get(arg.type.replace("(a!)", ""))
    if elements is None:
        return
    items = ctx.draw(memo.lists(elements, min_size=1, max_size=4), label="list")
    ctx.fixed["self"] = items
    ctx.fixed["el"] = items[ctx.draw(memo.integers(0, len(items) - 1), label="member")]


@family("Float", "Int")
def number_from_string(ctx):
    """float("1.5") and int("-2"): the string must hold a number."""
    arg = next((a for a in ctx.op.arguments if a.name == "a"), None)
    if arg is not None and arg.type == "str":
        numbers = ("1", "-2", "0", "1.5", "-0.25", "1e3") if ctx.op.base_name == "Float" else ("1", "-2", "0", "42")
        ctx.fixed["a"] = ctx.draw(memo.sampled_from(numbers), label="a")


@family("device")
def device_from_string(ctx):
    """torch.device("cpu:0"): a device string that names a device type."""
    arg = next((a for a in ctx.op.arguments if a.name == "a"), None)
    if arg is not None and arg.type == "str":
        ctx.fixed["a"] = ctx.draw(memo.sampled_from(("cpu", "cpu:0", "meta", "cuda:1", "mps")), label="a")


@family("Delete", "__getitem__", "pop")
def dict_key(ctx):
    """dict[key], del dict[key] and dict.pop(key) on a TorchScript Dict: the key is one the dict
    holds (else KeyError). A Tensor key is the very spec of the dict's key, which
    `Case.materialize` builds once: Dict[Tensor, t] hashes tensors by identity. list[idx] and
    list.pop(idx) (the "t" overloads): an index within a non-empty list (drawn apart, 0-3 items
    and an index 0-3, two cases in five were valid, and seed 23's five all raised "list index
    out of range": the cell was skipped)."""
    from generators.argtypes import draw_jit, jit_formal

    names = _arg_names(ctx)
    if getattr(ctx.op, "family", "") == "torchscript" and ctx.op.overload == "t" and "idx" in names:
        list_and_index(ctx, ctx.op.arguments[0].name)
        return
    if getattr(ctx.op, "family", "") != "torchscript" or "Dict" not in ctx.op.overload or "key" not in names:
        return
    d = draw_jit(jit_formal(ctx.op, "self"), ctx, "arg self", name="self")
    ctx.fixed["self"] = d
    keys = [k for k, _ in d["dict"]]
    ctx.fixed["key"] = keys[ctx.draw(memo.integers(0, len(keys) - 1), label="key")]


@family("einsum")
def einsum_sublist(ctx):
    """einsum(a, [subscripts of a], b, [subscripts of b], ..., [output subscripts]): the sublist
    form takes its operands and subscript lists as varargs after a. Shared subscripts have one
    size; the output subscripts, when given, are distinct subscripts of the operands. The
    equation form spells the same subscripts as letters ("ab,bc->ac"): an equation drawn apart
    from the tensors was rejected ("more operands were provided than specified in the
    equation", Linear.cpp's einsum), so its cells were valid by luck."""
    if ctx.op.overload not in ("sublist", ""):
        return
    sizes = [ctx.draw(memo.integers(1, 3), label=f"size[{i}]") for i in range(4)]
    operands = ctx.draw(memo.integers(1, 2), label="operands")
    subs = [
        ctx.draw(memo.lists(memo.integers(0, 3), min_size=1, max_size=3), label=f"subscripts[{i}]")
        for i in range(operands)
    ]
    tensors = [_tensor(ctx, tuple(sizes[j] for j in sub), label=f"operand[{i}]") for i, sub in enumerate(subs)]
    ctx.shape = tensors[0].shape
    if ctx.op.overload == "":
        equation = ",".join("".join("abcd"[j] for j in sub) for sub in subs)
        if ctx.draw(memo.booleans(), label="output subscripts"):
            present = sorted({j for sub in subs for j in sub})
            out = ctx.draw(memo.lists(memo.sampled_from(present), max_size=len(present), unique=True), label="output")
            equation += "->" + "".join("abcd"[j] for j in out)
        ctx.fixed.update(equation=equation, tensors=tensors, path=None)
        return
    ctx.fixed["a"] = tensors[0]
    rest = [subs[0]]
    for t, sub in zip(tensors[1:], subs[1:]):
        rest += [t, sub]
    if ctx.draw(memo.booleans(), label="output subscripts"):
        present = sorted({j for sub in subs for j in sub})
        # not empty: the builtin's vararg types are inferred from the values, and [] has no element type
        rest.append(
            ctx.draw(
                memo.lists(memo.sampled_from(present), min_size=1, max_size=len(present), unique=True), label="output"
            )
        )
    ctx.fixed[VARARGS] = rest


@family("__upsample")
def upsample_builtin(ctx):
    """TorchScript's nn.functional.upsample: an (N, C, *spatial) input of 1 to 3 spatial dims and
    either a size per spatial dim (size_list) or one size, nearest mode (every rank has it)."""
    spatial = ctx.draw(memo.integers(1, 3), label="spatial dims")
    ctx.shape = tuple(ctx.draw(memo.integers(1, 3), label=f"size {i}") for i in range(2 + spatial))
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    sizes = [ctx.draw(memo.integers(1, 4), label=f"out size {i}") for i in range(spatial)]
    ctx.fixed["size"] = sizes if ctx.op.overload == "size_list" else sizes[0]
    ctx.fixed.update(scale_factor=None, mode="nearest", align_corners=None)


@family("percentFormat")
def percent_format(ctx):
    """A format string with one %d and the one value that follows it ("Too many arguments" for
    more placeholders than values; opdb's one-node graph passes the builtin one vararg value)."""
    values = [ctx.draw(memo.integers(-9, 9), label="value")]
    ctx.fixed["self"] = "".join("<%d>" for _ in values)
    ctx.fixed[VARARGS] = values


@family("set_item")
def list_set_item(ctx):
    """l[idx] = el on a TorchScript list (_set_item.t): a non-empty list and an index within it,
    negative ones counting from the end ("list index out of range" otherwise); el of the list's
    element type (the type variable t binds both). The Dict overloads take any key."""
    from generators.argtypes import draw_jit, jit_formal

    if ctx.op.overload != "t":
        return
    list_and_index(ctx, "l")
    ctx.fixed["el"] = draw_jit(jit_formal(ctx.op, "el"), ctx, "el")


def list_and_index(ctx, name: str) -> None:
    """A non-empty TorchScript list argument `name` and an `idx` within it, negative ones counting
    from the end: what list[idx] reads or writes (_set_item.t, select.t) without "list index out
    of range"."""
    from generators.argtypes import draw_jit, jit_formal

    element = jit_formal(ctx.op, name).getElementType()
    n = ctx.draw(memo.integers(1, 3), label="list len")
    ctx.fixed[name] = [draw_jit(element, ctx, f"{name}[{i}]") for i in range(n)]
    ctx.fixed["idx"] = ctx.draw(memo.integers(-n, n - 1), label="idx")


@family("dequantize")
def dequantize_any(ctx):
    """dequantize.any takes a tuple (or a list of tensors, which a one-node graph types as
    Tensor[] and so selects dequantize.list instead): quantized tensors, with now and then a
    value of another type that it passes through (register_prim_ops_fulljit.cpp)."""
    if ctx.op.overload != "any":
        return
    from generators.case import QUANTIZED_DTYPES

    items = [
        draw_tensor(
            ctx.draw,
            dtype=ctx.draw(memo.sampled_from(QUANTIZED_DTYPES), label=f"tensors[{i}] dtype"),
            shape=ctx.shape,
            label=f"tensors[{i}]",
        )
        for i in range(ctx.draw(memo.integers(1, 3), label="tensors"))
    ]
    if ctx.draw(memo.booleans(), label="other value"):
        items.append(ctx.draw(memo.integers(-2, 2), label="other"))
    ctx.fixed["tensors"] = tuple(items)


@family("IntImplicit", "FloatImplicit", "ComplexImplicit", "ScalarImplicit")
def implicit_scalar(ctx):
    """The implicit conversions of a tensor to a number take a 0-d tensor ("Cannot input a tensor
    of dimension other than 0 as a scalar argument"); IntImplicit an integer one, so its
    floating, complex and bool cells stay rejected."""
    ctx.shape = ()
    ctx.fixed["a"] = _tensor(ctx, (), label="a")


# whether a substring is empty: no (the simplest), or yes two times in three
_empty_substring = memo.sampled_from((False, True, True))


@family("count")
def string_count(ctx):
    """str.count(substr, start, end). A non-empty substring first (the simplest case), then an
    empty one two cases in three, over a window that starts within the text: Python's str.count
    counts the empty matches there, and TorchScript's builtin never returns (torch 2.13:
    count("", "", 0, 2) ran past the 60 s case timeout; docs/evaluation/audit/other.toml,
    count-empty-substring-hang), a hang one cell of a sweep reports for that minute. Negative
    indices come with non-empty substrings. The list overloads take any element."""
    if ctx.op.overload:
        return
    text = ctx.draw(memo.text(alphabet="ab ", max_size=6), label="self")
    ctx.fixed["self"] = text
    empty = ctx.draw(_empty_substring, label="empty substr")
    substr = "" if empty else ctx.draw(memo.text(alphabet="ab", min_size=1, max_size=2), label="substr")
    ctx.fixed["substr"] = substr
    if substr:
        ctx.fixed["start"] = ctx.draw(memo.integers(-3, 3), label="start")
        ctx.fixed["end"] = ctx.draw(memo.integers(-3, 7), label="end")
    else:  # a window that starts within the text: where there are empty matches to count
        ctx.fixed["start"] = start = ctx.draw(memo.integers(0, len(text)), label="start")
        ctx.fixed["end"] = start + ctx.draw(memo.integers(1, 4), label="window")
