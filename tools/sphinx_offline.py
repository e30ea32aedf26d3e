"""Sphinx extension: keep the built site offline, and fail the strict build if it is not.

Jupyter Book 1 always loads sphinx-thebe, which names a CDN script on every page (it is fetched
only when a reader presses a launch button, which this book does not offer). We drop those
scripts, then scan each page: any ``src``/``href`` that loads a script, stylesheet or font from
another host is a Sphinx warning, which the strict build (``-W``) turns into a failure.
"""
from __future__ import annotations

import re

from sphinx.util import logging

logger = logging.getLogger(__name__)

_EXTERNAL = re.compile(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)=["'](https?:)?//""", re.I)
_CDN_HOSTS = re.compile(r"cdn\.jsdelivr|unpkg\.com|cdnjs\.cloudflare|code\.jquery\.com|cdn\.plot\.ly|"
                        r"requirejs\.org|fonts\.googleapis", re.I)


def _is_thebe(js) -> bool:
    body = getattr(js, "attributes", {}).get("body", "") or ""
    name = getattr(js, "filename", None) or str(js)
    return "THEBE_JS_URL" in body or "thebe" in str(name)


def _strip_thebe(app, pagename, templatename, context, doctree):
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if not _is_thebe(js)]


def _check_page(app, pagename, templatename, context, doctree):
    for key in ("body", "metatags"):
        text = context.get(key) or ""
        for m in _EXTERNAL.finditer(text):
            logger.warning("page %s loads a resource from another host: %s", pagename,
                           text[m.start():m.start() + 160], type="offline", subtype="external")
        for m in _CDN_HOSTS.finditer(text):
            logger.warning("page %s names a CDN (%s): the site must work offline", pagename,
                           m.group(0), type="offline", subtype="cdn")
    for js in context.get("script_files", []):
        name = getattr(js, "filename", None) or str(js)
        body = getattr(js, "attributes", {}).get("body", "") or ""
        if re.match(r"(https?:)?//", str(name)) or _CDN_HOSTS.search(body):
            logger.warning("page %s loads script %s from another host", pagename, name,
                           type="offline", subtype="external")


def setup(app):
    app.connect("html-page-context", _strip_thebe, priority=900)
    app.connect("html-page-context", _check_page, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
