# The README's two commands: `make demo` and `make test`. Both set up everything they need.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test chromium

$(STAMP): pyproject.toml
	python3.11 -m venv $(VENV) 2>/dev/null || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build first: an unpinned torch pulled in by sentence-transformers would be a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

# Browser tests drive Debian's Chromium; they fail, never skip, when it is missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

demo: $(STAMP)
	$(VENV)/bin/fixloop demo

test: $(STAMP) chromium
	$(PY) -m pytest -q
