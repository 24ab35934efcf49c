// followFeed (app/api.js) against a scripted fetch, as stream.test.mjs
// checks followStream: resume after the last id got (Last-Event-ID), the
// `ready` frame after each (re)connect, a refused resume point, stop().
import test from 'node:test';
import assert from 'node:assert/strict';
import { sseResponse } from './helpers.mjs';
import { followFeed } from '../app/api.js';

function event(id, type = 'run_changed') {
  return `id: ${id}\ndata: ${JSON.stringify({ type, id, run: 'r' })}\n\n`;
}

function ready(id) {
  return `event: ready\nid: ${id}\ndata: {"type":"ready","id":${id}}\n\n`;
}


/** Follows the feed with `script` answering each fetch in turn; the last
 * answer is awaited (`until`) before the follower is stopped. */
async function follow(script, until) {
  const calls = [];
  const events = [];
  const readies = [];
  const states = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    calls.push({ url, lastEventId: init.headers['Last-Event-ID'] ?? null });
    const next = script.shift();
    return next ? next(init) : new Promise(() => {});
  };
  const handle = followFeed('?status=needs_input', {
    onEvent: (ev, id) => events.push([ev.type, id]),
    onReady: (id, first) => readies.push([id, first]),
    onState: (s) => states.push(s),
  });
  try {
    for (let i = 0; i < 400 && !until({ calls, events, readies, states }); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    handle.stop();
    await new Promise((r) => setTimeout(r, 20));
    globalThis.fetch = realFetch;
  }
  return { calls, events, readies, states, handle };
}

test('a dropped connection resumes after the last id got, and each connection says when it caught up', async () => {
  const f = await follow(
    [
      () => sseResponse(200, [event(3), ready(3), event(4)], 'broken'),
      () => sseResponse(200, [ready(4), event(5)], 'hang'),
    ],
    (s) => s.events.length === 3,
  );
  assert.deepEqual(f.calls.map((c) => [c.url, c.lastEventId]), [
    ['/runs/events?status=needs_input', null],
    ['/runs/events?status=needs_input', '4'],
  ]);
  assert.deepEqual(f.events, [['run_changed', '3'], ['run_changed', '4'], ['run_changed', '5']]);
  assert.deepEqual(f.readies, [['3', true], ['4', false]]);
  assert.equal(f.handle.lastId(), '5');
  assert.deepEqual(f.states.filter((s) => s.state === 'live').map((s) => s.connections), [1, 2]);
});

test('a refused resume point (the feed log was replaced) starts again from now; another refusal stops', async () => {
  const f = await follow(
    [
      () => sseResponse(200, [ready(7), event(8)], 'broken'),
      () => new Response('{"error":"Last-Event-ID 8 is past the end of the feed"}', { status: 400 }),
      () => sseResponse(200, [ready(2), event(3)], 'hang'),
    ],
    (s) => s.events.length === 2,
  );
  assert.deepEqual(f.calls.map((c) => c.lastEventId), [null, '8', null]);
  assert.deepEqual(f.readies, [['7', true], ['2', true]]);
  assert.ok(f.states.some((s) => s.state === 'failed' && s.detail.includes('past the end')));

  const g = await follow([() => new Response('{"error":"bad status filter"}', { status: 400 })], (s) =>
    s.states.some((x) => x.state === 'failed'),
  );
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(g.calls.length, 1, 'a refusal with nothing to resume is final');
  assert.deepEqual(g.states.at(-1), { state: 'failed', connections: 0, detail: 'bad status filter' });
});

test('stop() ends a live feed: no reconnect', async () => {
  const f = await follow([() => sseResponse(200, [ready(1), event(2)], 'hang')], (s) => s.events.length === 1);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(f.calls.length, 1);
  assert.equal(f.states.at(-1).state, 'live');
});
