"""Real kernels: GEMM, memory bandwidth, collectives. CPU paths always run; CUDA when present.

Every bench returns plain dicts and can save them as a record (:mod:`companion.bench.record`).
"""
