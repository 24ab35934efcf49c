import test from 'node:test';
import assert from 'node:assert/strict';
import { applyEvent, compareSeq, createTask, endWithoutExit, parseSeq } from '../app/state/events.js';
import { statusOf } from '../app/state/toolcards.js';
import { jsonLines } from './helpers.mjs';

test('seq order follows normalize-events --after (line, then sub-index)', () => {
  assert.deepEqual(parseSeq(12), [12, 0]);
  assert.deepEqual(parseSeq('12.2'), [12, 2]);
  assert.equal(parseSeq('12.0'), null);
  assert.equal(parseSeq('x'), null);
  const sorted = ['10', 9, '9.2', '9.1', 2].sort(compareSeq);
  assert.deepEqual(sorted, [2, 9, '9.1', '9.2', '10']);
});

test('resume de-duplication: an overlapping reconnect shows every event once', () => {
  const all = jsonLines('fixtures/golden/events/claude/bb-stop-interrupt.killed-midstream.partial.events.jsonl');
  assert.ok(all.length > 10);
  const t = createTask();
  // first connection gets the first 8, the second restarts 3 events early
  for (const e of all.slice(0, 8)) assert.equal(applyEvent(t, e), 'applied');
  const again = all.slice(5).map((e) => applyEvent(t, e));
  assert.deepEqual(again.slice(0, 3), ['duplicate', 'duplicate', 'duplicate']);
  assert.equal(t.duplicates, 3);
  assert.deepEqual(t.seqs, all.map((e) => e.seq));
  assert.equal(new Set(t.seqs).size, t.seqs.length);
  assert.deepEqual(t.log.map((l) => l.seq), t.seqs);
});

test('fractional seqs de-duplicate too', () => {
  const t = createTask();
  const ev = (seq) => ({ v: 'events/v1', seq, ts: '2026-01-01T00:00:00.000Z', type: 'token_delta', data: { text: String(seq), channel: 'text', message: 'm' } });
  for (const s of ['5.1', '5.2', 6]) applyEvent(t, ev(s));
  assert.equal(applyEvent(t, ev('5.2')), 'duplicate');
  assert.equal(applyEvent(t, ev(6)), 'duplicate');
  assert.equal(applyEvent(t, ev('6.1')), 'applied');
  assert.equal(t.byId.get('text:m').text, '5.15.266.1');
});

test('the real bb-turn-tools task: calls, results, answer, exit settles everything', () => {
  const all = jsonLines('fixtures/golden/events/claude/bb-turn-tools.partial.events.jsonl');
  const t = createTask();
  for (const e of all) applyEvent(t, e);
  assert.equal(t.tools.order.length, 2);
  for (const id of t.tools.order) assert.equal(statusOf(t.tools, t.tools.byId.get(id)), 'completed');
  assert.equal(t.byId.get('text:msg_011CeF1eBzHRVBJPhBEiVUYS').text, '2');
  assert.equal(t.turns.length, 1);
  assert.equal(t.turns[0].end.ok, true);
  assert.equal(t.session, 'd8785ba1-3fa6-4606-b465-f13165cc441f');
  // the golden has no exit line: the task is still "live" until one arrives
  assert.equal(t.status, 'live');
  applyEvent(t, { v: 'events/v1', seq: 50, ts: '2026-01-01T00:00:00.000Z', type: 'exit', data: { rc: 0, ok: true } });
  assert.equal(t.status, 'exited');
});

test('a killed task: the open call is interrupted, a failed result stays failed with its size', () => {
  const t = createTask();
  const base = { v: 'events/v1', ts: '2026-01-01T00:00:00.000Z' };
  applyEvent(t, { ...base, seq: 1, type: 'tool_call', data: { id: 'a', name: 'Bash', args: { command: 'make' } } });
  applyEvent(t, { ...base, seq: 2, type: 'tool_result', data: { id: 'a', output: 'x'.repeat(65536), is_error: true, truncated: true, bytes: 70000, exit_code: 2 } });
  applyEvent(t, { ...base, seq: 3, type: 'tool_call', data: { id: 'b', name: 'Bash', args: { command: 'sleep 100' } } });
  assert.equal(statusOf(t.tools, t.tools.byId.get('b')), 'running');
  applyEvent(t, { ...base, seq: 4, type: 'exit', data: { rc: 143, ok: false, detail: 'killed' } });
  assert.equal(statusOf(t.tools, t.tools.byId.get('a')), 'failed');
  assert.equal(t.tools.byId.get('a').result.bytes, 70000);
  assert.equal(t.tools.byId.get('a').result.exitCode, 2);
  assert.equal(statusOf(t.tools, t.tools.byId.get('b')), 'interrupted');
  assert.deepEqual(t.exit, { rc: 143, ok: false, detail: 'killed' });
});

test('a stream that ends without an exit event settles open calls as interrupted', () => {
  const t = createTask();
  applyEvent(t, { v: 'events/v1', seq: 1, ts: '2026-01-01T00:00:00.000Z', type: 'tool_call', data: { id: 'a', name: 'Read', args: {} } });
  endWithoutExit(t, 'the task was halted');
  assert.equal(t.status, 'ended');
  assert.equal(statusOf(t.tools, t.tools.byId.get('a')), 'interrupted');
});

test('malformed records are counted and do not move the resume point', () => {
  const t = createTask();
  for (const r of [null, 'plain text', { type: 'token_delta' }, { seq: 'a.b', type: 'exit', data: {} }]) {
    assert.equal(applyEvent(t, r), 'malformed');
  }
  assert.equal(t.malformed, 4);
  assert.equal(t.lastSeq, null);
  assert.deepEqual(t.seqs, []);
  // a plain-text tool output is kept verbatim
  applyEvent(t, { v: 'events/v1', seq: 3, ts: '2026-01-01T00:00:00.000Z', type: 'tool_result', data: { id: 'z', output: 'not { json', is_error: false, truncated: false, bytes: 10 } });
  assert.equal(t.tools.byId.get('z').result.content, 'not { json');
  // non-fatal errors are warnings; a fatal one is kept as the task's failure
  applyEvent(t, { v: 'events/v1', seq: 4, ts: '2026-01-01T00:00:00.000Z', type: 'error', data: { reason: 'line 4 is not JSON', code: 'not_json', raw: 'oops', fatal: false } });
  assert.equal(t.fatal, null);
  assert.equal(t.warnings[0].code, 'not_json');
});
