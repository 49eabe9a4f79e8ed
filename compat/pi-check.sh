#!/bin/sh
# pi-check.sh: pibot-written session files must open in pi 0.73.1 with the
# same context pibot builds. Installs pi from npm into a cache folder, writes
# sessions with pibot (compat/cmd/writesessions) and compares every leaf's
# context with pi's SessionManager.open + buildSessionContext.
set -eu
PI_VERSION=0.73.1
CACHE="${PIBOT_CACHE:-$HOME/.cache/pibot}/pi-$PI_VERSION"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$CACHE/node_modules/@mariozechner/pi-coding-agent/package.json" ]; then
	mkdir -p "$CACHE"
	npm install --prefix "$CACHE" --no-audit --no-fund "@mariozechner/pi-coding-agent@$PI_VERSION" >&2
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
FILES=$(cd "$ROOT" && go run ./compat/cmd/writesessions -out "$OUT")
# shellcheck disable=SC2086 # one path per line, no spaces (mktemp)
PI_DIR="$CACHE" node "$ROOT/compat/pi-context.mjs" $FILES
