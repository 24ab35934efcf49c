// followStream (app/api.js) against a scripted fetch: each call answers
// with a body that delivers SSE text, then ends, breaks or hangs. Checks
// the reconnect logic end to end with the events/v1 reducer.
import test from 'node:test';
import assert from 'node:assert/strict';
import { sseResponse } from './helpers.mjs';
import { followStream } from '../app/api.js';
import { applyEvent, createTask } from '../app/state/events.js';

function frame(seq, type = 'token_delta', data = { text: `t${seq}`, channel: 'text', message: 'm' }) {
  return `id: ${seq}\ndata: ${JSON.stringify({ v: 'events/v1', seq, ts: '2026-01-01T00:00:00.000Z', type, data })}\n\n`;
}


function follow(script) {
  const calls = [];
  const task = createTask();
  const states = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    calls.push({ url, lastEventId: init.headers['Last-Event-ID'] ?? null });
    const next = script.shift();
    if (!next) return new Promise(() => {});
    return next(init);
  };
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const restore = () => {
    globalThis.fetch = realFetch;
  };
  const handle = followStream('/runs/r/tasks/t/stream', {
    onEvent: (rec) => applyEvent(task, rec),
    onState: (s) => {
      states.push(s);
      if (s.state === 'ended' || s.state === 'failed') resolveDone();
    },
    isDone: () => task.status === 'exited',
    lastId: () => (task.lastSeq === null ? null : String(task.lastSeq)),
  });
  return {
    calls,
    task,
    states,
    done: done.finally(restore),
    restore,
    handle,
  };
}

test('a broken connection is resumed after the last applied seq; an overlap is not shown twice', async () => {
  const f = follow([
    () => sseResponse(200, [frame(1), frame(2), frame('2.1'), 'id: 3\ndata: {"v":"events/v1","seq":3,"ts":"2026-01-01T00:00:00.000Z","type":"token_delta","data":{"text":"t3","channel":"text","message":"m"}}\n'], 'broken'),
    // a server that (wrongly) restarts one event early, then the rest and the exit
    () => sseResponse(200, [frame('2.1'), frame(3), frame(4), frame(5, 'exit', { rc: 0, ok: true })]),
  ]);
  await f.done;
  // The first connection broke before frame 3's blank line: 3 was never delivered.
  assert.deepEqual(f.calls.map((c) => c.lastEventId), [null, '2.1']);
  assert.deepEqual(f.task.seqs, [1, 2, '2.1', 3, 4, 5]);
  assert.equal(f.task.duplicates, 1);
  assert.equal(f.task.status, 'exited');
  assert.equal(f.states.at(-1).state, 'ended');
  assert.equal(f.states.at(-1).connections, 2);
});

test('a server "error" frame (events dropped for a slow reader) makes it fetch them again at once', async () => {
  const f = follow([
    () => sseResponse(200, [frame(1), frame(2), 'event: error\ndata: {"code":"dropped","raw":"3..9"}\n\n', frame(10)]),
    () => sseResponse(200, [frame(3), frame(4), frame(5, 'exit', { rc: 1, ok: false })]),
  ]);
  await f.done;
  assert.deepEqual(f.calls.map((c) => c.lastEventId), [null, '2']);
  assert.deepEqual(f.task.seqs, [1, 2, 3, 4, 5]);
  assert.equal(f.task.exit.rc, 1);
});

test('404 (no log yet) waits and retries; a clean end without exit reconnects, then gives up on silence', async () => {
  const f = follow([
    () => new Response('{"error":"no log"}', { status: 404 }),
    () => sseResponse(200, [frame(1)]),
    () => sseResponse(200, []),
    () => sseResponse(200, []),
    () => sseResponse(200, []),
  ]);
  await f.done;
  assert.equal(f.calls.length, 5);
  assert.deepEqual(f.calls.map((c) => c.lastEventId), [null, null, '1', '1', '1']);
  assert.ok(f.states.some((s) => s.state === 'waiting'));
  const last = f.states.at(-1);
  assert.equal(last.state, 'ended');
  assert.equal(last.noExit, true);
});

test('a refusal other than 404 stops with the server reason; stop() ends a live stream', async () => {
  const f = follow([() => new Response('{"error":"bad run id"}', { status: 400 })]);
  await f.done;
  assert.deepEqual(f.states.at(-1), { state: 'failed', connections: 0, detail: 'bad run id' });

  const g = follow([() => sseResponse(200, [frame(1)], 'hang')]);
  await new Promise((r) => setTimeout(r, 50));
  g.handle.stop();
  await new Promise((r) => setTimeout(r, 150));
  g.restore();
  assert.deepEqual(g.task.seqs, [1]);
  assert.equal(g.calls.length, 1, 'no reconnect after stop()');
  assert.equal(g.states.at(-1).state, 'live');
});
