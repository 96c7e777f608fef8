"""conform: op-coverage and numerical-conformance testing for PyTorch backends."""

__version__ = "0.1.0"
