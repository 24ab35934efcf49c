// A supervised run whose supervisor is gone (spec/LAYOUT.md, "Who runs a
// run"): not shown as plain running, and a feed event about it (a
// supervisor started again) drops the judgement GET /runs made.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mergeRunEvent, supervisorGone } from '../app/state/runs.js';

const why = 'its supervisor (pid 41) is gone: nothing runs it; start runwire-supervise on its plan again to continue';

test("a run still going whose supervisor is gone says so with the reason; a live or ended one does not", () => {
  const run = { runId: 'abc--p', slug: 'p', status: 'running', supervisor: 'gone', reason: why };
  assert.deepEqual(supervisorGone(run), { text: 'supervisor gone', why });
  for (const status of ['needs_input', 'paused', 'idle', 'registered']) assert.equal(supervisorGone({ ...run, status })?.text, 'supervisor gone', status);
  for (const status of ['done', 'failed', 'missing']) assert.equal(supervisorGone({ ...run, status }), null, status);
  assert.equal(supervisorGone({ ...run, supervisor: 'live', reason: null }), null);
  assert.equal(supervisorGone({ runId: 'r', status: 'running' }), null);
  // No reason given: a line of its own all the same.
  assert.match(supervisorGone({ ...run, reason: null }).why, /supervisor is gone: nothing runs it/);
  // A run runwire-serve records: its server was what ran it.
  const recorded = { runId: 'abc--agui-x', slug: 'agui-x', status: 'running', supervisor: 'gone', reason: 'its server (pid 9) is gone' };
  assert.deepEqual(supervisorGone(recorded), { text: 'server gone', why: 'its server (pid 9) is gone' });
  // A supervised run may have a slug like the server's: its reason says who ran it.
  assert.equal(supervisorGone({ ...run, slug: 'agui-migration', runId: 'abc--agui-migration' }).text, 'supervisor gone');
});

test("a feed event about the run drops the listing's judgement and its reason, and keeps the rest", () => {
  const listed = { runId: 'abc--p', slug: 'p', status: 'running', supervisor: 'gone', reason: why, node: undefined, costUsd: 1 };
  // A supervisor started again journals: the event carries the summary (reason null), not the judgement.
  const merged = mergeRunEvent(listed, { runId: 'abc--p', status: 'running', reason: null, wave: 1 });
  assert.equal('supervisor' in merged, false);
  assert.equal(supervisorGone(merged), null);
  assert.deepEqual([merged.status, merged.reason, merged.wave, merged.costUsd], ['running', null, 1, 1]);
  // A run first seen in the feed.
  assert.deepEqual(mergeRunEvent(undefined, { runId: 'n', status: 'running' }), { runId: 'n', status: 'running' });
});
