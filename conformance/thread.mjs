#!/usr/bin/env node
// thread.mjs: does a thread open anywhere with the official AG-UI 1.0.0
// client? (MESSAGES_SNAPSHOT, issue 38.)
//
// Usage: node thread.mjs open URL_ALONG URL_FRESH [URL_LAST]
//        node thread.mjs retry URL [--after N] [--holding input|partial]
//
// open: two servers with the same agent (a replayed log). On URL_ALONG one
//   HttpAgent runs three runs on a thread, each with its full history: it
//   was there all along, and must get no MESSAGES_SNAPSHOT. On URL_FRESH the
//   same threadId, runIds and user message ids: one HttpAgent runs the first
//   two, then a fresh HttpAgent posts the third with only its new message.
//   The fresh one must get a MESSAGES_SNAPSHOT right after RUN_STARTED and
//   end with the same messages (id, role, content, toolCalls, toolCallId)
//   as the one there all along. With URL_LAST (another server on the same
//   $HARNESS_HOME as URL_FRESH), the fresh HttpAgent posts there: the
//   thread is the home's, not one process's.
// retry: one HttpAgent runs a run; after N events (default 3) a second
//   HttpAgent holding what the first holds by then (its input, and the
//   message being streamed, in part) posts the same request (same threadId,
//   runId, user message) while the first still streams (--holding input:
//   the retry holds only the first's input, the very same request body). The retry must
//   get RUN_STARTED, then a MESSAGES_SNAPSHOT, then the rest, and both end
//   with the same messages.
//
// Every run also passes what live.mjs checks of a stream: framing, the
// schemas of @ag-ui/core 1.0.0, one terminal event, no client warning (the
// client itself runs verifyEvents).
//
// Prints one JSON line: {ok, error?, snapshots: {...}, along?, fresh?}.
// Exit status: 0 when ok, 1 when not, 2 on a usage error.

import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { captureConsole, checkFraming, checkSchemas, checkTerminal, noiseErrors, oneLine, rawEvents, teeingFetch, withTimeout } from "./lib.mjs";

const RUN_TIMEOUT_MS = Number(process.env.LIVE_TIMEOUT_MS || 60000);
const headers = process.env.RUNWIRE_TOKEN ? { Authorization: `Bearer ${process.env.RUNWIRE_TOKEN}` } : {};

function usage(why) {
  if (why) process.stderr.write(`thread.mjs: ${why}\n`);
  process.stderr.write("usage: node thread.mjs open URL_ALONG URL_FRESH [URL_LAST] | retry URL [--after N] [--holding input|partial]\n");
  process.exit(2);
}

function agent(url, threadId) {
  const wire = { chunks: [] };
  const a = new HttpAgent({ url, threadId, headers, fetch: teeingFetch(wire) });
  return { a, wire };
}

// One run of `ag` (its messages as they stand); the raw events and any error.
async function run(ag, runId, errors, what, onEvent, resume) {
  const { a, wire } = ag;
  wire.chunks = [];
  wire.done = null;
  const quiet = captureConsole();
  let failed = false;
  try {
    await withTimeout(a.runAgent({ runId, ...(resume ? { resume } : {}) }, { onEvent: ({ event }) => void (onEvent && onEvent(event)) }), RUN_TIMEOUT_MS, what, () => a.abortRun());
  } catch (e) {
    failed = true;
    errors.push(`${what}: runAgent failed: ${oneLine(e && e.message ? e.message : String(e))}`);
  } finally {
    quiet.restore();
  }
  errors.push(...noiseErrors(quiet.noise, failed).map((e) => `${what}: ${e}`));
  if (wire.done) await withTimeout(wire.done, 5000, "reading the rest").catch((e) => errors.push(`${what}: ${e.message}`));
  const bytes = Buffer.concat(wire.chunks);
  const framing = checkFraming(bytes);
  if (framing) errors.push(`${what}: ${framing}`);
  const raw = rawEvents(new TextDecoder("utf-8").decode(bytes));
  for (const e of [...raw.errors, ...checkSchemas(raw.events), ...checkTerminal(raw.events)]) errors.push(`${what}: ${e}`);
  return raw.events;
}

// What two clients must agree on: the conversation's messages.
function view(messages) {
  return messages
    .filter((m) => m.role === "user" || m.role === "assistant" || m.role === "tool")
    .map((m) => ({
      id: m.id,
      role: m.role,
      content: m.content ?? null,
      toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
      toolCallId: m.toolCallId ?? null,
    }));
}

function same(a, b, what, errors) {
  const x = JSON.stringify(view(a)), y = JSON.stringify(view(b));
  if (x !== y) errors.push(`${what}: the messages differ:\n  ${x}\n  ${y}`);
}

const count = (events, type) => events.filter((e) => e.type === type).length;

// An approval, or a question's first option (as conformance/interrupts.mjs
// answers one).
function answer(interrupt) {
  const props = interrupt.responseSchema?.properties?.answers?.properties;
  if (!props) return { approved: true };
  const answers = {};
  for (const [q, s] of Object.entries(props)) {
    const first = (s.items?.enum ?? s.enum ?? ["yes"])[0];
    answers[q] = s.type === "array" ? [first] : first;
  }
  return { answers };
}

// A user message's run, then (an interactive agent asks before it runs a
// tool) a run approving each interrupt it ended with, until none is left:
// the thread is then at rest. runIds come from `ids` in order, so two
// servers see the same runs. Returns each run's raw events.
async function turn(ag, message, ids, errors, what) {
  if (message) ag.a.messages.push(structuredClone(message));
  const all = [await run(ag, ids.shift(), errors, what)];
  for (let n = 0; (ag.a.pendingInterrupts ?? []).length > 0; n++) {
    if (n > 5) {
      errors.push(`${what}: still interrupted after ${n} answers`);
      break;
    }
    const resume = ag.a.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: answer(i) }));
    all.push(await run(ag, ids.shift(), errors, `${what} (answer ${n + 1})`, null, resume));
  }
  return all;
}

