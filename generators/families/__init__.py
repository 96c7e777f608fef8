"""Family builders: what a schema cannot say about an op's arguments.

One module per family of ops (indexing, convolution, normalisation, linear algebra, sparse,
nested, TorchScript, ...); each registers its builders with `registry.family`. Importing this
package imports them all, so `builder_for` sees every builder.
"""

from __future__ import annotations

# each op name is registered once (a test checks), so the order of these imports does not matter
from generators.families import (  # noqa: F401  (imported to register their builders)
    common,
    conv,
    indexing,
    kernels,
    linalg,
    nested,
    nn,
    norm,
    optim,
    quantized,
    script,
    shape,
    sparse,
    spectral,
    tables,
    values,
)
from generators.families.registry import builder_for, family, key

__all__ = ["builder_for", "family", "key"]
