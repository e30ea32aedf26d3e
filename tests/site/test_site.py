"""Open every page of the built site in headless Chromium, offline, and check what a reader sees.

For each page: no console error, no request to any host but the local server, every altair
chart draws (an SVG with marks), every saved widget renders; on pages with chart sliders, moving
one slider changes the chart.
"""
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import HTML

ALL = sorted(str(p.relative_to(HTML)) for p in HTML.rglob("*.html")
             if not p.relative_to(HTML).parts[0].startswith("_"))
# index.html only redirects to the first chapter: it is checked on its own below.
REDIRECTS = [p for p in ALL if 'http-equiv="Refresh"' in (HTML / p).read_text()[:2000]]
PAGES = [p for p in ALL if p not in REDIRECTS]

# pydata-sphinx-theme logs "Got invalid theme mode" as a console error on a fresh profile; a
# reader's browser has a stored mode, so we store one too rather than ignore console errors.
INIT = "localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');"

DRAWN = """() => Array.from(document.querySelectorAll('.companion-chart, .vega-embed')).map(el =>
  el.querySelectorAll('svg g.role-mark > *, canvas').length)"""


def _open(browser, site, page_path):
    ctx = browser.new_context()
    ctx.add_init_script(INIT)
    page = ctx.new_page()
    problems = []
    host = urlparse(site).netloc
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def on_request(req):
        u = urlparse(req.url)
        if u.scheme in ("http", "https", "ws", "wss") and u.netloc != host:
            problems.append(f"request to another host: {req.url}")
    page.on("request", on_request)
    page.goto(f"{site}/{page_path}", wait_until="load")
    return ctx, page, problems


def _wait_for_charts(page):
    n = page.locator(".companion-chart, .vega-embed").count()
    if n:
        page.wait_for_function(f"() => ({DRAWN})().filter(k => k > 0).length >= {n}", timeout=20000)
    return n


@pytest.mark.parametrize("page_path", PAGES)
def test_page(browser, site, page_path):
    ctx, page, problems = _open(browser, site, page_path)
    try:
        charts = _wait_for_charts(page)
        counts = page.evaluate(DRAWN)
        assert all(k > 0 for k in counts), f"{page_path}: charts without marks: {counts}"
        saved_widgets = page.locator("script[type='application/vnd.jupyter.widget-view+json']").count()
        if saved_widgets:
            page.wait_for_selector(".jupyter-widgets", timeout=20000)
        page.wait_for_timeout(300)
        assert not problems, f"{page_path}: " + "; ".join(problems)
        assert charts == len(counts)
    finally:
        ctx.close()


def test_site_has_pages():
    assert len(PAGES) >= 2 and "index.html" in ALL, ALL


def test_index_redirects_locally(browser, site):
    ctx, page, problems = _open(browser, site, "index.html")
    try:
        page.wait_for_url("**/book/intro.html", timeout=10000)
        assert not problems, problems
    finally:
        ctx.close()


def test_slider_changes_chart(browser, site):
    moved = 0
    for page_path in PAGES:
        ctx, page, problems = _open(browser, site, page_path)
        try:
            sliders = page.locator(".companion-chart input[type=range]")
            if not sliders.count():
                continue
            _wait_for_charts(page)
            chart = page.locator(".companion-chart", has=page.locator("input[type=range]")).first
            before = chart.locator("svg").first.inner_html()
            sliders.first.evaluate("""el => { el.value = (el.value == el.max) ? el.min : el.max;
                el.dispatchEvent(new Event('input', {bubbles: true})); }""")
            page.wait_for_timeout(500)
            after = chart.locator("svg").first.inner_html()
            assert before != after, f"{page_path}: moving a slider left the chart unchanged"
            assert not problems, problems
            moved += 1
        finally:
            ctx.close()
    assert moved, "no page has a chart with a slider"
