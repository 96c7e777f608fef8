"""Hypothesis strategies for conform: dtypes, shapes, strided layouts, tensors, and a case
strategy for any ATen overload (`from_schema`)."""

from generators.case import (
    LAYOUTS,
    VALUE_KINDS,
    Case,
    TensorSpec,
    dtype_from_name,
    dtype_name,
)
from generators.context import Context, Untestable
from generators.schema import cell_dtypes, from_schema
from generators.strategies import (
    DTYPE_NAMES,
    dtypes,
    from_dtype,
    layouts,
    shapes,
    tensors,
)

__all__ = [
    "Case",
    "Context",
    "DTYPE_NAMES",
    "LAYOUTS",
    "TensorSpec",
    "Untestable",
    "VALUE_KINDS",
    "cell_dtypes",
    "dtype_from_name",
    "dtype_name",
    "dtypes",
    "from_dtype",
    "from_schema",
    "layouts",
    "shapes",
    "tensors",
]
