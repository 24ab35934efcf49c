// lib.mjs: the checks check.mjs (recorded SSE files) and live.mjs (a live
// runwire-serve) share. See README.md for what each check means.

import { EventSchemas } from "@ag-ui/core/schemas";

export const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

// LF-only framing: the bytes hold no CR at all.
export function checkFraming(bytes) {
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
export function rawEvents(text) {
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

// Every raw event against the 1.0.0 zod schemas.
export function checkSchemas(events) {
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

// Exactly one terminal event, and it is the last.
export function checkTerminal(events) {
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

export function oneLine(s) {
  return String(s).replace(/\s+/g, " ").slice(0, 500);
}

export function fmtArgs(args) {
  return oneLine(args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" "));
}

// Collects console.warn / console.error until restore(): the client reports
// keys it stripped and events it dropped only that way. The client can be told
// to keep quiet about some transformations; a checker must hear every warning.
export function captureConsole() {
  delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;
  const noise = [];
  const orig = { warn: console.warn, error: console.error };
  console.warn = (...a) => noise.push(`client warned: ${fmtArgs(a)}`);
  console.error = (...a) => noise.push(`client error log: ${fmtArgs(a)}`);
  return {
    noise,
    restore() {
      console.warn = orig.warn;
      console.error = orig.error;
    },
  };
}

// The noise that counts as a failure. "Agent execution failed" is the client
// logging an error that is already reported (the run failed).
export function noiseErrors(noise, runFailed) {
  return noise.filter((n) => !(runFailed && n.startsWith("client error log: Agent execution failed")));
}

// A fetch for HttpAgent that hands the client one branch of the response body
// and records the other, byte for byte, with when the request went out and
// when its first bytes came back.
export function teeingFetch(wire) {
  return async (url, init) => {
    wire.sentAt = performance.now();
    const res = await fetch(url, init);
    wire.status = res.status;
    wire.contentType = res.headers.get("content-type");
    if (!res.body) {
      wire.done = Promise.resolve();
      return res;
    }
    const [mine, theirs] = res.body.tee();
    wire.done = (async () => {
      const reader = mine.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        if (wire.firstAt === null) wire.firstAt = performance.now();
        wire.chunks.push(value);
      }
    })().catch((e) => {
      wire.readError = oneLine(e && e.message ? e.message : String(e));
    });
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// `promise`, or a rejection naming `what` after `ms` (calling `onTimeout` first).
export function withTimeout(promise, ms, what, onTimeout) {
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => {
      if (onTimeout) onTimeout();
      rej(new Error(`${what} timed out after ${ms} ms`));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
