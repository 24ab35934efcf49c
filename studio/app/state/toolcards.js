// The tool-card model: one card per tool call, fed by either stream (AG-UI
// or events/v1). No DOM. Every change bumps the card's `rev`, so a view can
// re-render only the cards whose rev moved (settled cards stay untouched
// while text streams).
//
// Status, derived (never stored) from what is known:
//   preparing          the call started, its arguments are still streaming
//   running            the arguments are complete, no result yet, the run goes on
//   completed          a result arrived and it is not an error
//   failed             a result arrived and it is an error
//   result-unavailable the run ended successfully but no result was retained
//                      for this call (that is not "completed": nothing says it worked)
//   interrupted        the run ended in error / was stopped before a result came
//   denied             a person (or the answer timeout) refused the call: it never
//                      ran, whatever error result the agent reports for it

import { clip, formatBytes, oneLine } from './format.js';

export const STATUSES = ['preparing', 'running', 'completed', 'failed', 'result-unavailable', 'interrupted', 'denied'];

/** The normalizer's cap on tool output (events/v1 `tool_result.output`). */
export const OUTPUT_CAP = 65536;

export function createToolCards() {
  // requests: the agent's open requests (request id -> its tool call id, as the agent named it).
  return { order: [], byId: new Map(), settled: null, rev: 0, requests: new Map() };
}

function touch(model, card) {
  card.rev += 1;
  model.rev += 1;
}

function blank(id) {
  return {
    id,
    name: '',
    parent: null,
    argsText: '',
    argsDone: false,
    args: undefined,
    argsValid: null,
    result: null,
    rev: 0,
    seq: null,
    denied: null,
  };
}

/** Gets or creates the card for `id` (a result before its call still gets a card). */
export function ensureCard(model, id) {
  let card = model.byId.get(id);
  if (!card) {
    card = blank(id);
    model.byId.set(id, card);
    model.order.push(id);
    touch(model, card);
  }
  return card;
}

/** TOOL_CALL_START. A restated start for a known id only fills in what was missing. */
export function startCall(model, { id, name, parent }) {
  const card = ensureCard(model, id);
  let changed = false;
  if (name && !card.name) {
    card.name = String(name);
    changed = true;
  }
  if (parent && !card.parent) {
    card.parent = String(parent);
    changed = true;
  }
  if (changed) touch(model, card);
  return card;
}

/** TOOL_CALL_ARGS: a piece of the JSON argument text. */
export function appendArgs(model, id, delta) {
  const card = ensureCard(model, id);
  if (card.argsDone || typeof delta !== 'string' || delta === '') return card;
  card.argsText += delta;
  touch(model, card);
  return card;
}

/** TOOL_CALL_END: the arguments are complete; parse them once. */
export function endArgs(model, id) {
  const card = ensureCard(model, id);
  if (card.argsDone) return card;
  closeArgs(card);
  touch(model, card);
  return card;
}

/** Ends the argument phase: the streamed text is parsed once (empty counts as valid). */
function closeArgs(card) {
  card.argsDone = true;
  const parsed = parseJson(card.argsText);
  card.args = parsed.ok ? parsed.value : undefined;
  card.argsValid = card.argsText.trim() === '' ? true : parsed.ok;
}

/** A whole call at once (events/v1 `tool_call`: arguments already complete). */
export function wholeCall(model, { id, name, args, parent, seq }) {
  const card = ensureCard(model, id);
  if (card.argsDone) return card;
  startCall(model, { id, name, parent });
  card.argsText = args === undefined ? '' : JSON.stringify(args);
  card.args = args;
  card.argsValid = true;
  card.argsDone = true;
  if (seq !== undefined) card.seq = seq;
  touch(model, card);
  return card;
}

/**
 * A result. `content` is the text as retained; `isError`, `truncated`,
 * `bytes` (original size) and `exitCode` may come with it (events/v1) or
 * later (AG-UI's CUSTOM runwire.tool_result): see resultMeta.
 */
export function setResult(model, id, { content, isError, truncated, bytes, exitCode } = {}) {
  const card = ensureCard(model, id);
  const text = contentText(content);
  const prev = card.result;
  card.result = {
    content: text,
    isError: isError === undefined ? (prev ? prev.isError : null) : Boolean(isError),
    truncated: truncated === undefined ? (prev ? prev.truncated : false) : Boolean(truncated),
    bytes: typeof bytes === 'number' ? bytes : prev && typeof prev.bytes === 'number' ? prev.bytes : null,
    exitCode: typeof exitCode === 'number' ? exitCode : prev ? prev.exitCode : null,
    hasContent: true,
  };
  // A result ends the argument phase even if TOOL_CALL_END was never seen.
  if (!card.argsDone) closeArgs(card);
  touch(model, card);
  return card;
}

