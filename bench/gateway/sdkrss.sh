#!/bin/sh
# sdkrss.sh: what linking a dependency costs a process that only starts
# and idles (its package initialisers and the pages they touch), as the
# idle RSS of a release build that imports it blank over one that imports
# net/http alone. Issue #15 keeps openai-go and the Prometheus client;
# this says what each of them costs pibot serve. (The Anthropic SDK, +2.9
# MiB here and 4.7 MiB of pibot serve's idle RSS, was replaced by
# providers/anthropic's own client and is no longer in go.mod.)
# usage: bench/gateway/sdkrss.sh   (medians of 3 runs of 2 s each)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
variant() { # name imports...
	name=$1; shift
	mkdir -p "$TMP/src/$name"
	sed 's/^module .*/module sdkrss/' "$ROOT/go.mod" >"$TMP/src/$name/go.mod"
	cp "$ROOT/go.sum" "$TMP/src/$name/"
	{
		echo 'package main'
		echo 'import ('
		echo '	"time"'
		echo '	_ "net/http"'
		for p in "$@"; do echo "	_ \"$p\""; done
		echo ')'
		echo 'func main() { time.Sleep(3 * time.Second) }'
	} >"$TMP/src/$name/main.go"
	(cd "$TMP/src/$name" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$TMP/$name" .)
}
rss() { # binary -> median VmRSS in KiB of 3 runs
	for _ in 1 2 3; do
		"$1" & pid=$!
		sleep 2
		awk '/^VmRSS/{print $2}' "/proc/$pid/status"
		wait "$pid"
	done | sort -n | sed -n 2p
}
variant base
variant openai github.com/openai/openai-go/v3
variant prometheus github.com/prometheus/client_golang/prometheus/promhttp github.com/prometheus/client_golang/prometheus/collectors
variant both github.com/openai/openai-go/v3 github.com/prometheus/client_golang/prometheus/promhttp github.com/prometheus/client_golang/prometheus/collectors
base=$(rss "$TMP/base")
printf '%-12s %6.1f MiB\n' "net/http" "$(echo "$base/1024" | bc -l)"
for v in openai prometheus both; do
	r=$(rss "$TMP/$v")
	printf '%-12s %6.1f MiB  (+%.1f MiB)\n' "$v" "$(echo "$r/1024" | bc -l)" "$(echo "($r-$base)/1024" | bc -l)"
done
