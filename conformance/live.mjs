#!/usr/bin/env node
// live.mjs: does a LIVE runwire-serve pass the official AG-UI 1.0.0 client?
//
// Usage: node live.mjs URL [--runs N] [--thread T] [--expect finished|error]
//                          [--prompt TEXT]
//
// URL is the server's POST /agui endpoint (e.g. http://127.0.0.1:8787/agui).
// Each run is a real HttpAgent.runAgent() of @ag-ui/client 1.0.0: a fresh
// runId (a UUID) and one more user message (TEXT, default "hi") added to the
// agent's conversation. All N runs (default 1) go, in sequence, to one thread:
// T, or a fresh UUID; so runs 2..N resume the session of the run before, and
// carry the messages the client collected so far, as an app would send them.
//
// The response bytes are teed off the client's fetch as they arrive, so the
// checks see exactly what was on the wire. A run passes when:
//   http      the answer is 200 with Content-Type text/event-stream;
//   framing   the bytes hold no CR;
//   client    runAgent() resolves, and the client logs no console.warn or
//             console.error (stripped keys, dropped events, legacy shapes);
//   schema    every raw event parses with EventSchemas (@ag-ui/core 1.0.0);
//   terminal  exactly one RUN_FINISHED or RUN_ERROR, the last raw event, and
//             the last event the client delivered is that same type;
//   ids       the first event is RUN_STARTED, and it (and RUN_FINISHED)
//             carry the request's threadId and runId;
//   expect    with --expect, the terminal is the one expected.
//
// Prints one JSON line per run: {url, ok, events, terminal, code?, message?,
// error?}: events is the number of events the client delivered, terminal the
// last raw event's type when it is terminal (else null), code/message those
// of a RUN_ERROR, error every failure, "; "-joined (absent when ok).
// Exit status: 0 when every run passes, 1 when any fails, 2 on a usage error.
// Environment: LIVE_TIMEOUT_MS (per run, default 60000); RUNWIRE_TOKEN, when
// set, is sent as "Authorization: Bearer <token>".

import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { captureConsole, checkFraming, checkSchemas, checkTerminal, noiseErrors, oneLine, rawEvents, teeingFetch, TERMINAL, withTimeout } from "./lib.mjs";

const RUN_TIMEOUT_MS = Number(process.env.LIVE_TIMEOUT_MS || 60000);

function usage(why) {
  if (why) process.stderr.write(`live.mjs: ${why}\n`);
  process.stderr.write(
    "usage: node live.mjs URL [--runs N] [--thread T] [--expect finished|error] [--prompt TEXT]\n",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const o = { url: null, runs: 1, thread: null, expect: null, prompt: "hi" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "-h" || a === "--help") usage();
    else if (a === "--runs") {
      o.runs = Number(value());
      if (!Number.isInteger(o.runs) || o.runs < 1) usage("--runs must be a whole number of at least 1");
    } else if (a === "--thread") o.thread = value();
    else if (a === "--prompt") o.prompt = value();
    else if (a === "--expect") {
      o.expect = value();
      if (o.expect !== "finished" && o.expect !== "error") usage("--expect takes finished or error");
    } else if (a.startsWith("-")) usage(`unknown flag ${a}`);
    else if (o.url === null) o.url = a;
    else usage(`unexpected argument ${a}`);
  }
  if (o.url === null) usage("no URL");
  try {
    const u = new URL(o.url);
    if (u.protocol !== "http:" && u.protocol !== "https:") usage(`not an http URL: ${o.url}`);
  } catch {
    usage(`not a URL: ${o.url}`);
  }
  return o;
}

async function oneRun(agent, wire, opts) {
  const runId = randomUUID();
  const threadId = agent.threadId;
  agent.messages.push({ id: randomUUID(), role: "user", content: opts.prompt });
  wire.chunks = [];
  wire.status = null;
  wire.contentType = null;
  wire.readError = null;
  wire.done = null;

  const out = { url: opts.url, ok: false, events: 0, terminal: null };
  const errors = [];
  const seen = [];
  const quiet = captureConsole();
  try {
    await withTimeout(
      agent.runAgent({ runId }, { onEvent: ({ event }) => void seen.push(event) }),
      RUN_TIMEOUT_MS,
      "the run",
      () => agent.abortRun(),
    );
  } catch (e) {
    errors.push(`client: runAgent failed: ${oneLine(e && e.message ? e.message : String(e))}`);
  } finally {
    quiet.restore();
  }
  errors.push(...noiseErrors(quiet.noise, errors.length > 0));
  if (wire.done) {
    try {
      await withTimeout(wire.done, 5000, "reading the rest of the response");
    } catch (e) {
      errors.push(`http: ${e.message}`);
    }
  }
  out.events = seen.length;

  if (wire.status === null) errors.push("http: no response");
  else if (wire.status !== 200) errors.push(`http: status ${wire.status}`);
  else if (!/^text\/event-stream\b/i.test(wire.contentType || "")) errors.push(`http: Content-Type ${wire.contentType}`);
  if (wire.readError) errors.push(`http: reading the body failed: ${wire.readError}`);

  const bytes = Buffer.concat(wire.chunks);
  const framing = checkFraming(bytes);
  if (framing) errors.push(framing);
  const raw = rawEvents(new TextDecoder("utf-8").decode(bytes));
  const events = raw.events;
  errors.push(...raw.errors, ...checkSchemas(events), ...checkTerminal(events));

  const last = events[events.length - 1];
  if (last && TERMINAL.has(last.type)) {
    out.terminal = last.type;
    if (last.type === "RUN_ERROR") {
      if (last.code !== undefined) out.code = last.code;
      out.message = last.message;
    }
    const delivered = seen[seen.length - 1];
    if (!delivered || delivered.type !== last.type) {
      errors.push(`client: the last event it delivered is ${delivered ? delivered.type : "none"}, not ${last.type}`);
    }
  }
  const first = events[0];
  if (!first) errors.push("ids: no event at all");
  else if (first.type !== "RUN_STARTED") errors.push(`ids: the first event is ${first.type}, not RUN_STARTED`);
  for (const ev of events) {
    if (ev && (ev.type === "RUN_STARTED" || ev.type === "RUN_FINISHED")) {
      if (ev.threadId !== threadId || ev.runId !== runId) {
        errors.push(`ids: ${ev.type} carries threadId ${ev.threadId} runId ${ev.runId}, not the request's ${threadId} ${runId}`);
      }
    }
  }
  if (opts.expect) {
    const want = opts.expect === "finished" ? "RUN_FINISHED" : "RUN_ERROR";
    if (out.terminal !== want) errors.push(`expect: wanted ${want}, the run ended ${out.terminal ?? "without a terminal event"}`);
  }

  out.ok = errors.length === 0;
  if (!out.ok) out.error = errors.join("; ");
  return out;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const wire = { chunks: [] };
  const headers = process.env.RUNWIRE_TOKEN ? { Authorization: `Bearer ${process.env.RUNWIRE_TOKEN}` } : {};
  const agent = new HttpAgent({ url: opts.url, threadId: opts.thread ?? randomUUID(), headers, fetch: teeingFetch(wire) });
  let failed = 0;
  for (let i = 0; i < opts.runs; i++) {
    const r = await oneRun(agent, wire, opts);
    if (!r.ok) failed++;
    process.stdout.write(JSON.stringify(r) + "\n");
  }
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  process.stderr.write(`live.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
