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

import { readFile } from "node:fs/promises";
import http from "node:http";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const RUN_TIMEOUT_MS = Number(process.env.CHECK_TIMEOUT_MS || 30000);
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

// The client can be told to keep quiet about some transformations; this
// checker must hear every warning.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

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

// (a) LF-only framing.
function checkFraming(bytes) {
  const at = bytes.indexOf(0x0d);
  if (at < 0) return null;
  let line = 1;
  for (let i = 0; i < at; i++) if (bytes[i] === 0x0a) line++;
  return `framing: CR byte at offset ${at} (line ${line}); SSE output must use LF only`;
}

// The raw events as a spec-following SSE reader sees them: frames end at a
// blank line, "data:" lines (one optional space stripped) are joined with LF,
// comments and other fields are ignored. Used for the schema and terminal
// checks, independently of the client.
function rawEvents(text) {
  const events = [];
  const errors = [];
  const lines = text.split(/\r\n|\r|\n/);
  let data = [];
  let frame = 0;
  const flush = () => {
    if (data.length === 0) return;
    frame++;
    const payload = data.join("\n");
    data = [];
    try {
      events.push(JSON.parse(payload));
    } catch (e) {
      errors.push(`raw: frame ${frame} is not JSON: ${e.message}`);
    }
  };
  for (const line of lines) {
    if (line === "") flush();
    else if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
  }
  flush();
  return { events, errors };
}

// (c) Every raw event against the 1.0.0 zod schemas.
function checkSchemas(events) {
  const errors = [];
  events.forEach((ev, i) => {
    const r = EventSchemas.safeParse(ev);
    if (!r.success) {
      const what = r.error.issues
        .slice(0, 3)
        .map((is) => `${is.path.join(".") || "(event)"}: ${is.message}`)
        .join(", ");
      const type = ev && typeof ev === "object" ? ev.type : undefined;
      errors.push(`schema: event ${i + 1} (${type}) ${what}`);
    }
  });
  return errors;
}

// (d) Exactly one terminal event, and it is the last.
function checkTerminal(events) {
  const at = [];
  events.forEach((ev, i) => {
    if (ev && TERMINAL.has(ev.type)) at.push(i);
  });
  if (at.length === 0) return [`terminal: the stream ends without RUN_FINISHED or RUN_ERROR (${events.length} events)`];
  const errors = [];
  if (at.length > 1) errors.push(`terminal: ${at.length} terminal events (events ${at.map((i) => i + 1).join(", ")})`);
  if (at[at.length - 1] !== events.length - 1) {
    errors.push(`terminal: ${events[at[at.length - 1]].type} is event ${at[at.length - 1] + 1} of ${events.length}, not the last`);
  }
  return errors;
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

function oneLine(s) {
  return String(s).replace(/\s+/g, " ").slice(0, 500);
}

function fmtArgs(args) {
  return oneLine(args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" "));
}

// (b) The official client, for real.
async function checkClient(bytes) {
  const server = await serve(bytes);
  const { port } = server.address();
  const seen = [];
  const noise = [];
  const orig = { warn: console.warn, error: console.error };
  console.warn = (...a) => noise.push(`client warned: ${fmtArgs(a)}`);
  console.error = (...a) => noise.push(`client error log: ${fmtArgs(a)}`);
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
    console.warn = orig.warn;
    console.error = orig.error;
    server.close();
  }
  // "Agent execution failed" is the client logging the error already reported.
  for (const n of noise) if (!(errors.length && n.startsWith("client error log: Agent execution failed"))) errors.push(n);
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
  const framing = checkFraming(bytes);
  if (framing) errors.push(framing);

  const { seen, errors: clientErrors } = await checkClient(bytes);
  errors.push(...clientErrors);
  out.events = seen.length;
  for (const ev of seen) out.types[ev.type] = (out.types[ev.type] || 0) + 1;

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
