# Spec Sheet to Step Time: build the book, run every check. See README.md.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HTML := _build/html
# The kernel that executes notebooks knows it is building the site: charts then rely on the
# page's bundled vega instead of inlining it (companion/explore/render.py).
export COMPANION_SITE_BUILD := 1
export PYTHONHASHSEED := 0
export OMP_NUM_THREADS ?= 2

.PHONY: book test unit nbval strict browser serve lab clean assets notebooks chromium help

help:
	@echo "make book   - create .venv, install, execute notebooks, build the site into $(HTML)"
	@echo "make test   - unit tests, nbval on every notebook, strict site build, browser test"
	@echo "make serve  - serve $(HTML) on http://127.0.0.1:8000 ;  make lab - JupyterLab on book/"
	@echo "make notebooks - re-execute notebooks and store their outputs (after editing one)"
	@echo "make clean  - remove the built site and caches"

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

assets: $(STAMP)
	$(BIN)/python tools/vega_bundle.py
	$(BIN)/python tools/invalidate_cache.py

book: $(STAMP) assets
	$(BIN)/jupyter-book build .
	@echo "The book is built: open $(CURDIR)/$(HTML)/index.html (or run 'make serve')."

unit: $(STAMP)
	$(BIN)/python -m pytest tests --ignore=tests/site -p no:cacheprovider

# nbval executes every notebook and compares outputs with the stored ones; altair's random ids
# and machine-dependent values are sanitized (tests/nbval_sanitize.cfg).
nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	  -p no:cacheprovider -n 2 --dist loadfile book/

# Strict: any Sphinx warning (a broken reference, a failed cell) fails the build.
strict: $(STAMP) assets
	$(BIN)/jupyter-book build . -W -n --keep-going

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The browser test runs with networking disabled where the kernel allows it (a new network
# namespace with only loopback up), so "works offline" is tested, not assumed.
browser: $(STAMP) chromium
	@if command -v ip >/dev/null && unshare -n true 2>/dev/null; then \
	  echo "browser test with networking disabled (unshare -n, loopback only)"; \
	  unshare -n sh -c 'ip link set lo up && $(BIN)/python -m pytest tests/site -p no:cacheprovider'; \
	else \
	  echo "browser test (unshare unavailable: networking left on; requests to other hosts still fail it)"; \
	  $(BIN)/python -m pytest tests/site -p no:cacheprovider; \
	fi

test: unit nbval strict browser
	@echo "make test: all checks passed."

notebooks: $(STAMP)
	for nb in book/*.ipynb; do \
	  $(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 "$$nb" || exit 1; \
	  $(BIN)/python tools/clean_notebook.py "$$nb"; done

serve:
	@echo "Serving $(HTML) on http://127.0.0.1:8000 (Ctrl-C to stop)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory $(HTML) 8000

lab: $(STAMP)
	COMPANION_SITE_BUILD=0 $(BIN)/jupyter lab --notebook-dir=book

clean:
	rm -rf _build assets/generated
