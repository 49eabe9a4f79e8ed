#!/bin/sh
# compare.sh: pibot vs pi 0.73.1 on the same generated session files.
# usage: bench/sessions/compare.sh [SIZES]   (default "1000 10000 100000")
# Load = open + build the default-leaf context; peak RSS from /usr/bin/time -v.
# Appends = 1,000 entries: pibot with grouped fsync, pi with appendFileSync
# (pi never fsyncs).
set -eu
SIZES="${1:-1000 10000 100000}"
PI_VERSION=0.73.1
CACHE="${PIBOT_CACHE:-$HOME/.cache/pibot}/pi-$PI_VERSION"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$CACHE/node_modules/@mariozechner/pi-coding-agent/package.json" ]; then
	mkdir -p "$CACHE"
	npm install --prefix "$CACHE" --no-audit --no-fund "@mariozechner/pi-coding-agent@$PI_VERSION" >&2
fi
WORK="${BENCH_DIR:-$(mktemp -d)}"
mkdir -p "$WORK"
BIN="$WORK/bin"
mkdir -p "$BIN"
(cd "$ROOT" && go build -o "$BIN/gen" ./bench/sessions/gen && go build -o "$BIN/ctx" ./bench/sessions/ctx)
export PI_DIR="$CACHE"

# run LABEL CMD...: prints the command's JSON line and its peak RSS.
run() {
	label=$1
	shift
	/usr/bin/time -v "$@" >"$WORK/out" 2>"$WORK/time" || { cat "$WORK/time" >&2; exit 1; }
	rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$WORK/time")
	printf '%-14s %s peakRSS_MB=%s\n' "$label" "$(cat "$WORK/out")" "$((rss / 1024))"
}

for n in $SIZES; do
	f="$WORK/session-$n.jsonl"
	[ -f "$f" ] || "$BIN/gen" -n "$n" -o "$f"
	echo "== $n entries, $(($(wc -c <"$f") / 1048576)) MB"
	# Warm the page cache so both sides read from memory.
	cat "$f" >/dev/null
	run "pibot load" "$BIN/ctx" "$f"
	run "pi load" node "$ROOT/bench/sessions/pi-bench.mjs" load "$f"
done
echo "== 1000 appends"
rm -rf "$WORK/pibot-appends" "$WORK/pi-appends"
run "pibot append" "$BIN/ctx" -appends 1000 "$WORK"
run "pi append" node "$ROOT/bench/sessions/pi-bench.mjs" append "$WORK" 1000
if [ -z "${BENCH_DIR:-}" ]; then rm -rf "$WORK"; fi
