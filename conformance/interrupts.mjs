#!/usr/bin/env node
// interrupts.mjs: AG-UI interrupts against a LIVE runwire-serve --interactive,
// with the official @ag-ui/client 1.0.0 HttpAgent.
//
// Usage: node interrupts.mjs URL --prompt TEXT --answer ANSWER [--replay]
//                            [--different] [--unknown]
//
// On one thread (a fresh UUID):
//   1. ask     runAgent() with the user message TEXT. The run must end with
//              RUN_FINISHED carrying the interrupt outcome, and the client must
//              hold it in agent.pendingInterrupts. A tool_call interrupt must
//              name a toolCallId this run streamed (TOOL_CALL_START).
//   2. answer  runAgent({resume}) answering every pending interrupt: ANSWER is
//              approve | approve-edited:JSON | deny | cancel | question:LABEL
//              (LABEL for every question). The run must end with RUN_FINISHED
//              (success); for a tool_call interrupt it must emit
//              TOOL_CALL_RESULT for the original toolCallId and never
//              TOOL_CALL_START it again.
//   --replay     3. the same resume entries again on a new run: accepted, nothing
//                sent again, RUN_FINISHED.
//   --different  4. a different answer to the decided interrupt: RUN_ERROR.
//   --unknown    5. a resume entry naming an interrupt never raised, with a new
//                message: skipped with a runwire.resume_skipped CUSTOM event;
//                the run is not refused for it.
// Every run is also held to the checks of live.mjs (http, framing, client
// without console noise, schema, terminal, ids).
//
// Prints one JSON line per run: {step, ok, terminal, outcome, events, error?}.
// Exit status: 0 when every run passes, 1 when any fails, 2 on a usage error.
// Environment: LIVE_TIMEOUT_MS (per run, default 60000); RUNWIRE_TOKEN.

import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { captureConsole, checkFraming, checkSchemas, checkTerminal, noiseErrors, oneLine, rawEvents, teeingFetch, TERMINAL, withTimeout } from "./lib.mjs";

const RUN_TIMEOUT_MS = Number(process.env.LIVE_TIMEOUT_MS || 60000);

function usage(why) {
  if (why) process.stderr.write(`interrupts.mjs: ${why}\n`);
  process.stderr.write("usage: node interrupts.mjs URL --prompt TEXT --answer ANSWER [--replay] [--different] [--unknown]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const o = { url: null, prompt: null, answer: null, replay: false, different: false, unknown: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--prompt") o.prompt = value();
    else if (a === "--answer") o.answer = value();
    else if (a === "--replay") o.replay = true;
    else if (a === "--different") o.different = true;
    else if (a === "--unknown") o.unknown = true;
    else if (a === "-h" || a === "--help") usage();
    else if (a.startsWith("-")) usage(`unknown flag ${a}`);
    else if (o.url === null) o.url = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!o.url || !o.prompt || !o.answer) usage("URL, --prompt and --answer are required");
  if (!/^(approve|deny|cancel|approve-edited:.+|question:.+)$/.test(o.answer)) usage(`bad --answer ${o.answer}`);
  return o;
}

