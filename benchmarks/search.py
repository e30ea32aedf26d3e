"""Layout search speed: turing-530b on 5128 A100-SXM-80GB, global batch 2520, fp16.

The issue's reference: Calculon (Isaev et al., SC'23) evaluated 8,112 layouts of this case in
24 s on the project's 2-core machines (345 layouts/s). Goal: at least 100x, i.e. the whole
search under 0.25 s and over a million layouts evaluated per second.

Two timings, both medians: ``cold`` clears the memo caches of the per-shape kernel and memory
figures before every run (a first search in a fresh process); ``warm`` keeps them (every
later search over the same model and machine, as an explorer does). The candidate set follows
Calculon's conventions where Megatron's strict ones leave nothing to search (5128 = 8 x 641):
the batch is rounded down to a multiple of DP, and uneven pipeline stages are allowed. A
second, larger case (gpt3-175b on 4096 H100, every knob) shows the rate on a bigger space.

    python benchmarks/search.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from companion import search as S  # noqa: E402
from companion import steptime  # noqa: E402

CALCULON_LAYOUTS_PER_S = 8112 / 24
GOAL_S, GOAL_RATE = 0.25, 1e6
CASES = {
    "turing-530b / 5128 A100 / gb 2520 / fp16": dict(
        model="turing-530b", gpu="A100", num_gpus=5128, global_batch=2520, precision="fp16",
        exact_batch=False, uneven_stages=True, zero=(0, 1, 2, 3), include_infeasible=True),
    "gpt3-175b / 4096 H100 / gb 2048 / bf16": dict(
        model="gpt3-175b", gpu="H100", num_gpus=4096, global_batch=2048, zero=(0, 1, 2, 3),
        uneven_stages=True, max_microbatch=16, include_infeasible=True),
}


def _clear():
    for fn in (steptime._kernels, steptime._state, steptime._acts):
        fn.cache_clear()


def timed(kw, repeats, cold):
    times, n = [], 0
    for _ in range(repeats):
        if cold:
            _clear()
        t0 = time.perf_counter()
        frame = S.search(**kw)
        times.append(time.perf_counter() - t0)
        n = frame.attrs["candidates"]
    return statistics.median(times), n, frame


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    print(f"goal: < {GOAL_S} s and > {GOAL_RATE:.0e} layouts/s; Calculon: "
          f"{CALCULON_LAYOUTS_PER_S:.0f} layouts/s")
    print(f"{'case':<42} {'cache':<5} {'layouts':>8} {'fit':>6} {'median s':>9} "
          f"{'layouts/s':>10} {'x Calculon':>10}")
    for name, kw in CASES.items():
        for cold in (True, False):
            t, n, frame = timed(kw, args.repeats, cold)
            rate = n / t
            print(f"{name:<42} {'cold' if cold else 'warm':<5} {n:>8} {frame.attrs['feasible']:>6} "
                  f"{t:>9.3f} {rate:>10.3g} {rate / CALCULON_LAYOUTS_PER_S:>10.0f}")
    best = frame[frame["fits"]].iloc[0]
    print(f"best {name}: tp {best.tp} pp {best.pp} dp {best.dp} vpp {best.vpp} mb "
          f"{best.microbatch} {best.recompute} zero {best.zero}: {best.step_time_s:.2f} s, "
          f"MFU {best.mfu:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
