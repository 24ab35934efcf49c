// A supervised run whose supervisor is gone (spec/LAYOUT.md, "Who runs a
// run"): not shown as plain running, and a feed event about it (a
// supervisor started again) drops the judgement GET /runs made.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mergeRunEvent, runOfEvent, supervisorGone } from '../app/state/runs.js';

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

test("a run still going whose supervisor is stopped says so, with the reason; once it runs again it does not", () => {
  const stopped = 'its supervisor (pid 41) is stopped (SIGSTOP, or Ctrl-Z in its terminal): it takes no command and runs nothing on until it continues (kill -CONT 41, or fg)';
  const run = { runId: 'abc--p', slug: 'p', status: 'running', supervisor: 'stopped', reason: stopped };
  assert.deepEqual(supervisorGone(run), { text: 'supervisor stopped', why: stopped });
  assert.equal(supervisorGone({ ...run, status: 'done' }), null);
  assert.match(supervisorGone({ ...run, reason: null }).why, /supervisor is stopped: it takes no command/);
  assert.equal(supervisorGone({ ...run, supervisor: 'live', reason: null }), null);
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

test("the feed's supervisor-gone event shows the badge on an open list, and the next started drops it", () => {
  // A row GET /runs gave while the supervisor ran.
  const listed = { runId: 'abc--p', slug: 'p', status: 'running', supervisor: 'live', reason: null, costUsd: 1 };
  // runwire-serve journals the death: the event's summary says who runs the run.
  const gone = { id: 900, type: 'run', record: 'supervisor-gone', actor: 'runwire-serve', detail: why, ts: '2026-01-01T00:00:05.000Z',
    runId: 'abc--p', slug: 'p', status: 'running', previous: 'running', supervisor: 'gone', reason: why, costUsd: 1 };
  const row = mergeRunEvent(listed, runOfEvent(gone));
  assert.deepEqual(supervisorGone(row), { text: 'supervisor gone', why });
  assert.equal(row.status, 'running');
  assert.equal(row.activityMs, Date.parse(gone.ts));
  assert.equal('record' in row || 'detail' in row || 'previous' in row, false, 'only the summary is kept');
  // A supervisor started again on the plan: its record's summary has no supervisor field.
  const started = { id: 960, type: 'run', record: 'started', actor: 'runwire-supervise', detail: 'restarted', ts: '2026-01-01T00:00:09.000Z',
    runId: 'abc--p', slug: 'p', status: 'running', previous: 'running', reason: null, costUsd: 1 };
  const back = mergeRunEvent(row, runOfEvent(started));
  assert.equal(supervisorGone(back), null);
  assert.equal('supervisor' in back, false);
  assert.equal(back.reason, null);
  // A paused run whose supervisor died stays paused, with the badge.
  assert.equal(supervisorGone(mergeRunEvent({ ...listed, status: 'paused' }, runOfEvent({ ...gone, status: 'paused', previous: 'paused' })))?.text, 'supervisor gone');
});
