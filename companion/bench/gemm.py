"""Matmul throughput by dtype and shape.

The method is that of Stas Bekman's Maximum Achievable Matmul FLOPS finder (ML Engineering,
https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/benchmarks/mamf-finder.py):
normally distributed operands, warm-up calls, then every timed call preceded by a write to a
buffer larger than the last-level cache (L2 on a GPU) so no call finds its operands cached, and
the time of each call measured on its own: CUDA events on a GPU, ``time.perf_counter`` on a CPU.
A matmul of (M, K) by (K, N) counts 2 M N K floating-point operations.

dtypes: ``fp32`` (TF32 off), ``tf32``, ``bf16``, ``fp16``, ``fp8_e4m3`` (``torch._scaled_mm``
with per-tensor scales, bf16 output; CUDA compute capability 8.9 or newer) and ``fp4``
(``torch._scaled_mm`` on E2M1 with E8M0 block scales, compute capability 10.0 or newer). A
dtype the device cannot run is reported with ``status="skipped"`` and the reason.

Run it with ``python -m companion bench gemm [--device cpu|cuda] [--quick] [--save]``.
"""
from __future__ import annotations

import statistics
import sys
import time

from companion import checks
from companion.bench import cli, record

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp4")
CPU_DTYPES = ("fp32", "bf16")
DEFAULT_DTYPES = {"cpu": CPU_DTYPES, "cuda": ("bf16", "fp16", "tf32", "fp8_e4m3", "fp4")}
DEFAULT_SHAPES = {"cpu": [(1024, 1024, 1024), (2048, 2048, 2048)],
                  "cuda": [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 1024)]}
