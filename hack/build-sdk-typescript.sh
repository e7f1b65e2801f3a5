#!/usr/bin/env bash
# Builds the TypeScript SDK (sdk/typescript) and leaves two executables:
#   .run/sdk/typescript/conformance      the conformance program (sdk/conformance/README.md)
#   .run/sdk/typescript/example-worker   the example worker (examples/workers.py's task types)
# Idempotent and quiet on success. npm packages come from the registry with
# `npm ci`, only when package-lock.json changed: node_modules is kept per lock
# under ${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway/sdk-typescript/ and linked
# into sdk/typescript, so a fresh clone reuses it. tsc runs only when a source changed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SDK="$ROOT/sdk/typescript"
OUT="$ROOT/.run/sdk/typescript"
CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}/sdk-typescript
log() { printf '[build-sdk-typescript] %s\n' "$*" >&2; }
quietly() {  # run a command, showing its output only when it fails
  local output
  if ! output=$("$@" 2>&1); then printf '%s\n' "$output" >&2; log "failed: $*"; exit 1; fi
}

command -v node >/dev/null || { log "node (20 or later) is needed: apt-get install nodejs npm"; exit 1; }
mkdir -p "$CACHE" "$OUT"
lock=$(sha256sum "$SDK/package-lock.json" | cut -c1-16)
MODULES="$CACHE/$lock"

# Two checkouts building side by side: the second waits for the first's install.
exec 9>"$CACHE/.lock"
flock 9
if [ ! -f "$MODULES/.installed" ]; then
  log "npm ci (package-lock.json changed, or first run on this machine)"
  WORK=$(mktemp -d "$CACHE/install.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  cp "$SDK/package.json" "$SDK/package-lock.json" "$WORK/"
  quietly npm ci --prefix "$WORK" --no-audit --no-fund --ignore-scripts --loglevel=error
  rm -rf "$MODULES" && mkdir -p "$MODULES" && mv "$WORK/node_modules" "$MODULES/node_modules"
  touch "$MODULES/.installed"
fi
if [ "$(readlink "$SDK/node_modules" 2>/dev/null || true)" != "$MODULES/node_modules" ]; then
  rm -rf "$SDK/node_modules"  # what npm ci made there, or a link to an older lock's
  ln -s "$MODULES/node_modules" "$SDK/node_modules"
fi

# Compile when any source, the lock or the compiler options changed.
sources=$(cd "$SDK" && find src conformance examples test tsconfig.json package-lock.json -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$OUT/.built" 2>/dev/null || true)" != "$sources" ] || [ ! -f "$SDK/dist/conformance/main.js" ]; then
  rm -rf "$SDK/dist"
  quietly "$SDK/node_modules/.bin/tsc" -p "$SDK/tsconfig.json"
  echo "$sources" >"$OUT/.built"
fi
flock -u 9

wrapper() {  # a small executable running node on a compiled file
  local target="$OUT/$1" tmp
  tmp=$(mktemp "$OUT/.wrapper.XXXXXX")
  printf '#!/bin/sh\nexec node "%s" "$@"\n' "$SDK/dist/$2" >"$tmp"
  chmod +x "$tmp" && mv "$tmp" "$target"
}
wrapper conformance conformance/main.js
wrapper example-worker examples/worker.js
