"""opdb: the operator catalog of the installed torch, and the per-op rules no schema states."""

from opdb.catalog import KERNEL_KEYS, UnknownOpError, catalog, counts, find, lookup, select
from opdb.families import FAMILIES, FAMILY_NAMES, family_of
from opdb.rules import RulesError, rules_for
from opdb.spec import VARIANTS, ArgSpec, OpRules, OpSpec, Tolerance

__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "KERNEL_KEYS",
    "VARIANTS",
    "ArgSpec",
    "OpRules",
    "OpSpec",
    "RulesError",
    "Tolerance",
    "UnknownOpError",
    "catalog",
    "counts",
    "family_of",
    "find",
    "lookup",
    "rules_for",
    "select",
]
