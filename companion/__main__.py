"""Command line: ``python -m companion bench|plan|check|env ...`` (``--help`` on each)."""
from __future__ import annotations

import importlib
import json
import os
import sys

from .bench.cli import Parser

BENCHES = ("gemm", "bandwidth", "collectives", "power")


def _env(argv) -> int:
    p = Parser(prog="python -m companion env",
                                description="Print what this machine is, as a record would.")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():  # as the benchmarks refuse it: no record of a GPU
            print("python -m companion env: --device cuda needs a visible CUDA GPU; use "
                  "--device cpu", file=sys.stderr)
            return 2
    from .bench.record import provenance
    print(json.dumps(provenance(args.device), indent=1, sort_keys=True))
    return 0


def _check(argv) -> int:
    p = Parser(
        prog="python -m companion check",
        description="Recompute the seeds' claims (data/claims.yaml) and print each verdict, or "
                    "check an answer to one of the book's exercises.")
    p.add_argument("claims", nargs="*", metavar="CLAIM_ID",
                   help="claim ids to recompute (default: every claim with a numeric check)")
    p.add_argument("--exercise", nargs=2, metavar=("ID", "ANSWER"),
                   help="check ANSWER (a number or a word) for the exercise ID")
    p.add_argument("--json", action="store_true", help="print the claims as JSON")
    args = p.parse_args(argv)
    if args.exercise and args.claims:
        p.error("give claim ids or --exercise ID ANSWER, not both")
    if args.exercise:
        from .exercises import check
        exercise_id, raw = args.exercise
        try:
            answer = float(raw)
        except ValueError:
            answer = raw
        verdict = check(exercise_id, answer)
        print(verdict)
        return 0 if verdict else 1
    from . import claims
    ids = args.claims or list(claims.checkable())
    rows = []
    for claim_id in ids:
        c = claims.evaluate(claim_id)
        expected = claims.claim(claim_id)["expected_verdict"]
        rows.append({"id": c.id, "verdict": c.verdict, "catalogue": expected,
                     "agree": c.verdict == expected, "detail": c.detail,
                     "recomputed": c.computed is not None})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        width = max(len(r["id"]) for r in rows)
        for r in rows:
            mark = ("" if r["agree"] else f"  (catalogue says {r['catalogue']})") + (
                "" if r["recomputed"] else "  (no number to recompute: the catalogue's verdict)")
            print(f"{r['id']:<{width}}  {r['verdict']}{mark}")
            # what was recomputed, or why the verdict stands without a number
            why = r["detail"] if r["recomputed"] else claims.claim(r["id"])["why"]
            print(f"  {why}")
        done = sum(r["recomputed"] for r in rows)
        differ = sum(not r["agree"] for r in rows)
        print(f"{done} claim{'' if done == 1 else 's'} recomputed; "
              f"{differ} {'disagrees' if differ == 1 else 'disagree'} with the catalogue"
              + (f"; {len(rows) - done} not checkable" if done < len(rows) else ""))
    return 0 if all(r["agree"] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (2 for bad input, with a one-line message
    from argparse or the argument checks, never a traceback)."""
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse's exit, so main() returns a status in every case
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:  # piped into head: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _dispatch(argv: list[str]) -> int:
    usage = ("usage: python -m companion {bench,plan,check,env} ...\n\n"
             "  bench {gemm,bandwidth,collectives,power} [--help]\n"
             "                                               run a real kernel benchmark\n"
             "  plan --model M --gpu G --gpus N --global-batch B [--top K] [--explain] [--json]\n"
             "                                               fastest parallel layouts\n"
             "  plan --list                                  the models, GPUs and systems it takes\n"
             "  check [CLAIM_ID ...] [--json] | --exercise ID ANSWER\n"
             "                                               recompute the seeds' claims\n"
             "  env [--device cuda]                          print this machine's provenance\n")
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "env":
        return _env(rest)
    if cmd == "check":
        try:
            return _check(rest)
        except (ValueError, TypeError) as e:  # an unknown id: say so, without a traceback
            print(f"python -m companion check: {e}", file=sys.stderr)
            return 2
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
        try:
            return module.main(rest[1:])
        except OSError as exc:  # e.g. the record directory vanished mid-run: say which
            print(f"python -m companion bench {rest[0]}: {exc}", file=sys.stderr)
            return 1
    print(f"unknown command {cmd!r}\n\n{usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
