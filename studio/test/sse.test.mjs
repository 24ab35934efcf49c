import test from 'node:test';
import assert from 'node:assert/strict';
import { SseParser, parseSse } from '../app/state/sse.js';

test('frames split at any byte boundary give the same events', () => {
  const body = 'id: 1\ndata: {"a":1}\n\n: keep-alive\n\nevent: error\ndata: x\ndata: y\n\nid: 2.1\r\ndata: z\r\n\r\n';
  const whole = parseSse(body);
  assert.deepEqual(whole.map((e) => [e.event, e.data, e.id, e.hasId]), [
    ['message', '{"a":1}', '1', true],
    ['error', 'x\ny', '1', false],
    ['message', 'z', '2.1', true],
  ]);
  for (let step = 1; step <= 7; step++) {
    const p = new SseParser();
    const got = [];
    for (let i = 0; i < body.length; i += step) got.push(...p.feed(body.slice(i, i + step)));
    assert.deepEqual(got, whole, `chunk size ${step}`);
    assert.equal(p.lastEventId, '2.1');
  }
});

test('an event without its blank line is not dispatched; retry is read', () => {
  const p = new SseParser();
  assert.deepEqual(p.feed('retry: 1500\nid: 7\ndata: half'), []);
  assert.equal(p.retry, 1500);
  assert.deepEqual(p.end(), []);
  assert.equal(p.lastEventId, '7');
});
