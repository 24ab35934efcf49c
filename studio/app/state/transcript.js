// The transcript both reducers fold into (AG-UI in agui.js, events/v1 in
// events.js) and views/transcript.js renders. No DOM.
//
// `items`, in arrival order: text messages, reasoning messages and tool calls
// (the calls themselves live in the tool-card model), and subagents: each
// AG-UI subagent (`subagents`, by subagentRunId) keeps the items it produced
// in its own `items`, so a view shows them as one group. `dirty` collects the
// keys of the items each event changed, so a view patches only those (a text
// delta touches its message, never a settled tool card).

import { createToolCards } from './toolcards.js';

/** The fields every transcript has; a reducer adds its own. */
export function createTranscript() {
  return {
    items: [],
    byId: new Map(),
    tools: createToolCards(),
    turns: [],
    warnings: [],
    subagents: new Map(),
    dirty: new Set(),
    statusDirty: false,
  };
}

/**
 * The item `kind:id`, created (empty, open) on first use: in the items of
 * the subagent `group` when one is named and known, else in the transcript's.
 */
export function item(tr, kind, id, group = null) {
  const key = `${kind}:${id}`;
  let it = tr.byId.get(key);
  if (!it) {
    it = { key, kind, id, text: '', done: false, rev: 0 };
    tr.byId.set(key, it);
    const sa = group ? tr.subagents.get(group) : null;
    if (sa) {
      it.group = group;
      sa.items.push(it);
    } else {
      tr.items.push(it);
    }
  }
  return it;
}

/** Marks an item changed. */
export function bump(tr, it) {
  it.rev += 1;
  tr.dirty.add(it.key);
}

/** Takes the set of changed item keys (and whether the status line changed). */
export function takeDirty(tr) {
  const keys = [...tr.dirty];
  tr.dirty.clear();
  const status = tr.statusDirty;
  tr.statusDirty = false;
  return { keys, status };
}
