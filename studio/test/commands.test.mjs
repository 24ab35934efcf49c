// postCommand (app/api.js): each click's command carries an idempotency
// key of its own, so a hub that retries it (or forwards a retry) runs it
// once (spec/CLUSTER.md, "Keys"); other requests carry none.
import test from 'node:test';
import assert from 'node:assert/strict';
import { postCommand, postJson } from '../app/api.js';

async function sent(fn, answers = []) {
  const seen = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    seen.push({ url, key: init.headers['Idempotency-Key'] ?? null, body: init.body });
    const a = answers.shift();
    if (a === 'down') throw new TypeError('fetch failed');
    return new Response('{"ok":true}', { status: a ?? 200 });
  };
  try {
    await fn();
  } finally {
    globalThis.fetch = realFetch;
  }
  return seen;
}

test('each command gets a key of its own; a given key is kept; plain posts get none', async () => {
  const seen = await sent(async () => {
    const a = await postCommand('/runs/r/tasks/t/steer', { msg: 'x' });
    assert.equal(a.status, 200);
    await postCommand('/runs/r/tasks/t/steer', { msg: 'x' });
    await postCommand('/runs/r/tasks/t/kill', undefined, { key: 'click-given' });
    await postJson('/agui', {});
  });
  assert.equal(seen.length, 4);
  assert.match(seen[0].key, /^click-[0-9a-f]{16}$/);
  assert.match(seen[1].key, /^click-[0-9a-f]{16}$/);
  assert.notEqual(seen[0].key, seen[1].key);
  assert.equal(seen[2].key, 'click-given');
  assert.equal(seen[3].key, null);
  assert.equal(seen[0].body, '{"msg":"x"}');
});

test('a command whose answer never came (or that was not run) is sent again under its key, once settled a new one', async () => {
  const seen = await sent(async () => {
    const a = await postCommand('/runs/r/tasks/t/steer', { msg: 'deploy' });
    assert.equal(a.status, null);
    await postCommand('/runs/r/tasks/t/steer', { msg: 'deploy' }); // 504: the node did not take it
    await postCommand('/runs/r/tasks/t/steer', { msg: 'other' }); // another command: its own key
    await postCommand('/runs/r/tasks/t/steer', { msg: 'deploy' }); // 200: settled
    await postCommand('/runs/r/tasks/t/steer', { msg: 'deploy' }); // a new click after that: a new key
  }, ['down', 504, 200, 200, 200]);
  assert.equal(seen.length, 5);
  assert.equal(seen[1].key, seen[0].key);
  assert.notEqual(seen[2].key, seen[0].key);
  assert.equal(seen[3].key, seen[0].key);
  assert.notEqual(seen[4].key, seen[0].key);
});
