"""Command line: ``python -m companion bench|plan|env ...`` (``--help`` on each)."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

BENCHES = ("gemm", "bandwidth", "collectives")


def _env(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m companion env",
                                description="Print what this machine is, as a record would.")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)
    from .bench.record import provenance
    print(json.dumps(provenance(args.device), indent=1, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m companion {bench,plan,env} ...\n\n"
             "  bench {gemm,bandwidth,collectives} [--help]   run a real kernel benchmark\n"
             "  plan --model M --gpu G --gpus N --global-batch B [--top K] [--json]\n"
             "                                               fastest parallel layouts\n"
             "  env [--device cuda]                          print this machine's provenance\n")
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "env":
        return _env(rest)
    if cmd == "plan":
        from .search import main as plan
        return plan(rest)
    if cmd == "bench":
        if not rest or rest[0] in ("-h", "--help"):
            print("usage: python -m companion bench {" + ",".join(BENCHES) + "} [--help]")
            return 0
        if rest[0] not in BENCHES:
            print(f"unknown benchmark {rest[0]!r}; choose one of {', '.join(BENCHES)}",
                  file=sys.stderr)
            return 2
        module = importlib.import_module(f"companion.bench.{rest[0]}")
        return module.main(rest[1:])
    print(f"unknown command {cmd!r}\n\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
