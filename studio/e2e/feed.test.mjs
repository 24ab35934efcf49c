// Browser tests of the studio's runs and run views on the change feed
// (GET /runs/events): the system Chromium against the real runwire-serve,
// runs made of fixture files whose journals the test appends to, as a
// runner would. The page is loaded through a TCP proxy that records every
// request and can cut every connection.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO, frames, guard, launchBrowser, removeTempDirs, startProxy, startServer, tempDir, waitFor } from './harness.mjs';

const FIXTURE = readFileSync(path.join(REPO, 'fixtures/feed/synthetic.needs-input.jsonl'), 'utf8').trim().split('\n');

let browser;
const servers = [];
const proxies = [];

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  for (const p of proxies) await p.close();
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

/** A run as a runner leaves it: pointer, runstate directory, a one-task plan, an empty journal. */
function makeRun(home, slug, repo) {
  const root = tempDir(`repo-${repo}`);
  const runstate = path.join(root, 'runstate');
  mkdirSync(runstate, { recursive: true });
  writeFileSync(path.join(runstate, `${slug}.plan.json`), JSON.stringify({ v: 'plan/v1', tasks: [{ id: 'a', adapter: 'claude', prompt: 'p' }] }));
  const runId = `0123456789ab--${slug}`;
  mkdirSync(path.join(home, 'runs'), { recursive: true });
  const pointer = { runId, slug, repoRoot: root, project: repo, repo, branch: 'main', worktree: root, runstateDir: runstate, created: '2026-03-01T10:00:00.000Z' };
  writeFileSync(path.join(home, 'runs', `${runId}.json`), JSON.stringify(pointer));
  const journal = path.join(runstate, `${slug}.jsonl`);
  return { runId, slug, journal, append: (line) => appendFileSync(journal, `${line}\n`) };
}

/** A server behind a proxy whose origin it allows. */
async function serverBehindProxy(home) {
  const proxy = await startProxy();
  proxies.push(proxy);
  const s = await startServer({ home, args: ['--allow-origin', proxy.url] });
  servers.push(s);
  proxy.setTarget(s.port);
  return { s, proxy };
}

/**
 * A page whose Notification API is a recorder (headless Chromium shows
 * none): permission granted, each notification kept in window.__notes.
 */
async function pageWithNotifications() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript(() => {
    window.__notes = [];
    class RecordedNotification {
      constructor(title, options = {}) {
        this.title = title;
        this.body = options.body;
        this.tag = options.tag;
        window.__notes.push({ title, body: options.body, tag: options.tag });
      }
      close() {}
    }
    RecordedNotification.permission = 'default';
    RecordedNotification.requestPermission = async () => {
      RecordedNotification.permission = 'granted';
      return 'granted';
    };
    window.Notification = RecordedNotification;
  });
  const p = await context.newPage();
  const requests = [];
  p.on('request', (r) => requests.push({ at: Date.now(), method: r.method(), url: new URL(r.url()).pathname + new URL(r.url()).search }));
  return { p, g: guard(p), context, requests };
}

const rowOf = (p, runId) => p.locator(`tr[data-run-id="${runId}"]`);

