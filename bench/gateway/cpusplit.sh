#!/bin/sh
# cpusplit.sh: what a message costs and what a streamed token costs, in
# CPU, at 1,000 conversations at the stress pace (issue #15's "CPU per
# streamed token").
# usage: bench/gateway/cpusplit.sh [ROUNDS]   (default 3; medians)
#
# BenchmarkConcurrentConversations/convs=1000 streams 13 tokens a reply,
# convs=1000,tokens=52 four times as many in the same 260 ms, so messages
# arrive at the same pace in both. The rounds alternate the two. From the
# CPU per message (user + system) of each:
#   per token   = (cpu/msg at 52 - cpu/msg at 13) / 39
#   per message = cpu/msg at 13 - 13 * per token
# Then the durability floor: the CPU of one durable append on this disk
# (internal/fsync BenchmarkData), and, when strace is installed, the
# fdatasyncs a message costs (strace -f -c over one more round at 13).
# Run it on a quiet machine: the figures move with anything else running.
set -eu
ROUNDS="${1:-3}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
cd "$ROOT"
go test -c -o "$BIN/gateway.test" ./gateway/
go test -c -o "$BIN/fsync.test" ./internal/fsync/

# cpu_per_msg BENCH: the CPU per message (µs) of one run of BENCH.
cpu_per_msg() {
	(cd "$ROOT/gateway" && "$BIN/gateway.test" -test.run '^$' -test.bench "BenchmarkConcurrentConversations/$1\$" -test.benchtime 6000x) |
		awk '/^Benchmark/ { for (i = 2; i <= NF; i++) { if ($i == "user-us/msg") u = $(i-1); if ($i == "sys-us/msg") s = $(i-1) } print u + s, u, s }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$BIN/13"
: >"$BIN/52"
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	a=$(cpu_per_msg 'convs=1000')
	b=$(cpu_per_msg 'convs=1000,tokens=52')
	echo "round $((i + 1)): cpu/msg (user + sys µs) at 13 tokens: $a; at 52 tokens: $b"
	echo "$a" >>"$BIN/13"
	echo "$b" >>"$BIN/52"
	i=$((i + 1))
done
c13=$(median <"$BIN/13")
c52=$(median <"$BIN/52")
s13=$(awk '{ print $3 }' "$BIN/13" | median)
awk -v a="$c13" -v b="$c52" -v s="$s13" 'BEGIN {
	t = (b - a) / 39
	printf "median cpu/msg: %.0f µs at 13 tokens (%.0f µs in the kernel), %.0f µs at 52 tokens\n", a, s, b
	printf "per streamed token: %.1f µs; per message, before its tokens: %.0f µs\n", t, a - 13 * t
	printf "cpu per token as the benchmark reports it (total / tokens): %.1f µs at 13 tokens, %.1f µs at 52\n", a / 13, b / 52
}'

fs=$("$BIN/fsync.test" -test.run '^$' -test.bench 'BenchmarkData$' -test.benchtime 3000x |
	awk '/^Benchmark/ { for (i = 2; i <= NF; i++) { if ($i == "user-ns/op") u = $(i-1); if ($i == "sys-ns/op") s = $(i-1) } print (u + s) / 1000 }')
echo "one durable append (300 bytes, fdatasync) on this disk: $fs µs of CPU"
if command -v strace >/dev/null 2>&1; then
	out=$(cd "$ROOT/gateway" && strace -f -c -e trace=fdatasync -o "$BIN/strace" "$BIN/gateway.test" -test.run '^$' \
		-test.bench 'BenchmarkConcurrentConversations/convs=1000$' -test.benchtime 6000x | grep '^Benchmark' || true)
	n=$(awk '$NF == "fdatasync" { print $4 }' "$BIN/strace")
	# 6,000 timed messages and 1,000 first ones (their sessions' creation
	# syncs the file and its directory with fsync, not counted here).
	awk -v n="${n:-0}" -v fs="$fs" 'BEGIN {
		m = n / 7000
		printf "fdatasyncs per message (strace, first messages included): %.2f, so %.0f µs of CPU a message (%.1f µs a token at 13 tokens) before pibot does anything else\n", m, m * fs, m * fs / 13
	}'
	[ -n "$out" ] || echo "(the strace round failed)"
fi
