#!/bin/sh
# rss.sh: idle RSS and time-to-ready of `pibot serve` (issue #15 goals:
# idle RSS <= 20 MiB, ready < 100 ms; PicoClaw's gateway idles at ~32 MB).
# usage: bench/gateway/rss.sh [RUNS]   (default 5; medians are reported)
# Each run: no config file, an empty temporary directory as cwd and HOME,
# no API keys, a free loopback port; RSS is read from /proc/PID/status
# after 2 s idle. See serveprobe/main.go.
set -eu
RUNS="${1:-5}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
# The release build of the README.
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN/pibot" ./cmd/pibot && go build -o "$BIN/serveprobe" ./bench/gateway/serveprobe)
echo "binary: $(du -h "$BIN/pibot" | cut -f1)"
"$BIN/serveprobe" -bin "$BIN/pibot" -runs "$RUNS" -idle 2s