describe('the studio follows the change feed', () => {
  test('runs view: a state change reaches the page, needs-you first, notifications, no periodic requests', async () => {
    const home = tempDir('feed-home');
    const a = makeRun(home, 'feed-a', 'alpha');
    const b = makeRun(home, 'feed-b', 'beta');
    const { s } = await serverBehindProxy(home);
    const { p, g, context, requests } = await pageWithNotifications();
    await p.goto(`${s.url}/#/runs`);
    await rowOf(p, a.runId).waitFor();
    await rowOf(p, b.runId).waitFor();
    await p.waitForSelector('.view-runs[data-feed="live"]');
    assert.equal(await rowOf(p, a.runId).getAttribute('data-status'), 'registered');

    // A runner's journal line reaches the page: the row's status changes.
    a.append(FIXTURE[0]);
    a.append(FIXTURE[1]);
    await waitFor(async () => (await rowOf(p, a.runId).getAttribute('data-status')) === 'running', { what: 'run a running' });
    assert.equal(await rowOf(p, a.runId).locator('.badge').textContent(), 'running');
    assert.match((await rowOf(p, a.runId).locator('td').allTextContents()).join('|'), /leased 1/);
    // b changes after a: the most recent change is on top.
    b.append(FIXTURE[1]);
    await waitFor(async () => (await p.locator('tr[data-run-id]').first().getAttribute('data-run-id')) === b.runId, { what: 'b on top' });

    // The person allows notifications.
    await p.check('.notify-switch');
    assert.equal(await p.evaluate(() => Notification.permission), 'granted');

    // a waits for a person: it comes first, marked, and a notification says so.
    a.append(FIXTURE[2]);
    await waitFor(async () => (await rowOf(p, a.runId).getAttribute('data-status')) === 'needs_input', { what: 'run a needs input' });
    assert.equal(await p.locator('tr[data-run-id]').first().getAttribute('data-run-id'), a.runId, 'the run that needs you is first');
    assert.equal(await rowOf(p, a.runId).getAttribute('class'), 'needs-you');
    assert.equal(await rowOf(p, a.runId).locator('.badge').textContent(), 'needs input');
    assert.match(await p.textContent('.view-runs .view-status'), /1 needs you/);
    await waitFor(async () => (await p.evaluate(() => window.__notes.length)) === 1, { what: 'a notification' });
    const note = (await p.evaluate(() => window.__notes))[0];
    assert.equal(note.title, 'feed-a needs you');
    assert.match(note.body, /task a · tool approval · Bash · rm -rf build\//);
    // b changes again, but a still needs you: a stays first.
    b.append(FIXTURE[6]);
    await waitFor(async () => (await rowOf(p, b.runId).getAttribute('data-status')) === 'done', { what: 'run b done' });
    assert.equal(await p.locator('tr[data-run-id]').first().getAttribute('data-run-id'), a.runId);

    // Answered, then ended: no longer marked; a notification for the end.
    a.append(FIXTURE[3]);
    await waitFor(async () => (await rowOf(p, a.runId).getAttribute('data-status')) === 'running', { what: 'run a answered' });
    assert.equal(await rowOf(p, a.runId).getAttribute('class'), '');
    a.append(FIXTURE[6]);
    await waitFor(async () => (await rowOf(p, a.runId).getAttribute('data-status')) === 'done', { what: 'run a done' });
    const notes = await p.evaluate(() => window.__notes.map((n) => n.title));
    assert.deepEqual(notes, ['feed-a needs you', 'feed-b finished', 'feed-a finished']);

    // No periodic requests while the view is open: after the page loaded, one GET /runs and one
    // feed connection, however many changes came and however long it stays open.
    await new Promise((r) => setTimeout(r, 5000));
    const api = requests.filter((r) => r.url.startsWith('/runs') || r.url.startsWith('/api/'));
    assert.deepEqual(api.map((r) => `${r.method} ${r.url}`).sort(), ['GET /api/info', 'GET /runs', 'GET /runs/events'], JSON.stringify(api));
    g.check();
    await context.close();
  });

  test('a dropped feed connection resumes with Last-Event-ID, without a gap or a duplicate', async () => {
    const home = tempDir('feed-drop');
    const a = makeRun(home, 'drop-a', 'alpha');
    const { s, proxy } = await serverBehindProxy(home);
    const { p, g, context } = await pageWithNotifications();
    await p.goto(`${proxy.url}/#/runs`);
    await rowOf(p, a.runId).waitFor();
    await p.waitForSelector('.view-runs[data-feed="live"]');
    a.append(FIXTURE[0]);
    a.append(FIXTURE[1]);
    // Both events in (the first alone already shows the run running).
    await waitFor(async () => /leased 1/.test((await rowOf(p, a.runId).locator('td').allTextContents()).join('|')), { what: 'task a leased before the cut' });
    g.allow(/net::ERR_/);
    const cut = proxy.drop();
    assert.ok(cut >= 1, 'the feed connection was cut');
    // Changes while the page is disconnected.
    a.append(FIXTURE[2]);
    a.append(FIXTURE[3]);
    a.append(FIXTURE[6]);
    await waitFor(async () => (await rowOf(p, a.runId).getAttribute('data-status')) === 'done', { timeout: 20000, what: 'the page to catch up after the cut' });
    await waitFor(async () => Number(await p.locator('.view-runs').getAttribute('data-feed-connections')) >= 2, { what: 'a second feed connection' });
    // The reconnect asked for exactly what followed the last event the page had.
    const feedReqs = proxy.requests.filter((r) => /^GET \/runs\/events /.test(r));
    assert.ok(feedReqs.length >= 2, `${feedReqs.length} feed request(s)`);
    assert.doesNotMatch(feedReqs[0], /last-event-id/i);
    const resumed = /\r\nlast-event-id: *([^\r\n]+)/i.exec(feedReqs[1]);
    assert.ok(resumed, `the reconnect carries Last-Event-ID:\n${feedReqs[1]}`);
    // The server's feed from the start: the page's resume point is the id of the last event before the cut.
    const whole = await readFeed(s.url, 0, 5);
    const before = whole.filter((e) => e.record === 'started' || e.state === 'leased');
    assert.equal(resumed[1], String(before.at(-1).id), `resumed after the last event received before the cut: ${resumed[1]} ${JSON.stringify(whole.map((e) => [e.id, e.type]))}`);
    // Nothing missed: every event after the resume point reached the page (the row ended done,
    // having passed needs_input, which only the events in between carry).
    const afterIds = whole.filter((e) => e.id > Number(resumed[1])).map((e) => e.type);
    assert.deepEqual(afterIds, ['needs_input', 'input_answered', 'ended']);
    g.check();
    await context.close();
  });

  test('run view: the run\'s facts follow the feed, no periodic requests', async () => {
    const home = tempDir('feed-run');
    const a = makeRun(home, 'view-a', 'alpha');
    const { s } = await serverBehindProxy(home);
    const { p, g, context, requests } = await pageWithNotifications();
    await p.goto(`${s.url}/#/runs/${encodeURIComponent(a.runId)}`);
    const task = p.locator('li.task[data-task-id="a"]');
    await task.waitFor();
    await p.waitForSelector('.view-run[data-feed="live"]');
    assert.equal(await task.getAttribute('data-state'), 'pending');
    a.append(FIXTURE[1]);
    await waitFor(async () => (await task.getAttribute('data-state')) === 'leased', { what: 'task a leased on the page' });
    a.append(FIXTURE[2]);
    const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
    await waitFor(async () => /Statusneeds input/.test(await facts.textContent()), { what: 'the run shown as needing input' });
    a.append(FIXTURE[3]);
    a.append(FIXTURE[6]);
    await waitFor(async () => (await task.getAttribute('data-state')) === 'committed', { what: 'task a committed on the page' });
    await waitFor(async () => /Statusdone/.test(await facts.textContent()), { what: 'the run shown done' });
    // The two appends are two feed events, so a refresh may still be on its
    // way when the page first shows done: count once the requests settled.
    const runFetches = () => requests.filter((r) => r.url === `/runs/${encodeURIComponent(a.runId)}`).length;
    let fetched = runFetches();
    for (let i = 0, quiet = 0; quiet < 10 && i < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const n = runFetches();
      quiet = n === fetched ? quiet + 1 : 0;
      fetched = n;
    }
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(runFetches(), fetched, 'no request while nothing changes');
    assert.equal(requests.filter((r) => r.url.startsWith('/runs/events')).length, 1, 'one feed connection');
    g.check();
    await context.close();
  });
});

/** The server's feed from `since`, `n` events (read from node, the reference). */
async function readFeed(base, since, n) {
  const ctrl = new AbortController();
  const res = await fetch(`${base}/runs/events?since=${since}`, { signal: ctrl.signal });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const out = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    const fs = frames(text.slice(0, text.lastIndexOf('\n\n') + 2));
    if (fs.some((f) => f.event === 'ready')) {
      for (const f of fs) if (f.event === 'message') out.push(JSON.parse(f.data));
      break;
    }
  }
  ctrl.abort();
  assert.ok(out.length >= n, `the server's feed holds ${out.length} events`);
  return out;
}
