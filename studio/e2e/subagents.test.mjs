// Browser test of subagents in the studio (issue 38): the system Chromium
// (headless, through playwright-core) against the real runwire-serve with
// the claude stub engine replaying three concurrent subagents. Each
// subagent is a collapsible group inside the card of the Task call that
// spawned it, at 1280 and 390 px.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { REPO, guard, launchBrowser, removeTempDirs, startServer, tempDir } from './harness.mjs';

const SIZES = [
  ['desktop', { width: 1280, height: 800 }],
  ['390', { width: 390, height: 844 }],
];
const STREAM = path.join(REPO, 'fixtures/claude/synthetic.subagents-concurrent.partial.jsonl');

let browser;
let server;
let shots;

before(async () => {
  browser = await launchBrowser();
  server = await startServer({ args: ['--agent', 'claude'], env: { STUB_STREAM: STREAM, STUB_DELAY: '0.01' } });
  shots = process.env.STUDIO_SCREENSHOTS || path.join(tempDir('subagent-shots'), 'screenshots');
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  if (server) await server.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

describe('subagents in Chromium against runwire-serve', () => {
  for (const [size, viewport] of SIZES) {
    test(`chat at ${size}: each of three concurrent subagents is a collapsible group inside its Task card`, async () => {
      const context = await browser.newContext({ viewport });
      const p = await context.newPage();
      const g = guard(p);
      await p.goto(`${server.url}/#/chat`);
      await p.waitForSelector('#chat-prompt');
      await p.fill('#chat-prompt', 'split the work');
      await p.press('#chat-prompt', 'Control+Enter');
      await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 30000 });

      const runId = await p.locator('.exchange').last().getAttribute('data-run-id');
      const groups = p.locator('.exchange').last().locator('details.subagent');
      assert.equal(await groups.count(), 3);
      const want = { A: ['Explore', 'Count the Rust files'], B: ['general-purpose', 'Summarise README.md'], C: ['Explore', 'List the binaries'] };
      for (const [k, [name, desc]] of Object.entries(want)) {
        // Inside the card of the Task call that spawned it, nowhere else.
        const card = p.locator(`.tool[data-tool-id="${runId}:t:toolu_${k}"]`);
        assert.match(await card.locator('.tool-name').first().textContent(), /^Task$/);
        const group = card.locator(':scope > .tool-subagents > details.subagent');
        assert.equal(await group.count(), 1, `toolu_${k}`);
        assert.equal(await group.getAttribute('data-subagent-id'), `${runId}:sa:toolu_${k}`);
        assert.equal(await group.getAttribute('data-status'), 'finished');
        assert.equal(await group.locator('.subagent-name').textContent(), name);
        assert.equal(await group.locator('.subagent-desc').textContent(), desc);
        assert.equal(await group.locator('summary .badge').textContent(), 'finished');
        // What it produced, and only that: its two messages and its own Bash card.
        const texts = await group.locator('.subagent-body > .assistant-text').allTextContents();
        assert.deepEqual(texts, [`Working on it. (${k})`, `Done with toolu_${k}.`]);
        const inner = group.locator('.subagent-body > .tool');
        assert.equal(await inner.count(), 1);
        assert.equal(await inner.getAttribute('data-tool-id'), `${runId}:t:toolu_bash_${k}`);
        assert.equal(await inner.getAttribute('data-status'), 'completed');
        // Collapsible: open while shown, closed by its summary (mouse, then keyboard), and back.
        const body = group.locator('.subagent-body');
        assert.equal(await group.evaluate((d) => d.open), true);
        assert.equal(await body.isVisible(), true);
        await group.locator('summary').click();
        assert.equal(await group.evaluate((d) => d.open), false);
        assert.equal(await body.isVisible(), false);
        await group.locator('summary').focus();
        await p.keyboard.press('Enter');
        assert.equal(await group.evaluate((d) => d.open), true);
        assert.equal(await body.isVisible(), true);
      }
      // The main agent's text stays outside the groups, in order.
      const main = await p
        .locator('.exchange')
        .last()
        .locator('.transcript > .assistant-text')
        .allTextContents();
      assert.deepEqual(main, ["I'll split this into three tasks.", 'All three done.']);
      assert.equal(await p.locator('.transcript > details.subagent').count(), 0, 'no group left outside its card');

      const m = await p.evaluate(() => ({ sw: document.scrollingElement.scrollWidth, iw: window.innerWidth }));
      assert.ok(m.sw <= m.iw, `the document is ${m.sw}px wide in a ${m.iw}px viewport`);
      await p.screenshot({ path: path.join(shots, `subagents-${size}.png`), fullPage: true });
      g.check();
      await context.close();
    });
  }
});
