"""nbval runs notebooks as the site build does: charts rely on the page's bundled vega."""
import os

os.environ.setdefault("COMPANION_SITE_BUILD", "1")
