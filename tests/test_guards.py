"""The build's guards fire: a CDN reference is a Sphinx warning (so -W fails), and a notebook
with a failing cell fails nbval. (A chart that does not draw fails tests/site/test_guards_site.py.)
"""
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

# tools/ found from this file, not the working directory: pytest may run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import sphinx_offline  # noqa: E402


# Hosts spelled in pieces so a plain grep of the repository for CDN names finds only real uses.
CDN = "https://cdn." + "jsdelivr.net"
UNPKG = "https://" + "unpkg" + ".com"


class _JS(str):
    def __new__(cls, filename, body=""):
        s = super().__new__(cls, filename or "")
        s.filename, s.attributes = filename, {"body": body}
        return s


def _warnings(monkeypatch, context):
    seen = []
    monkeypatch.setattr(sphinx_offline.logger, "warning", lambda msg, *a, **k: seen.append(msg % a))
    sphinx_offline._check_page(None, "page", "page.html", context, None)
    return seen


def test_cdn_script_in_body_is_a_warning(monkeypatch):
    body = f'<script src="{CDN}/npm/vega@6"></script>'
    assert _warnings(monkeypatch, {"body": body, "script_files": []})


def test_external_script_file_is_a_warning(monkeypatch):
    ctx = {"body": "", "script_files": [_JS(f"{UNPKG}/thebe@0.8.2/lib/index.js")]}
    assert _warnings(monkeypatch, ctx)


def test_local_page_passes(monkeypatch):
    ctx = {"body": '<script src="../_static/vega-bundle.js"></script>',
           "script_files": [_JS("_static/vega-bundle.js")]}
    assert not _warnings(monkeypatch, ctx)


def test_thebe_scripts_are_stripped():
    ctx = {"script_files": [_JS(None, body=f'const THEBE_JS_URL = "{UNPKG}/x"'),
                            _JS("sphinx-thebe.js"), _JS("vega-bundle.js")]}
    sphinx_offline._strip_thebe(None, "p", "p.html", ctx, None)
    assert ctx["script_files"] == ["vega-bundle.js"]


def test_a_failing_cell_fails_nbval(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1 / 0")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
                          "-p", "no:cacheprovider", "-q", str(path)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode != 0 and "ZeroDivisionError" in run.stdout
