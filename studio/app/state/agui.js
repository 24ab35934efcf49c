// The AG-UI event reducer: one run's stream of AG-UI 1.0 events (as
// runwire-serve's POST /agui sends them) folded into a transcript
// (transcript.js). No DOM.

import {
  applyRequest,
  appendArgs,
  endArgs,
  resultMeta,
  setResult,
  settle,
  startCall,
} from './toolcards.js';
import { bump, createTranscript, item } from './transcript.js';

export { takeDirty } from './transcript.js';

export function createRun({ threadId = null, runId = null } = {}) {
  return {
    threadId,
    runId,
    /** idle → running → finished | waiting (interrupt outcome) | cancelled | error */
    status: 'idle',
    error: null,
    /** The AG-UI interrupts the run ended with (status 'waiting'). */
    interrupts: [],
    /** runwire.session: the interactive session's task routes (steer, stop, answer). */
    session: null,
    ...createTranscript(),
    usage: null,
    events: 0,
    ignored: 0,
  };
}


function str(v) {
  return typeof v === 'string' ? v : null;
}

/** True once the run ended (any outcome). */
export function isTerminal(run) {
  return ['finished', 'error', 'waiting', 'cancelled'].includes(run.status);
}

function closeText(run) {
  // Every message, a subagent's too.
  for (const it of run.byId.values()) {
    if ((it.kind === 'text' || it.kind === 'reasoning') && !it.done) {
      it.done = true;
      bump(run, it);
    }
  }
}

function terminal(run, status, error) {
  run.status = status;
  run.error = error;
  run.statusDirty = true;
  closeText(run);
  settle(run.tools, status === 'finished' ? 'finished' : 'interrupted');
  for (const id of run.tools.order) run.dirty.add(`tool:${id}`);
}

/**
 * Applies one AG-UI event (a parsed JSON object). Unknown or malformed events
 * are counted in `ignored`, never thrown.
 * @returns the run (mutated in place)
 */
export function applyAgui(run, ev) {
  run.events += 1;
  if (!ev || typeof ev !== 'object' || typeof ev.type !== 'string') {
    run.ignored += 1;
    run.warnings.push({ reason: 'an event that is not an AG-UI object was skipped', code: 'malformed' });
    run.statusDirty = true;
    return run;
  }
  if (isTerminal(run)) {
    // Nothing follows a terminal event in a well-formed stream.
    run.ignored += 1;
    return run;
  }
  switch (ev.type) {
    case 'RUN_STARTED':
      run.threadId = str(ev.threadId) ?? run.threadId;
      run.runId = str(ev.runId) ?? run.runId;
      run.status = 'running';
      run.statusDirty = true;
      break;
    case 'RUN_FINISHED': {
      if (Array.isArray(ev.usage)) run.usage = ev.usage;
      const outcome = ev.outcome && typeof ev.outcome === 'object' ? ev.outcome.type : null;
      if (outcome === 'interrupt' && Array.isArray(ev.outcome.interrupts)) {
        // The agent waits for an answer: its tool call is not over, so the
        // cards stay as they are (no settle).
        run.interrupts = ev.outcome.interrupts;
        closeText(run);
        run.status = 'waiting';
        run.statusDirty = true;
      } else if (outcome === 'cancelled') {
        terminal(run, 'cancelled', null);
      } else {
        terminal(run, 'finished', null);
      }
      break;
    }
    case 'RUN_ERROR':
      if (Array.isArray(ev.usage)) run.usage = ev.usage;
      terminal(run, 'error', { message: str(ev.message) ?? 'the run failed', code: str(ev.code) });
      break;
    case 'TEXT_MESSAGE_START':
    case 'TEXT_MESSAGE_CONTENT':
    case 'TEXT_MESSAGE_END':
    case 'TEXT_MESSAGE_CHUNK':
      textEvent(run, 'text', ev);
      break;
    case 'REASONING_MESSAGE_START':
    case 'REASONING_MESSAGE_CONTENT':
    case 'REASONING_MESSAGE_END':
    case 'REASONING_MESSAGE_CHUNK':
      textEvent(run, 'reasoning', ev);
      break;
    case 'REASONING_START':
    case 'REASONING_END':
      break;
    case 'MESSAGES_SNAPSHOT':
      // The thread as it stood: the chat's thread messages take it
      // (state/messages.js); this run's transcript is its own events.
      break;
    case 'TOOL_CALL_START':
    case 'TOOL_CALL_ARGS':
    case 'TOOL_CALL_END':
    case 'TOOL_CALL_CHUNK':
    case 'TOOL_CALL_RESULT':
      return toolEvent(run, ev);
    case 'CUSTOM':
      custom(run, ev);
      break;
    case 'SUBAGENT_STARTED':
    case 'SUBAGENT_FINISHED':
    case 'SUBAGENT_ERROR':
      return subagentEvent(run, ev);
    default:
      run.ignored += 1;
  }
  return run;
}

/** Subagent states a view shows, by SUBAGENT_FINISHED outcome or SUBAGENT_ERROR. */
export const SUBAGENT_LABELS = { running: 'running', finished: 'finished', suspended: 'waiting', failed: 'failed' };

/**
 * A subagent (AG-UI 1.0 SUBAGENT_*): a group the events carrying its
 * subagentRunId fill, placed inside the tool card of the call that spawned
 * it (parentToolCallId; a view without that card shows it where it began),
 * within the subagent that spawned it when nested.
 */
