// Browser tests of the studio: the system Chromium (headless, through
// playwright-core) against the real runwire-serve with the stub engines,
// over real sockets. Any console error or page error fails the test that
// caused it, except the network errors a test declares it expects.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)
//   RUNWIRE_SUPERVISE=path/to/runwire-supervise  (default: beside RUNWIRE_SERVE)
//   STUDIO_SCREENSHOTS=dir  keeps the screenshots there (else a temp dir)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync, existsSync, appendFileSync } from 'node:fs';
import path from 'node:path';
import { ANSWER, BIG_OUTPUT_BYTES, HANG_TEXT, REASONING, TOOL_ID, failedToolCorpus, hangCorpus } from './corpus.mjs';
import { REPO, alive, frames, groupAlive, guard, launchBrowser, postRun, removeTempDirs, startProxy, startServer, startSupervisor, tempDir, waitFor } from './harness.mjs';

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

let browser;
let work;
let corpus;
let shots;
const servers = [];
const supervisors = [];

async function server(opts) {
  const s = await startServer(opts);
  servers.push(s);
  return s;
}

async function page(viewport = DESKTOP) {
  const context = await browser.newContext({ viewport });
  const p = await context.newPage();
  const g = guard(p);
  return { p, g, context };
}

/** The seqs a task stream holds, read from node straight off the server (the reference). */
async function serverSeqs(base, runId, task = 'agent') {
  const res = await fetch(`${base}/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(task)}/stream`);
  assert.equal(res.status, 200);
  return frames(await res.text()).filter((f) => f.event === 'message').map((f) => f.id);
}

async function runsList(base) {
  const res = await fetch(`${base}/runs`);
  return (await res.json()).runs;
}

async function chatRun(p, prompt) {
  await p.fill('#chat-prompt', prompt);
  await p.press('#chat-prompt', 'Control+Enter');
  await p.waitForSelector('.run-status[data-status="finished"], .run-status[data-status="error"]', { timeout: 30000 });
  // The terminal event renders before the server closes the stream; the view is idle
  // again (prompt enabled, history updated) only once the stream has ended.
  await p.waitForSelector('.view-chat button[type="submit"]:enabled', { timeout: 10000 });
  return p.locator('.exchange').last().getAttribute('data-run-id');
}

async function noHorizontalOverflow(p, what) {
  const m = await p.evaluate(() => ({ sw: document.scrollingElement.scrollWidth, iw: window.innerWidth }));
  assert.ok(m.sw <= m.iw, `${what}: the document is ${m.sw}px wide in a ${m.iw}px viewport`);
}

/**
 * A server and a runwire-supervise run of `tasks` on one HARNESS_HOME, its
 * first task `a` hanging for real: the stub engine and its child wrote their
 * pids, the session id and process group are known, the control socket named.
 */
async function hangingRun(tasks, args = []) {
  const home = tempDir('sup-home');
  const s = await server({ home });
  const hang = path.join(tempDir('hang'), 'hang.claude.jsonl');
  writeFileSync(hang, hangCorpus());
  // hang: the engine prints the corpus's first two lines (init, a message) and waits until killed.
  const sup = startSupervisor({ home, plan: { v: 'plan/v1', tasks }, env: { STUB_MODE: 'hang', STUB_STREAM: hang }, args });
  supervisors.push(sup);
  const slow = { timeout: 60000, interval: 100 };
  const why = () => `supervisor: ${JSON.stringify(sup.exit())} ${sup.stderr()}`;
  const entry = await waitFor(() => {
    if (sup.exit()) throw new Error(`the supervisor exited early: ${why()}`);
    const e = sup.live()?.tasks?.a;
    return sup.stubPids().length >= 2 && typeof e?.session_id === 'string' && typeof e?.pgid === 'number' && typeof sup.live()?.sock === 'string' && e;
  }, { ...slow, what: 'task a hanging with a session id' });
  return { home, s, sup, slow, why, entry };
}

before(async () => {
  browser = await launchBrowser();
  work = tempDir('e2e');
  corpus = path.join(work, 'failed-tool.claude.jsonl');
  writeFileSync(corpus, failedToolCorpus());
  shots = process.env.STUDIO_SCREENSHOTS || path.join(work, 'screenshots');
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  for (const s of supervisors) await s.stop();
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  // Screenshots outlive the run only in a directory the caller named.
  if (process.env.STUDIO_SCREENSHOTS) console.log(`# screenshots in ${shots}`);
  removeTempDirs();
});

