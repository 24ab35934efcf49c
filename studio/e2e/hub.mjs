// The studio at a cluster's hub (issue 29), in Chromium: run by
// cluster/tests/it/hub_studio.rs against a hub whose nodes are real
// runwire-serve processes on a 3-server NATS cluster. Not a `*.test.mjs`:
// `node --test e2e/` (tests/studio.rs) does not run it; it needs the cluster.
//
//   HUB_URL=http://127.0.0.1:PORT NODES=alpha,beta ASKING=beta node e2e/hub.mjs
//
// It checks that the runs list shows runs of every node in NODES, finds
// the run of node ASKING that needs the person, opens its task, approves
// the agent's request there (the hub forwards the answer to that node) and
// waits for the card to close. Then, in the chat, it picks node CHAT_NODE
// (default the first of NODES) and sends a message: the run finishes.
// With LOSE=1 it then opens that run's page (its node up), prints
// {"watching": RUN} and waits for the page to say the node is lost, which
// the caller makes happen (it kills the node): the page learns it from its
// own feed's `node` event. It prints one JSON line: {"run", "request",
// "record", "chat", "lost"}; any failure or console error exits 1.

import assert from 'node:assert/strict';
import { guard, launchBrowser, waitFor } from './harness.mjs';

const HUB = process.env.HUB_URL;
const NODES = (process.env.NODES || '').split(',').filter(Boolean);
const ASKING = process.env.ASKING;
// The node a new chat thread is started on, picked in the chat's node picker.
const CHAT_NODE = process.env.CHAT_NODE || NODES[0];
assert.ok(HUB && NODES.length && ASKING, 'HUB_URL, NODES and ASKING are required');

const browser = await launchBrowser();
let failed = null;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await context.newPage();
  const g = guard(p);
  await p.goto(`${HUB}/#/runs`);
  // Every node's runs, in one list: a hub's run ids are <node>.<run>.
  for (const n of NODES) {
    await p.waitForSelector(`tr[data-run-id^="${n}."]`, { timeout: 30000 });
  }
  // The footer says where a hub's data comes from (not "stays on this machine").
  await waitFor(async () => /cluster's nodes/.test(await p.locator('#footer-text').textContent()), { what: "the hub's footer" });
  // The run of the other node that needs the person comes first, and looks it.
  const row = p.locator(`tr.needs-you[data-run-id^="${ASKING}."]`).first();
  await row.waitFor({ timeout: 30000 });
  const run = await row.getAttribute('data-run-id');
  assert.match(await row.textContent(), /needs input/);
  const first = await p.locator('tbody tr').first().getAttribute('data-run-id');
  assert.equal(first, run, 'the run that needs the person is listed first');
  // Its page, then its task: the agent's request, open.
  await row.locator('th a').click();
  await waitFor(async () => (await p.evaluate(() => location.hash)) === `#/runs/${encodeURIComponent(run)}`, { what: 'the run page' });
  await p.locator('a[href$="/tasks/agent"]').first().click();
  const card = p.locator('[data-request-id][data-state="open"]').first();
  await card.waitFor({ timeout: 30000 });
  const request = await card.getAttribute('data-request-id');
  await card.locator('button[data-action="approve"]').click();
  // Answered at the node: the card closes as the answer comes back on the stream.
  const answered = p.locator(`[data-request-id="${request}"][data-state="answered"]`);
  await answered.waitFor({ timeout: 30000 });
  const record = (await answered.locator('summary.request-record').textContent()).trim();
  assert.match(record, /^Approved/);
  // The chat at the hub: a node picker offering the nodes that are up; a
  // new thread runs on the node picked (CHAT_NODE), and its run finishes.
  await p.goto(`${HUB}/#/chat`);
  const picker = p.locator('#chat-node');
  await picker.waitFor({ timeout: 30000 });
  await waitFor(async () => {
    const offered = await picker.locator('option').allTextContents();
    return NODES.every((n) => offered.includes(n));
  }, { what: 'every node offered in the chat' });
  await picker.selectOption(CHAT_NODE);
  await p.fill('#chat-prompt', 'hello from the hub');
  await p.press('#chat-prompt', 'Control+Enter');
  const line = p.locator('article.exchange .run-line').first();
  await waitFor(async () => ['finished', 'error', 'waiting', 'cancelled'].includes(await line.getAttribute('data-status')), {
    what: 'the chat run to end',
    timeout: 60000,
  });
  const chat = await line.getAttribute('data-status');
  assert.equal(chat, 'finished', `the chat at the hub: ${await line.textContent()}`);
  // The thread keeps its node: the picker is fixed on it.
  assert.equal(await picker.isDisabled(), true);
  assert.equal(await picker.inputValue(), CHAT_NODE);
  // Another page (a reload, another device) opens the thread by its
  // address: the conversation shows at once, read from the thread's node
  // through the hub (GET /agui/thread), with no new message sent.
  const thread = await p.locator('.thread-id').textContent();
  const two = await context.newPage();
  const g2 = guard(two);
  await two.goto(`${HUB}/#/chat/${encodeURIComponent(thread)}`);
  await two.waitForSelector('.chat-log .earlier', { timeout: 30000 });
  const opened = (await two.locator('.chat-log .msg.user .user-text').allTextContents()).map((t) => t.trim());
  assert.deepEqual(opened, ['hello from the hub'], 'the thread opened at the hub shows its conversation');
  g2.check();
  await two.close();
  // The run's own page while its node is lost: its Status and Node facts say
  // so, from the page's feed of that run alone (`?run=`), with no reload.
  let lost = null;
  if (process.env.LOSE === '1') {
    await p.goto(`${HUB}/#/runs/${encodeURIComponent(run)}`);
    const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
    await waitFor(async () => (await facts.textContent()).includes(`${ASKING} · up`), { what: "the run page's node, up", timeout: 30000 });
    console.log(JSON.stringify({ watching: run }));
    await waitFor(async () => (await facts.textContent()).includes(`${ASKING} · lost`), {
      what: "the run page's node, lost",
      timeout: 60000,
    });
    lost = (await facts.textContent()).replace(/\s+/g, ' ').trim();
    assert.match(lost, new RegExp(`node ${ASKING} lost: no heartbeat since`));
    assert.equal(await p.evaluate(() => location.hash), `#/runs/${encodeURIComponent(run)}`, 'no reload, no navigation');
  }
  g.check();
  await context.close();
  console.log(JSON.stringify({ run, request, record, chat, lost }));
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.error(failed.stack || String(failed));
  process.exit(1);
}
