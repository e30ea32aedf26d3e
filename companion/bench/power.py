"""GPU board power while one GEMM runs back to back: watts, FLOP/s and FLOP per joule.

The method: run a large matmul (the operands of :mod:`companion.bench.gemm`) continuously for
``seconds``, sample the board power with ``nvidia-smi --query-gpu=power.draw -lms`` on the side,
drop the first ``settle_s`` of samples (clocks and power ramp up), and report the median
power, the FLOP/s over the whole loop and the FLOP per joule. This is the measurement behind
the power chapter's question: how close to its TDP does a GPU run, and what does that buy. It
needs an NVIDIA GPU and ``nvidia-smi``; elsewhere it says so and runs nothing.

Run it with ``python -m companion bench power [--dtypes bf16,fp8_e4m3] [--seconds 10] [--save]``.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import threading
import time

from companion import checks
from companion.bench import cli, record
from companion.bench.gemm import DTYPES, _operands, _unsupported, parse_shapes

DEFAULT_DTYPES = ("bf16", "fp8_e4m3")
DEFAULT_SHAPE = (8192, 8192, 8192)


def summarize(samples: list[tuple[float, float]], work_flop: float, calls: int,
              elapsed_s: float, settle_s: float) -> dict:
    """Median and mean power of the ``(time_s, watts)`` samples taken after ``settle_s``,
    the loop's FLOP/s (``calls`` x ``work_flop`` over ``elapsed_s``) and FLOP per joule."""
    checks.number("work_flop", work_flop, positive=True)
    checks.number("calls", calls, integer=True, positive=True)
    checks.number("elapsed_s", elapsed_s, positive=True)
    checks.number("settle_s", settle_s, nonnegative=True)
    kept = [w for t, w in samples if t >= settle_s]
    if not kept:
        raise ValueError(f"no power sample after settle_s={settle_s} s (of {len(samples)} "
                         f"samples): run longer or settle less")
    flops = calls * work_flop / elapsed_s
    median_w = statistics.median(kept)
    return {"samples": len(kept), "median_w": median_w, "mean_w": statistics.fmean(kept),
            "max_w": max(kept), "flops": flops, "flop_per_joule": flops / median_w}


class _Sampler:
    """``nvidia-smi`` printing one GPU's board power every ``interval_s``, read on a thread.
    ``gpu`` is what ``nvidia-smi -i`` takes: the torch device's UUID, so that the GPU sampled
    is the GPU computing whatever CUDA_VISIBLE_DEVICES says."""

    def __init__(self, interval_s: float, gpu: str):
        ms = max(1, int(round(interval_s * 1e3)))
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", gpu, "--query-gpu=power.draw", "--format=csv,noheader,nounits",
             f"--loop-ms={ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.samples: list[tuple[float, float]] = []
        self.t0 = time.perf_counter()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append((time.perf_counter() - self.t0, float(line.strip())))
            except ValueError:  # "[N/A]" or a header: skip
                continue

    def stop(self) -> list[tuple[float, float]]:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.thread.join(timeout=10)
        return self.samples


def _gpu_id() -> str:
    import torch
    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    return f"GPU-{uuid}" if uuid is not None else str(torch.cuda.current_device())


def run(dtypes=DEFAULT_DTYPES, shape=DEFAULT_SHAPE, seconds: float = 10.0,
        interval_s: float = 0.1, settle_s: float = 2.0, device: str = "cuda") -> list[dict]:
    """Power, FLOP/s and FLOP per joule of each dtype's GEMM loop (one dict per dtype; a dtype
    the GPU cannot run gets ``status="skipped"`` and the reason)."""
    import torch
    checks.choice("device", device, ("cuda",))
    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        raise ValueError("the power benchmark needs an NVIDIA GPU visible to torch and "
                         "nvidia-smi on PATH; neither CPU power nor other vendors are read")
    for d in dtypes:
        checks.choice("dtype", d, DTYPES)
    m, n, k = (checks.number(f"shape {c}", v, integer=True, positive=True)
               for c, v in zip("MNK", shape))
    checks.number("seconds", seconds, positive=True)
    checks.number("interval_s", interval_s, positive=True)
    if settle_s >= seconds:
        raise ValueError(f"settle_s={settle_s} must be shorter than seconds={seconds}")
    results = []
    for dtype in dtypes:
        case = {"dtype": dtype, "device": device, "m": m, "n": n, "k": k,
                "work_flop": 2 * m * n * k, "seconds": seconds, "settle_s": settle_s,
                "interval_s": interval_s}
        reason = _unsupported(dtype, device)
        if reason is not None:
            results.append({**case, "status": "skipped", "reason": reason})
            continue
        fn = _operands(dtype, m, n, k, device)
        fn()
        torch.cuda.synchronize()
        sampler = _Sampler(interval_s, _gpu_id())
        try:  # stop nvidia-smi and its reader even if a GEMM raises
            t0, calls = time.perf_counter(), 0
            while time.perf_counter() - t0 < seconds:
                for _ in range(8):  # queue a few calls per check of the clock
                    fn()
                calls += 8
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - t0
        finally:
            samples = sampler.stop()
        results.append({**case, "status": "ok", "calls": calls,
                        **summarize(samples, case["work_flop"], calls, elapsed, settle_s)})
    return results


def _one_shape(text: str) -> tuple[int, int, int]:
    shapes = parse_shapes(text)
    if len(shapes) != 1:
        raise ValueError(f"shape must be one MxNxK; got {len(shapes)}")
    return shapes[0]


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    p = cli.Parser(prog="python -m companion bench power",
                                description="GPU board power during a GEMM loop, per dtype.")
    p.add_argument("--dtypes", type=cli.names("dtypes", DTYPES),
                   default=list(DEFAULT_DTYPES), help=f"comma-separated, from {', '.join(DTYPES)}")
    p.add_argument("--shape", type=cli._typed(_one_shape, "shape"), default=DEFAULT_SHAPE,
                   help="MxNxK")
    p.add_argument("--seconds", type=cli.finite_seconds("seconds", maximum=3600.0),
                   default=10.0, help="length of each GEMM loop (at most an hour)")
    p.add_argument("--settle", type=cli.real("settle", nonnegative=True), default=2.0,
                   help="seconds of samples to drop")
    p.add_argument("--save", action="store_true", help="write a record to data/measurements/")
    p.add_argument("--out", type=cli.directory,
                   help="directory for the record (default data/measurements/)")
    args = p.parse_args(argv)
    if args.settle >= args.seconds:
        p.error(f"argument --settle: settle={args.settle} must be shorter than "
                f"seconds={args.seconds}")
    shape = args.shape
    try:
        results = run(args.dtypes, shape, args.seconds, settle_s=args.settle)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in results:
        if r["status"] != "ok":
            print(f"{r['dtype']:<9} skipped: {r['reason']}")
            continue
        print(f"{r['dtype']:<9} {r['median_w']:7.1f} W median ({r['samples']} samples), "
              f"{r['flops'] / 1e12:8.1f} TFLOP/s, {r['flop_per_joule'] / 1e12:6.2f} TFLOP/J")
    if args.save or args.out:
        meta = record.provenance("cuda")
        meta.update({"bench": "power", "method": "GEMM loop, nvidia-smi power.draw sampled "
                     "on a thread, first settle_s dropped", "settings": {
                         "seconds": args.seconds, "settle_s": args.settle, "shape": shape}})
        path = record.write_record("power", results, meta, args.out)
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
