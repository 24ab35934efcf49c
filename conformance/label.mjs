#!/usr/bin/env node
// label.mjs: the official verdict on each stream of a producer corpus, the
// labels agui-check is held to (conformance/producer-corpus/, see its README).
//
// Usage: node label.mjs FILE...   (SSE files, or JSON lines when a file's
// first non-blank byte is "{")
//
// For every file, three official checks run, and the file is "bad" when any
// of them objects:
//   verifyEvents  the raw events through verifyEvents() of @ag-ui/client
//                 1.0.0 alone (its sequence rules), in an rxjs pipeline.
//   schemas       every raw event against EventSchemas of
//                 @ag-ui/core/schemas 1.0.0.
//   client        the stream served as text/event-stream and run through
//                 HttpAgent.runAgent() of @ag-ui/client 1.0.0 (its SSE
//                 parser, compatibility boundary, enforcement, chunk
//                 expansion, verifyEvents, apply); a rejected run or any
//                 console.warn/console.error (stripped keys, dropped events,
//                 legacy shapes) is an objection.
// Beside them, not part of the verdict, runwire's own checks from lib.mjs:
// framing (no CR) and terminal (exactly one terminal event, last).
//
// Prints one JSON line per file:
//   {file, official: "ok"|"bad", verifyEvents, schemas, client, runwire: {framing, terminal}}
// where each check is null (no objection) or its error text. Exit status: 0
// when every file was labelled, 2 on a usage error.

import { readFile } from "node:fs/promises";
import http from "node:http";
import { relative } from "node:path";
import { from, lastValueFrom } from "rxjs";
import { toArray } from "rxjs/operators";
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { captureConsole, checkFraming, checkSchemas, checkTerminal, noiseErrors, oneLine, rawEvents } from "./lib.mjs";

const RUN_TIMEOUT_MS = Number(process.env.CHECK_TIMEOUT_MS || 30000);

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

async function client(bytes) {
  const server = await serve(bytes);
  const { port } = server.address();
  const quiet = captureConsole();
  const errors = [];
  let timer;
  try {
    const agent = new HttpAgent({ url: `http://127.0.0.1:${port}/agui` });
    const run = agent.runAgent({});
    const timeout = new Promise((_, rej) => {
      timer = setTimeout(() => {
        agent.abortRun();
        rej(new Error(`timed out after ${RUN_TIMEOUT_MS} ms`));
      }, RUN_TIMEOUT_MS);
    });
    await Promise.race([run, timeout]);
  } catch (e) {
    errors.push(`runAgent failed: ${oneLine(e && e.message ? e.message : String(e))}`);
  } finally {
    clearTimeout(timer);
    quiet.restore();
    server.close();
  }
  errors.push(...noiseErrors(quiet.noise, errors.length > 0));
  return errors.length ? errors.join("; ") : null;
}

async function verify(events) {
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
    return null;
  } catch (e) {
    return oneLine(e && e.message ? e.message : String(e));
  }
}

// JSON lines become SSE frames for the client, byte for byte otherwise.
function asSse(text) {
  const first = text.trimStart()[0];
  if (first !== "{") return { sse: text, events: rawEvents(text) };
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  const events = [];
  const errors = [];
  lines.forEach((l, i) => {
    try {
      events.push(JSON.parse(l));
    } catch (e) {
      errors.push(`raw: line ${i + 1} is not JSON: ${e.message}`);
    }
  });
  return { sse: lines.map((l) => `data: ${l}\n\n`).join(""), events: { events, errors } };
}

async function label(file) {
  const bytes = await readFile(file);
  const text = new TextDecoder("utf-8").decode(bytes);
  const { sse, events } = asSse(text);
  const schemaErrors = [...events.errors, ...checkSchemas(events.events)];
  const out = {
    file: relative(process.cwd(), file),
    official: "ok",
    verifyEvents: await verify(events.events),
    schemas: schemaErrors.length ? schemaErrors.join("; ") : null,
    client: await client(sse === text ? bytes : Buffer.from(sse)),
    runwire: {
      framing: checkFraming(bytes),
      terminal: checkTerminal(events.events).join("; ") || null,
    },
  };
  if (out.verifyEvents || out.schemas || out.client) out.official = "bad";
  return out;
}

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0 || files.includes("-h") || files.includes("--help")) {
    process.stderr.write("usage: node label.mjs FILE...\n");
    process.exit(2);
  }
  for (const f of files) process.stdout.write(JSON.stringify(await label(f)) + "\n");
}

main().catch((e) => {
  process.stderr.write(`label.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
