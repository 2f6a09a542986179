#!/usr/bin/env bash
# Test-only system dependency: Debian's Chromium, for the headless-browser test of report.html.
# Playwright (a dev extra) drives it; its own browser download is never used.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != "0" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "[setup] chromium is missing; install Debian's 'chromium' package for the report test" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" = "0" ] || SUDO=sudo
echo "[setup] installing Debian chromium (headless report test)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
