import test from 'node:test';
import assert from 'node:assert/strict';
import { applyAgui, assistantText, createRun, failRun, runCost, takeDirty } from '../app/state/agui.js';
import { statusOf, truncationNote } from '../app/state/toolcards.js';
import { SseParser } from '../app/state/sse.js';
import { readFileSync } from 'node:fs';
import { jsonLines, repo } from './helpers.mjs';

function play(events) {
  const run = createRun();
  for (const e of events) applyAgui(run, e);
  return run;
}

test('the golden reasoning run: text, reasoning, a failed truncated call re-answered, usage', () => {
  const run = play(jsonLines('fixtures/golden/agui/reasoning.jsonl'));
  assert.equal(run.status, 'finished');
  assert.equal(run.error, null);
  const kinds = run.items.map((i) => `${i.kind}:${i.text}`);
  assert.ok(kinds.includes('reasoning:Think hard.'), kinds.join('|'));
  assert.ok(kinds.includes('reasoning:More thought'));
  assert.equal(assistantText(run), 'Answer');
  const id = 'run-c118ac1f332ab405:t:toolu_7';
  const card = run.tools.byId.get(id);
  assert.equal(card.name, 'Read');
  assert.deepEqual(card.args, { path: 'x' });
  // the second result replaced the first: the call ended well
  assert.equal(card.result.content, 'again');
  assert.equal(statusOf(run.tools, card), 'completed');
  assert.equal(run.usage[0].totalTokens, 150);
  assert.equal(runCost(run), 0.0125);
});

test('a failed and truncated result, as the translator sends it (RESULT then CUSTOM)', () => {
  const events = jsonLines('fixtures/golden/agui/reasoning.jsonl');
  const cut = events.findIndex((e) => e.type === 'CUSTOM' && e.value.isError === true);
  const run = play(events.slice(0, cut + 1));
  const card = run.tools.byId.get('run-c118ac1f332ab405:t:toolu_7');
  assert.equal(statusOf(run.tools, card), 'failed');
  assert.equal(card.result.content, 'ERR');
  assert.equal(truncationNote(card), 'Truncated: showing the first 3 B of 8.8 KiB (9000 bytes).');
  assert.equal(run.status, 'running');
});

test('a killed stream ends in RUN_ERROR with its message, text closed', () => {
  const run = play(jsonLines('fixtures/golden/agui/killed.jsonl'));
  assert.equal(run.status, 'error');
  assert.deepEqual(run.error, { message: "the agent's stream ended before the run finished", code: 'incomplete' });
  assert.equal(assistantText(run), 'Half a sent');
  assert.ok(run.items.every((i) => i.done));
});

test('the real bb-turn-tools SSE body: two settled Bash cards, then the answer', () => {
  const p = new SseParser();
  const body = readFileSync(`${repo}fixtures/golden/sse/claude/bb-turn-tools.partial.sse`, 'utf8');
  const run = createRun();
  for (const f of p.feed(body)) applyAgui(run, JSON.parse(f.data));
  assert.equal(run.status, 'finished');
  assert.equal(run.tools.order.length, 2);
  for (const id of run.tools.order) {
    const c = run.tools.byId.get(id);
    assert.equal(c.name, 'Bash');
    assert.equal(statusOf(run.tools, c), 'completed');
    assert.equal(typeof c.args.command, 'string');
  }
  assert.equal(run.tools.byId.get(run.tools.order[1]).result.content, '2');
  assert.equal(assistantText(run), '2');
});

test('tool arguments streamed in pieces stay preparing, then parse at END', () => {
  const run = createRun();
  applyAgui(run, { type: 'RUN_STARTED', threadId: 't', runId: 'r' });
  applyAgui(run, { type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'Write' });
  applyAgui(run, { type: 'TOOL_CALL_ARGS', toolCallId: 'c', delta: '{"file_path":"/a.txt",' });
  assert.equal(statusOf(run.tools, run.tools.byId.get('c')), 'preparing');
  applyAgui(run, { type: 'TOOL_CALL_ARGS', toolCallId: 'c', delta: '"content":"hi"}' });
  applyAgui(run, { type: 'TOOL_CALL_END', toolCallId: 'c' });
  assert.deepEqual(run.tools.byId.get('c').args, { file_path: '/a.txt', content: 'hi' });
  assert.equal(statusOf(run.tools, run.tools.byId.get('c')), 'running');
  applyAgui(run, { type: 'RUN_FINISHED', threadId: 't', runId: 'r' });
  // finished, but no result was ever sent: not "completed"
  assert.equal(statusOf(run.tools, run.tools.byId.get('c')), 'result-unavailable');
});

test('a run error interrupts the open calls', () => {
  const run = createRun();
  applyAgui(run, { type: 'RUN_STARTED', threadId: 't', runId: 'r' });
  applyAgui(run, { type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'Bash' });
  applyAgui(run, { type: 'RUN_ERROR', message: 'the agent exited with status 143', code: 'exit_nonzero' });
  assert.equal(statusOf(run.tools, run.tools.byId.get('c')), 'interrupted');
  assert.equal(run.error.code, 'exit_nonzero');
  // nothing after the terminal event changes the run
  applyAgui(run, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'late' });
  assert.equal(run.items.filter((i) => i.kind === 'text').length, 0);
  assert.equal(run.ignored, 1);
});

test('malformed and unknown events are counted, never thrown; a broken connection fails the run', () => {
  const run = createRun();
  for (const e of [null, 'text', 42, {}, { type: 7 }, { type: 'STATE_DELTA', delta: [] }, { type: 'TOOL_CALL_ARGS' }]) {
    assert.doesNotThrow(() => applyAgui(run, e));
  }
  assert.equal(run.ignored, 7);
  assert.equal(run.status, 'idle');
  failRun(run, 'network error');
  assert.equal(run.status, 'error');
  assert.equal(run.error.message, 'network error');
});

test('a text delta dirties only its message, not the settled tool card', () => {
  const run = createRun();
  applyAgui(run, { type: 'RUN_STARTED', threadId: 't', runId: 'r' });
  applyAgui(run, { type: 'TOOL_CALL_START', toolCallId: 'c', toolCallName: 'Bash' });
  applyAgui(run, { type: 'TOOL_CALL_ARGS', toolCallId: 'c', delta: '{}' });
  applyAgui(run, { type: 'TOOL_CALL_END', toolCallId: 'c' });
  applyAgui(run, { type: 'TOOL_CALL_RESULT', toolCallId: 'c', messageId: 'x', content: 'ok', role: 'tool' });
  takeDirty(run);
  const rev = run.tools.byId.get('c').rev;
  for (const d of ['a', 'b', 'c']) applyAgui(run, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: d });
  const { keys } = takeDirty(run);
  assert.deepEqual(keys, ['text:m1']);
  assert.equal(run.tools.byId.get('c').rev, rev);
  assert.equal(run.byId.get('text:m1').text, 'abc');
});

test('non-fatal runwire.error becomes a warning and the run goes on', () => {
  const run = play(jsonLines('fixtures/golden/agui/nonfatal_error.jsonl'));
  assert.equal(run.status, 'finished');
  assert.deepEqual(run.warnings.map((w) => w.code), ['api_retry']);
  assert.equal(assistantText(run), 'Hello again');
});