function subagentEvent(run, ev) {
  const id = str(ev.subagentRunId);
  if (!id) return skip(run);
  let sa = run.subagents.get(id);
  if (ev.type === 'SUBAGENT_STARTED') {
    if (sa) return skip(run);
    sa = {
      id,
      name: str(ev.name) ?? 'subagent',
      description: str(ev.description),
      parentToolCallId: str(ev.parentToolCallId),
      parentSubagentRunId: str(ev.parentSubagentRunId),
      status: 'running',
      message: null,
      items: [],
    };
    const it = item(run, 'subagent', id, sa.parentSubagentRunId);
    run.subagents.set(id, sa);
    bump(run, it);
    return run;
  }
  if (!sa) return skip(run);
  if (ev.type === 'SUBAGENT_ERROR') {
    sa.status = 'failed';
    sa.message = str(ev.message);
  } else {
    sa.status = ev.outcome && ev.outcome.type === 'suspended' ? 'suspended' : 'finished';
  }
  for (const it of sa.items) {
    if ((it.kind === 'text' || it.kind === 'reasoning') && !it.done) {
      it.done = true;
      bump(run, it);
    }
  }
  bump(run, run.byId.get(`subagent:${id}`));
  return run;
}

function skip(run) {
  run.ignored += 1;
  return run;
}

function toolItem(run, id, group = null) {
  const it = item(run, 'tool', id, group);
  run.dirty.add(it.key);
  return it;
}

function toolEvent(run, ev) {
  const id = str(ev.toolCallId);
  if (!id) return skip(run);
  toolItem(run, id, str(ev.subagentRunId));
  switch (ev.type) {
    case 'TOOL_CALL_START':
      startCall(run.tools, { id, name: str(ev.toolCallName), parent: str(ev.parentMessageId) });
      break;
    case 'TOOL_CALL_ARGS':
      appendArgs(run.tools, id, str(ev.delta) ?? '');
      break;
    case 'TOOL_CALL_END':
      endArgs(run.tools, id);
      break;
    case 'TOOL_CALL_CHUNK':
      startCall(run.tools, { id, name: str(ev.toolCallName), parent: str(ev.parentMessageId) });
      appendArgs(run.tools, id, str(ev.delta) ?? '');
      break;
    default: // TOOL_CALL_RESULT
      setResult(run.tools, id, { content: ev.content });
  }
  return run;
}

function textEvent(run, kind, ev) {
  const id = str(ev.messageId);
  if (!id) return skip(run);
  const it = item(run, kind, id, str(ev.subagentRunId));
  if (ev.type.endsWith('_END')) {
    if (!it.done) {
      it.done = true;
      bump(run, it);
    }
    return run;
  }
  const delta = str(ev.delta);
  if (ev.type.endsWith('_START')) {
    // A message may be reopened (the translator does after a non-fatal error).
    it.done = false;
    bump(run, it);
    return run;
  }
  if (delta) {
    it.text += delta;
    bump(run, it);
  }
  return run;
}

function custom(run, ev) {
  const v = ev.value && typeof ev.value === 'object' ? ev.value : {};
  switch (ev.name) {
    case 'runwire.tool_result': {
      const id = str(v.toolCallId);
      if (!id) return skip(run);
      toolItem(run, id);
      resultMeta(run.tools, id, {
        isError: v.isError,
        truncated: v.truncated,
        bytes: v.bytes,
        exitCode: v.exitCode,
      });
      break;
    }
    case 'runwire.turn_start':
      run.turns.push({ start: v, end: null });
      run.statusDirty = true;
      break;
    case 'runwire.turn_end': {
      const last = run.turns[run.turns.length - 1];
      if (last && !last.end) last.end = v;
      else run.turns.push({ start: null, end: v });
      run.statusDirty = true;
      break;
    }
    case 'runwire.input_request':
    case 'runwire.input_answer': {
      // A denied request's tool call is shown denied, not failed.
      const card = applyRequest(run.tools, ev.name.slice('runwire.'.length), v);
      if (card) toolItem(run, card.id);
      break;
    }
    case 'runwire.session':
      run.session = v;
      run.statusDirty = true;
      break;
    case 'runwire.resume_skipped':
    case 'runwire.input_not_sent':
      run.warnings.push({ reason: str(v.warning) ?? 'warning', code: ev.name.slice('runwire.'.length) });
      run.statusDirty = true;
      break;
    case 'runwire.error':
      run.warnings.push({ reason: str(v.reason) ?? 'error', code: str(v.code), raw: str(v.raw) });
      run.statusDirty = true;
      break;
    default:
      run.ignored += 1;
  }
  return run;
}

/** The request could not be made or the stream broke before a terminal event. */
export function failRun(run, message, code = 'client') {
  if (isTerminal(run)) return run;
  terminal(run, 'error', { message, code });
  return run;
}

/** The assistant's text of the run, all messages joined (for the next request's history). */
export function assistantText(run) {
  return run.items
    .filter((it) => it.kind === 'text')
    .map((it) => it.text)
    .join('\n\n');
}

/** Sum of the turns' costs, where reported. */
export function runCost(run) {
  let cost = null;
  for (const t of run.turns) {
    if (t.end && typeof t.end.costUsd === 'number') cost = (cost ?? 0) + t.end.costUsd;
  }
  return cost;
}
