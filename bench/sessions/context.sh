#!/bin/sh
# context.sh: `pibot session context FILE` against pi 0.73.1 doing the same
# (SessionManager.open + buildSessionContext + the context as one JSON line
# on stdout), whole processes, alternating, on the same generated files in
# the page cache. Prints per size the median wall time (date +%s%N around
# /usr/bin/time, so it includes about a millisecond of its fork and exec) and
# peak RSS (/usr/bin/time) of each side, the ratios, and pibot's --stats
# split of one more run. That the output is byte-identical to the full
# loader's is checked by session/fastctx_test.go; with BASE set to another
# pibot binary (say, a build of the previous version) the script also runs
# it and fails if its output differs from this build's.
#
# usage: bench/sessions/context.sh [SIZES] [RUNS]   (default "10000 100000" 5)
set -eu
SIZES="${1:-10000 100000}"
RUNS="${2:-5}"
PI_VERSION=0.73.1
CACHE="${PIBOT_CACHE:-$HOME/.cache/pibot}/pi-$PI_VERSION"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -f "$CACHE/node_modules/@mariozechner/pi-coding-agent/package.json" ]; then
	mkdir -p "$CACHE"
	npm install --prefix "$CACHE" --no-audit --no-fund "@mariozechner/pi-coding-agent@$PI_VERSION" >&2
fi
WORK="${BENCH_DIR:-$(mktemp -d)}"
mkdir -p "$WORK/bin"
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/bin/pibot" ./cmd/pibot && go build -o "$WORK/bin/gen" ./bench/sessions/gen)
export PI_DIR="$CACHE"

# once LABEL CMD...: one run, stdout to $WORK/out.LABEL; appends "µs KiB" to $WORK/t.LABEL.
once() {
	label=$1
	shift
	t0=$(date +%s%N)
	/usr/bin/time -f '%M' -o "$WORK/time" "$@" >"$WORK/out.$label" || { cat "$WORK/time" >&2; exit 1; }
	t1=$(date +%s%N)
	echo "$(((t1 - t0) / 1000)) $(tail -n 1 "$WORK/time")" >>"$WORK/t.$label"
}

# median FILE COLUMN
median() { sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR]=$c} END {print v[int((NR+1)/2)]}'; }

for n in $SIZES; do
	f="$WORK/session-$n.jsonl"
	[ -f "$f" ] || "$WORK/bin/gen" -n "$n" -o "$f"
	cat "$f" >/dev/null # into the page cache
	rm -f "$WORK"/t.*
	i=0
	while [ "$i" -lt "$RUNS" ]; do
		once pibot "$WORK/bin/pibot" session context "$f"
		once pi node "$ROOT/bench/sessions/pi-bench.mjs" context "$f"
		if [ -n "${BASE:-}" ]; then once base "$BASE" session context "$f"; fi
		i=$((i + 1))
	done
	if [ -n "${BASE:-}" ] && ! cmp -s "$WORK/out.pibot" "$WORK/out.base"; then
		echo "context.sh: $n entries: output differs from $BASE" >&2
		exit 1
	fi
	same=differs
	if cmp -s "$WORK/out.pibot" "$WORK/out.pi"; then same=identical; fi
	pt=$(median "$WORK/t.pibot" 1) pm=$(median "$WORK/t.pibot" 2)
	it=$(median "$WORK/t.pi" 1) im=$(median "$WORK/t.pi" 2)
	echo "== $n entries, $(($(wc -c <"$f") / 1048576)) MiB, $RUNS runs each, medians (output vs pi's: $same bytes)"
	awk -v pt="$pt" -v pm="$pm" -v it="$it" -v im="$im" 'BEGIN {
		printf "pibot  %8.1f ms  %6.1f MiB\n", pt / 1000, pm / 1024
		printf "pi     %8.1f ms  %6.1f MiB\n", it / 1000, im / 1024
		printf "pibot: %.1fx faster, 1/%.1f of the peak RSS\n", it / pt, im / pm
	}'
	if [ -n "${BASE:-}" ]; then
		awk -v t="$(median "$WORK/t.base" 1)" -v m="$(median "$WORK/t.base" 2)" 'BEGIN { printf "base   %8.1f ms  %6.1f MiB\n", t / 1000, m / 1024 }'
	fi
	"$WORK/bin/pibot" session context --stats "$f" 2>&1 >/dev/null | sed 's/^/pibot /'
done
if [ -z "${BENCH_DIR:-}" ]; then rm -rf "$WORK"; fi
