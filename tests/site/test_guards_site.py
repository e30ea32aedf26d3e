"""The browser test's chart check fails on a chart that does not draw."""
import shutil

import pytest

from conftest import HTML
from test_site import DRAWN


def test_a_broken_chart_draws_no_marks(browser, tmp_path):
    shutil.copy(HTML / "_static" / "vega-bundle.js", tmp_path / "vega-bundle.js")
    page_html = """<html><head><script src="vega-bundle.js"></script></head><body>
    <div id="good" class="companion-chart"></div><div id="bad" class="companion-chart"></div>
    <script>
    vegaEmbed('#good', {"data": {"values": [{"x": 1}]}, "mark": "point",
                        "encoding": {"x": {"field": "x", "type": "quantitative"}}}, {"renderer": "svg"});
    vegaEmbed('#bad', {"mark": "no-such-mark"}, {"renderer": "svg"}).catch(() => {});
    </script></body></html>"""
    (tmp_path / "page.html").write_text(page_html)
    page = browser.new_page()
    try:
        page.goto((tmp_path / "page.html").as_uri())
        page.wait_for_function(f"() => ({DRAWN})()[0] > 0", timeout=10000)
        page.wait_for_timeout(300)
        good, bad = page.evaluate(DRAWN)
        assert good > 0 and bad == 0  # test_page asserts every count > 0, so this page fails it
    finally:
        page.close()