/** One runAgent() with the live.mjs checks; returns {out, events, errors}. */
async function checkedRun(step, agent, wire, params) {
  const runId = randomUUID();
  Object.assign(wire, { chunks: [], status: null, contentType: null, readError: null, done: null, sentAt: null, firstAt: null });
  const errors = [];
  const seen = [];
  const quiet = captureConsole();
  let clientError = null;
  try {
    await withTimeout(agent.runAgent({ runId, ...params }, { onEvent: ({ event }) => void seen.push(event) }), RUN_TIMEOUT_MS, "the run", () => agent.abortRun());
  } catch (e) {
    clientError = oneLine(e && e.message ? e.message : String(e));
    errors.push(`client: runAgent failed: ${clientError}`);
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
  if (wire.status !== 200) errors.push(`http: status ${wire.status}`);
  else if (!/^text\/event-stream\b/i.test(wire.contentType || "")) errors.push(`http: Content-Type ${wire.contentType}`);
  const bytes = Buffer.concat(wire.chunks);
  const framing = checkFraming(bytes);
  if (framing) errors.push(framing);
  const raw = rawEvents(new TextDecoder("utf-8").decode(bytes));
  const events = raw.events;
  errors.push(...raw.errors, ...checkSchemas(events), ...checkTerminal(events));
  const first = events[0];
  if (!first || first.type !== "RUN_STARTED") errors.push(`ids: the first event is ${first ? first.type : "none"}, not RUN_STARTED`);
  for (const ev of events) {
    if ((ev.type === "RUN_STARTED" || ev.type === "RUN_FINISHED") && (ev.threadId !== agent.threadId || ev.runId !== runId)) {
      errors.push(`ids: ${ev.type} carries ${ev.threadId}/${ev.runId}, not ${agent.threadId}/${runId}`);
    }
  }
  const last = events[events.length - 1];
  const out = {
    step,
    ok: false,
    terminal: last && TERMINAL.has(last.type) ? last.type : null,
    outcome: last && last.type === "RUN_FINISHED" ? (last.outcome ? last.outcome.type : "success") : null,
    events: seen.length,
    firstEventMs: wire.firstAt !== null && wire.sentAt !== null ? Math.round((wire.firstAt - wire.sentAt) * 1000) / 1000 : null,
  };
  if (last && last.type === "RUN_ERROR") out.message = last.message;
  return { out, events, errors, last };
}

function finish(r) {
  r.out.ok = r.errors.length === 0;
  if (!r.out.ok) r.out.error = r.errors.join("; ");
  process.stdout.write(JSON.stringify(r.out) + "\n");
  return r.out.ok;
}

function payloadFor(answer, interrupt) {
  if (answer === "cancel") return { status: "cancelled" };
  if (answer.startsWith("question:")) {
    const label = answer.slice("question:".length);
    const props = interrupt.responseSchema?.properties?.answers?.properties ?? {};
    const answers = {};
    for (const [q, s] of Object.entries(props)) answers[q] = s.type === "array" ? [label] : label;
    return { status: "resolved", payload: { answers } };
  }
  if (answer === "deny") return { status: "resolved", payload: { approved: false, message: "denied by the conformance check" } };
  if (answer.startsWith("approve-edited:")) return { status: "resolved", payload: { approved: true, editedArgs: JSON.parse(answer.slice("approve-edited:".length)) } };
  return { status: "resolved", payload: { approved: true } };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const wire = { chunks: [] };
  const headers = process.env.RUNWIRE_TOKEN ? { Authorization: `Bearer ${process.env.RUNWIRE_TOKEN}` } : {};
  const agent = new HttpAgent({ url: o.url, threadId: randomUUID(), headers, fetch: teeingFetch(wire) });
  let ok = true;

  // 1. ask
  agent.messages.push({ id: randomUUID(), role: "user", content: o.prompt });
  const ask = await checkedRun("ask", agent, wire, {});
  if (ask.out.outcome !== "interrupt") ask.errors.push(`expect: the run should end with the interrupt outcome, it ended ${ask.out.terminal}/${ask.out.outcome}`);
  const pending = agent.pendingInterrupts ?? [];
  if (ask.out.outcome === "interrupt" && pending.length === 0) ask.errors.push("client: agent.pendingInterrupts is empty after an interrupt outcome");
  const started = new Set(ask.events.filter((e) => e.type === "TOOL_CALL_START").map((e) => e.toolCallId));
  for (const i of pending) {
    if (i.reason === "tool_call" && !started.has(i.toolCallId)) ask.errors.push(`interrupt ${i.id}: toolCallId ${i.toolCallId} was not streamed in the run`);
  }
  ask.out.interrupts = pending.map((i) => ({ id: i.id, reason: i.reason, toolCallId: i.toolCallId }));
  ok = finish(ask) && ok;
  if (pending.length === 0) {
    process.exitCode = 1;
    return;
  }

  // 2. answer
  const resume = pending.map((i) => ({ interruptId: i.id, ...payloadFor(o.answer, i) }));
  const answer = await checkedRun("answer", agent, wire, { resume });
  if (answer.out.outcome !== "success") answer.errors.push(`expect: the resumed run should finish, it ended ${answer.out.terminal}/${answer.out.outcome}`);
  for (const i of pending) {
    if (i.reason !== "tool_call" || !i.toolCallId) continue;
    if (answer.events.some((e) => e.type === "TOOL_CALL_START" && e.toolCallId === i.toolCallId)) answer.errors.push(`the resumed run re-emitted TOOL_CALL_START ${i.toolCallId}`);
    if (!answer.events.some((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === i.toolCallId)) answer.errors.push(`the resumed run has no TOOL_CALL_RESULT for ${i.toolCallId}`);
  }
  if ((agent.pendingInterrupts ?? []).length !== 0) answer.errors.push("client: interrupts still pending after the resumed run");
  ok = finish(answer) && ok;

  if (o.replay) {
    const r = await checkedRun("replay", agent, wire, { resume });
    if (r.out.outcome !== "success") r.errors.push(`expect: an identical replay should finish, it ended ${r.out.terminal}/${r.out.outcome}`);
    if (r.events.some((e) => e.type === "TOOL_CALL_RESULT")) r.errors.push("an identical replay streamed tool results: the answer was sent again");
    ok = finish(r) && ok;
  }
  if (o.different && o.answer !== "cancel") {
    const other = o.answer === "deny" ? "approve" : o.answer.startsWith("question:") ? "question:__different__" : "deny";
    const diff = pending.map((i) => ({ interruptId: i.id, ...payloadFor(other, i) }));
    const r = await checkedRun("different", agent, wire, { resume: diff });
    if (r.out.terminal !== "RUN_ERROR") r.errors.push(`expect: a different answer to a decided interrupt is RUN_ERROR, the run ended ${r.out.terminal}`);
    // RUN_ERROR is the expected end: the client rejects nothing else here.
    r.errors = r.errors.filter((e) => !e.startsWith("client: runAgent failed"));
    ok = finish(r) && ok;
  }
  if (o.unknown) {
    const r = await checkedRun("unknown", agent, wire, {
      resume: [{ interruptId: `never-raised-${randomUUID()}`, status: "resolved", payload: { approved: true } }],
    });
    if (!r.events.some((e) => e.type === "CUSTOM" && e.name === "runwire.resume_skipped")) r.errors.push("no runwire.resume_skipped CUSTOM event for the unknown interrupt");
    if (r.out.terminal !== "RUN_FINISHED") r.errors.push(`expect: an unknown interrupt is skipped, not refused; the run ended ${r.out.terminal}`);
    ok = finish(r) && ok;
  }
  process.exitCode = ok ? 0 : 1;
}

main().catch((e) => {
  process.stderr.write(`interrupts.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
