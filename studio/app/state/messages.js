// A thread's messages as the chat holds them: built from the AG-UI events
// as @ag-ui/client 1.0.0's defaultApplyEvents builds its `messages` (and as
// the server records the thread, src/runs/thread.rs), with the ids the
// stream gave them. The chat sends them as the next run's history, so the
// server finds every message it recorded (no MESSAGES_SNAPSHOT, and no
// second copy of an answer under an id of the page's own), and a
// MESSAGES_SNAPSHOT changes nothing the chat already holds. No DOM.

function str(v) {
  return typeof v === 'string' ? v : null;
}

export function createThreadMessages() {
  return {
    /** The messages, in the client's order. */
    list: [],
    /** Ids this page has shown (sent, streamed, or shown from a snapshot). */
    shown: new Set(),
  };
}

function find(t, id) {
  return t.list.find((m) => m.id === id) ?? null;
}

function holdsCall(m, call) {
  return m.role === 'assistant' && Array.isArray(m.toolCalls) && m.toolCalls.some((c) => c.id === call);
}

/** Takes a message version: replaces the one with its id where it stands, else places it (a tool result after its call's message and the tool messages after it). */
export function putMessage(t, m) {
  const at = t.list.findIndex((x) => x.id === m.id);
  if (at >= 0) {
    t.list[at] = m;
    return;
  }
  if (m.role === 'tool' && typeof m.toolCallId === 'string') {
    const f = t.list.findIndex((x) => holdsCall(x, m.toolCallId));
    if (f >= 0) {
      let i = f + 1;
      while (i < t.list.length && t.list[i].role === 'tool') i += 1;
      t.list.splice(i, 0, m);
      return;
    }
  }
  t.list.push(m);
}

/** A message the person sent (shown by the page as it sent it). */
export function addSent(t, m) {
  putMessage(t, m);
  t.shown.add(m.id);
}

function withSub(m, ev) {
  const sub = str(ev.subagentRunId);
  if (sub) m.subagentRunId = sub;
  return m;
}

/**
 * Applies one AG-UI event. Returns the messages of a MESSAGES_SNAPSHOT this
 * page has not shown yet (in the snapshot's order), for the view to show as
 * the conversation before; [] for every other event (the run's own
 * transcript shows those).
 */
export function applyMessageEvent(t, ev) {
  if (!ev || typeof ev !== 'object') return [];
  switch (ev.type) {
    case 'TEXT_MESSAGE_START': {
      const id = str(ev.messageId);
      if (!id) return [];
      t.shown.add(id);
      if (find(t, id)) return [];
      const m = { id, role: str(ev.role) ?? 'assistant', content: '' };
      if (str(ev.name)) m.name = ev.name;
      putMessage(t, withSub(m, ev));
      return [];
    }
    case 'TEXT_MESSAGE_CONTENT': {
      const m = find(t, str(ev.messageId));
      if (m) m.content = (typeof m.content === 'string' ? m.content : '') + (str(ev.delta) ?? '');
      return [];
    }
    case 'TOOL_CALL_START': {
      const call = str(ev.toolCallId);
      if (!call || t.list.some((m) => holdsCall(m, call))) return [];
      // The client's rule: the parent when it is an assistant message, else a
      // new assistant message (named by the parent id, or by the call when
      // the parent id is taken).
      const parent = str(ev.parentMessageId);
      const held = parent ? find(t, parent) : null;
      const target = parent && (!held || held.role === 'assistant') ? parent : call;
      let m = find(t, target);
      if (!m) {
        m = withSub({ id: target, role: 'assistant', toolCalls: [] }, ev);
        putMessage(t, m);
      }
      t.shown.add(target);
      if (!Array.isArray(m.toolCalls)) m.toolCalls = [];
      m.toolCalls.push({ id: call, type: 'function', function: { name: str(ev.toolCallName) ?? '', arguments: '' } });
      return [];
    }
    case 'TOOL_CALL_ARGS': {
      const call = str(ev.toolCallId);
      const m = call ? t.list.find((x) => holdsCall(x, call)) : null;
      if (m) {
        const c = m.toolCalls.find((x) => x.id === call);
        c.function.arguments += str(ev.delta) ?? '';
      }
      return [];
    }
    case 'TOOL_CALL_RESULT': {
      const id = str(ev.messageId);
      const call = str(ev.toolCallId);
      if (!id || !call) return [];
      t.shown.add(id);
      putMessage(t, withSub({ id, toolCallId: call, role: str(ev.role) ?? 'tool', content: ev.content ?? '' }, ev));
      return [];
    }
    case 'MESSAGES_SNAPSHOT': {
      if (!Array.isArray(ev.messages)) return [];
      // As the client applies one: a message it holds stays where it stands
      // (as the snapshot has it), one the snapshot does not name is dropped,
      // the others are appended in order.
      const snap = ev.messages.filter((m) => m && typeof m === 'object' && typeof m.id === 'string');
      const named = new Set(snap.map((m) => m.id));
      const kept = t.list.filter((m) => named.has(m.id)).map((m) => snap.find((s) => s.id === m.id));
      const keptIds = new Set(kept.map((m) => m.id));
      t.list = [...kept, ...snap.filter((m) => !keptIds.has(m.id))];
      const fresh = snap.filter((m) => !t.shown.has(m.id));
      for (const m of fresh) t.shown.add(m.id);
      return fresh;
    }
    default:
      return [];
  }
}

/** The history the next run sends: the messages held, as plain copies. */
export function history(t) {
  return t.list.map((m) => JSON.parse(JSON.stringify(m)));
}
