"""How long the book takes to build: a cold build (venv kept) and a no-change rebuild.

Goal (issue 2): cold build under 3 minutes, no-change rebuild under 30 seconds, as medians.
"Cold" removes _build (so every notebook executes) but keeps .venv; "rebuild" runs `make book`
again with nothing changed. Usage: .venv/bin/python benchmarks/build_time.py [--repeat 3]
"""
import argparse
import shutil
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_make() -> float:
    t0 = time.perf_counter()
    subprocess.run(["make", "book"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cold, warm = [], []
    for _ in range(args.repeat):
        shutil.rmtree(ROOT / "_build", ignore_errors=True)
        cold.append(timed_make())
        warm.append(timed_make())
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"cold make book (venv kept): median {c:6.1f} s over {len(cold)} runs "
          f"(goal 180 s: {c / 180:.2f} of goal) {['%.1f' % x for x in cold]}")
    print(f"no-change rebuild:          median {w:6.1f} s over {len(warm)} runs "
          f"(goal 30 s: {w / 30:.2f} of goal) {['%.1f' % x for x in warm]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
