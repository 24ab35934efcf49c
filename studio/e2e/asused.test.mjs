// Browser tests of the studio as a newcomer uses it (issue 40, item 6):
// Chromium (playwright-core) against the real `runwire-serve --demo`, each
// item at 1280 and at 390 px.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/asused.test.mjs   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { guard, launchBrowser, removeTempDirs, startServer, waitFor } from './harness.mjs';

const SIZES = [
  { name: '1280', viewport: { width: 1280, height: 800 } },
  { name: '390', viewport: { width: 390, height: 844 } },
];

let browser;
let server;

before(async () => {
  browser = await launchBrowser();
  server = await startServer({ args: ['--demo'] });
});

after(async () => {
  if (server) await server.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

async function page(viewport) {
  const context = await browser.newContext({ viewport });
  const p = await context.newPage();
  const g = guard(p);
  return { p, g, context };
}

async function send(p, prompt) {
  await p.fill('#chat-prompt', prompt);
  await p.press('#chat-prompt', 'Control+Enter');
}

/** The demo's turn up to its approval card (open). */
async function toApproval(p, prompt) {
  await p.goto(`${server.url}/#/chat`);
  await send(p, prompt);
  const card = p.locator('section.request[data-kind="tool_approval"][data-state="open"]');
  await card.waitFor({ timeout: 30000 });
  return card;
}

/** Approves, answers the question with its first option, waits for the turn's end. */
async function finishTurn(p) {
  await p.locator('section.request[data-kind="tool_approval"] button[data-action="approve"]').click();
  const q = p.locator('section.request[data-kind="question"][data-state="open"]');
  await q.waitFor({ timeout: 30000 });
  await q.locator('input[type=radio]').first().check();
  await q.locator('button[type=submit]').click();
  await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 30000 });
}

/** The runs list's row of the chat turn whose run id ends with `runPart`. */
function runRow(p, runId) {
  return p.locator(`tr[data-run-id$="${runId}"]`);
}

for (const { name, viewport } of SIZES) {
  describe(`the studio as used, at ${name} px`, () => {
    test('a chat run is named by its first message, renamed in the chat; an idle chat shows no task state', async () => {
      const { p, g, context } = await page(viewport);
      const prompt = `Tidy the README at ${name} px\nand the rest later`;
      await toApproval(p, prompt);
      assert.equal(await p.inputValue('#thread-name'), `Tidy the README at ${name} px`);
      await finishTurn(p);
      const runId = await p.locator('article.exchange').first().getAttribute('data-run-id');
      await p.goto(`${server.url}/#/`);
      const row = runRow(p, runId);
      await row.waitFor({ timeout: 15000 });
      await waitFor(async () => (await row.getAttribute('data-status')) === 'idle', { what: 'the chat run idle' });
      assert.equal(await row.locator('th a').textContent(), `Tidy the README at ${name} px`);
      const cells = (await row.locator('td').allTextContents()).join('|');
      assert.doesNotMatch(cells, /leased/, cells);
      // Renamed in the chat (the same page keeps the thread): the list follows.
      await p.goto(`${server.url}/#/chat`);
      await p.fill('#thread-name', `Docs pass ${name}`);
      await p.press('#thread-name', 'Enter');
      await p.locator('#thread-name').evaluate((el) => el.blur());
      await p.goto(`${server.url}/#/`);
      await waitFor(async () => (await runRow(p, runId).locator('th a').textContent()) === `Docs pass ${name}`, { what: 'the renamed thread in the runs list' });
      g.check();
      await context.close();
    });

    test('the thread id is never wrapped mid-token', async () => {
      const { p, g, context } = await page(viewport);
      await p.goto(`${server.url}/#/chat`);
      const id = p.locator('code.thread-id');
      await id.waitFor();
      const m = await id.evaluate((el) => ({ rects: el.getClientRects().length, text: el.textContent, title: el.title, right: el.getBoundingClientRect().right }));
      assert.equal(m.rects, 1, `the thread id ${m.text} is on ${m.rects} lines`);
      assert.equal(m.title, m.text, 'the whole id is in the tooltip');
      assert.ok(m.right <= viewport.width, `the id ends at ${m.right}px`);
      g.check();
      await context.close();
    });
  });
}
