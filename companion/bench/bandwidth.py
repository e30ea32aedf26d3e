"""Memory bandwidth: STREAM-style copy, scale, triad and a read-only reduction.

Sizes sweep from inside the caches to many times the last-level cache (CPU) or L2 (CUDA),
so the curve shows each level and then DRAM/HBM. Bytes follow the STREAM convention
(McCalpin, https://www.cs.virginia.edu/stream/ref.html): each array an op touches counts once
per call, copy ``b = a`` and scale ``b = s a`` move 2 arrays, triad ``a = b + s c`` moves 3,
the reduction ``sum(a)`` 1. Write-allocate traffic (a CPU cache reading a line before writing
it) is not counted, which is why a CPU copy can report less than the DRAM does. Bandwidth
is in bytes per second; printed GB/s are 1e9 bytes/s, not GiB/s.

Run it with ``python -m companion bench bandwidth [--device cpu|cuda] [--quick] [--save]``.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path

from companion import checks
from companion.bench import cli, record

KERNELS = ("copy", "scale", "triad", "read")
ARRAYS_TOUCHED = {"copy": 2, "scale": 2, "triad": 3, "read": 1}
CONVENTION = ("STREAM: bytes per call = arrays touched x array bytes (copy 2, scale 2, "
              "triad 3, read 1); write-allocate not counted; bandwidth in bytes/s (SI)")
DTYPES = ("float32", "float64")
_SCALAR = 3.0
_CHUNK = 32768  # numpy triad works in L2-sized chunks, so it moves 3 arrays, not 5


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(float(text.rstrip("KMGB") or 0) * mult)


def cpu_caches() -> dict[str, int]:
    """Data and unified cache sizes of CPU 0 from sysfs, e.g. ``{"L1": 32768, "L3": ...}``."""
    out = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (d / "type").read_text().strip() == "Instruction":
                continue
            out[f"L{(d / 'level').read_text().strip()}"] = _parse_size((d / "size").read_text())
        except (OSError, ValueError):
            continue
    return out


def _max_array_bytes(device: str) -> int | None:
    """Largest array this machine can hold three of (a quarter of RAM on a CPU)."""
    if device != "cpu":
        return None  # torch raises its own clear out-of-memory error on a GPU
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return None


def _llc_bytes(device: str) -> int:
    if device == "cuda":
        import torch
        return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2 ** 20))
    return max(cpu_caches().values(), default=32 * 2 ** 20)


def default_sizes(device: str = "cpu", quick: bool = False) -> list[int]:
    """Array sizes in bytes: from in-cache (16 KiB CPU, 1 MiB GPU) to 8x (CPU) or 32x (GPU)
    the last-level cache, doubling; ``quick`` keeps four points (4 MiB on a GPU or a quarter
    of L2 on a CPU, half the LLC, 2x and 8x the LLC). The smallest sizes measure per-call overhead (microseconds
    for a torch call) as much as bandwidth."""
    llc = _llc_bytes(device)
    lo, hi = (2 ** 20, max(32 * llc, 2 ** 30)) if device == "cuda" else (16 * 2 ** 10, 8 * llc)
    if device == "cpu":
        try:  # three arrays must fit comfortably in RAM
            hi = min(hi, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 16)
        except (ValueError, OSError, AttributeError):
            pass
    if quick:  # one point in a mid-level cache, one in the LLC, two beyond it
        mid = 4 * 2 ** 20 if device == "cuda" else cpu_caches().get("L2", 2 ** 20) // 4
        return sorted({mid, llc // 2, 2 * llc, min(8 * llc, hi)})
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    return sizes


def _torch_kernels(n, dtype, device):
    import torch
    dt = getattr(torch, dtype)
    a = torch.ones(n, dtype=dt, device=device)
    b = torch.full((n,), 2.0, dtype=dt, device=device)
    c = torch.full((n,), 0.5, dtype=dt, device=device)
    return {
        "copy": lambda: b.copy_(a),
        "scale": lambda: torch.mul(a, _SCALAR, out=b),
        "triad": lambda: torch.add(b, c, alpha=_SCALAR, out=a),  # one fused pass
        "read": lambda: a.sum(),
    }


def _numpy_kernels(n, dtype):
    import numpy as np
    a, b, c = np.ones(n, dtype), np.full(n, 2.0, dtype), np.full(n, 0.5, dtype)
    tmp = np.empty(_CHUNK, dtype)

    def triad():
        for i in range(0, n, _CHUNK):
            j = min(i + _CHUNK, n)
            np.multiply(c[i:j], _SCALAR, out=tmp[:j - i])
            np.add(b[i:j], tmp[:j - i], out=a[i:j])

    return {"copy": lambda: np.copyto(b, a), "scale": lambda: np.multiply(a, _SCALAR, out=b),
            "triad": triad, "read": lambda: a.sum()}


def _time_calls(fn, device: str, reps: int, target_s: float) -> tuple[list[float], int]:
    """Seconds per call for ``reps`` repetitions, each of enough calls to last ``target_s``."""
    if device == "cuda":
        import torch
        sync = torch.cuda.synchronize

        def span(k):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sync()
            start.record()
            for _ in range(k):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
    else:
        def span(k):
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            return time.perf_counter() - t0
    span(1)  # warm-up: first touch of pages, kernel caches
    one = max(span(1), 1e-7)
    inner = max(1, min(100_000, math.ceil(target_s / one)))
    return [span(inner) / inner for _ in range(reps)], inner


def _level(working_set: int, caches: dict[str, int], memory: str) -> str:
    for name, size in sorted(caches.items()):
        if working_set <= size:
            return name
    return memory


def run(device: str = "cpu", sizes: list[int] | None = None, kernels=KERNELS,
        dtype: str = "float32", quick: bool = False, reps: int | None = None,
        target_s: float | None = None, backend: str | None = None) -> list[dict]:
    """Measure each kernel at each array size; one dict per (kernel, size).

    ``sizes`` are bytes per array (default :func:`default_sizes`). ``backend`` is ``"torch"``
    (default when installed; required for CUDA) or ``"numpy"``. Reported bandwidth uses the
    best repetition (``best_Bps``, STREAM's choice) and the median (``median_Bps``).
    """
    checks.choice("device", device, ("cpu", "cuda"))
    checks.choice("dtype", dtype, DTYPES)
    checks.boolean("quick", quick)
    for k in kernels:
        checks.choice("kernel", k, KERNELS)
    reps = checks.number("reps", reps if reps is not None else (3 if quick else 5),
                         integer=True, positive=True)
    target_s = checks.number("target_s", target_s if target_s is not None else
                             (0.01 if quick else 0.05), positive=True)
    if backend is None:
        try:
            import torch  # noqa: F401
            backend = "torch"
        except ImportError:
            backend = "numpy"
    checks.choice("backend", backend, ("torch", "numpy"))
    if device == "cuda":
        import torch
        if backend != "torch" or not torch.cuda.is_available():
            raise ValueError("device='cuda' needs torch with a visible CUDA GPU")
    itemsize = 4 if dtype == "float32" else 8
    sizes = default_sizes(device, quick) if sizes is None else list(sizes)
    caches = cpu_caches() if device == "cpu" else {"L2": _llc_bytes("cuda")}
    memory = "HBM" if device == "cuda" else "DRAM"
    for size in sizes:
        checks.number("size (bytes per array)", size, integer=True, minimum=itemsize,
                      maximum=_max_array_bytes(device))
    results = []
    for size in sizes:
        n = size // itemsize
        fns = (_torch_kernels(n, dtype, device) if backend == "torch"
               else _numpy_kernels(n, dtype))
        for k in kernels:
            times, inner = _time_calls(fns[k], device, reps, target_s)
            moved = ARRAYS_TOUCHED[k] * n * itemsize
            best, med = min(times), statistics.median(times)
            results.append({
                "kernel": k, "device": device, "backend": backend, "dtype": dtype,
                "array_bytes": n * itemsize, "elements": n, "bytes_per_call": moved,
                "working_set_bytes": moved, "cache_level": _level(moved, caches, memory),
                "best_s": best, "median_s": med, "best_Bps": moved / best,
                "median_Bps": moved / med, "calls_per_rep": inner, "reps": reps,
            })
        del fns
    return results


def save(results: list[dict], device: str, settings: dict,
         directory: Path | str | None = None) -> Path:
    """Write one bandwidth record (atomic, never overwriting) and return its path."""
    meta = record.provenance(device)
    meta.update({"bench": "bandwidth", "convention": CONVENTION, "settings": settings})
    return record.write_record("bandwidth", results, meta, directory)


def _table(results: list[dict]) -> str:
    lines = [f"{'kernel':<6} {'array':>10} {'level':>9} {'best GB/s':>10} {'median GB/s':>12}"]
    for r in results:
        size = r["array_bytes"]
        label = f"{size / 2 ** 20:.2f} MiB" if size >= 2 ** 20 else f"{size / 1024:.0f} KiB"
        lines.append(f"{r['kernel']:<6} {label:>10} {r['cache_level']:>9} "
                     f"{r['best_Bps'] / 1e9:>10.2f} {r['median_Bps'] / 1e9:>12.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    p = cli.Parser(prog="python -m companion bench bandwidth",
                                description="STREAM-style memory bandwidth: " + CONVENTION)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when a GPU is visible, else cpu")
    p.add_argument("--quick", action="store_true", help="four sizes, short repetitions")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--sizes", type=cli.sizes("sizes", minimum=4),
                   help="comma-separated bytes per array, e.g. 64K,8M,1G")
    p.add_argument("--save", action="store_true", help="write a record to data/measurements/")
    p.add_argument("--out", type=cli.directory,
                   help="directory for the record (default data/measurements/)")
    args = p.parse_args(argv)
    device = args.device
    if device == "auto":
        try:
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    try:
        results = run(device, args.sizes, dtype=args.dtype, quick=args.quick)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"# {CONVENTION}")
    print(_table(results))
    if args.save or args.out:
        path = save(results, device, {"quick": args.quick, "dtype": args.dtype,
                                      "sizes": [r["array_bytes"] for r in results[::len(KERNELS)]]},
                    args.out)
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
