"""Models: will a model run on a device, how exactly, and how fast.

`conform model SPEC` traces what a model dispatches (forward and backward), runs each distinct
traced call as a case of its op through the same runner and verdict rule as a sweep, compares the
whole model on the device, on the CPU and in float64, names the first op whose local error float32
cannot explain, times the traced calls, and gives one verdict: runs, runs with fallback, fails,
diverges. Modules: spec (SPEC -> a model and its inputs), libraries (importing the optional
model libraries), trace (the dispatch recorder), cases (traced calls -> cases), whole (the whole
model and the shadow pass), verdict (the per-model verdict), backendbench (the trace text format).
"""
