// Compares pibot's session contexts with pi's own SessionManager.
// usage: PI_DIR=<npm prefix with @mariozechner/pi-coding-agent> node pi-context.mjs FILE.jsonl...
// For each FILE.jsonl, FILE.pibot.json (written by compat/cmd/writesessions)
// holds pibot's default leaf, contexts and root count. Exits 1 on mismatch.
import { isDeepStrictEqual } from "node:util";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { pathToFileURL } from "node:url";

const piDir = process.env.PI_DIR;
if (!piDir) {
  console.error("PI_DIR is not set");
  process.exit(2);
}
const pi = await import(pathToFileURL(join(piDir, "node_modules/@mariozechner/pi-coding-agent/dist/index.js")).href);
const { SessionManager, buildSessionContext } = pi;

// firstDiff returns a JSON path where a and b differ, with both values.
function firstDiff(a, b, path = "$") {
  if (isDeepStrictEqual(a, b)) return null;
  if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const d = firstDiff(a[k], b[k], `${path}.${k}`);
      if (d) return d;
    }
  }
  return `${path}\n    pi:    ${JSON.stringify(a)?.slice(0, 400)}\n    pibot: ${JSON.stringify(b)?.slice(0, 400)}`;
}

// Round-trip through JSON so undefined keys vanish like in a file.
const plain = (v) => JSON.parse(JSON.stringify(v));

let failures = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const expected = JSON.parse(readFileSync(file.replace(/\.jsonl$/, ".pibot.json"), "utf8"));
  const sm = SessionManager.open(file, dirname(file));
  const fail = (what, d) => {
    failures++;
    console.error(`MISMATCH ${file}: ${what}: ${d}`);
  };
  if (sm.getLeafId() !== expected.defaultLeaf) fail("default leaf", `pi ${sm.getLeafId()} pibot ${expected.defaultLeaf}`);
  const roots = sm.getTree().length;
  if (roots !== expected.roots) fail("tree roots", `pi ${roots} pibot ${expected.roots}`);
  const d = firstDiff(plain(sm.buildSessionContext()), expected.default);
  if (d) fail("default context", d);
  const entries = sm.getEntries();
  for (const e of entries) {
    const want = expected.leaves[e.id];
    if (!want) {
      fail(`leaf ${e.id}`, "missing in pibot output");
      continue;
    }
    const diff = firstDiff(plain(buildSessionContext(entries, e.id)), want);
    if (diff) fail(`context at leaf ${e.id}`, diff);
    checked++;
  }
  if (Object.keys(expected.leaves).length !== entries.length) {
    fail("entry count", `pi ${entries.length} pibot ${Object.keys(expected.leaves).length}`);
  }
}
if (failures > 0) {
  console.error(`${failures} mismatch(es)`);
  process.exit(1);
}
console.log(`pi-check: ${process.argv.length - 2} files, ${checked} leaves: pibot context == pi 0.73.1 context`);
