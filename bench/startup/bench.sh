#!/usr/bin/env bash
# Start-up (`pibot version`) and one prompt to the scripted faux model
# (`pibot chat -p`), this checkout against another build (issue #34):
# release builds (static, -trimpath, -s -w), run interleaved by
# bench/startup (one run of each binary after the other), with a plain
# net/http binary as the floor of a Go process on this machine.
#
#   bash bench/startup/bench.sh [BASE_REF (default main)] [RUNS (default 50)]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=${1:-main}
N=${2:-50}
TMP=$(mktemp -d)
cleanup() {
	git -C "$ROOT" worktree remove --force "$TMP/base-src" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT

build() { (cd "$1" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$2" ./cmd/pibot); }
git -C "$ROOT" worktree add --detach "$TMP/base-src" "$REF" >/dev/null 2>&1
build "$TMP/base-src" "$TMP/base"
build "$ROOT" "$TMP/new"
(cd "$ROOT" && go build -o "$TMP/startup" ./bench/startup)
mkdir "$TMP/floor"
cat >"$TMP/floor/main.go" <<'GO'
package main

import (
	"fmt"
	"net/http"
)

var _ = http.Get

func main() { fmt.Println("floor") }
GO
(cd "$TMP/floor" && printf 'module floor\n\ngo 1.26\n' >go.mod && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$TMP/nethttp" .)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$TMP/startup" -n "$N" -bin "$REF=$TMP/base" -bin this=$TMP/new -bin nethttp=$TMP/nethttp -- version

mkdir "$TMP/chat"
cat >"$TMP/chat/pibot.yaml" <<'YAML'
providers:
  demo:
    api: faux
    models: [{id: echo}]
    script:
      - {text: "Hello there."}
agent:
  model: demo/echo
  sandbox: auto
YAML
cd "$TMP/chat"
# The probe cache (this build) lives in XDG_CACHE_HOME: the warm-up run
# fills it, as the first prompt on a machine does.
"$TMP/startup" -n "$N" -env "XDG_CACHE_HOME=$TMP/cache" -bin "$REF=$TMP/base" -bin this=$TMP/new -- chat -c pibot.yaml -p hi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
