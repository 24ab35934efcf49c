// The events/v1 reducer: a task stream (GET /runs/:id/tasks/:tid/stream,
// one events/v1 record per SSE frame, `id:` = seq) folded into a transcript
// (transcript.js).
// No DOM. Resume de-duplication is by seq: a record whose seq is not after
// the last one applied is dropped (and counted), so a reconnect that overlaps
// never shows an event twice.

import { applyRequest, setResult, settle, wholeCall } from './toolcards.js';
import { bump, createTranscript, item } from './transcript.js';

export { takeDirty } from './transcript.js';

/** `12` → [12, 0]; `"12.2"` → [12, 2]; anything else → null. */
export function parseSeq(seq) {
  if (typeof seq === 'number' && Number.isInteger(seq) && seq >= 1) return [seq, 0];
  if (typeof seq !== 'string') return null;
  const m = /^([0-9]+)(?:\.([1-9][0-9]*))?$/.exec(seq);
  if (!m) return null;
  return [Number(m[1]), m[2] ? Number(m[2]) : 0];
}

/** Orders seqs the way `normalize-events --after` does. Invalid seqs sort first. */
export function compareSeq(a, b) {
  const x = parseSeq(a);
  const y = parseSeq(b);
  if (!x || !y) return (x ? 1 : 0) - (y ? 1 : 0);
  return x[0] - y[0] || x[1] - y[1];
}

export function createTask() {
  return {
    lastSeq: null,
    /** The seqs applied, in order (what the event log shows). */
    seqs: [],
    duplicates: 0,
    malformed: 0,
    ...createTranscript(),
    session: null,
    /** live → exited (an exit event was read) */
    status: 'live',
    exit: null,
    fatal: null,
    /** Entries for the event log: {seq, type, summary}. */
    log: [],
    logDirty: 0,
  };
}

function closeText(t) {
  for (const it of t.items) {
    if ((it.kind === 'text' || it.kind === 'reasoning') && !it.done) {
      it.done = true;
      bump(t, it);
    }
  }
}

/**
 * Applies one record. `rec` is the parsed JSON of a frame (or anything a
 * broken server might send). Returns 'applied', 'duplicate' or 'malformed'.
 */
export function applyEvent(t, rec) {
  if (!rec || typeof rec !== 'object' || typeof rec.type !== 'string' || parseSeq(rec.seq) === null) {
    t.malformed += 1;
    t.statusDirty = true;
    return 'malformed';
  }
  if (t.lastSeq !== null && compareSeq(rec.seq, t.lastSeq) <= 0) {
    t.duplicates += 1;
    return 'duplicate';
  }
  t.lastSeq = rec.seq;
  t.seqs.push(rec.seq);
  if (typeof rec.session === 'string' && !t.session) {
    t.session = rec.session;
    t.statusDirty = true;
  }
  const d = rec.data && typeof rec.data === 'object' ? rec.data : {};
  let summary = '';
  switch (rec.type) {
    case 'token_delta': {
      const kind = d.channel === 'reasoning' ? 'reasoning' : 'text';
      const msg = typeof d.message === 'string' ? d.message : `L${rec.seq}`;
      // A message of the other channel ends the open one (as the translator does).
      for (const it of t.items) {
        if (!it.done && (it.kind === 'text' || it.kind === 'reasoning') && it.key !== `${kind}:${msg}`) {
          it.done = true;
          bump(t, it);
        }
      }
      const it = item(t, kind, msg);
      if (typeof d.text === 'string' && d.text !== '') {
        it.text += d.text;
        bump(t, it);
      }
      summary = `${kind} ${JSON.stringify(typeof d.text === 'string' ? d.text.slice(0, 40) : '')}`;
      break;
    }
    case 'tool_call': {
      closeText(t);
      const id = typeof d.id === 'string' ? d.id : `seq-${rec.seq}`;
      const it = item(t, 'tool', id);
      wholeCall(t.tools, { id, name: typeof d.name === 'string' ? d.name : '(unnamed)', args: d.args, parent: d.parent, seq: rec.seq });
      t.dirty.add(it.key);
      summary = `${d.name ?? ''} ${id}`;
      break;
    }
    case 'tool_result': {
      closeText(t);
      const id = typeof d.id === 'string' ? d.id : `seq-${rec.seq}`;
      const it = item(t, 'tool', id);
      setResult(t.tools, id, {
        content: typeof d.output === 'string' ? d.output : '',
        isError: Boolean(d.is_error),
        truncated: Boolean(d.truncated),
        bytes: typeof d.bytes === 'number' ? d.bytes : undefined,
        exitCode: typeof d.exit_code === 'number' ? d.exit_code : undefined,
      });
      t.dirty.add(it.key);
      summary = `${id}${d.is_error ? ' error' : ''}${d.truncated ? ' truncated' : ''}`;
      break;
    }
    case 'turn_start':
      closeText(t);
      t.turns.push({ start: d, end: null, seq: rec.seq });
      t.statusDirty = true;
      summary = d.model ? `model ${d.model}` : '';
      break;
    case 'turn_end': {
      closeText(t);
      const last = t.turns[t.turns.length - 1];
      if (last && !last.end) last.end = d;
      else t.turns.push({ start: null, end: d, seq: rec.seq });
      t.statusDirty = true;
      summary = d.ok ? 'ok' : `failed${d.reason ? `: ${d.reason}` : ''}`;
      break;
    }
    case 'error':
      if (d.fatal) t.fatal = { reason: String(d.reason ?? 'error'), code: d.code ?? null };
      t.warnings.push({ reason: String(d.reason ?? 'error'), code: d.code ?? null, raw: d.raw ?? null, seq: rec.seq });
      t.statusDirty = true;
      summary = `${d.code ?? ''} ${d.reason ?? ''}`;
      break;
    case 'exit':
      closeText(t);
      t.exit = { rc: typeof d.rc === 'number' ? d.rc : null, ok: Boolean(d.ok), detail: d.detail ?? null };
      t.status = 'exited';
      t.statusDirty = true;
      settle(t.tools, t.exit.ok && t.exit.rc === 0 && !t.fatal ? 'finished' : 'interrupted');
      for (const id of t.tools.order) t.dirty.add(`tool:${id}`);
      summary = `rc ${d.rc}${d.detail ? `: ${d.detail}` : ''}`;
      break;
    case 'input_request':
    case 'input_answer': {
      // A denied request's tool call is shown denied, not failed.
      const card = applyRequest(t.tools, rec.type, d);
      if (card) t.dirty.add(item(t, 'tool', card.id).key);
      summary = rec.type === 'input_request'
        ? `${d.kind ?? ''} ${d.tool ?? ''}`
        : `${d.decision ?? ''}${d.by ? ` by ${d.by}` : ''}`;
      break;
    }
    case 'custom':
      // A side note passed through (progress, a retry, a notification): listed in the log only.
      summary = String(d.name ?? 'custom');
      break;
    default:
      summary = '(unknown type)';
  }
  t.log.push({ seq: rec.seq, type: rec.type, summary: summary.trim() });
  t.logDirty += 1;
  return 'applied';
}

/**
 * The task ended without an exit event (killed, or its exit only journaled):
 * settle what is open as interrupted.
 */
export function endWithoutExit(t, reason) {
  if (t.status === 'exited') return;
  closeText(t);
  t.status = 'ended';
  t.fatal = t.fatal || (reason ? { reason, code: null } : null);
  t.statusDirty = true;
  settle(t.tools, 'interrupted');
  for (const id of t.tools.order) t.dirty.add(`tool:${id}`);
}
