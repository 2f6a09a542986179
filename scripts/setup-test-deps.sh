#!/usr/bin/env bash
# Test-only dependencies outside Python:
#   - Debian's Chromium, for the headless-browser test of report.html (Playwright, a dev
#     extra, drives it; its own browser download is never used);
#   - tekton-lint (npm @ibm/tekton-lint, pinned in tools/tekton-lint/package-lock.json), the
#     semantic lint of pipelines/, installed into tools/tekton-lint/node_modules.
#   - inference-perf (Python 3.12, own environment): the llm-d Benchmark Report schema for
#     `tunebench export`'s tests, and real inference-perf reports for `tunebench import`'s;
#   - AIPerf (own environment): real AIPerf exports for `tunebench import`'s tests;
#   - Debian's Prometheus server: the DCGM energy path's test queries a real Prometheus that
#     scrapes recorded DCGM exporter output (tests/integration/test_energy_prometheus.py);
#   - Debian's PostgreSQL server: tuning workers sharing one study
#     (tests/integration/test_distributed_tune.py starts a throw-away cluster);
#   - Debian's slurm-wlm and munge: `tunebench batch --slurm` scripts run on a real
#     single-node Slurm (tests/e2e/test_slurm_cpu.py starts it).
# (shellcheck and the local S3 server, moto, come with the dev extra.)
# The tools' environments and node_modules are installed once per content, outside the
# clone (`$TUNEBENCH_TOOLS_CACHE/tools-<key>`, default ~/.cache/tunebench/tools, the key a
# hash of this script and tekton-lint's package files): the clone's `.cache/tools` and
# `tools/tekton-lint/node_modules` are links to it. TUNEBENCH_TOOLS_CACHE=off installs
# them into the clone.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_CACHE=${TUNEBENCH_TOOLS_CACHE:-${TUNEBENCH_HOME:-$HOME/.cache/tunebench}/tools}
NPM_DIR=tools/tekton-lint  # where `npm ci` runs: the clone, or the shared copy
if [ "$TOOLS_CACHE" != off ]; then
    key=$(cat scripts/setup-test-deps.sh tools/tekton-lint/package.json \
        tools/tekton-lint/package-lock.json | sha256sum | cut -c1-16)
    shared="$TOOLS_CACHE/tools-$key"
    mkdir -p "$shared/tekton-lint" .cache
    cp tools/tekton-lint/package.json tools/tekton-lint/package-lock.json "$shared/tekton-lint/"
    # a link of an earlier key is replaced; a real directory (an older checkout) is kept
    for pair in ".cache/tools:$shared" "tools/tekton-lint/node_modules:$shared/tekton-lint/node_modules"; do
        link=${pair%%:*}
        target=${pair#*:}
        if [ -L "$link" ] || [ ! -e "$link" ]; then
            mkdir -p "$target"
            ln -sfn "$target" "$link"
        fi
    done
    NPM_DIR="$shared/tekton-lint"
    # two clones setting up at once install the tools once
    exec 9>"$shared.lock"
    flock 9
fi

SUDO=""
need_root() {
    if [ "$(id -u)" != "0" ] && ! command -v sudo >/dev/null 2>&1; then
        echo "[setup] $1 is missing; install Debian's '$2' package for the tests" >&2
        exit 1
    fi
    [ "$(id -u)" = "0" ] || SUDO=sudo
}

MISSING=()
need() {  # package... : install them with the others (one apt-get update for all)
    MISSING+=("$@")
}

CHROMIUM=()  # with its recommended packages (fonts) for the rendering test
if ! command -v chromium >/dev/null 2>&1; then CHROMIUM=(chromium); fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then need postgresql; fi
if ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    need slurm-wlm munge
fi
if ! command -v prometheus >/dev/null 2>&1; then need prometheus; fi
TEKTON_LINT_DIR=tools/tekton-lint
TEKTON_LINT_VERSION=$(sed -n 's/.*"@ibm\/tekton-lint": "\(.*\)".*/\1/p' "$TEKTON_LINT_DIR/package.json")
installed=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' \
    "$TEKTON_LINT_DIR/node_modules/@ibm/tekton-lint/package.json" 2>/dev/null || true)
if [ "$installed" != "$TEKTON_LINT_VERSION" ] && ! command -v npm >/dev/null 2>&1; then
    need nodejs npm
fi
if [ $((${#MISSING[@]} + ${#CHROMIUM[@]})) -gt 0 ]; then
    all="${CHROMIUM[*]} ${MISSING[*]}"
    need_root "${all# }" "${all# }"
    echo "[setup] installing Debian ${all# } (test dependencies)"
    $SUDO apt-get update -qq
    if [ ${#CHROMIUM[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
        chromium --version
    fi
    if [ ${#MISSING[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            "${MISSING[@]}" >/dev/null
    fi
    if command -v prometheus >/dev/null 2>&1; then prometheus --version 2>&1 | head -1; fi
fi

# The three tool installs below are independent downloads: they run at once, each with its
# own log; a failure prints its log and fails the set-up.
mkdir -p .cache/tools
# the real path: a virtual environment's scripts name the path it was created at
TOOLS=$(cd .cache/tools && pwd -P)
LOGS=$TOOLS/logs
mkdir -p "$LOGS"
PIDS=()
NAMES=()
in_background() {  # name command...
    local name=$1
    shift
    "$@" >"$LOGS/$name.log" 2>&1 &
    PIDS+=($!)
    NAMES+=("$name")
}

if [ "$installed" != "$TEKTON_LINT_VERSION" ]; then
    echo "[setup] installing tekton-lint $TEKTON_LINT_VERSION into $TEKTON_LINT_DIR"
    in_background tekton-lint bash -c \
        "cd '$NPM_DIR' && npm ci --no-audit --no-fund --loglevel=error"
fi

# The llm-d Benchmark Report v0.2 schema (revision 0.2.1), to validate `tunebench export
# --format llmd-br`: inference-perf (Kubernetes SIG; Python >= 3.12, so in its own virtual
# environment) ships the published schema's models; their JSON Schema is written to
# .cache/tools/br_v0_2_1_schema.json. The same environment runs inference-perf itself.
INFERENCE_PERF_VERSION=0.7.0
IP_VENV=$TOOLS/inference-perf
BR_SCHEMA=$TOOLS/br_v0_2_1_schema.json
if ! "$IP_VENV/bin/python" -c "import inference_perf" 2>/dev/null ||
    [ "$("$IP_VENV/bin/pip" show inference-perf 2>/dev/null | sed -n 's/^Version: //p')" != "$INFERENCE_PERF_VERSION" ]; then
    # A pyenv shim is on PATH even when its version is not selected, and then fails when
    # run: each candidate is tried, not just looked up.
    PY312=""
    for candidate in python3.12 python3.13 \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13; do
        if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
            PY312=$(command -v "$candidate")
            break
        fi
    done
    if [ -z "$PY312" ]; then
        echo "[setup] inference-perf needs Python 3.12 or newer: install python3.12" \
            "(Debian or pyenv) and run make setup-test-deps again" >&2
        exit 1
    fi
    echo "[setup] installing inference-perf $INFERENCE_PERF_VERSION into $IP_VENV ($PY312)"
    rm -rf "$IP_VENV" "$BR_SCHEMA"
    in_background inference-perf bash -c "'$PY312' -m venv '$IP_VENV' &&
        '$IP_VENV/bin/pip' install --quiet 'inference-perf==$INFERENCE_PERF_VERSION'"
fi

# AIPerf (NVIDIA), to make real AIPerf exports against the CPU server for `tunebench import`'s
# tests; its pins (rich, pandas, aiohttp, ...) clash with vLLM's, so in its own environment.
AIPERF_VERSION=0.13.0
AIPERF_VENV=$TOOLS/aiperf
if [ "$("$AIPERF_VENV/bin/pip" show aiperf 2>/dev/null | sed -n 's/^Version: //p')" != "$AIPERF_VERSION" ]; then
    echo "[setup] installing aiperf $AIPERF_VERSION into $AIPERF_VENV"
    rm -rf "$AIPERF_VENV"
    in_background aiperf bash -c "python3 -m venv '$AIPERF_VENV' &&
        '$AIPERF_VENV/bin/pip' install --quiet 'aiperf==$AIPERF_VERSION'"
fi

failed=0
for index in "${!PIDS[@]}"; do
    if ! wait "${PIDS[$index]}"; then
        echo "[setup] installing ${NAMES[$index]} failed; its log ($LOGS/${NAMES[$index]}.log):" >&2
        tail -n 30 "$LOGS/${NAMES[$index]}.log" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 1

if [ ! -s "$BR_SCHEMA" ]; then
    "$IP_VENV/bin/python" - "$BR_SCHEMA" <<'PYEOF'
import json, sys
from inference_perf.reportgen.br.v0_2.schema_v0_2_1 import BenchmarkReportV021
with open(sys.argv[1], "w") as out:
    json.dump(BenchmarkReportV021.model_json_schema(), out, indent=1)
PYEOF
    echo "[setup] wrote $BR_SCHEMA"
fi
