#!/usr/bin/env node
// check.mjs: does an SSE byte stream pass the official AG-UI 1.0.0 client?
//
// Usage: node check.mjs FILE... (FILE may be "-" for standard input)
//
// For every file, four checks run and every failure is reported:
//   framing   the bytes hold no CR at all (the protocol's producers MUST use LF;
//             the 1.0.0 client's SSE parser splits on "\n\n" only).
//   client    the bytes are served from a loopback HTTP server as
//             text/event-stream and consumed by the real HttpAgent.runAgent()
//             of @ag-ui/client 1.0.0, so its SSE parser, compatibility
//             boundary, enforcement (zod schemas, unknown-key stripping,
//             unknown-type dropping), chunk expansion and verifyEvents
//             sequence rules all run. Any console.warn / console.error during
//             the run is a failure: that is how the client reports keys it
//             stripped and events it dropped.
//   schema    every raw event, as it is on the wire, parses with EventSchemas
//             from @ag-ui/core/schemas 1.0.0.
//   terminal  exactly one RUN_FINISHED or RUN_ERROR, and it is the last event
//             (the 1.0.0 client resolves a truncated stream as a success).
//
// Prints one JSON line per file: {file, ok, events, types, error}, where
// events is the number of events the client delivered to its subscriber,
// types counts them by type, and error is null or every failure, "; "-joined.
// Exit status: 0 when every file passes, 1 when any fails, 2 on a usage error.
// The framing, schema, terminal and console checks live in lib.mjs (live.mjs
// uses them too).

import { readFile } from "node:fs/promises";
import http from "node:http";
import { HttpAgent } from "@ag-ui/client";
import { captureConsole, checkFraming, checkSchemas, checkTerminal, noiseErrors, oneLine, rawEvents } from "./lib.mjs";

const RUN_TIMEOUT_MS = Number(process.env.CHECK_TIMEOUT_MS || 30000);

function usage() {
  process.stderr.write("usage: node check.mjs FILE... (use - for standard input)\n");
  process.exit(2);
}

async function readInput(name) {
  if (name !== "-") return readFile(name);
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks);
}

function serve(bytes) {
  return new Promise((resolve, reject) => {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
        res.end(bytes);
      });
    });
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

// (b) The official client, for real.
async function checkClient(bytes) {
  const server = await serve(bytes);
  const { port } = server.address();
  const seen = [];
  const quiet = captureConsole();
  const errors = [];
  let timer;
  try {
    const agent = new HttpAgent({ url: `http://127.0.0.1:${port}/agui` });
    const run = agent.runAgent({}, { onEvent: ({ event }) => void seen.push(event) });
    const timeout = new Promise((_, rej) => {
      timer = setTimeout(() => {
        agent.abortRun();
        rej(new Error(`timed out after ${RUN_TIMEOUT_MS} ms`));
      }, RUN_TIMEOUT_MS);
    });
    await Promise.race([run, timeout]);
  } catch (e) {
    errors.push(`client: runAgent failed: ${oneLine(e && e.message ? e.message : String(e))}`);
  } finally {
    clearTimeout(timer);
    quiet.restore();
    server.close();
  }
  errors.push(...noiseErrors(quiet.noise, errors.length > 0));
  return { seen, errors };
}

async function checkFile(name) {
  const out = { file: name, ok: false, events: 0, types: {}, error: null };
  const errors = [];
  let bytes;
  try {
    bytes = await readInput(name);
  } catch (e) {
    out.error = `read: ${e.message}`;
    return out;
  }
  // (a) LF-only framing.
  const framing = checkFraming(bytes);
  if (framing) errors.push(framing);

  const { seen, errors: clientErrors } = await checkClient(bytes);
  errors.push(...clientErrors);
  out.events = seen.length;
  for (const ev of seen) out.types[ev.type] = (out.types[ev.type] || 0) + 1;

  // (c) schema and (d) terminal, on the raw events.
  const raw = rawEvents(new TextDecoder("utf-8").decode(bytes));
  errors.push(...raw.errors, ...checkSchemas(raw.events), ...checkTerminal(raw.events));

  out.ok = errors.length === 0;
  out.error = out.ok ? null : errors.join("; ");
  return out;
}

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0 || files.includes("-h") || files.includes("--help")) usage();
  if (files.filter((f) => f === "-").length > 1) usage();
  let failed = 0;
  for (const f of files) {
    const r = await checkFile(f);
    if (!r.ok) failed++;
    process.stdout.write(JSON.stringify(r) + "\n");
  }
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  process.stderr.write(`check.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
