"""Layout search speed: turing-530b on 5128 A100-SXM-80GB, global batch 2520, fp16.

The issue's reference: Calculon (Isaev et al., SC'23) evaluated 8,112 layouts of this case in
about 24 s on the project's 2-core machines (345 layouts/s, the issue's figure). Goal: at
least 100x, i.e. the whole search under 0.25 s and over a million layouts evaluated per
second.

Every candidate is priced through the step-time and memory model (the code
:func:`companion.parallel.estimate` runs); "layouts" counts them all, feasible or not. The
candidate set follows Calculon's conventions where Megatron's strict ones leave nothing to
search (5128 = 8 x 641): the batch is rounded down to a multiple of DP and uneven pipeline
stages are allowed; like Calculon's search it tries every interleaving degree and every
microbatch size that divides a replica's batch (``vpp="all"``, ``max_microbatch=None``), on
top of TP, PP, CP, sequence parallelism, three recomputation modes and four optimizer
shardings. It keeps only layouts Megatron runs: the interleaved schedule needs the
microbatches in whole rounds of PP (Megatron-LM's pipeline schedules raise otherwise). On this
case that rule leaves 492 layouts of the 18,480 an unconstrained enumeration gives (DP 641 or
more leaves one to four sequences per replica), so the whole search takes milliseconds but is
too small to measure a rate. The goal is therefore checked on two rows: the turing-530b
search's wall time (under 0.25 s, against Calculon's 24 s), and the rate on the largest case,
gpt3-175b on 4096 H100 (over a million layouts per second, against Calculon's 345), and the
same rate on the seed's 1.7T MoE on 9,216 GB200 (every EP degree, recompute "moe"). Rows:
Times are medians. ``cold`` clears the search's only cache (resolved GPU, system and stack
names: reading the hardware registry's tables costs a few milliseconds) before each run;
``warm`` keeps it, as an explorer calling the search repeatedly does. The model keeps no
memo of kernels or memory: every run prices every layout. ``first call`` is one search in a
fresh Python process after the imports (it includes reading the registry files).

    python benchmarks/search.py [--repeats 15] [--save]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from companion import machine  # noqa: E402
from companion import search as S  # noqa: E402

# The figure for Calculon on this case: 8,112 layouts in about 24 s on 2 cores.
CALCULON_LAYOUTS_PER_S = 345.0
CALCULON_S = 24.0
GOAL_S, GOAL_RATE = 0.25, 1e6
TURING = dict(model="turing-530b", gpu="A100", num_gpus=5128, global_batch=2520,
              precision="fp16", exact_batch=False, uneven_stages=True, zero=(0, 1, 2, 3))
FULL = dict(TURING, vpp="all", max_microbatch=None)
CASES = {
    "turing-530b, every vpp and microbatch (feasible)": FULL,
    "turing-530b, every vpp and microbatch (all rows)": dict(FULL, include_infeasible=True),
    "turing-530b, default knobs (all rows)": dict(TURING, include_infeasible=True),
    "gpt3-175b / 4096 H100 / gb 2048 (all rows)": dict(
        model="gpt3-175b", gpu="H100", num_gpus=4096, global_batch=2048, zero=(0, 1, 2, 3),
        uneven_stages=True, max_microbatch=16, include_infeasible=True),
}
HEADLINE = next(iter(CASES))
RATE_CASE = "gpt3-175b / 4096 H100 / gb 2048 (all rows)"
# Issue 12: MoE layouts (every EP that divides the experts, the all-to-all on fractional
# NVLink domains, recompute "moe") must price as fast: the seed's 1.7T MoE on 128 NVL72 racks
MOE_CASES = {
    "seed-1.7t-moe / 9216 GB200 / gb 2304 (all rows)": dict(
        model="seed-1.7t-moe", gpu="GB200", num_gpus=9216, global_batch=2304,
        precision="fp8", include_infeasible=True),
    "qwen3-235b-a22b / 256 GB200 / gb 8192 (all rows)": dict(
        model="qwen3-235b-a22b", gpu="GB200", num_gpus=256, global_batch=8192,
        uneven_stages=True, include_infeasible=True),
}
MOE_RATE_CASE = next(iter(MOE_CASES))


def timed(kw: dict, repeats: int, cold: bool):
    """Median wall time of ``repeats`` searches, the candidate count and the last frame."""
    S.search(**kw)  # warm-up: first touch of memory, lazy imports
    times = []
    for _ in range(repeats):
        if cold:
            machine._resolve_cached.cache_clear()
        t0 = time.perf_counter()
        frame = S.search(**kw)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), frame.attrs["candidates"], frame


def first_call_s() -> float:
    """One search in a fresh interpreter, after the imports (registry files not yet read)."""
    code = ("import time; from companion import search as S; t0 = time.perf_counter(); "
            f"S.search(**{FULL!r}); print(time.perf_counter() - t0)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def moe_rates(repeats: int) -> dict:
    """Cold search rate (layouts/s) of each MoE case, printed as the dense rows are."""
    rates = {}
    for name, kw in MOE_CASES.items():
        t, n, frame = timed(kw, repeats, cold=True)
        rates[name] = n / t
        print(f"{name:<52} {'cold':<5} {n:>8} {len(frame):>7} {t:>9.4f} {n / t:>10.3g} "
              f"{n / t / CALCULON_LAYOUTS_PER_S:>10.0f}")
    return rates


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--save", action="store_true",
                   help="also write a record to data/measurements (companion.bench.record)")
    args = p.parse_args(argv)
    print(f"goal: turing-530b search < {GOAL_S} s; > {GOAL_RATE:.0e} layouts/s on the largest "
          f"case; Calculon: {CALCULON_S:.0f} s, {CALCULON_LAYOUTS_PER_S:.0f} layouts/s")
    print(f"{'case':<52} {'cache':<5} {'layouts':>8} {'rows':>7} {'median s':>9} "
          f"{'layouts/s':>10} {'x Calculon':>10}")
    results, cold_rows = [], {}
    for name, kw in CASES.items():
        for cold in (True, False):
            t, n, frame = timed(kw, args.repeats, cold)
            rate = n / t
            results.append(dict(case=name, cache="cold" if cold else "warm", layouts=n,
                                rows=len(frame), feasible=frame.attrs["feasible"],
                                median_s=t, layouts_per_s=rate,
                                x_calculon=rate / CALCULON_LAYOUTS_PER_S))
            if cold:
                cold_rows[name] = (t, rate, frame)
            print(f"{name:<52} {'cold' if cold else 'warm':<5} {n:>8} {len(frame):>7} "
                  f"{t:>9.4f} {rate:>10.3g} {rate / CALCULON_LAYOUTS_PER_S:>10.0f}")
    moe = moe_rates(args.repeats)
    first = first_call_s()
    n = cold_rows[HEADLINE][2].attrs["candidates"]
    print(f"{HEADLINE}: first call in a fresh process {first:.3f} s ({n / first:.3g} layouts/s)")
    t, _, frame = cold_rows[HEADLINE]
    rate = cold_rows[RATE_CASE][1]
    ok = t < GOAL_S and rate > GOAL_RATE and moe[MOE_RATE_CASE] > GOAL_RATE
    print(f"MoE: {MOE_RATE_CASE} (cold) at {moe[MOE_RATE_CASE]:.3g} layouts/s")
    print(f"goal: {HEADLINE} (cold) in {t:.4f} s ({CALCULON_S / t:.0f}x faster than Calculon's "
          f"{CALCULON_S:.0f} s); {RATE_CASE} (cold) at {rate:.3g} layouts/s "
          f"({rate / CALCULON_LAYOUTS_PER_S:.0f}x Calculon's rate): {'met' if ok else 'NOT met'}")
    best = frame.iloc[0]
    print(f"best: tp {best.tp} pp {best.pp} dp {best.dp} cp {best.cp} vpp {best.vpp} mb "
          f"{best.microbatch} sp {best.sequence_parallel} {best.recompute} zero {best.zero}: "
          f"{best.step_time_s:.2f} s, MFU {best.mfu:.3f}, {best.memory_gb:.0f} GB")
    if args.save:
        from companion.bench.record import provenance, write_record
        meta = {**provenance("cpu"), "device": "cpu", "repeats": args.repeats,
                "calculon_s": CALCULON_S,
                "first_call_s": first, "calculon_layouts_per_s": CALCULON_LAYOUTS_PER_S}
        print("saved", write_record("search-speed", results, meta))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
