#!/usr/bin/env bash
# The browser the UI's tests drive: Debian's chromium-headless-shell, from the
# distribution's archive (installed once; a no-op when present). Playwright is
# pointed at it (SLUICEWAY_CHROMIUM), so no test ever downloads a browser.
set -euo pipefail
BROWSER=/usr/bin/chromium-headless-shell
[ -x "$BROWSER" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-browser: run as root, or: apt-get install chromium-headless-shell" >&2
  exit 1
fi
echo "[install-browser] apt-get install chromium-headless-shell" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium-headless-shell >&2
