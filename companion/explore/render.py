"""An altair renderer that never touches a CDN.

On the published site (``COMPANION_SITE_BUILD=1``, set by the Makefile) the page already loads
the bundled vega/vega-lite/vega-embed (``assets/generated/vega-bundle.js``), so a chart is a div
plus one call to ``window.vegaEmbed``. In a live Jupyter session the first chart of the kernel
carries the same bundle inline, so notebooks draw offline too. Either way the output holds no
network address, and charts draw as SVG so tests can count their marks.
"""
from __future__ import annotations

import json
import os
import uuid

import altair as alt

EMBED_OPTIONS = {"mode": "vega-lite", "renderer": "svg", "actions": False}
_state = {"bundle_sent": False}
MAX_ROWS = 250_000  # rows of data one chart may embed (a few MB of JSON at most)


def site_build() -> bool:
    """True while the book is being built or tested (the page supplies vega itself)."""
    return os.environ.get("COMPANION_SITE_BUILD", "") not in ("", "0")


def _bundle_script() -> str:
    import vl_convert as vlc
    return "<script type=\"text/javascript\">(function(){\n" + vlc.javascript_bundle() + "\n})();</script>\n"


def chart_html(spec: dict, div_id: str | None = None) -> str:
    """HTML that draws ``spec`` with ``window.vegaEmbed``; explains itself if vega is missing."""
    div_id = div_id or f"altair-viz-{uuid.uuid4().hex}"
    spec_json = json.dumps(spec, sort_keys=True).replace("</", "<\\/")
    opts = json.dumps(EMBED_OPTIONS, sort_keys=True)
    return (
        f'<div id="{div_id}" class="companion-chart"></div>\n'
        '<script type="text/javascript">\n'
        "(function(){\n"
        f'  var el = document.getElementById("{div_id}");\n'
        "  function draw(){\n"
        "    if (!window.vegaEmbed) { el.textContent = 'Run this cell to draw the chart (vega is not loaded).'; return; }\n"
        f"    window.vegaEmbed(el, {spec_json}, {opts}).catch(function(err){{\n"
        "      el.textContent = 'Chart error: ' + err.message; console.error(err); });\n"
        "  }\n"
        "  if (window.vegaEmbed || document.readyState === 'complete') draw();\n"
        "  else window.addEventListener('load', draw);\n"
        "})();\n"
        "</script>"
    )


def offline_renderer(spec: dict, **metadata) -> dict:
    """altair renderer: text/html for the site and for Jupyter, both with no CDN."""
    html = chart_html(spec)
    if not site_build() and not _state["bundle_sent"]:
        html = _bundle_script() + html
        _state["bundle_sent"] = True
    return {"text/html": html}


def enable() -> None:
    """Register and activate the renderer (idempotent)."""
    if "companion" not in alt.renderers.names():
        alt.renderers.register("companion", offline_renderer)
    alt.renderers.enable("companion")
    # Static explorers embed every grid point of their controls; the grid size is bounded in
    # core.MAX_GRID_POINTS, so altair's default 5,000-row guard would only get in the way.
    alt.data_transformers.enable("default", max_rows=MAX_ROWS)
