// Chat threads' names: the thread's first message (its first line, short),
// or what the person renamed it to. Kept in this browser (localStorage,
// one small map threadId → name): the server records no thread, only each
// turn's run, so the runs list names a chat turn by its thread's name where
// this browser knows it, else by its run id. No DOM.

const KEY = 'runwire.threadNames';
/** Names are short: a table cell, a heading. */
export const NAME_MAX = 80;
/** Threads remembered at most (the oldest named are forgotten first). */
const KEEP = 500;

/** A name from a message: its first non-empty line, whitespace folded, clipped with an ellipsis. */
export function nameFromMessage(text) {
  const line = String(text ?? '').split('\n').map((l) => l.trim()).find((l) => l !== '') ?? '';
  const folded = line.replace(/\s+/g, ' ');
  return folded.length > NAME_MAX ? `${folded.slice(0, NAME_MAX - 1)}…` : folded;
}

function storage() {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null;
  }
}

function load() {
  const s = storage();
  try {
    const v = s ? JSON.parse(s.getItem(KEY) || '{}') : {};
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** The thread's name in this browser, or null. */
export function threadName(threadId) {
  if (!threadId) return null;
  const v = load()[threadId];
  return typeof v === 'string' && v.trim() ? v : null;
}

/** Names the thread (a blank name forgets it); returns the name kept, or null. */
export function setThreadName(threadId, name) {
  const s = storage();
  if (!s || !threadId) return null;
  const names = load();
  const clean = nameFromMessage(name);
  delete names[threadId];
  if (clean) names[threadId] = clean;
  const ids = Object.keys(names);
  for (const id of ids.slice(0, Math.max(0, ids.length - KEEP))) delete names[id];
  try {
    s.setItem(KEY, JSON.stringify(names));
  } catch {
    // Storage full or refused: the name holds for this page only.
  }
  return clean || null;
}