/** CUSTOM runwire.tool_result {toolCallId, isError, truncated, bytes, exitCode?}. */
export function resultMeta(model, id, { isError, truncated, bytes, exitCode } = {}) {
  const card = ensureCard(model, id);
  const r = card.result || { content: '', isError: null, truncated: false, bytes: null, exitCode: null, hasContent: false };
  const next = {
    ...r,
    isError: typeof isError === 'boolean' ? isError : r.isError,
    truncated: typeof truncated === 'boolean' ? truncated : r.truncated,
    bytes: typeof bytes === 'number' ? bytes : r.bytes,
    exitCode: typeof exitCode === 'number' ? exitCode : r.exitCode,
  };
  card.result = next;
  touch(model, card);
  return card;
}

/**
 * The run ended: `outcome` is 'finished' (successful) or 'error' / 'interrupted'.
 * Cards without a result settle to result-unavailable or interrupted.
 */
export function settle(model, outcome) {
  if (model.settled === outcome) return;
  model.settled = outcome === 'finished' ? 'finished' : 'interrupted';
  for (const id of model.order) {
    const card = model.byId.get(id);
    if (!card.result || !card.result.hasContent) touch(model, card);
  }
}

/**
 * The call whose agent-side id is `raw`: the card of that id, or the one an
 * AG-UI stream namespaced as `<runId>:t:<raw>`; null if none.
 */
export function findCall(model, raw) {
  if (typeof raw !== 'string' || raw === '') return null;
  if (model.byId.has(raw)) return model.byId.get(raw);
  for (const id of model.order) if (id.endsWith(`:t:${raw}`)) return model.byId.get(id);
  return null;
}

/** Marks a call refused: it never ran (its error result, if any, only says so). */
export function markDenied(model, id, { message = null, expired = false } = {}) {
  const card = ensureCard(model, id);
  card.denied = { message: typeof message === 'string' && message.trim() ? message.trim() : null, expired: Boolean(expired) };
  touch(model, card);
  return card;
}

/**
 * An input request or its answer (events/v1 `input_request` / `input_answer`
 * data, or AG-UI's CUSTOM `runwire.input_request` / `runwire.input_answer`
 * value): a denied or expired answer marks the request's tool call denied.
 * Returns the card it changed, or null.
 */
export function applyRequest(model, type, data) {
  if (!data || typeof data !== 'object' || typeof data.id !== 'string') return null;
  if (type === 'input_request') {
    if (typeof data.tool_call_id === 'string') model.requests.set(data.id, data.tool_call_id);
    return null;
  }
  if (type !== 'input_answer' || (data.decision !== 'deny' && data.decision !== 'expired')) return null;
  const card = findCall(model, model.requests.get(data.id));
  if (!card) return null;
  return markDenied(model, card.id, { message: data.message, expired: data.decision === 'expired' });
}

/** The card's status (see the module doc). */
export function statusOf(model, card) {
  if (card.denied) return 'denied';
  if (card.result && card.result.hasContent) {
    return card.result.isError ? 'failed' : 'completed';
  }
  if (card.result && card.result.isError) return 'failed';
  if (model.settled === 'finished') return 'result-unavailable';
  if (model.settled === 'interrupted') return 'interrupted';
  return card.argsDone ? 'running' : 'preparing';
}

export const STATUS_LABELS = {
  preparing: 'preparing',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  'result-unavailable': 'result unavailable',
  interrupted: 'interrupted',
  denied: 'denied',
};

/** A sentence explaining the status, for the expanded card. */
export function statusDetail(model, card) {
  const s = statusOf(model, card);
  const r = card.result;
  switch (s) {
    case 'preparing':
      return 'The agent is still writing the arguments.';
    case 'running':
      return 'Waiting for the result.';
    case 'completed':
      return r && r.exitCode !== null && r.exitCode !== undefined ? `Completed (exit code ${r.exitCode}).` : 'Completed.';
    case 'failed':
      return r && r.exitCode !== null && r.exitCode !== undefined
        ? `The tool reported an error (exit code ${r.exitCode}).`
        : 'The tool reported an error.';
    case 'result-unavailable':
      return 'The run finished, but no result was retained for this call, so whether it worked is unknown.';
    case 'interrupted':
      return 'The run stopped before this call returned a result.';
    case 'denied': {
      const d = card.denied;
      const why = d.expired ? 'Denied automatically: nobody answered in time' : 'Denied';
      return `${why}${d.message && !d.expired ? `: ${d.message.replace(/\.$/, '')}` : ''}. The call did not run.`;
    }
    default:
      return '';
  }
}

/** The truncation note, or null: says the result was cut and gives the original size. */
export function truncationNote(card) {
  const r = card.result;
  if (!r || !r.truncated) return null;
  const shown = byteLength(r.content);
  const orig = typeof r.bytes === 'number' ? `${formatBytes(r.bytes)} (${r.bytes} bytes)` : 'an unknown size';
  return `Truncated: showing the first ${formatBytes(shown)} of ${orig}.`;
}

