#!/usr/bin/env bash
# The static checks, in order: ruff lint, ruff format, the import layers (import-linter) and
# mypy, all configured in pyproject.toml. Every step runs; the exit status is non-zero if any
# failed. PY picks the interpreter whose tools are used (default: the project's .venv).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-.venv/bin/python}
PATHS=(tunebench tests benchmarks scripts)

failed=()
# step NAME COMMAND...: one line naming the step, then the tool's own output.
step() {
    local name=$1
    shift
    echo "[lint] $name"
    if ! "$@"; then
        failed+=("$name")
    fi
}

step "ruff check ${PATHS[*]}" "$PY" -m ruff check "${PATHS[@]}"
step "ruff format --check ${PATHS[*]}" "$PY" -m ruff format --check "${PATHS[@]}"
step "lint-imports" "$PY" -c \
    'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())'
step "mypy" "$PY" -m mypy

if [ ${#failed[@]} -gt 0 ]; then
    printf -v summary '%s; ' "${failed[@]}"
    echo "[lint] FAILED: ${summary%; }"
    exit 1
fi
echo "[lint] all passed"
