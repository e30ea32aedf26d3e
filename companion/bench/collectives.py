"""A real collective benchmark under ``torchrun``: time, algbw, busbw and an alpha-beta fit.

Run it with torchrun (gloo on CPU, NCCL on GPU)::

    python -m torch.distributed.run --standalone --nproc-per-node=2 \\
        -m companion.bench.collectives --op all_reduce --sizes 4K,64K,1M,16M

or through ``python -m companion bench collectives ...``, which starts torchrun itself when
it is not already running under it. Across nodes the same command runs with torchrun's own
rendezvous (``--nnodes``, ``--rdzv-endpoint``): there is no launcher of our own.

Conventions follow nccl-tests (see :mod:`companion.comm`): the size of all-gather and
reduce-scatter is the total gathered buffer, and busbw is algbw times the nccl-tests factor
of the collective.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from companion import checks
from companion.bench import cli
from companion.bench.cli import parse_size
from companion.comm import bus_factor, fit_alpha_beta

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
JSON_MARKER = "COLLECTIVES_JSON "
# A worker that fails prints one line with this marker; the parent reports the reason once.
ERROR_MARKER = "COLLECTIVES_ERROR "
MAX_PROCS = 1024  # processes one command starts on this machine
QUICK_SIZES = (4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
DEFAULT_SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20)
_ROOT = Path(__file__).resolve().parents[2]


def _check_sizes(sizes) -> list[int]:
    out = []
    for s in sizes:
        s = parse_size(s) if isinstance(s, str) else s
        out.append(checks.number("sizes", s, integer=True, minimum=1))
    if not out:
        raise ValueError("sizes must not be empty")
    return out


def _parser() -> cli.Parser:
    p = cli.Parser(prog="companion bench collectives",
                                description="Time a collective under torchrun; fit alpha-beta.")
    p.add_argument("--op", default="all_reduce", choices=OPS)
    p.add_argument("--sizes", default=None, type=cli.sizes("sizes", maximum=1 << 34),
                   help="comma-separated sizes in bytes, K/M/G suffixes allowed")
    p.add_argument("--quick", action="store_true", help="small sizes and short timing (CI)")
    p.add_argument("--warmup", type=cli.integer("warmup", 0, 10_000), default=3)
    p.add_argument("--iters", type=cli.integer("iters", 1, 1_000_000), default=200,
                   help="maximum timed calls per size")
    p.add_argument("--min-iters", type=cli.integer("min-iters", 1, 1_000_000), default=20,
                   help="minimum timed calls per size (at most --iters)")
    p.add_argument("--min-time", type=cli.finite_seconds("min-time", maximum=3600.0),
                   default=None,
                   help="target seconds of timed calls per size (default 0.3, quick 0.05)")
    p.add_argument("--fit-on", default="p10", choices=("p10", "median", "mean"),
                   help="per-call statistic the alpha-beta line is fitted to (default p10)")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    p.add_argument("--save", action="store_true", help="write a record to data/measurements")
    p.add_argument("--record-dir", default=None, help="directory for --save (tests)")
    # Not "--nproc": torchrun's parser scans the script's arguments too and rejects an
    # abbreviation of its own --nproc-per-node.
    p.add_argument("--procs", type=cli.integer("procs", 1, MAX_PROCS), default=2,
                   help="processes when this command starts torchrun itself")
    return p


def _under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _buffers(torch, op, size, world, device):
    """Input and output tensors whose byte counts follow the nccl-tests size convention."""
    elems = max(world, size // 4 // world * world)  # float32, divisible by the world size
    f32 = torch.float32
    if op == "all_gather":
        return torch.ones(elems // world, dtype=f32, device=device), \
            torch.empty(elems, dtype=f32, device=device), elems * 4
    if op == "reduce_scatter":
        return torch.ones(elems, dtype=f32, device=device), \
            torch.empty(elems // world, dtype=f32, device=device), elems * 4
    return torch.ones(elems, dtype=f32, device=device), \
        torch.empty(elems, dtype=f32, device=device), elems * 4


def _call(dist, op, x, y, rank, world):
    if op == "all_reduce":
        dist.all_reduce(x)
    elif op == "all_gather":
        # torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor to *_single
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(y, x)
    elif op == "reduce_scatter":
        (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(y, x)
    elif op == "broadcast":
        dist.broadcast(x, 0)
    elif op == "all_to_all":
        dist.all_to_all_single(y, x)
    else:  # send_recv: a ring shift, every rank sends to the next and receives from the last
        reqs = [dist.isend(x, (rank + 1) % world), dist.irecv(y, (rank - 1) % world)]
        for r in reqs:
            r.wait()


def _worker(args) -> int:
    """Run the benchmark on this rank; a failure becomes one marked line on stderr (the
    parent reports it once) and exit status 1, not a traceback from every rank."""
    try:
        return _benchmark(args)
    except Exception as exc:  # noqa: BLE001 - any failure is reported, by the parent, once
        rank = os.environ.get("RANK", "?")
        print(f"{ERROR_MARKER}rank {rank}: {type(exc).__name__}: {exc}".replace("\n", " "),
              file=sys.stderr, flush=True)
        return 1


def _benchmark(args) -> int:
    import torch
    import torch.distributed as dist
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and not torch.cuda.is_available():
        raise ValueError("backend nccl needs CUDA GPUs, and torch sees none; use gloo")
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.op == "send_recv" and world < 2:
        raise ValueError("send_recv needs at least 2 processes (--procs 2 or more)")
    sizes = list(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick
                                                     else DEFAULT_SIZES)
    min_time = args.min_time if args.min_time is not None else (0.05 if args.quick else 0.3)
    cuda = backend == "nccl"

    def per_call_times(x, y, calls):
        """Seconds of each call on this rank: CUDA events on GPU, a wall clock on CPU."""
        dist.barrier()
        if cuda:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(calls)]
            for a, b in ev:
                a.record()
                _call(dist, args.op, x, y, rank, world)
                b.record()
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in ev]
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            _call(dist, args.op, x, y, rank, world)
            out.append(time.perf_counter() - t0)
        return out

    # Wake the transport (threads, connections, allocator) before the first timed size.
    x, y, _ = _buffers(torch, args.op, max(sizes), world, device)
    per_call_times(x, y, max(1, args.warmup))
    rows = []
    for size in sizes:
        x, y, nbytes = _buffers(torch, args.op, size, world, device)
        warm = per_call_times(x, y, max(1, args.warmup))
        # Every rank must make the same number of calls: agree on the slowest warm-up.
        probe = torch.tensor([statistics.median(warm)], dtype=torch.float64, device=device)
        dist.all_reduce(probe, op=dist.ReduceOp.MAX)
        calls = int(min(args.iters, max(args.min_iters, min_time / max(probe.item(), 1e-9))))
        times = sorted(per_call_times(x, y, calls))
        stats = torch.tensor([statistics.median(times), times[len(times) // 10],
                              statistics.fmean(times)], dtype=torch.float64, device=device)
        dist.all_reduce(stats)  # then the mean over ranks, as nccl-tests reports
        t, t_p10, t_mean = (stats / world).tolist()
        factor = float(bus_factor(args.op, world))
        rows.append({"size_bytes": nbytes, "iters": calls, "time_s": t, "time_p10_s": t_p10,
                     "time_mean_s": t_mean,
                     "algbw_Bps": nbytes / t, "busbw_Bps": nbytes / t * factor})
    dist.destroy_process_group()
    if rank != 0:
        return 0
    key = {"median": "time_s", "p10": "time_p10_s", "mean": "time_mean_s"}[args.fit_on]
    fit = fit_alpha_beta([r["size_bytes"] for r in rows], [r[key] for r in rows])
    result = {"op": args.op, "world_size": world, "backend": backend, "rows": rows,
              "fit": {"alpha_s": fit.alpha_s, "beta_s_per_byte": fit.beta_s_per_byte,
                      "r2": fit.r2, "bandwidth_Bps": fit.bandwidth_Bps, "on": args.fit_on}}
    print(f"{args.op} on {world} ranks ({backend}); sizes per nccl-tests convention")
    print(f"{'size (B)':>12} {'iters':>6} {'time (us)':>11} {'algbw (GB/s)':>13} "
          f"{'busbw (GB/s)':>13}")
    for r in rows:
        print(f"{r['size_bytes']:>12} {r['iters']:>6} {r['time_s'] * 1e6:>11.1f} "
              f"{r['algbw_Bps'] / 1e9:>13.3f} {r['busbw_Bps'] / 1e9:>13.3f}")
    print(f"fit: alpha = {fit.alpha_s * 1e6:.1f} us, beta = {fit.beta_s_per_byte * 1e9:.4f} ns/B "
          f"({fit.bandwidth_Bps / 1e9:.2f} GB/s), R^2 = {fit.r2:.4f} (on {args.fit_on} times)")
    print("  (1/beta is the rate a large message approaches once alpha is paid, not a busbw: "
          "the table's times include alpha" + ("" if args.fit_on == "median" else
                                                 f" and are medians, the fit's {args.fit_on}s")
          + ")")
    if args.save:
        from companion.bench.record import provenance, write_record
        meta = provenance("cuda" if backend == "nccl" else "cpu")
        meta.update({"op": args.op, "world_size": world, "backend": backend,
                     "warmup": args.warmup, "max_iters": args.iters, "min_iters": args.min_iters,
                     "min_time_s": min_time,
                     "fit": result["fit"]})
        path = write_record("collectives", rows, meta, directory=args.record_dir)
        result["record"] = str(path)
        print(f"record: {path}")
    print(JSON_MARKER + json.dumps(result), flush=True)
    return 0


def _torchrun_command(nproc: int, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "companion.bench.collectives", *argv]


def _env() -> dict:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # two workers on two cores: no thread oversubscription
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def launch(nproc: int = 2, sizes=None, op: str = "all_reduce", quick: bool = True,
           backend: str = "auto", save: bool = False, record_dir=None,
           timeout_s: float = 300.0, extra_args: list[str] | None = None) -> dict:
    """Run the benchmark under torchrun in a subprocess and return rank 0's result dict.

    The dict has ``op``, ``world_size``, ``backend``, ``rows`` (``size_bytes``, ``iters``,
    ``time_s`` (median), ``time_p10_s``, ``time_mean_s``, ``algbw_Bps``, ``busbw_Bps``) and
    ``fit`` (``alpha_s``, ``beta_s_per_byte``, ``r2``, ``bandwidth_Bps``, ``on``). Extra
    command-line flags go in ``extra_args``; ``record`` holds the record's path with ``save``.
    """
    nproc = checks.number("nproc", nproc, integer=True, minimum=1)
    op = checks.choice("op", op, OPS)
    checks.choice("backend", backend, ("auto", "gloo", "nccl"))
    checks.boolean("quick", quick)
    checks.boolean("save", save)
    argv = ["--op", op, "--backend", backend]
    if sizes is not None:
        argv += ["--sizes", ",".join(str(s) for s in _check_sizes(sizes))]
    if quick:
        argv.append("--quick")
    if save:
        argv.append("--save")
    if record_dir is not None:
        argv += ["--record-dir", str(record_dir)]
    argv += list(extra_args or [])
    _parser().parse_args(argv)  # bad extra_args fail here, before any process starts
    proc = subprocess.run(_torchrun_command(nproc, argv), capture_output=True, text=True,
                          env=_env(), cwd=_ROOT, timeout=timeout_s)
    for line in proc.stdout.splitlines():
        if line.startswith(JSON_MARKER):
            return json.loads(line[len(JSON_MARKER):])
    raise RuntimeError(f"the collectives benchmark failed (torchrun exit status "
                       f"{proc.returncode}): {worker_failure(proc.stderr)}")


def worker_failure(stderr: str) -> str:
    """The reason a torchrun run failed, once: the first worker's marked error line (every
    rank usually fails the same way), else the tail of torchrun's own output."""
    reasons = [line.split(ERROR_MARKER, 1)[1] for line in stderr.splitlines()
               if ERROR_MARKER in line]
    if reasons:
        same = sum(r.split(":", 1)[-1] == reasons[0].split(":", 1)[-1] for r in reasons)
        more = f" (and {same - 1} more ranks the same)" if same > 1 else ""
        return reasons[0] + more
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-5:]
    return "no worker reported a reason; torchrun said:\n" + "\n".join(tail)


def main(argv=None) -> int:
    """Entry point: benchmark when under torchrun, otherwise start torchrun with ``--procs``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = _parser()
    args = p.parse_args(argv)  # a bad flag exits 2 here, in the parent, before any worker
    if args.min_iters > args.iters:
        p.error(f"argument --min-iters: {args.min_iters} must not exceed --iters {args.iters}")
    if args.op == "send_recv" and args.procs < 2 and not _under_torchrun():
        p.error("argument --procs: send_recv needs at least 2 processes")
    if _under_torchrun():
        return _worker(args)
    if args.backend == "nccl":
        import torch
        if not torch.cuda.is_available():
            p.error("argument --backend: nccl needs CUDA GPUs, and torch sees none; use gloo")
    # The workers' stdout (rank 0's table) streams through; their stderr is read so that a
    # failure is reported once, with its reason, rather than as a traceback per rank.
    proc = subprocess.run(_torchrun_command(args.procs, argv), env=_env(), cwd=_ROOT,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"error: the collectives benchmark failed: {worker_failure(proc.stderr)}",
              file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
