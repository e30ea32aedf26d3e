"""Block-quantize throughput: mxfp4 and nvfp4 on 2**24 float32 values, median of 5 runs.

Goal: at least 100 million values per second on the project's 2-core CPU machines. Prints the
median time and rate per scheme and input kind (numpy array; torch CPU tensor if torch is
installed) and the ratio of the rate to the goal.

    python benchmarks/formats.py [--n-log2 24] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from companion import formats  # noqa: E402

GOAL_VALUES_PER_S = 100e6  # issue 13
SCHEMES = ("mxfp4", "nvfp4")


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first touch of memory, lazy imports
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-log2", type=int, default=24, help="values = 2**N (default 24)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    n = 2 ** args.n_log2
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    inputs = {"numpy": x}
    try:
        import torch
        inputs[f"torch-cpu({torch.get_num_threads()} threads)"] = torch.from_numpy(x)
    except ImportError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"block_quantize on 2**{args.n_log2} float32 values, median of {args.repeats}; "
          f"goal {GOAL_VALUES_PER_S / 1e6:.0f} M values/s; {os.cpu_count()} CPUs, "
          f"load average {load:.2f} (other processes slow this down)")
    print(f"{'scheme':<7} {'input':<22} {'median ms':>10} {'M values/s':>11} {'x goal':>7}")
    for scheme in SCHEMES:
        for kind, arr in inputs.items():
            t = median_seconds(lambda: formats.block_quantize(arr, scheme), args.repeats)
            rate = n / t
            print(f"{scheme:<7} {kind:<22} {t * 1e3:>10.1f} {rate / 1e6:>11.1f} "
                  f"{rate / GOAL_VALUES_PER_S:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
