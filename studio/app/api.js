// Talking to runwire-serve: the token, JSON calls, and SSE over fetch (so
// the Authorization header and our own Last-Event-ID can be sent).

import { SseParser } from './state/sse.js';

const TOKEN_KEY = 'runwire.token';

/**
 * Reads `#token=…` from the address (possibly with a route after it:
 * `#token=abc&/chat` or `#/chat&token=abc`), keeps it in sessionStorage and
 * takes it out of the address bar and history.
 */
export function initToken() {
  const hash = location.hash.replace(/^#/, '');
  if (!/(^|[&?])token=/.test(hash)) return;
  let rest = [];
  for (const part of hash.split(/[&?]/)) {
    if (part.startsWith('token=')) {
      const t = decodeURIComponent(part.slice('token='.length));
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
    } else if (part) {
      rest.push(part);
    }
  }
  rest = rest.filter((p) => p.startsWith('/'));
  const route = rest.length ? `#${rest[0]}` : '#/runs';
  history.replaceState(null, '', `${location.pathname}${location.search}${route}`);
}

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function headers(extra = {}) {
  const h = { ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** Tells the page a request was refused for want of a token (it shows the banner). */
export function unauthorized() {
  document.dispatchEvent(new CustomEvent('runwire:unauthorized'));
}

/** A response body: JSON when it parses, else its text; null when empty. */
export async function readBody(res) {
  const text = await res.text();
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * GET or POST JSON. Never throws: `{status, body, error}`; status is null
 * when the request itself failed (the server is down, the network dropped).
 */
export async function call(method, path, body, { signal, key } = {}) {
  const init = { method, headers: headers({ Accept: 'application/json' }), cache: 'no-store', signal };
  if (key) init.headers['Idempotency-Key'] = key;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(path, init);
    if (res.status === 401) unauthorized();
    return { status: res.status, body: await readBody(res), error: null };
  } catch (e) {
    if (e && e.name === 'AbortError') return { status: null, body: null, error: 'aborted', aborted: true };
    return { status: null, body: null, error: 'The server could not be reached.' };
  }
}

export const getJson = (path, opts) => call('GET', path, undefined, opts);
export const postJson = (path, body, opts) => call('POST', path, body, opts);
/**
 * Commands whose outcome is unknown or that were not run (no answer came,
 * or 502, 503, 504): the same command sent again (same path and body, a
 * person clicking again) reuses its key, so the server and a hub run it
 * once however many times it is retried. Bounded: the oldest go first.
 */
const unsettled = new Map();
const MAX_UNSETTLED = 64;

/**
 * POSTs a command (steer, kill, stop, answer, ...) with an idempotency key
 * made for this one click (or the key of the same command whose answer
 * never came: see `unsettled`): a hub forwarding it, and the server, run
 * it once whatever is retried on the way (spec/CLUSTER.md, docs/REFERENCE.md).
 */
export async function postCommand(path, body, opts = {}) {
  const id = `${path}\n${JSON.stringify(body ?? null)}`;
  const key = opts.key || unsettled.get(id) || randomId('click');
  const answer = await call('POST', path, body, { ...opts, key });
  unsettled.delete(id);
  if ([null, 502, 503, 504].includes(answer.status) && !answer.aborted) {
    unsettled.set(id, key);
    if (unsettled.size > MAX_UNSETTLED) unsettled.delete(unsettled.keys().next().value);
  }
  return answer;
}

/** `{error}` / `{detail}` of an error body, or a fallback sentence. */
export function errorText(answer) {
  const b = answer.body;
  if (answer.status === null) return answer.error || 'The server could not be reached.';
  if (b && typeof b === 'object') {
    if (typeof b.error === 'string') return b.error;
    if (typeof b.detail === 'string') return b.detail;
  }
  if (typeof b === 'string' && b.trim()) return b.trim().slice(0, 300);
  return `HTTP ${answer.status}`;
}

/**
 * Reads one SSE response body, calling onFrame(frame) for every event.
 * Resolves to 'eof' (the server ended it), 'aborted' or 'broken' (network).
 */
export async function readSse(res, onFrame, signal) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const frame of parser.feed(decoder.decode(value, { stream: true }))) {
        if (onFrame(frame) === false) {
          reader.cancel().catch(() => {});
          return 'stopped';
        }
      }
    }
    parser.feed(decoder.decode());
    return 'eof';
  } catch {
    return signal && signal.aborted ? 'aborted' : 'broken';
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

/**
 * One connection of a follower (followStream, followFeed): GET `url` as an
 * event stream, resumed after `from` (Last-Event-ID) when there is one, and
 * read through `onFrame(frame, ctrl)` (as readSse's; `ctrl` aborts this
 * connection). `onOpen()` is called once the answer is 200. Aborted with
 * `stopper`. Resolves to {stopped: true} once stopper is aborted,
 * {refused: res} for an answer that is not 200 (its body unread), or
 * {end} with readSse's answer ('broken' when the fetch itself failed).
 */
async function connectOnce(url, from, stopper, onOpen, onFrame) {
  const ctrl = new AbortController();
  const abortConn = () => ctrl.abort();
  stopper.signal.addEventListener('abort', abortConn, { once: true });
  try {
    const h = headers({ Accept: 'text/event-stream' });
    if (from !== null && from !== undefined && from !== '') h['Last-Event-ID'] = String(from);
    let res = null;
    try {
      res = await fetch(url, { headers: h, signal: ctrl.signal, cache: 'no-store' });
    } catch {
      res = null;
    }
    if (stopper.signal.aborted) return { stopped: true };
    if (res && res.status === 401) unauthorized();
    if (res && !res.ok) return { refused: res };
    if (!res) return { end: 'broken' };
    onOpen();
    const end = await readSse(res, (frame) => onFrame(frame, ctrl), ctrl.signal);
    return stopper.signal.aborted ? { stopped: true } : { end };
  } finally {
    stopper.signal.removeEventListener('abort', abortConn);
  }
}

/**
 * Follows a task stream (events/v1 over SSE, `id:` = seq) and reconnects by
 * itself with Last-Event-ID after a drop, a server-side `error` frame (events
 * it had to drop for a slow reader) or a clean end before the task's exit.
 *
 * @param {string} url
 * @param {object} o
 * @param {(record: any, id: string) => void} o.onEvent
 * @param {(s: object) => void} o.onState  {state: connecting|live|reconnecting|waiting|ended|failed, connections, detail}
 * @param {() => boolean} o.isDone   true once the exit event was applied
 * @param {() => string|null} o.lastId  the last seq applied (the reducer's truth)
 * @returns {{stop(): void}}
 */
export function followStream(url, { onEvent, onState, isDone, lastId }) {
  const stopper = new AbortController();
  let connections = 0;
  let quiet = 0;
  let delay = 250;
  (async () => {
    while (!stopper.signal.aborted) {
      const from = lastId();
      onState({ state: connections ? 'reconnecting' : 'connecting', connections, detail: from ? `after seq ${from}` : '' });
      let got = 0;
      const r = await connectOnce(
        url,
        from,
        stopper,
        () => {
          connections += 1;
          onState({ state: 'live', connections, detail: '' });
        },
        (frame, ctrl) => {
          if (frame.event === 'error' && !frame.hasId) {
            // The server dropped events for us (slow reader): reconnect after the last one we have.
            onState({ state: 'reconnecting', connections, detail: `the server skipped events (${frame.data.slice(0, 120)}); fetching them again` });
            ctrl.abort();
            got += 1;
            return false;
          }
          if (frame.event !== 'message') return true;
          let rec;
          try {
            rec = JSON.parse(frame.data);
          } catch {
            rec = frame.data;
          }
          onEvent(rec, frame.id);
          got += 1;
          return true;
        },
      );
      if (r.stopped) return;
      if (r.refused) {
        const res = r.refused;
        const body = await readBody(res).catch(() => null);
        if (res.status === 404) {
          // The task's log does not exist yet: it has not started.
          onState({ state: 'waiting', connections, detail: 'the task has no log yet' });
          await sleep(Math.min(delay *= 2, 4000), stopper.signal);
          continue;
        }
        onState({ state: 'failed', connections, detail: errorText({ status: res.status, body }) });
        return;
      }
      if (isDone()) {
        onState({ state: 'ended', connections, detail: '' });
        return;
      }
      if (got > 0) {
        quiet = 0;
        delay = 250;
      } else if (r.end === 'eof') {
        quiet += 1;
      }
      if (quiet >= 3) {
        onState({ state: 'ended', connections, detail: 'the stream ended without an exit event', noExit: true });
        return;
      }
      onState({ state: 'reconnecting', connections, detail: r.end === 'broken' ? 'the connection dropped' : 'the stream ended early' });
      await sleep(got > 0 ? 100 : (delay = Math.min(delay * 2, 4000)), stopper.signal);
    }
  })();
  return { stop: () => stopper.abort() };
}

/** A short random id for threads and runs. */
export function randomId(prefix) {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  return `${prefix}-${[...b].map((x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Follows the change feed, GET /runs/events (one event per change of any
 * run or task; `id:` = the event's id in the server's durable feed log).
 * Reconnects by itself after a drop with Last-Event-ID = the last id it
 * got, so the server sends exactly what was missed, nothing twice. Nothing
 * is requested while the connection is up: no polling.
 *
 * @param {string} query  e.g. '' or '?run=ID' (filters: run, status, repo, type)
 * @param {object} o
 * @param {(ev: object, id: string) => void} o.onEvent  each event, in feed order
 * @param {(id: string, first: boolean) => void} [o.onReady]  caught up (after each (re)connect)
 * @param {(s: object) => void} [o.onState]  {state: connecting|live|reconnecting|failed, connections, detail}
 * @returns {{stop(): void, lastId(): string|null}}
 */
export function followFeed(query, { onEvent, onReady = () => {}, onState = () => {} }) {
  const stopper = new AbortController();
  let last = null;
  let connections = 0;
  let readies = 0;
  let delay = 250;
  (async () => {
    while (!stopper.signal.aborted) {
      onState({ state: connections ? 'reconnecting' : 'connecting', connections, detail: last !== null ? `after event ${last}` : '' });
      const r = await connectOnce(
        `/runs/events${query}`,
        last,
        stopper,
        () => {
          connections += 1;
          onState({ state: 'live', connections, detail: '' });
        },
        (frame) => {
          if (frame.hasId) last = frame.id;
          if (frame.event === 'ready') {
            delay = 250;
            onReady(frame.id, readies++ === 0);
            return true;
          }
          if (frame.event !== 'message') return true;
          let ev;
          try {
            ev = JSON.parse(frame.data);
          } catch {
            return true;
          }
          onEvent(ev, frame.id);
          return true;
        },
      );
      if (r.stopped) return;
      if (r.refused) {
        const res = r.refused;
        const body = await readBody(res).catch(() => null);
        onState({ state: 'failed', connections, detail: errorText({ status: res.status, body }) });
        // A refused resume point (the feed log was replaced): start again from now.
        if (res.status === 400 && last !== null) {
          last = null;
          readies = 0;
          await sleep(delay, stopper.signal);
          continue;
        }
        return;
      }
      onState({ state: 'reconnecting', connections, detail: 'the connection dropped' });
      await sleep((delay = Math.min(delay * 2, 4000)), stopper.signal);
    }
  })();
  return { stop: () => stopper.abort(), lastId: () => last };
}
