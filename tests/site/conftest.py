"""Serve the built site on loopback for the browser test."""
import functools
import http.server
import threading
from pathlib import Path

import pytest

HTML = Path(__file__).resolve().parents[2] / "_build" / "html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site():
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built site at {HTML}: run 'make book' first")
    handler = functools.partial(_Quiet, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.fail("Debian's chromium is missing: 'make chromium' installs it")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"])
        yield b
        b.close()
