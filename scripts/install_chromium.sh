#!/usr/bin/env bash
# Install a headless-capable Chromium for static figure export (kaleido) and the browser tests.
# Idempotent: does nothing when a Chromium is already on the machine. Never downloads a browser
# from anywhere but the system package manager (Debian/Ubuntu apt).
#
# Usage: scripts/install_chromium.sh          (prints the browser path it found or installed)
#        BROWSER_PATH=/path/to/chrome scripts/install_chromium.sh   (accept that browser as is)
set -euo pipefail

find_browser() {
    if [ -n "${BROWSER_PATH:-}" ] && [ -x "${BROWSER_PATH}" ]; then
        echo "${BROWSER_PATH}"; return 0
    fi
    for name in chromium chromium-browser google-chrome-stable google-chrome chrome; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"; return 0
        fi
    done
    return 1
}

if path="$(find_browser)"; then
    echo "chromium: found $path"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: not found and apt-get is unavailable; install Chromium or Chrome yourself and set" \
         "BROWSER_PATH to its executable (static figure export and the browser tests need it)" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "chromium: not found; installing it needs root (apt-get install -y chromium)" >&2
        exit 1
    fi
fi

echo "chromium: installing the Debian package (apt-get install -y chromium)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if path="$(find_browser)"; then
    echo "chromium: installed $path"
else
    echo "chromium: apt-get finished but no chromium executable is on PATH" >&2
    exit 1
fi