#: Most warm-up or timed calls per case a command accepts (a long run, not a hang).
MAX_CALLS = 100_000
QUICK_SHAPES = {"cpu": [(256, 256, 256), (512, 512, 512)], "cuda": [(4096, 4096, 4096)]}


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``"4096x4096x4096,8192x8192x1024"`` -> [(M, N, K), ...]."""
    shapes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"shape {item!r} must look like MxNxK with positive integers")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def _unsupported(dtype: str, device: str) -> str | None:
    """Why ``dtype`` cannot run on ``device`` (None if it can)."""
    import torch
    if device == "cpu":
        return None if dtype in CPU_DTYPES else f"{dtype} GEMMs are not timed on CPU"
    major, minor = torch.cuda.get_device_capability(0)
    if dtype == "fp8_e4m3" and (major, minor) < (8, 9):
        return f"FP8 tensor cores need compute capability >= 8.9; this GPU is {major}.{minor}"
    if dtype == "fp4" and major < 10:
        return f"FP4 tensor cores need compute capability >= 10.0; this GPU is {major}.{minor}"
    return None


def _operands(dtype, m, n, k, device):
    """The matmul as a zero-argument callable on normally distributed operands."""
    import torch
    a32 = torch.randn(m, k, device=device)
    b32 = torch.randn(k, n, device=device)
    if dtype in ("fp32", "tf32"):
        return lambda: torch.matmul(a32, b32)
    if dtype in ("bf16", "fp16"):
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a, b = a32.to(dt), b32.to(dt)
        del a32, b32
        return lambda: torch.matmul(a, b)
    one = torch.ones((), device=device)
    if dtype == "fp8_e4m3":
        a = a32.to(torch.float8_e4m3fn)
        b = b32.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    # fp4: packed E2M1 pairs with one E8M0 scale per 32 values (MXFP4); the values are random
    # bytes, which is fine for timing. Scale layout follows torch's blocked-scale convention.
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device=device)
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=device)
    a, b = a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2).t()
    sa = torch.full((m * (k // 32),), 127, dtype=torch.uint8, device=device)
    sb = torch.full((n * (k // 32),), 127, dtype=torch.uint8, device=device)
    sa, sb = sa.view(torch.float8_e8m0fnu), sb.view(torch.float8_e8m0fnu)
    return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def _flush_buffer(device):
    """A buffer 2x the last-level cache; zeroing it evicts the operands."""
    import torch
    if device == "cuda":
        llc = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2 ** 20))
    else:
        from companion.bench.bandwidth import cpu_caches
        llc = max(cpu_caches().values(), default=32 * 2 ** 20)
    return torch.empty(2 * llc, dtype=torch.uint8, device=device)


def _time(fn, device, flush, warmup, iters):
    """Seconds of each of ``iters`` calls, cache flushed before each."""
    import torch
    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
        for _ in range(iters):
            flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(iters):
            flush.zero_()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return times


def run(dtypes=None, shapes=None, device: str = "cpu", warmup: int | None = None,
        iters: int | None = None, quick: bool = False) -> list[dict]:
    """Time ``torch.matmul`` (or ``torch._scaled_mm``) per dtype and (M, N, K) shape.

    Returns one dict per case with ``median_s``, ``best_s``, ``median_flops`` and
    ``best_flops`` (FLOP/s), or ``status="skipped"`` and a ``reason``.
    """
    import torch
    checks.choice("device", device, ("cpu", "cuda"))
    checks.boolean("quick", quick)
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' needs a visible CUDA GPU; use device='cpu'")
    dtypes = list(dtypes) if dtypes is not None else list(DEFAULT_DTYPES[device])
    for d in dtypes:
        checks.choice("dtype", d, DTYPES)
    shapes = list(shapes) if shapes is not None else (QUICK_SHAPES if quick
                                                      else DEFAULT_SHAPES)[device]
    for s in shapes:
        if len(s) != 3:
            raise ValueError(f"each shape must be (M, N, K); got {s!r}")
        for name, v in zip("MNK", s):
            checks.number(f"shape {name}", v, positive=True, integer=True)
    warmup = checks.number("warmup", warmup if warmup is not None else (2 if quick else 10),
                           integer=True, nonnegative=True)
    iters = checks.number("iters", iters if iters is not None else (5 if quick else 50),
                          integer=True, positive=True)
    torch.manual_seed(0)
    flush = _flush_buffer(device)
    results = []
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for dtype in dtypes:
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            for m, n, k in shapes:
                case = {"dtype": dtype, "device": device, "m": m, "n": n, "k": k,
                        "work_flop": 2 * m * n * k, "warmup": warmup, "iters": iters}
                reason = _unsupported(dtype, device)
                if reason is None and dtype == "fp4" and k % 32:
                    reason = "fp4 needs K divisible by 32 (one E8M0 scale per 32 values)"
                if reason is None:
                    try:
                        times = _time(_operands(dtype, m, n, k, device), device, flush, warmup,
                                      iters)
                    except (RuntimeError, TypeError, ValueError) as exc:
                        reason = f"torch refused: {str(exc).splitlines()[0][:200]}"
                if reason is not None:
                    results.append({**case, "status": "skipped", "reason": reason})
                    continue
                med, best = statistics.median(times), min(times)
                results.append({**case, "status": "ok", "median_s": med, "best_s": best,
                                "median_flops": case["work_flop"] / med,
                                "best_flops": case["work_flop"] / best})
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return results


def _table(results: list[dict]) -> str:
    lines = [f"{'dtype':<9} {'M x N x K':>20} {'median ms':>10} {'median TFLOP/s':>15} "
             f"{'best TFLOP/s':>13}"]
    for r in results:
        shape = f"{r['m']}x{r['n']}x{r['k']}"
        if r["status"] != "ok":
            lines.append(f"{r['dtype']:<9} {shape:>20}  skipped: {r['reason']}")
            continue
        lines.append(f"{r['dtype']:<9} {shape:>20} {r['median_s'] * 1e3:>10.3f} "
                     f"{r['median_flops'] / 1e12:>15.2f} {r['best_flops'] / 1e12:>13.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    p = cli.Parser(prog="python -m companion bench gemm",
                                description="Matmul throughput by dtype and shape "
                                            "(mamf-finder method: L2 flush, per-call timing).")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when a GPU is visible, else cpu")
    p.add_argument("--quick", action="store_true", help="small shapes, few iterations")
    p.add_argument("--dtypes", type=cli.names("dtypes", DTYPES),
                   help=f"comma-separated, from {', '.join(DTYPES)}")
    p.add_argument("--shapes", type=cli._typed(parse_shapes, "shapes"),
                   help="comma-separated MxNxK, e.g. 4096x4096x4096")
    p.add_argument("--warmup", type=cli.integer("warmup", 0, MAX_CALLS),
                   help="untimed calls per case")
    p.add_argument("--iters", type=cli.integer("iters", 1, MAX_CALLS),
                   help="timed calls per case")
    p.add_argument("--save", action="store_true", help="write a record to data/measurements/")
    p.add_argument("--out", type=cli.directory,
                   help="directory for the record (default data/measurements/)")
    args = p.parse_args(argv)
    import torch
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        results = run(args.dtypes, args.shapes, device, args.warmup, args.iters, args.quick)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(_table(results))
    if args.save or args.out:
        meta = record.provenance(device)
        meta.update({"bench": "gemm", "method": "mamf-finder: randn operands, cache flush, "
                     "per-call timing", "settings": {
                         "quick": args.quick, "warmup": results[0]["warmup"] if results else None,
                         "iters": results[0]["iters"] if results else None,
                         "dtypes": sorted({r["dtype"] for r in results}),
                         "shapes": sorted({(r["m"], r["n"], r["k"]) for r in results})}})
        path = record.write_record("gemm", results, meta, args.out)
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
