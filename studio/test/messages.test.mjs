import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { addSent, applyMessageEvent, createThreadMessages, history } from '../app/state/messages.js';
import { repo } from './helpers.mjs';

/** The AG-UI events of a golden SSE file (the real pipeline's output). */
function sseEvents(rel) {
  return readFileSync(repo + rel, 'utf8')
    .split('\n\n')
    .filter((f) => f.startsWith('data: '))
    .map((f) => JSON.parse(f.slice('data: '.length)));
}

/** A page that sent `prompt` and streamed `events`. */
function live(prompt, events) {
  const t = createThreadMessages();
  addSent(t, { id: 'u1', role: 'user', content: prompt });
  for (const e of events) assert.deepEqual(applyMessageEvent(t, e), []);
  return t;
}

test('the history holds the stream\'s ids: text messages, tool calls in their message, tool results after it', () => {
  const events = sseEvents('fixtures/golden/sse/claude/bb-turn-tools.partial.sse');
  const t = live('do it', events);
  const ids = history(t).map((m) => m.id);
  assert.equal(ids[0], 'u1');
  for (const e of events.filter((e) => e.type === 'TEXT_MESSAGE_START')) assert.ok(ids.includes(e.messageId), e.messageId);
  for (const e of events.filter((e) => e.type === 'TOOL_CALL_RESULT')) assert.ok(ids.includes(e.messageId), e.messageId);
  // Every call is in exactly one assistant message, its arguments whole.
  for (const e of events.filter((e) => e.type === 'TOOL_CALL_START')) {
    const holders = history(t).filter((m) => (m.toolCalls ?? []).some((c) => c.id === e.toolCallId));
    assert.equal(holders.length, 1, e.toolCallId);
    const args = events.filter((a) => a.type === 'TOOL_CALL_ARGS' && a.toolCallId === e.toolCallId).map((a) => a.delta).join('');
    assert.equal(holders[0].toolCalls.find((c) => c.id === e.toolCallId).function.arguments, args);
    // Its result comes after the message that holds the call.
    const r = events.find((x) => x.type === 'TOOL_CALL_RESULT' && x.toolCallId === e.toolCallId);
    if (r) assert.ok(ids.indexOf(r.messageId) > ids.indexOf(holders[0].id));
  }
  // No message without an id of the stream's or the person's.
  assert.ok(!ids.some((id) => /^msg-/.test(id)));
});

test('a snapshot of what the page holds changes nothing and shows nothing', () => {
  const events = sseEvents('fixtures/golden/sse/claude/synthetic.subagents-concurrent.partial.sse');
  const t = live('split the work', events);
  const before = history(t);
  assert.deepEqual(applyMessageEvent(t, { type: 'MESSAGES_SNAPSHOT', messages: history(t) }), []);
  assert.deepEqual(history(t), before);
  // A subagent's messages carry it.
  assert.ok(before.some((m) => typeof m.subagentRunId === 'string'));
});

test('an opened thread shows what the snapshots bring once, in the thread\'s order, and keeps its new message', () => {
  const first = live('fix the build', sseEvents('fixtures/golden/sse/claude/bb-turn-tools.partial.sse'));
  const thread = history(first);
  // A second page sent only its new message; the server gives it the
  // thread before it, then the whole thread (src/runs/thread.rs snapshots).
  const t = createThreadMessages();
  const mine = { id: 'u2', role: 'user', content: 'and the tests' };
  addSent(t, mine);
  const shown = applyMessageEvent(t, { type: 'MESSAGES_SNAPSHOT', messages: thread });
  assert.deepEqual(shown.map((m) => m.id), thread.map((m) => m.id));
  assert.deepEqual(history(t), thread, 'its message dropped: the snapshot does not name it');
  const again = applyMessageEvent(t, { type: 'MESSAGES_SNAPSHOT', messages: [...thread, mine] });
  assert.deepEqual(again, [], 'nothing shown twice');
  assert.deepEqual(history(t), [...thread, mine]);
});