/** UTF-8 length of a string. */
export function byteLength(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** `{ok, value}` for JSON text; never throws. */
export function parseJson(text) {
  if (typeof text !== 'string' || text.trim() === '') return { ok: false, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, value: undefined };
  }
}

/** AG-UI content may be a string or an array of content parts. */
export function contentText(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : typeof p === 'string' ? p : ''))
      .join('');
  }
  if (content === undefined || content === null) return '';
  return JSON.stringify(content);
}

/**
 * The questions of an AskUserQuestion-like call (`{questions: [{question,
 * header?, options: [{label, description?}], multiSelect?}]}`), or null when
 * the arguments are not that shape.
 */
export function questionsOf(args) {
  if (!args || typeof args !== 'object' || !Array.isArray(args.questions) || args.questions.length === 0) return null;
  if (!args.questions.every((q) => q && typeof q === 'object' && typeof q.question === 'string')) return null;
  return args.questions.map((q) => ({
    question: q.question,
    header: typeof q.header === 'string' ? q.header : '',
    multiSelect: q.multiSelect === true,
    options: (Array.isArray(q.options) ? q.options : [])
      .filter((o) => o && typeof o === 'object' && typeof o.label === 'string')
      .map((o) => ({ label: o.label, description: typeof o.description === 'string' ? o.description : '' })),
  }));
}

/** Questions as people read them: each question, then its options one a line. */
export function questionsText(qs) {
  return qs
    .map((q) => {
      const head = `${q.header ? `${q.header}: ` : ''}${q.question}${q.multiSelect ? ' (any of)' : ''}`;
      return [head, ...q.options.map((o) => `  • ${o.label}${o.description ? ` — ${o.description}` : ''}`)].join('\n');
    })
    .join('\n\n');
}

/**
 * The arguments as shown expanded: pretty JSON when they parse, else the raw
 * text with a note (malformed or still streaming).
 */
export function formattedArgs(card) {
  if (!card.argsDone) return { text: card.argsText, note: 'Arguments still streaming.', json: false };
  if (card.argsText.trim() === '') return { text: '', note: 'No arguments.', json: false };
  if (card.argsValid && card.args !== undefined) {
    // A question to the person reads as a question, not as its JSON.
    const qs = questionsOf(card.args);
    if (qs) return { text: questionsText(qs), note: null, json: false };
    return { text: JSON.stringify(card.args, null, 2), note: null, json: true };
  }
  return { text: card.argsText, note: 'The arguments are not valid JSON; shown as received.', json: false };
}

/** The result as shown expanded: pretty JSON when the whole text is a JSON object/array, else plain text. */
export function formattedResult(card) {
  const r = card.result;
  if (!r || !r.hasContent) return null;
  const t = r.content;
  const trimmed = t.trim();
  if (!r.truncated && (trimmed.startsWith('{') || trimmed.startsWith('['))) {
    const p = parseJson(trimmed);
    if (p.ok && p.value && typeof p.value === 'object') return { text: JSON.stringify(p.value, null, 2), json: true };
  }
  return { text: t, json: false };
}

const PREVIEW_KEYS = ['command', 'cmd', 'file_path', 'path', 'pattern', 'url', 'query', 'description', 'prompt'];

/** One short line summarising the arguments (the collapsed card shows it). */
export function argPreview(card, max = 80) {
  const a = card.args;
  if (card.argsDone && card.argsValid === false) return clip(oneLine(card.argsText), max);
  if (a === undefined) return card.argsText ? clip(oneLine(card.argsText), max) : '';
  if (a === null || typeof a !== 'object') return clip(oneLine(JSON.stringify(a)), max);
  if (Array.isArray(a)) return clip(oneLine(JSON.stringify(a)), max);
  const qs = questionsOf(a);
  if (qs) {
    const q = qs[0];
    const opts = q.options.length ? ` (${q.options.map((o) => o.label).join(' / ')})` : '';
    return clip(oneLine(`${q.question}${opts}${qs.length > 1 ? ` +${qs.length - 1} more` : ''}`), max);
  }
  for (const k of PREVIEW_KEYS) {
    if (typeof a[k] === 'string' && a[k].trim() !== '') return clip(oneLine(a[k]), max);
  }
  const parts = [];
  for (const [k, v] of Object.entries(a)) {
    parts.push(`${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
    if (parts.join(', ').length > max) break;
  }
  return clip(oneLine(parts.join(', ')), max);
}

/** Counts per status, for summaries and tests. */
export function statusCounts(model) {
  const counts = {};
  for (const id of model.order) {
    const s = statusOf(model, model.byId.get(id));
    counts[s] = (counts[s] || 0) + 1;
  }
  return counts;
}
