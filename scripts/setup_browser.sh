#!/usr/bin/env bash
# Headless Chromium for tests/report/test_report_browser.py (the report's plots rendered in a real browser);
# called by `make test`. Debian's package, installed when /usr/bin/chromium is missing: as root directly,
# otherwise through sudo when it needs no password; else it says what to run and fails.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
if [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && "${install[@]}"
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo apt-get update -qq && sudo "${install[@]}"
else
  echo "make test needs headless Chromium for the report's browser test: run 'sudo apt-get install chromium'" >&2
  exit 1
fi
