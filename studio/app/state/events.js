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
  // Every message, a subagent's too.
  for (const it of t.byId.values()) {
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
  // The subagent that produced it (events/v1 `parent`), as a group.
  const group = subagent(t, d.parent);
  let summary = '';
  switch (rec.type) {
    case 'token_delta': {
      const kind = d.channel === 'reasoning' ? 'reasoning' : 'text';
      const msg = typeof d.message === 'string' ? d.message : `L${rec.seq}`;
      // A message of the other channel ends the open one of the same agent (as the translator does).
      for (const it of t.byId.values()) {
        const mine = (it.group ?? null) === group;
        if (mine && !it.done && (it.kind === 'text' || it.kind === 'reasoning') && it.key !== `${kind}:${msg}`) {
          it.done = true;
          bump(t, it);
        }
      }
      const it = item(t, kind, msg, group);
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
      const it = item(t, 'tool', id, group);
      const message = typeof d.message === 'string' ? d.message : null;
      wholeCall(t.tools, { id, name: typeof d.name === 'string' ? d.name : '(unnamed)', args: d.args, parent: message, seq: rec.seq });
      t.dirty.add(it.key);
      summary = `${d.name ?? ''} ${id}`;
      break;
    }
    case 'tool_result': {
      closeText(t);
      const id = typeof d.id === 'string' ? d.id : `seq-${rec.seq}`;
      const it = item(t, 'tool', id, group);
      // The spawning call's result: the subagents it started are done.
      for (const sa of t.subagents.values()) {
        if (sa.parentToolCallId === id && sa.status === 'running') {
          sa.status = d.is_error ? 'failed' : 'finished';
          bump(t, t.byId.get(`subagent:${sa.id}`));
        }
      }
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
      endSubagents(t, t.exit.ok && t.exit.rc === 0 && !t.fatal ? 'finished' : 'failed');
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
 * The group of the subagent an events/v1 `parent` names (created, inside the
 * group of the one that spawned it when nested, on its first event), or null
 * for the main agent's events. Grouped under the spawning call's card, as
 * the AG-UI reducer does.
 */
function subagent(t, p) {
  if (!p || typeof p !== 'object' || typeof p.id !== 'string') return null;
  if (!t.subagents.has(p.id)) {
    const outer = typeof p.parent_id === 'string' && t.subagents.has(p.parent_id) ? p.parent_id : null;
    const sa = {
      id: p.id,
      name: typeof p.name === 'string' && p.name ? p.name : 'subagent',
      description: typeof p.description === 'string' ? p.description : null,
      parentToolCallId: typeof p.tool_call === 'string' ? p.tool_call : null,
      parentSubagentRunId: outer,
      status: 'running',
      message: null,
      items: [],
    };
    const it = item(t, 'subagent', p.id, outer);
    t.subagents.set(p.id, sa);
    bump(t, it);
  }
  return p.id;
}

/** The task is over: subagents still running end with it. */
function endSubagents(t, status) {
  for (const sa of t.subagents.values()) {
    if (sa.status === 'running') {
      sa.status = status;
      bump(t, t.byId.get(`subagent:${sa.id}`));
    }
  }
}

/**
 * The task ended without an exit event (killed, or its exit only journaled):
 * settle what is open as interrupted.
 */
export function endWithoutExit(t, reason) {
  if (t.status === 'exited') return;
  endSubagents(t, 'failed');
  closeText(t);
  t.status = 'ended';
  t.fatal = t.fatal || (reason ? { reason, code: null } : null);
  t.statusDirty = true;
  settle(t.tools, 'interrupted');
  for (const id of t.tools.order) t.dirty.add(`tool:${id}`);
}
