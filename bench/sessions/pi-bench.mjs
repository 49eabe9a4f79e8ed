// pi side of compare.sh. usage:
//   PI_DIR=... node pi-bench.mjs load FILE      open + buildSessionContext
//   PI_DIR=... node pi-bench.mjs append DIR N   N appendMessage calls
//   PI_DIR=... node pi-bench.mjs context FILE   open + buildSessionContext,
//                                               the context as one JSON line
//                                               on stdout (what `pibot session
//                                               context FILE` prints)
// load and append print one JSON line with timings in milliseconds.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { mkdirSync } from "node:fs";

const pi = await import(pathToFileURL(join(process.env.PI_DIR, "node_modules/@mariozechner/pi-coding-agent/dist/index.js")).href);
const { SessionManager } = pi;
const [mode, arg, count] = process.argv.slice(2);

if (mode === "load") {
  const t0 = performance.now();
  const sm = SessionManager.open(arg, join(arg, ".."));
  const t1 = performance.now();
  const ctx = sm.buildSessionContext();
  const t2 = performance.now();
  console.log(JSON.stringify({ impl: "pi", entries: sm.getEntries().length, messages: ctx.messages.length, loadMs: t1 - t0, contextMs: t2 - t1, totalMs: t2 - t0 }));
} else if (mode === "context") {
  const sm = SessionManager.open(arg, join(arg, ".."));
  const ctx = sm.buildSessionContext();
  process.stdout.write(JSON.stringify({ messages: ctx.messages, thinkingLevel: ctx.thinkingLevel, model: ctx.model ?? null }) + "\n");
} else if (mode === "append") {
  const dir = join(arg, "pi-appends");
  mkdirSync(dir, { recursive: true });
  const sm = SessionManager.create(arg, dir);
  // pi writes nothing until the first assistant message exists.
  sm.appendMessage({ role: "assistant", content: [{ type: "text", text: "hi" }], api: "x", provider: "x", model: "x", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: Date.now() });
  const n = Number(count);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    sm.appendMessage({ role: "user", content: [{ type: "text", text: `benchmark message ${i} with a little text in it` }], timestamp: Date.now() });
  }
  console.log(JSON.stringify({ impl: "pi", appends: n, totalMs: performance.now() - t0, fsync: "none" }));
} else {
  console.error("usage: pi-bench.mjs load FILE | context FILE | append DIR N");
  process.exit(2);
}
