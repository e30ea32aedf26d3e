"""Invalidate the notebook execution cache when the code or data the notebooks import changes.

jupyter-cache keys a notebook on its own cells, and Sphinx rebuilds a page only when its source
changes, so an edit to ``companion/`` or ``data/`` alone would leave stale outputs in the site.
We hash those trees (and the requirements); when the hash moves, the cache and doctrees go.
"""
import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
TREES = ["companion", "data", "requirements.txt", "_config.yml", "tools/sphinx_offline.py",
         "assets/vendor", "assets/generated"]


def digest() -> str:
    h = hashlib.sha256()
    for name in TREES:
        p = ROOT / name
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def main() -> int:
    stamp = BUILD / ".inputs-sha256"
    now = digest()
    if stamp.exists() and stamp.read_text() == now:
        return 0
    for sub in (".jupyter_cache", ".doctrees", "jupyter_execute", "html"):
        shutil.rmtree(BUILD / sub, ignore_errors=True)
    BUILD.mkdir(exist_ok=True)
    stamp.write_text(now)
    print("companion/ or data/ changed: notebooks will be re-executed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
