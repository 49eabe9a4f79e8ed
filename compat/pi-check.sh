#!/bin/sh
# pi-check.sh: pibot-written session files must open in pi 0.73.1 with the
# same context pibot builds. Installs pi from npm into a cache folder, writes
# sessions with pibot (compat/cmd/writesessions, and `pibot chat -p` running
# real tools against a scripted model) and compares every leaf's context
# with pi's SessionManager.open + buildSessionContext.
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

# Version-1 and version-2 files migrated by pi itself (it writes "id" and
# "parentId" after a version-1 message), with a thinking level change and
# a label appended as leaves: `pibot session context` must answer each
# leaf like pibot's full loader (writesessions -expect checks) and like pi.
# shellcheck disable=SC2086 # one path per line, no spaces (mktemp)
LEGACY=$(cd "$ROOT" && go run ./compat/cmd/writesessions -legacy "$OUT/legacy")
# shellcheck disable=SC2086
PI_DIR="$CACHE" node "$ROOT/compat/pi-migrate.mjs" $LEGACY
# shellcheck disable=SC2086
(cd "$ROOT" && go run ./compat/cmd/writesessions -expect $LEGACY >/dev/null)

# A session written by `pibot chat -p` with tool calls (ls, write, read,
# bash) from a scripted faux model, in a scratch workspace.
mkdir -p "$OUT/ws" "$OUT/data"
cat > "$OUT/pibot.yaml" <<YAML
data_dir: $OUT/data
agent:
  model: script/m
  workspace: $OUT/ws
  thinking: low
providers:
  script:
    api: faux
    models: [{id: m, reasoning: true}]
    script:
      - thinking: "First look at the workspace."
        text: "Let me look around."
        tool_calls:
          - {name: ls, args: {path: "."}}
          - {name: write, args: {path: notes.txt, content: "line one\nline two\n"}}
      - tool_calls:
          - {name: read, args: {path: notes.txt}}
          - {name: bash, args: {command: "wc -l notes.txt"}}
      - text: "notes.txt has two lines."
YAML
(cd "$ROOT" && go run ./cmd/pibot chat -c "$OUT/pibot.yaml" -p "Create notes.txt and count its lines" >/dev/null)
CHAT=$(find "$OUT/data/sessions" -name '*.jsonl' | head -n 1)
if [ -z "$CHAT" ]; then
	echo "pi-check: pibot chat -p wrote no session" >&2
	exit 1
fi
if ! grep -q '"toolResult"' "$CHAT"; then
	echo "pi-check: the pibot chat session has no tool results" >&2
	exit 1
fi
(cd "$ROOT" && go run ./compat/cmd/writesessions -expect "$CHAT" >/dev/null)
# shellcheck disable=SC2086 # one path per line, no spaces (mktemp)
PI_DIR="$CACHE" node "$ROOT/compat/pi-context.mjs" $FILES $LEGACY "$CHAT"
