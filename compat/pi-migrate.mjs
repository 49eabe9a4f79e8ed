// Opens legacy (version 1 and 2) session files with pi's own
// SessionManager, which migrates each and rewrites it as pi does (new keys
// after the existing ones: a version-1 message line gets its "id" and
// "parentId" after the message), then appends what a resumed pi session
// appends after the last message: a thinking level change and a label.
// usage: PI_DIR=<npm prefix with @mariozechner/pi-coding-agent> node pi-migrate.mjs FILE.jsonl...
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { pathToFileURL } from "node:url";

const piDir = process.env.PI_DIR;
if (!piDir) {
  console.error("PI_DIR is not set");
  process.exit(2);
}
const pi = await import(pathToFileURL(join(piDir, "node_modules/@mariozechner/pi-coding-agent/dist/index.js")).href);
const { SessionManager } = pi;

for (const file of process.argv.slice(2)) {
  const before = readFileSync(file, "utf8");
  const sm = SessionManager.open(file, dirname(file));
  const first = sm.getEntries().find((e) => e.type === "message");
  sm.appendThinkingLevelChange("low");
  sm.appendLabelChange(first.id, "start");
  const lines = readFileSync(file, "utf8").trim().split("\n");
  const header = JSON.parse(lines[0]);
  if (header.version !== 3 || readFileSync(file, "utf8") === before) {
    console.error(`pi-migrate: ${file}: pi did not migrate it (header ${lines[0]})`);
    process.exit(1);
  }
  const last = JSON.parse(lines[lines.length - 1]);
  if (last.type !== "label") {
    console.error(`pi-migrate: ${file}: the leaf is a ${last.type}, not the label pi appended`);
    process.exit(1);
  }
  if (!before.includes('"version":2') && !lines.some((l) => /^\{"type":"message","timestamp":.*\},"id":"[0-9a-f]{8}","parentId":/.test(l))) {
    console.error(`pi-migrate: ${file}: no message line with "id" after the message`);
    process.exit(1);
  }
}
