import test from 'node:test';
import assert from 'node:assert/strict';
import {
  appendArgs, argPreview, createToolCards, endArgs, formattedArgs, formattedResult, resultMeta, setResult,
  settle, startCall, statusOf, truncationNote, wholeCall, byteLength,
} from '../app/state/toolcards.js';

test('streamed arguments: preparing until END, then parsed and previewed', () => {
  const m = createToolCards();
  startCall(m, { id: 'c1', name: 'Bash' });
  const pieces = ['{"comm', 'and": "ls -la /tm', 'p", "description": "list"', '}'];
  for (const p of pieces) {
    appendArgs(m, 'c1', p);
    assert.equal(statusOf(m, m.byId.get('c1')), 'preparing');
  }
  const c = m.byId.get('c1');
  assert.equal(c.argsText, pieces.join(''));
  assert.equal(formattedArgs(c).note, 'Arguments still streaming.');
  endArgs(m, 'c1');
  assert.equal(statusOf(m, c), 'running');
  assert.deepEqual(c.args, { command: 'ls -la /tmp', description: 'list' });
  assert.equal(argPreview(c), 'ls -la /tmp');
  assert.equal(formattedArgs(c).text, JSON.stringify({ command: 'ls -la /tmp', description: 'list' }, null, 2));
  // arguments after END are ignored
  const rev = c.rev;
  appendArgs(m, 'c1', 'junk');
  assert.equal(c.rev, rev);
});

test('malformed arguments are kept as text with a note, never thrown', () => {
  const m = createToolCards();
  startCall(m, { id: 'c', name: 'Edit' });
  appendArgs(m, 'c', '{"file_path": "/a", oops');
  endArgs(m, 'c');
  const c = m.byId.get('c');
  assert.equal(c.argsValid, false);
  const f = formattedArgs(c);
  assert.equal(f.json, false);
  assert.equal(f.text, '{"file_path": "/a", oops');
  assert.match(f.note, /not valid JSON/);
  assert.equal(argPreview(c), '{"file_path": "/a", oops');
});

test('results correlate by call id, whatever the order of calls and results', () => {
  const m = createToolCards();
  startCall(m, { id: 'a', name: 'Read' });
  startCall(m, { id: 'b', name: 'Bash' });
  endArgs(m, 'a');
  endArgs(m, 'b');
  setResult(m, 'b', { content: 'B out' });
  resultMeta(m, 'b', { isError: false, truncated: false, bytes: 5 });
  assert.equal(statusOf(m, m.byId.get('b')), 'completed');
  assert.equal(statusOf(m, m.byId.get('a')), 'running');
  setResult(m, 'a', { content: 'no such file' });
  resultMeta(m, 'a', { isError: true, truncated: false, bytes: 12, exitCode: 1 });
  assert.equal(statusOf(m, m.byId.get('a')), 'failed');
  assert.equal(m.byId.get('a').result.content, 'no such file');
  assert.equal(m.byId.get('a').result.exitCode, 1);
  assert.equal(m.byId.get('b').result.content, 'B out');
  // a result for a call never announced still gets its own card
  setResult(m, 'ghost', { content: 'x' });
  assert.deepEqual(m.order, ['a', 'b', 'ghost']);
});

test('terminal settlement: finished without a result is result-unavailable, not completed', () => {
  const m = createToolCards();
  wholeCall(m, { id: 'done', name: 'Bash', args: { command: 'true' } });
  wholeCall(m, { id: 'lost', name: 'Bash', args: { command: 'sleep 9' } });
  setResult(m, 'done', { content: '', isError: false });
  settle(m, 'finished');
  assert.equal(statusOf(m, m.byId.get('done')), 'completed');
  assert.equal(statusOf(m, m.byId.get('lost')), 'result-unavailable');

  const k = createToolCards();
  startCall(k, { id: 'x', name: 'Bash' });
  appendArgs(k, 'x', '{"command":');
  settle(k, 'interrupted');
  assert.equal(statusOf(k, k.byId.get('x')), 'interrupted');
});

test('settling bumps only the cards it changes', () => {
  const m = createToolCards();
  wholeCall(m, { id: 'ok', name: 'A', args: {} });
  setResult(m, 'ok', { content: 'fine', isError: false });
  wholeCall(m, { id: 'open', name: 'B', args: {} });
  const okRev = m.byId.get('ok').rev;
  const openRev = m.byId.get('open').rev;
  settle(m, 'finished');
  assert.equal(m.byId.get('ok').rev, okRev);
  assert.ok(m.byId.get('open').rev > openRev);
});

test('failure with truncation says so and gives the original size', () => {
  const m = createToolCards();
  wholeCall(m, { id: 't', name: 'Bash', args: { command: 'make' } });
  const kept = 'e'.repeat(65536);
  setResult(m, 't', { content: kept, isError: true, truncated: true, bytes: 100000 });
  const c = m.byId.get('t');
  assert.equal(statusOf(m, c), 'failed');
  assert.equal(truncationNote(c), 'Truncated: showing the first 64 KiB of 97.7 KiB (100000 bytes).');
  // an untruncated result has no note
  setResult(m, 'u', { content: 'short', isError: false, truncated: false, bytes: 5 });
  assert.equal(truncationNote(m.byId.get('u')), null);
});

test('JSON results are pretty-printed, plain text stays as it is, content parts are joined', () => {
  const m = createToolCards();
  setResult(m, 'j', { content: '{"a":[1,2]}' });
  assert.deepEqual(formattedResult(m.byId.get('j')), { text: '{\n  "a": [\n    1,\n    2\n  ]\n}', json: true });
  setResult(m, 'p', { content: 'line 1\n{not json' });
  assert.deepEqual(formattedResult(m.byId.get('p')), { text: 'line 1\n{not json', json: false });
  setResult(m, 'parts', { content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] });
  assert.equal(m.byId.get('parts').result.content, 'ab');
  assert.equal(byteLength('é€😀'), 2 + 3 + 4);
});