async function open(urlAlong, urlFresh, urlLast) {
  const errors = [];
  const threadId = randomUUID();
  const runs = Array.from({ length: 24 }, () => randomUUID());
  const users = ["first", "second", "third"].map((text) => ({ id: randomUUID(), role: "user", content: text }));
  const snapshots = { along: [], fresh: 0 };

  const along = agent(urlAlong, threadId);
  const alongIds = [...runs];
  for (let i = 0; i < 3; i++) {
    for (const ev of await turn(along, users[i], alongIds, errors, `along turn ${i + 1}`)) {
      snapshots.along.push(count(ev, "MESSAGES_SNAPSHOT"));
      if (count(ev, "MESSAGES_SNAPSHOT") > 0) errors.push(`along turn ${i + 1}: a client that sent the full history got a MESSAGES_SNAPSHOT`);
    }
  }

  const first = agent(urlFresh, threadId);
  const freshIds = [...runs];
  for (let i = 0; i < 2; i++) await turn(first, users[i], freshIds, errors, `first turn ${i + 1}`);
  same(first.a.messages, along.a.messages.slice(0, first.a.messages.length), "the two servers' first two turns", errors);
  const fresh = agent(urlLast ?? urlFresh, threadId);
  const [ev, ...answers] = await turn(fresh, users[2], freshIds, errors, "fresh turn");
  snapshots.fresh = count(ev, "MESSAGES_SNAPSHOT");
  for (const a of answers) {
    if (count(a, "MESSAGES_SNAPSHOT") > 0) errors.push("fresh turn: its answer run (full history) got a MESSAGES_SNAPSHOT");
  }
  if (ev[0]?.type !== "RUN_STARTED" || ev[1]?.type !== "MESSAGES_SNAPSHOT") {
    errors.push(`fresh run: wanted RUN_STARTED then MESSAGES_SNAPSHOT, got ${ev.slice(0, 3).map((e) => e.type).join(", ")}`);
  }
  same(fresh.a.messages, along.a.messages, "the fresh client and the one there all along", errors);
  return { ok: errors.length === 0, ...(errors.length ? { error: errors.join("; ") } : {}), snapshots, along: view(along.a.messages), fresh: view(fresh.a.messages) };
}

async function retry(url, after, holding) {
  const errors = [];
  const threadId = randomUUID();
  const runId = randomUUID();
  const first = agent(url, threadId);
  first.a.messages.push({ id: randomUUID(), role: "user", content: "hi" });
  const input = structuredClone(first.a.messages);
  let seen = 0;
  let partial = null;
  let second = null;
  let secondRun = null;
  let secondEvents = null;
  const firstRun = run(first, runId, errors, "first", () => {
    seen++;
    if (seen === after && !second) {
      // The same request, while the first still streams, from a client
      // holding what the first holds by now (a reconnect: the message
      // being streamed, part of its content).
      second = agent(url, threadId);
      second.a.messages = structuredClone(holding === "input" ? input : first.a.messages);
      partial = view(second.a.messages);
      secondRun = run(second, runId, errors, "retry").then((ev) => (secondEvents = ev));
    }
  });
  const firstEvents = await firstRun;
  if (!secondRun) {
    errors.push(`the first run ended after ${seen} events, before the retry (--after ${after})`);
    return { ok: false, error: errors.join("; ") };
  }
  await secondRun;
  const snap = secondEvents.findIndex((e) => e.type === "MESSAGES_SNAPSHOT");
  if (secondEvents[0]?.type !== "RUN_STARTED" || snap !== 1) {
    errors.push(`retry: wanted RUN_STARTED then MESSAGES_SNAPSHOT, got ${secondEvents.slice(0, 3).map((e) => e.type).join(", ")}`);
  }
  if (secondEvents.length >= firstEvents.length) {
    errors.push(`retry: ${secondEvents.length} events, not fewer than the first run's ${firstEvents.length}: what it missed came as events, not as the snapshot`);
  }
  same(second.a.messages, first.a.messages, "the retry and the first client", errors);
  return { ok: errors.length === 0, ...(errors.length ? { error: errors.join("; ") } : {}), events: { first: firstEvents.length, retry: secondEvents.length }, partial, first: view(first.a.messages), retry: view(second.a.messages) };
}

async function main() {
  const [mode, ...rest] = process.argv.slice(2);
  let out;
  if (mode === "open") {
    if (rest.length !== 2 && rest.length !== 3) usage("open takes two or three URLs");
    out = await open(rest[0], rest[1], rest[2]);
  } else if (mode === "retry") {
    let after = 3;
    const i = rest.indexOf("--after");
    if (i >= 0) {
      after = Number(rest[i + 1]);
      if (!Number.isInteger(after) || after < 1) usage("--after takes a whole number of at least 1");
      rest.splice(i, 2);
    }
    let holding = "partial";
    const j = rest.indexOf("--holding");
    if (j >= 0) {
      holding = rest[j + 1];
      if (holding !== "input" && holding !== "partial") usage("--holding takes input or partial");
      rest.splice(j, 2);
    }
    if (rest.length !== 1) usage("retry takes one URL");
    out = await retry(rest[0], after, holding);
  } else usage(mode ? `unknown mode ${mode}` : "no mode");
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exitCode = out.ok ? 0 : 1;
}

main().catch((e) => {
  process.stderr.write(`thread.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