describe('studio in Chromium against runwire-serve', () => {
  let chatServer;
  let chatRunId;

  test('chat: streamed text, reasoning collapsed, a failed and truncated tool card driven by keyboard', async () => {
    chatServer = await server({ args: ['--agent', 'claude'], env: { STUB_STREAM: corpus, STUB_DELAY: '0.04' } });
    const { p, g, context } = await page();
    await p.goto(`${chatServer.url}/#/chat`);
    await p.waitForSelector('#chat-prompt');
    // Sample the assistant's text as it grows, inside the page.
    await p.evaluate(() => {
      window.__samples = [];
      const t = setInterval(() => {
        const nodes = [...document.querySelectorAll('.exchange .assistant-text')];
        window.__samples.push(nodes.map((n) => n.textContent).join('|'));
        const st = document.querySelector('.run-status');
        if (st && (st.dataset.status === 'finished' || st.dataset.status === 'error')) clearInterval(t);
      }, 10);
    });
    await p.fill('#chat-prompt', 'fix the build');
    await p.press('#chat-prompt', 'Control+Enter');

    // The tool card settles (failed) while the answer is still to come: from then on it must not change.
    const card = p.locator('.tool');
    await p.waitForSelector('.tool[data-status="failed"]', { timeout: 20000 });
    const atSettle = await p.evaluate(() => {
      const el = document.querySelector('.tool');
      window.__cardMutations = 0;
      new MutationObserver((list) => {
        window.__cardMutations += list.length;
      }).observe(el, { subtree: true, childList: true, attributes: true, characterData: true });
      const answer = [...document.querySelectorAll('.assistant-text')].map((n) => n.textContent).join('');
      return { renders: el.dataset.renders, answerLength: answer.length };
    });
    await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 20000 });
    const status = await p.textContent('.run-status');
    assert.match(status, /^Finished · 1 tool call · \$0\.0421 · 110 tokens\.$/);
    chatRunId = await p.locator('.exchange').getAttribute('data-run-id');

    // Streamed: the answer was seen at several partial lengths before it was whole.
    const samples = await p.evaluate(() => window.__samples);
    const answers = [...new Set(samples.map((s) => s.split('|')[1] || ''))].filter((s) => s !== '');
    assert.ok(answers.length >= 3, `the answer arrived in ${answers.length} visible step(s): ${JSON.stringify(answers)}`);
    for (const partial of answers) assert.ok(ANSWER.startsWith(partial), `partial text ${JSON.stringify(partial)}`);
    assert.equal(answers[answers.length - 1], ANSWER);
    const texts = await p.locator('.exchange .assistant-text').allTextContents();
    assert.deepEqual(texts, ['Let me run the build to see the error.', ANSWER]);

    // The settled card was not touched while the answer streamed.
    assert.ok(atSettle.answerLength < ANSWER.length + 'Let me run the build to see the error.'.length, 'the answer was still streaming when the card settled');
    assert.equal(await p.evaluate(() => window.__cardMutations), 0, 'the settled tool card was mutated by text deltas');
    assert.equal(await card.getAttribute('data-renders'), atSettle.renders);

    // Reasoning: collapsed by default, holds the streamed reasoning.
    const reasoning = p.locator('details.reasoning');
    assert.equal(await reasoning.count(), 1);
    assert.equal(await reasoning.evaluate((d) => d.open), false);
    assert.equal(await reasoning.locator('.reasoning-text').textContent(), REASONING);

    // The card, by keyboard only.
    const toggle = card.locator('button.tool-toggle');
    const body = card.locator('.tool-body');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
    assert.equal(await body.isVisible(), false);
    assert.match(await toggle.textContent(), /Bash\s*make -j4 all\s*failed/);
    await toggle.focus();
    await p.keyboard.press('Enter');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    assert.equal(await body.isVisible(), true);
    assert.equal(await p.evaluate(() => document.activeElement.classList.contains('tool-toggle')), true);
    assert.equal(await toggle.getAttribute('aria-controls'), await body.getAttribute('id'));
    // details: call id (namespaced by the run), formatted arguments, the result and its truncation
    assert.equal(await card.locator('.tool-id').textContent(), `${chatRunId}:t:${TOOL_ID}`);
    assert.equal(await card.locator('.tool-args').textContent(), JSON.stringify({ command: 'make -j4 all', description: 'Build everything' }, null, 2));
    const kib = (BIG_OUTPUT_BYTES / 1024).toFixed(1);
    assert.equal(await card.locator('.note.truncated').textContent(), `Truncated: showing the first 64 KiB of ${kib} KiB (${BIG_OUTPUT_BYTES} bytes).`);
    const result = await card.locator('.tool-result').textContent();
    assert.equal(result.length, 65536, 'the result shows the 64 KiB the normalizer kept');
    assert.ok(result.startsWith('make: *** [Makefile:12: all] Error 2\nld: cannot find -lfoo\n'));
    assert.match(await card.locator('.tool-detail').textContent(), /reported an error/);
    assert.equal(await card.locator('.badge').textContent(), 'failed');
    await p.keyboard.press('Space');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
    assert.equal(await body.isVisible(), false);
    await p.keyboard.press(' ');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    await noHorizontalOverflow(p, 'chat, desktop, card open');
    g.check();
    await context.close();
  });

  test('runs view lists the run, stays current, and opens its plan and task', async () => {
    assert.ok(chatRunId, 'needs the chat run');
    const { p, g, context } = await page();
    await p.goto(`${chatServer.url}/#/runs`);
    // The server journals the run's end just after its stream's last chunk: poll, never race it.
    const listed = await waitFor(
      async () => (await runsList(chatServer.url)).find((r) => r.slug === `agui-${chatRunId}` && r.status === 'done'),
      { what: 'the server to list the chat run as done' },
    );
    const row = p.locator(`tr[data-run-id="${listed.runId}"]`);
    await row.waitFor();
    assert.equal(await row.locator('th a').textContent(), listed.slug);
    await waitFor(async () => (await row.locator('.badge').textContent()) === 'done', { what: 'the page to show the run as done' });
    const cells = await row.locator('td').allTextContents();
    // The age of its latest activity, with the local time as the tooltip.
    assert.match(cells.splice(1, 1)[0], /^(just now|\d+ s ago)$/);
    const local = await p.evaluate((ms) => new Date(ms).toLocaleString(), listed.activityMs);
    assert.equal(await row.locator('td.age time').getAttribute('title'), `last activity ${local}`);
    assert.equal(cells.join('|'), `${listed.status}||committed 1|$0.0421|20 in / 90 out|runwire-serve|`);

    // Kept current: a run started elsewhere appears without a reload.
    const before = await p.locator('tr[data-run-id]').count();
    await postRun(chatServer.url, { threadId: 'elsewhere', runId: 'r-elsewhere', prompt: 'hi' });
    await p.locator('tr[data-run-id$="--agui-r-elsewhere"]').waitFor({ timeout: 10000 });
    assert.equal(await p.locator('tr[data-run-id]').count(), before + 1);

    // Into the run: its plan (one wave, task "agent", committed), then the task's stream.
    await row.locator('th a').click();
    const task = p.locator('li.task[data-task-id="agent"]');
    await task.waitFor();
    assert.equal(await task.getAttribute('data-state'), 'committed');
    assert.equal(await p.locator('.wave h3').allTextContents().then((a) => a.join()), 'Wave 1');
    await task.locator('a').click();
    await p.waitForSelector('.stream-state[data-state="exited"]', { timeout: 15000 });
    const seqs = await p.locator('table.events tr[data-seq]').evaluateAll((rows) => rows.map((r) => r.dataset.seq));
    assert.deepEqual(seqs, await serverSeqs(chatServer.url, listed.runId));
    assert.equal(await p.locator('.tool').getAttribute('data-status'), 'failed');
    assert.match(await p.textContent('.stream-state'), /^Agent exited with status 0/);
    g.check();
    await context.close();
  });

  test('a live run\'s controls show the server answer (409 with its reason, 202 from a steer inbox); once it ends, none and why', async () => {
    // A run the server holds open (the engine hangs) and no supervisor: live, but not controllable.
    const hang = path.join(tempDir('live'), 'hang.claude.jsonl');
    writeFileSync(hang, hangCorpus());
    const s = await server({ args: ['--agent', 'claude'], env: { STUB_MODE: 'hang', STUB_STREAM: hang } });
    const client = new AbortController();
    const held = fetch(`${s.url}/agui`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ threadId: 'held', runId: 'r-held', messages: [{ id: 'm1', role: 'user', content: 'go' }] }),
      signal: client.signal,
    }).then((r) => r.text()).catch(() => null);
    const run = await waitFor(async () => (await runsList(s.url)).find((r) => r.slug === 'agui-r-held' && r.status === 'running'), { what: 'the held run to be running' });
    const { p, g, context } = await page();
    g.allow(/Failed to load resource: the server responded with a status of 409/);
    await p.goto(`${s.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/agent`);
    await p.waitForSelector('.stream-state[data-state="live"]', { timeout: 30000 });
    const answer = p.locator('.panel .answer').nth(1);
    // Kill asks for a second press before it sends anything.
    await p.click('button:has-text("Kill task")');
    assert.match(await answer.textContent(), /press “Confirm kill”/);
    assert.equal(await answer.getAttribute('data-http-status'), null);
    await p.click('button:has-text("Confirm kill")');
    await waitFor(async () => (await answer.getAttribute('data-http-status')) === '409', { what: 'the kill answer' });
    assert.equal(await answer.textContent(), 'Kill: 409 Conflict: run not supervised / not live');
    // A run the server records has no supervisor: no Pause or Resume to
    // offer (they could only answer 409), and it says so.
    const runSlot = p.locator('section[aria-labelledby="run-sum-h"] .control-slot[data-live="recorded"]');
    await runSlot.waitFor({ timeout: 15000 });
    assert.match(await runSlot.textContent(), /^A run runwire-serve records: no supervisor to pause or resume\./);
    assert.equal(await p.locator('button:has-text("Pause run")').count(), 0);

    // A steer inbox beside the journal takes the message (202) and the line lands in it.
    const inbox = path.join(s.home, 'serve', 'runstate', `${run.slug}.steer.jsonl`);
    assert.ok(existsSync(path.dirname(inbox)));
    appendFileSync(inbox, '');
    await p.fill('#steer-msg', 'also handle empty input');
    await p.check('#steer-interrupt');
    await p.click('button:has-text("Send steer")');
    await waitFor(async () => ['202', '200'].includes(await answer.getAttribute('data-http-status')), { what: 'the steer answer' });
    assert.match(await answer.textContent(), /^Steer: 20[02] (Accepted|OK): /);
    const lines = readFileSync(inbox, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.length, 1);
    assert.equal(JSON.stringify(lines[0]).includes('also handle empty input'), true);
    // The accepted message leaves the box, so a second press cannot send it twice.
    await waitFor(async () => (await p.inputValue('#steer-msg')) === '', { what: 'the steer box to empty' });

    // The client goes: the server halts the run. The page drops every live control and says why.
    client.abort();
    await held;
    const ended = await waitFor(async () => (await runsList(s.url)).find((r) => r.runId === run.runId && r.status === 'failed'), { what: 'the run to end failed' });
    assert.match(ended.reason, /^agent halted/, JSON.stringify(ended));
    await p.waitForSelector('section[aria-labelledby="run-sum-h"] .control-slot[data-live="false"]', { timeout: 15000 });
    await p.waitForSelector('section[aria-labelledby="task-h"] .control-slot[data-live="false"]', { state: 'attached', timeout: 15000 }); // empty: the run's line says it is over
    for (const name of ['Pause run', 'Resume run', 'Stop turn', 'Kill task', 'Send steer']) {
      assert.equal(await p.locator(`button:has-text("${name}")`).count(), 0, `no “${name}” on a finished run`);
    }
    assert.equal(await p.locator('#steer-msg').count(), 0);
    assert.equal(await p.locator('section[aria-labelledby="run-sum-h"] .over').textContent(), 'This run is over: nothing to pause or resume.');
    const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
    await waitFor(async () => (await facts.textContent()).includes(`Reason${ended.reason}`), { what: 'the run\'s reason on the page' });
    // In the runs list, the failed run's badge carries the reason too.
    await p.goto(`${s.url}/#/runs`);
    const badge = p.locator(`tr[data-run-id="${run.runId}"] .badge`);
    await badge.waitFor();
    await waitFor(async () => (await badge.getAttribute('title')) === ended.reason, { what: 'the reason on the run\'s badge' });
    g.check();
    await context.close();
  });

  test('a real runwire-supervise run: pause, resume, steer and kill from the page; the group is gone, the kill journaled', async () => {
    // One server and one supervisor under the same HARNESS_HOME: the server reaches
    // the supervisor through the control socket the run's liveness names.
    const { s, sup, slow, why, entry } = await hangingRun(
      [{ id: 'a', adapter: 'claude', prompt: 'work on it' }, { id: 'b', adapter: 'claude', prompt: 'then this', deps: ['a'] }],
      // Ample time for the wrapper to stop its engine on SIGTERM (it gets half), even on a loaded machine.
      ['--kill-grace', '20'],
    );
    const pgid = entry.pgid;
    const stubs = sup.stubPids();
    assert.ok(groupAlive(pgid), `task a's process group ${pgid} is alive`);
    assert.ok(stubs.every(alive), `the stub engine and its child are alive: ${stubs}`);
    const run = await waitFor(async () => (await runsList(s.url)).find((r) => r.slug === 'sup'), { ...slow, what: 'the run to be listed' });

    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/a`);
    const stream = p.locator('.stream-state');
    await p.waitForSelector('.stream-state[data-state="live"]', { timeout: 30000 });
    await p.waitForSelector('li.task[data-task-id="a"][data-state="leased"]', { timeout: 30000 });
    // What the hanging engine printed is shown, live.
    await waitFor(async () => (await p.locator('.transcript').textContent()).includes(HANG_TEXT), { ...slow, what: 'the task\'s message in the transcript' });
    const seqsBefore = await p.locator('table.events tr[data-seq]').evaluateAll((rows) => rows.map((r) => r.dataset.seq));
    const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
    const runAnswer = p.locator('.panel .answer').first();
    const taskAnswer = p.locator('.panel .answer').nth(1);
    const answered = async (loc, what) => {
      await waitFor(async () => !['', null].includes(await loc.getAttribute('data-http-status')), { ...slow, what });
      return { status: await loc.getAttribute('data-http-status'), text: await loc.textContent() };
    };
    const journaled = (pred, what) => waitFor(() => sup.journal().find(pred), { ...slow, what });

    // Pause, then resume: each answered 200 by the supervisor, journaled, shown as the last run record.
    await p.click('button:has-text("Pause run")');
    let a = await answered(runAnswer, 'the pause answer');
    assert.equal(a.status, '200', a.text);
    assert.match(a.text, /^Pause: 200 OK: /);
    await journaled((r) => r.run === 'paused', 'the journal to record the pause');
    await waitFor(async () => /Last run record\s*paused/.test(await facts.textContent()), { ...slow, what: 'the page to show the run paused' });
    await p.click('button:has-text("Resume run")');
    a = await answered(runAnswer, 'the resume answer');
    assert.equal(a.status, '200', a.text);
    assert.match(a.text, /^Resume: 200 OK: /);
    await journaled((r) => r.run === 'resumed', 'the journal to record the resume');
    await waitFor(async () => /Last run record\s*resumed/.test(await facts.textContent()), { ...slow, what: 'the page to show the run resumed' });

    // Steer (queued for the turn boundary): 200, journaled as steer-queued.
    await p.fill('#steer-msg', 'also handle empty input');
    await p.click('button:has-text("Send steer")');
    a = await answered(taskAnswer, 'the steer answer');
    assert.equal(a.status, '200', a.text);
    assert.match(a.text, /^Steer: 200 OK: /);
    await journaled((r) => r.run === 'steer-queued', 'the journal to record the queued steer');
    assert.equal(await stream.getAttribute('data-state'), 'live', 'the task still runs after pause, resume and steer');
    assert.ok(groupAlive(pgid));

    // Kill: the first press only arms; the second sends, and the answer comes once the group is gone.
    await p.click('button:has-text("Kill task")');
    assert.match(await taskAnswer.textContent(), /press “Confirm kill”/);
    assert.equal(await taskAnswer.getAttribute('data-http-status'), null);
    assert.ok(groupAlive(pgid), 'one press kills nothing');
    await p.click('button:has-text("Confirm kill")');
    a = await answered(taskAnswer, 'the kill answer');
    assert.equal(a.status, '200', a.text);
    assert.match(a.text, /^Kill: 200 OK: .*\(state: halted\)$/);
    const killText = a.text;

    // Outside the browser: the task's process group and the engine's processes are gone.
    await waitFor(() => !groupAlive(pgid), { ...slow, what: `process group ${pgid} to be gone` });
    await waitFor(() => sup.stubPids().every((pid) => !alive(pid)), { ...slow, what: 'every stub process to be gone' });
    // The journal records the kill, by the server, with the stopped process's status.
    const halt = await journaled((r) => r.task === 'a' && r.state === 'halted', 'the journal to record the kill');
    assert.equal(halt.actor, 'runwire-serve', JSON.stringify(halt));
    assert.match(String(halt.detail), /killed by runwire-serve/, JSON.stringify(halt));
    assert.ok(typeof halt.rc === 'number' && halt.rc > 128, JSON.stringify(halt));
    assert.equal(killText, `Kill: 200 OK: killed by runwire-serve: rc ${halt.rc} (state: halted)`);

    // In the page: the task halted (plan and details), its live stream over.
    const li = p.locator('li.task[data-task-id="a"]');
    await waitFor(async () => (await li.getAttribute('data-state')) === 'halted', { ...slow, what: 'the page to show task a halted' });
    assert.equal(await li.locator('.badge').textContent(), `halted (rc ${halt.rc})`);
    const taskFacts = p.locator('section[aria-labelledby="task-h"] dl.facts');
    await waitFor(async () => (await taskFacts.textContent()).includes(`Statehalted (rc ${halt.rc})`), { ...slow, what: 'the task details to show halted' });
    // The wrapper, stopped by SIGTERM, wrote its status line: the stream ends on that exit.
    await waitFor(async () => ['exited', 'ended', 'failed'].includes(await stream.getAttribute('data-state')), { ...slow, what: 'the live stream to end' });
    assert.equal(await stream.getAttribute('data-state'), 'exited', await stream.textContent());
    assert.equal(await stream.textContent(), `Agent exited with status ${halt.rc} (stopped: the wrapper got SIGTERM) — failed.`);
    // The page shows exactly the server's stream of the killed task: what it had, then its end.
    const seqs = await p.locator('table.events tr[data-seq]').evaluateAll((rows) => rows.map((r) => r.dataset.seq));
    assert.deepEqual(seqs, await serverSeqs(s.url, run.runId, 'a'));
    assert.deepEqual(seqs.slice(0, seqsBefore.length), seqsBefore);
    // The dependent task never started: halted by the supervisor, and the run is over.
    await waitFor(async () => (await p.locator('li.task[data-task-id="b"]').getAttribute('data-state')) === 'halted', { ...slow, what: 'task b halted' });
    await waitFor(() => sup.exit(), { ...slow, what: 'the supervisor to finish the run' });
    assert.deepEqual(sup.exit(), { code: 1, signal: null }, why());
    await waitFor(async () => /Last run record\s*finished/.test(await facts.textContent()), { ...slow, what: 'the page to show the run finished' });
    // Over: no live control is offered, and the run and its tasks say why.
    await p.waitForSelector('section[aria-labelledby="run-sum-h"] .control-slot[data-live="false"]', { timeout: 15000 });
    for (const name of ['Pause run', 'Resume run', 'Stop turn', 'Kill task', 'Send steer']) {
      assert.equal(await p.locator(`button:has-text("${name}")`).count(), 0, `no “${name}” on a finished run`);
    }
    await waitFor(async () => (await facts.textContent()).includes('Reasona halted: killed by runwire-serve'), { ...slow, what: 'the run\'s reason' });
    assert.equal(await li.locator('.why').textContent(), 'killed by runwire-serve');
    assert.equal(await p.locator('li.task[data-task-id="b"] .why').textContent(), 'not started: dependency a is halted');
    await waitFor(async () => (await taskFacts.textContent()).includes('Reasonkilled by runwire-serve'), { ...slow, what: 'the task\'s reason' });
    await p.screenshot({ path: path.join(shots, 'supervised-desktop.png'), fullPage: true });
    g.check();
    await context.close();
  });

  test('a supervisor stopped, continued, then killed: the run page and the Runs list say so, with no control meanwhile', async () => {
    const { s, sup, slow, entry } = await hangingRun([{ id: 'a', adapter: 'claude', prompt: 'work on it' }]);
    const run = await waitFor(async () => (await runsList(s.url)).find((r) => r.slug === 'sup' && r.supervisor === 'live'), { ...slow, what: 'the run listed, its supervisor live' });
    const pid = sup.pid;
    const controls = ['Pause run', 'Resume run', 'Stop turn', 'Kill task', 'Send steer'];
    let killed = false;
    try {
      const { p, g, context } = await page();
      const { p: lp, g: lg, context: lcontext } = await page();
      const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
      // The run's facts as a person reads them: each term and what it says.
      const fact = async (term) => facts.evaluate((dl, t) => {
        const dt = [...dl.querySelectorAll('dt')].find((d) => d.textContent === t);
        return dt ? dt.nextElementSibling.textContent : null;
      }, term);
      const runSlot = p.locator('section[aria-labelledby="run-sum-h"] .control-slot');
      const taskSlot = p.locator('section[aria-labelledby="task-h"] .control-slot');
      const badge = lp.locator(`tr[data-run-id="${run.runId}"] .badge`);
      const noControls = async (when) => {
        for (const name of controls) assert.equal(await p.locator(`button:has-text("${name}")`).count(), 0, `no “${name}” ${when}`);
        assert.equal(await p.locator('#steer-msg').count(), 0, `no steer box ${when}`);
      };

      // 1. Stopped (SIGSTOP): the page, opened now, says so and how to continue it; it offers nothing to press.
      process.kill(pid, 'SIGSTOP');
      await waitFor(async () => (await runsList(s.url)).find((r) => r.runId === run.runId && r.supervisor === 'stopped'), { ...slow, what: 'the server to judge the supervisor stopped' });
      const stopped = `its supervisor (pid ${pid}) is stopped (SIGSTOP, or Ctrl-Z in its terminal): it takes no command and runs nothing on until it continues (kill -CONT ${pid}, or fg)`;
      await p.goto(`${s.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/a`);
      await p.waitForSelector('.stream-state[data-state="live"]', { timeout: 30000 });
      await waitFor(async () => (await fact('Status')) === 'supervisor stopped (last status running)', { ...slow, what: 'the page to say the supervisor is stopped' });
      assert.equal(await fact('Reason'), stopped);
      await waitFor(async () => (await runSlot.textContent()) === `Nothing can pause or resume this run: ${stopped}.`, { ...slow, what: 'the run\'s controls replaced by why' });
      assert.equal(await taskSlot.textContent(), `Nothing can stop, steer or kill this task: ${stopped}.`);
      await noControls('while the supervisor is stopped');
      await lp.goto(`${s.url}/#/runs`);
      await badge.waitFor({ timeout: 30000 });
      await waitFor(async () => (await badge.textContent()) === 'supervisor stopped', { ...slow, what: 'the Runs list badge: supervisor stopped' });
      assert.equal(await badge.getAttribute('title'), `${stopped}; its last status was running`);

      // 2. Continued (SIGCONT): on reload, the run is plainly running and its controls are back.
      process.kill(pid, 'SIGCONT');
      await waitFor(async () => (await runsList(s.url)).find((r) => r.runId === run.runId && r.supervisor === 'live'), { ...slow, what: 'the server to judge the supervisor live again' });
      await p.reload();
      await p.waitForSelector('.stream-state[data-state="live"]', { timeout: 30000 });
      await waitFor(async () => (await fact('Status')) === 'running', { ...slow, what: 'the page to say running' });
      assert.equal(await fact('Reason'), null, 'no reason on a run running');
      for (const name of controls) await p.locator(`button:has-text("${name}")`).waitFor({ timeout: 15000 });
      assert.equal(await p.locator('.over.gone').count(), 0);
      await lp.reload();
      await badge.waitFor({ timeout: 30000 });
      await waitFor(async () => (await badge.textContent()) === 'running', { ...slow, what: 'the Runs list badge: running' });

      // 3. Killed (SIGKILL), neither page reloaded: the server's watch journals the death,
      // and both pages, fed by the change feed, say it within seconds.
      const marks = () => Promise.all([p, lp].map((x) => x.evaluate(() => window.__notReloaded === true)));
      await Promise.all([p, lp].map((x) => x.evaluate(() => { window.__notReloaded = true; })));
      process.kill(pid, 'SIGKILL');
      killed = true;
      await sup.exited;
      const gone = `its supervisor (pid ${pid}) is gone: nothing runs it; start runwire-supervise on its plan again to continue`;
      await waitFor(async () => (await fact('Status')) === 'supervisor gone (last status running)', { timeout: 20000, interval: 100, what: 'the open page to say the supervisor is gone' });
      await waitFor(async () => (await badge.textContent()) === 'supervisor gone', { timeout: 20000, interval: 100, what: 'the open Runs list to say supervisor gone' });
      assert.deepEqual(await marks(), [true, true], 'neither page was reloaded');
      // What the server journaled and says, the page says.
      const record = sup.journal().find((r) => r.run === 'supervisor-gone');
      assert.ok(record, `the journal has the supervisor-gone record: ${JSON.stringify(sup.journal())}`);
      assert.equal(record.detail, gone);
      assert.equal(await fact('Reason'), gone);
      await waitFor(async () => (await runSlot.textContent()) === `Nothing can pause or resume this run: ${gone}.`, { ...slow, what: 'the run\'s controls replaced by why' });
      assert.equal(await taskSlot.textContent(), `Nothing can stop, steer or kill this task: ${gone}.`);
      await noControls('once the supervisor is gone');
      assert.equal(await badge.getAttribute('title'), `${gone}; its last status was running`);
      await p.screenshot({ path: path.join(shots, 'supervisor-gone-desktop.png'), fullPage: true });
      await lp.screenshot({ path: path.join(shots, 'supervisor-gone-runs-desktop.png'), fullPage: true });
      g.check();
      lg.check();
      await context.close();
      await lcontext.close();
    } finally {
      // A stopped supervisor takes no SIGTERM until it continues; one killed
      // leaves its task's process group behind: nothing outlives the test.
      if (!sup.exit()) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {}
      }
      if (killed) {
        try {
          process.kill(-entry.pgid, 'SIGKILL');
        } catch {}
      }
    }
    if (killed) {
      await waitFor(() => !groupAlive(entry.pgid), { ...slow, what: `process group ${entry.pgid} to be gone` });
      await waitFor(() => sup.stubPids().every((n) => !alive(n)), { ...slow, what: 'every stub process to be gone' });
    }
  });

  test('a task stream survives a forced reconnect: Last-Event-ID sent, no gap, no duplicate', async () => {
    // The page is loaded through the proxy, so its origin is the proxy's: the server must allow it.
    const proxy = await startProxy();
    const s = await server({ args: ['--agent', 'claude', '--allow-origin', proxy.url], env: { STUB_STREAM: corpus, STUB_DELAY: '0.1' } });
    proxy.setTarget(s.port);
    try {
      const done = postRun(s.url, { threadId: 'live', runId: 'r-live', prompt: 'go' });
      const run = await waitFor(async () => (await runsList(s.url)).find((r) => r.slug === 'agui-r-live'), { what: 'the run to be registered' });
      const { p, g, context } = await page();
      await p.goto(`${proxy.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/agent`);
      const rows = p.locator('table.events tr[data-seq]');
      await waitFor(async () => (await rows.count()) >= 6, { what: 'six events before the cut' });
      const state = await p.locator('.stream-state').getAttribute('data-state');
      assert.equal(state, 'live', 'the task is still running when the connection is cut');
      // From here, Chromium logs the cut connections (stream and any poll in flight).
      g.allow(/net::ERR_/);
      const beforeCut = await rows.evaluateAll((r) => r.map((x) => x.dataset.seq));
      const cut = proxy.drop();
      assert.ok(cut >= 1, 'a connection was cut');
      await p.waitForSelector('.stream-state[data-state="exited"]', { timeout: 30000 });
      await done;
      const seqs = await rows.evaluateAll((r) => r.map((x) => x.dataset.seq));
      const reference = await serverSeqs(s.url, run.runId);
      assert.deepEqual(seqs, reference, 'the page shows exactly the server stream');
      assert.equal(new Set(seqs).size, seqs.length);
      assert.ok(reference.length > beforeCut.length + 5, 'events arrived after the reconnect');
      const st = p.locator('.stream-state');
      assert.ok(Number(await st.getAttribute('data-connections')) >= 2, 'the page reconnected');
      assert.equal(await st.getAttribute('data-duplicates'), '0', 'the server resent nothing: the resume point was right');
      // The reconnect asked for exactly what followed the last event the page had.
      const streamReqs = proxy.requests.filter((r) => /^GET \/runs\/[^ ]+\/tasks\/agent\/stream /.test(r));
      assert.ok(streamReqs.length >= 2, `${streamReqs.length} stream request(s) went through the proxy`);
      assert.doesNotMatch(streamReqs[0], /last-event-id/i);
      const resumed = /\r\nlast-event-id: *([^\r\n]+)/i.exec(streamReqs[1]);
      assert.ok(resumed, `the reconnect carries Last-Event-ID:\n${streamReqs[1]}`);
      const at = seqs.indexOf(resumed[1]);
      assert.ok(at >= beforeCut.length - 1, `resumed after seq ${resumed[1]}, which the page had shown`);
      g.check();
      await context.close();
    } finally {
      await proxy.close();
    }
  });

  test('compare: the accept sample as verdict-check prints it, then the error of a malformed one', async () => {
    const dir = tempDir('evidence');
    const sample = path.join(REPO, 'fixtures/verdict/accept.verdict.json');
    copyFileSync(sample, path.join(dir, 'verdict.json'));
    const s = await server({ args: ['--evidence', dir] });
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/compare`);
    await p.waitForSelector('.verdict');
    const verdict = JSON.parse(readFileSync(sample, 'utf8'));
    assert.equal(await p.locator('.verdict-status .badge').getAttribute('data-status'), verdict.status);
    assert.equal(await p.textContent('.verdict-reason'), verdict.reason);
    // Per-variant rows and the evidence line: the same as verdict-check's own table.
    const table = readFileSync(path.join(REPO, 'fixtures/verdict/golden/accept.table'), 'utf8').split('\n');
    for (const v of ['baseline', 'candidate']) {
      const cells = await p.locator(`table.variants tr[data-variant="${v}"]`).locator('th, td').allTextContents();
      const golden = table.find((l) => l.startsWith(v)).trim().split(/\s+/);
      assert.deepEqual(cells, golden, v);
    }
    const evidence = table.find((l) => l.startsWith('evidence')).replace(/^evidence\s+/, '');
    assert.equal(await p.textContent('.evidence-line'), evidence);
    const cost = table.find((l) => l.startsWith('cost')).replace(/^cost\s+/, '');
    assert.equal(await p.textContent('.cost-line'), cost);
    const trials = p.locator('table.trials tbody tr');
    assert.equal(await trials.count(), verdict.trials.length);
    for (let i = 0; i < verdict.trials.length; i++) {
      const cells = await trials.nth(i).locator('th, td').allTextContents();
      const t = verdict.trials[i];
      assert.deepEqual(cells.slice(0, 5), [t.variant, String(t.trial), t.harnessId, t.classification, String(t.grade.score)]);
    }
    await noHorizontalOverflow(p, 'compare, desktop');

    // The file is read afresh: an edited figure is refused with its finding.
    g.allow(/Failed to load resource: the server responded with a status of 422/);
    const edited = structuredClone(verdict);
    edited.candidate.passRate = 0.5;
    writeFileSync(path.join(dir, 'verdict.json'), JSON.stringify(edited, null, 2));
    await p.click('button:has-text("Reload")');
    await p.waitForSelector('.problem');
    assert.equal(await p.locator('.compare-body').getAttribute('data-kind'), 'invalid');
    const api = await (await fetch(`${s.url}/api/evidence`)).json();
    assert.equal(api.ok, false);
    assert.equal(await p.textContent('.problem-message'), api.error);
    const paths = await p.locator('table.findings tbody td code').allTextContents();
    assert.deepEqual(paths, api.findings.map((f) => f.path));
    assert.ok(paths.includes('candidate.passRate'), paths.join());
    assert.equal(await p.locator('.verdict').count(), 0);
    // At phone width every finding's path and message are in view, not
    // scrolled off to the right of a table.
    await p.setViewportSize({ width: 390, height: 844 });
    const cells = await p.locator('table.findings tbody td').evaluateAll((tds) =>
      tds.map((td) => ({ label: td.dataset.label, right: td.getBoundingClientRect().right, text: td.textContent })),
    );
    assert.ok(cells.length >= 3, JSON.stringify(cells));
    for (const c of cells) assert.ok(c.right <= 390, `${c.label} "${c.text}" ends at ${c.right}px, out of view`);
    await p.setViewportSize({ width: 1280, height: 800 });

    // Not JSON at all: still a readable error, never a blank page.
    writeFileSync(path.join(dir, 'verdict.json'), '{"status": "accept",');
    await p.click('button:has-text("Reload")');
    await waitFor(async () => (await p.textContent('.problem-message')) !== api.error, { what: 'the second error' });
    assert.ok((await p.textContent('.problem-message')).length > 10);
    g.check();
    await context.close();
  });

  test('chat: a failing agent ends in the run error the server sent, shown as such', async () => {
    const s = await server({ args: ['--agent', 'claude'], env: { STUB_STREAM: corpus, STUB_MODE: 'fail' } });
    // What the server says for this failure, asked from node on another thread.
    const body = await postRun(s.url, { threadId: 'ref', runId: 'r-ref', prompt: 'x' });
    const last = JSON.parse(frames(body).at(-1).data);
    assert.equal(last.type, 'RUN_ERROR');
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await chatRun(p, 'fix the build');
    assert.equal(await p.locator('.run-status').getAttribute('data-status'), 'error');
    assert.equal(await p.locator('.exchange .run-line').textContent(), `Error: ${last.message} (${last.code}).`);
    // The prompt box is usable again for the next message.
    assert.equal(await p.locator('button[type="submit"]').isEnabled(), true);
    g.check();
    await context.close();
  });

  test('with --token-file: the token from #token= is kept for the tab, removed from the address, and sent', async () => {
    const dir = tempDir('token');
    const secret = 'studio-token-0123456789abcdef';
    writeFileSync(path.join(dir, 'token'), `${secret}\n`);
    const s = await server({ args: ['--agent', 'claude', '--token-file', path.join(dir, 'token')], env: { STUB_STREAM: corpus } });
    // Without the token: the page still loads (static files need none) and says what is missing.
    {
      const { p, g, context } = await page();
      g.allow(/Failed to load resource: the server responded with a status of 401/);
      await p.goto(`${s.url}/#/runs`);
      await p.waitForSelector('#banner:not([hidden])');
      assert.match(await p.textContent('#banner'), /needs a token/);
      // Doing as the banner says in this open page (the address edited, no
      // load of its own): the token is taken, cleared from the address, and
      // the page works (it stayed refused, the token in the address bar).
      await p.evaluate((t) => {
        location.hash = `#token=${t}`;
      }, secret);
      await p.waitForSelector('#banner', { state: 'hidden', timeout: 15000 });
      await p.waitForSelector('.view-runs .view-status');
      assert.equal(await p.evaluate(() => location.href.includes('token')), false);
      g.check();
      await context.close();
    }
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#token=${secret}`);
    await p.waitForSelector('.view-runs .view-status');
    assert.equal(await p.evaluate(() => location.hash), '#/runs');
    assert.equal(await p.evaluate(() => location.href.includes('token')), false);
    assert.equal(await p.evaluate(() => sessionStorage.getItem('runwire.token')), secret);
    assert.equal(await p.locator('#banner').isVisible(), false);
    // A chat run needs the header on POST /agui; its task stream on the streaming GET.
    await p.goto(`${s.url}/#/chat`);
    const runId = await chatRun(p, 'fix the build');
    assert.equal(await p.locator('.run-status').getAttribute('data-status'), 'finished');
    const listed = await (await fetch(`${s.url}/runs`, { headers: { Authorization: `Bearer ${secret}` } })).json();
    const run = listed.runs.find((r) => r.slug === `agui-${runId}`);
    await p.goto(`${s.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/agent`);
    await p.waitForSelector('.stream-state[data-state="exited"]');
    assert.ok((await p.locator('table.events tr[data-seq]').count()) > 10);
    g.check();
    await context.close();
  });

  test('runs: two chat turns are one conversation; at 390 px every run is a card with status, age and cost in view', async () => {
    const s = await server({ args: ['--agent', 'claude'], env: { STUB_STREAM: corpus } });
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    const first = await chatRun(p, 'fix the build');
    const second = await chatRun(p, 'and now the tests');
    const thread = await p.locator('.thread-id').textContent();
    assert.ok(first.startsWith(`${thread}.`) && second.startsWith(`${thread}.`), `${first} ${second} name thread ${thread}`);
    // Another client's run, on a thread of its own, stays a run of its own.
    await postRun(s.url, { threadId: 'other', runId: 'r-other', prompt: 'hi' });
    const listed = await waitFor(async () => {
      const runs = await runsList(s.url);
      return runs.filter((r) => r.status === 'done').length === 3 && runs;
    }, { what: 'three runs done' });
    const turns = listed.filter((r) => r.slug.startsWith(`agui-${thread}.`));
    assert.equal(turns.length, 2);
    await p.goto(`${s.url}/#/runs`);
    const conv = p.locator(`tr.thread[data-thread="${thread}"]`);
    await conv.waitFor();
    await waitFor(async () => (await p.locator('tr[data-run-id]').count()) === 3, { what: 'the three runs on the page' });
    assert.equal(await conv.getAttribute('data-turns'), '2');
    // Named by the thread's first message (this browser sent it), with its id and turns.
    assert.equal(await conv.locator('th').textContent(), `fix the build${thread} · 2 turns`);
    const convCells = await conv.locator('td').allTextContents();
    assert.equal(convCells[0], 'done');
    assert.equal(convCells[3], '2 turns');
    assert.equal(convCells[4], '$0.0842', 'the turns cost together');
    // The turns are folded under it, the other run is its own row.
    for (const r of turns) assert.equal(await p.locator(`tr.turn[data-run-id="${r.runId}"]`).isVisible(), false);
    assert.equal(await p.locator('tr:not(.turn)[data-run-id$="--agui-r-other"]').isVisible(), true);
    const toggle = conv.locator('button.thread-toggle');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
    await toggle.focus();
    await p.keyboard.press('Enter');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    for (const r of turns) {
      const tr = p.locator(`tr.turn[data-run-id="${r.runId}"]`);
      assert.equal(await tr.isVisible(), true);
      assert.equal(await tr.locator('th a').getAttribute('href'), `#/runs/${encodeURIComponent(r.runId)}`);
    }
    await context.close();

    // At 390 px: cards, each with its status, age and cost on screen; no scrolling sideways.
    const phone = await page(PHONE);
    await phone.p.goto(`${s.url}/#/runs`);
    await phone.p.locator(`tr.thread[data-thread="${thread}"]`).waitFor();
    await phone.p.locator(`tr.thread[data-thread="${thread}"] button.thread-toggle`).click();
    await noHorizontalOverflow(phone.p, 'runs at 390 px');
    const wrap = await phone.p.locator('.table-wrap.runs-wrap').evaluate((el) => ({ sw: el.scrollWidth, cw: el.clientWidth }));
    assert.ok(wrap.sw <= wrap.cw, `the runs region scrolls sideways: ${wrap.sw} > ${wrap.cw}`);
    const rows = phone.p.locator('table.runs tbody tr:visible');
    assert.equal(await rows.count(), 4, 'the conversation, its two turns and the other run');
    for (let i = 0; i < 4; i++) {
      const row = rows.nth(i);
      for (const sel of ['.badge', 'td.age time', 'td[data-label="Cost"]']) {
        const el = row.locator(sel);
        assert.equal(await el.isVisible(), true, `row ${i}: ${sel} is shown`);
        const b = await el.boundingBox();
        assert.ok(b.x >= 0 && b.x + b.width <= PHONE.width, `row ${i}: ${sel} at x ${b.x}..${b.x + b.width}`);
      }
      assert.match(await row.locator('td[data-label="Cost"]').textContent(), /^\$0\.0(421|842)$/);
    }
    await phone.p.screenshot({ path: path.join(shots, 'runs-conversation-390.png'), fullPage: true });
    g.check();
    phone.g.check();
    await phone.context.close();
  });

  test('the header and the chat say the server\'s mode in runwire-serve\'s words; a real agent gets no note', async () => {
    const cases = [
      [[], 'Replay: each prompt replays a recorded run; it is not sent to any agent.', /^replay · runwire-serve /],
      [['--demo'], 'Demo: runwire\'s demo agent, no model, runs nothing. It asks to run a command, then asks a question: try Approve, Deny, a steer and Stop.', /^demo · runwire-serve /],
      [['--agent', 'claude'], null, /^agent: claude · runwire-serve /],
    ];
    for (const [args, note, label] of cases) {
      const s = await server({ args, env: { STUB_STREAM: corpus } });
      const { p, g, context } = await page();
      await p.goto(`${s.url}/#/chat`);
      await waitFor(async () => (await p.textContent('#server-info')) !== '', { what: 'the server line' });
      assert.match(await p.textContent('#server-info'), label);
      const shown = p.locator('.view-chat .demo-note');
      if (note === null) {
        assert.equal(await shown.isVisible(), false, `${args}: no demo note`);
      } else {
        assert.equal(await shown.isVisible(), true, `${args}: the demo note`);
        assert.equal(await shown.textContent(), note);
        // Above the conversation, so it is read before a prompt is sent.
        assert.equal(await p.evaluate(() => !!(document.querySelector('.demo-note').compareDocumentPosition(document.querySelector('#chat-prompt')) & Node.DOCUMENT_POSITION_FOLLOWING)), true);
      }
      g.check();
      await context.close();
    }
  });

  test('the runs page says it is loading, then "No runs yet": never an empty table header, at 1280 and 390 px', async () => {
    const s = await server({});
    for (const viewport of [DESKTOP, PHONE]) {
      const { p, g, context } = await page(viewport);
      // The listing held until the first paint has been looked at.
      let release;
      const held = new Promise((r) => {
        release = r;
      });
      await p.route((url) => new URL(url).pathname === '/runs', async (route) => {
        await held;
        await route.continue();
      });
      await p.goto(`${s.url}/#/runs`);
      await p.waitForSelector('.view-runs .view-status:not(:empty)');
      assert.equal(await p.textContent('.view-runs .view-status'), 'Loading the runs…', `${viewport.width} px`);
      assert.equal(await p.locator('table.runs').isVisible(), false, `${viewport.width} px: an empty table header while loading`);
      assert.equal(await p.locator('.view-runs .empty').isVisible(), false, `${viewport.width} px: "No runs yet" before the listing`);
      release();
      await p.locator('.view-runs .empty').waitFor();
      assert.match(await p.textContent('.view-runs .empty'), /^No runs yet\./);
      assert.equal(await p.locator('table.runs').isVisible(), false, `${viewport.width} px: the table of no runs`);
      await waitFor(async () => /^0 runs/.test(await p.textContent('.view-runs .view-status')), { what: 'the count' });
      await noHorizontalOverflow(p, `no runs at ${viewport.width} px`);
      g.check();
      await context.close();
    }
  });

  test('a view\'s heading takes focus on navigation without a focus ring, by mouse or keyboard; links keep theirs', async () => {
    const s = await server({});
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/runs`);
    await p.waitForSelector('.view-runs .view-status:not(:empty)');
    const ring = () => p.evaluate(() => {
      const el = document.activeElement;
      const cs = getComputedStyle(el);
      return { tag: el.tagName, text: el.textContent, outline: cs.outlineStyle === 'none' ? 0 : parseFloat(cs.outlineWidth) };
    });
    // By keyboard: Tab to the nav's Chat link (ring), Enter: the heading has focus, no ring.
    await p.locator('nav a[data-view="chat"]').focus();
    await p.keyboard.press('Tab');
    await p.keyboard.press('Shift+Tab');
    assert.deepEqual(await ring(), { tag: 'A', text: 'Chat', outline: 3 });
    await p.keyboard.press('Enter');
    await waitFor(async () => (await ring()).tag === 'H1', { what: 'the heading to take focus' });
    assert.deepEqual(await ring(), { tag: 'H1', text: 'Chat', outline: 0 });
    // By mouse.
    await p.click('nav a[data-view="runs"]');
    // The clicked link is named Runs too: wait for the heading itself.
    await waitFor(async () => {
      const r = await ring();
      return r.tag === 'H1' && r.text === 'Runs';
    }, { what: 'the runs heading to take focus' });
    assert.deepEqual(await ring(), { tag: 'H1', text: 'Runs', outline: 0 });
    // The skip link moves focus to main: no ring there either.
    await p.keyboard.press('Shift+Tab');
    await p.evaluate(() => document.getElementById('skip').focus());
    await p.keyboard.press('Enter');
    assert.deepEqual((await ring()).tag, 'MAIN');
    assert.equal((await ring()).outline, 0);
    g.check();
    await context.close();
  });

  test('light and dark follow prefers-color-scheme; keyboard focus is visible; landmarks are there', async () => {
    const s = await server({});
    const colors = {};
    for (const scheme of ['light', 'dark']) {
      const context = await browser.newContext({ viewport: DESKTOP, colorScheme: scheme });
      const p = await context.newPage();
      const g = guard(p);
      await p.goto(`${s.url}/#/runs`);
      await p.waitForSelector('.view-runs .view-status:not(:empty)');
      colors[scheme] = await p.evaluate(() => {
        const rgb = (c) => c.match(/\d+/g).slice(0, 3).map(Number);
        const lum = ([r, g, b]) => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
        return { bg: lum(rgb(getComputedStyle(document.documentElement).backgroundColor)), fg: lum(rgb(getComputedStyle(document.body).color)) };
      });
      // Tab from the top: the skip link first, then the brand and the nav, each with an outline.
      await p.keyboard.press('Tab');
      assert.equal(await p.evaluate(() => document.activeElement.id), 'skip');
      for (let i = 0; i < 3; i++) {
        await p.keyboard.press('Tab');
        const outline = await p.evaluate(() => {
          const cs = getComputedStyle(document.activeElement);
          return { style: cs.outlineStyle, width: parseFloat(cs.outlineWidth), tag: document.activeElement.tagName };
        });
        assert.equal(outline.tag, 'A');
        assert.notEqual(outline.style, 'none');
        assert.ok(outline.width >= 2, `focus outline ${outline.width}px`);
      }
      for (const sel of ['header', 'nav[aria-label="Views"]', 'main#main', 'footer']) assert.equal(await p.locator(sel).count(), 1, sel);
      g.check();
      await context.close();
    }
    assert.ok(colors.light.bg > 0.9 && colors.light.fg < 0.3, JSON.stringify(colors.light));
    assert.ok(colors.dark.bg < 0.15 && colors.dark.fg > 0.7, JSON.stringify(colors.dark));
  });

  test('every view at desktop and 390 px: no horizontal overflow; screenshots', async () => {
    const evidence = tempDir('evidence-shot');
    copyFileSync(path.join(REPO, 'fixtures/verdict/accept.verdict.json'), path.join(evidence, 'verdict.json'));
    const s = await server({ args: ['--agent', 'claude', '--evidence', evidence], env: { STUB_STREAM: corpus } });
    await postRun(s.url, { threadId: 'shots', runId: 'r-shots', prompt: 'fix the build' });
    const run = (await runsList(s.url)).find((r) => r.slug === 'agui-r-shots');
    for (const [name, viewport] of [['desktop', DESKTOP], ['390', PHONE]]) {
      const { p, g, context } = await page(viewport);
      await p.goto(`${s.url}/#/runs`);
      await p.locator(`tr[data-run-id="${run.runId}"]`).waitFor();
      await noHorizontalOverflow(p, `runs at ${name}`);
      await p.screenshot({ path: path.join(shots, `runs-${name}.png`), fullPage: true });

      await p.goto(`${s.url}/#/runs/${encodeURIComponent(run.runId)}/tasks/agent`);
      await p.waitForSelector('.stream-state[data-state="exited"]');
      await p.locator('.tool .tool-toggle').click();
      await p.locator('details.event-log summary').click();
      await noHorizontalOverflow(p, `task at ${name}, card and event log open`);
      await p.locator('details.event-log summary').click();
      await p.screenshot({ path: path.join(shots, `task-${name}.png`), fullPage: true });

      await p.goto(`${s.url}/#/chat`);
      await chatRun(p, 'fix the build');
      await p.locator('.tool .tool-toggle').focus();
      await p.keyboard.press('Enter');
      await p.locator('details.reasoning summary').click();
      await noHorizontalOverflow(p, `chat at ${name}`);
      await p.screenshot({ path: path.join(shots, `chat-${name}.png`), fullPage: true });

      await p.goto(`${s.url}/#/compare`);
      await p.waitForSelector('.verdict');
      await noHorizontalOverflow(p, `compare at ${name}`);
      await p.screenshot({ path: path.join(shots, `compare-${name}.png`), fullPage: true });

      await p.goto(`${s.url}/#/run`);
      await p.waitForSelector('h1');
      await noHorizontalOverflow(p, `run picker at ${name}`);
      g.check();
      await context.close();
    }
    for (const v of ['runs', 'task', 'chat', 'compare']) {
      for (const n of ['desktop', '390']) assert.ok(existsSync(path.join(shots, `${v}-${n}.png`)), `${v}-${n}.png`);
    }
  });
});
