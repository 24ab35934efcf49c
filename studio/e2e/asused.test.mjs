// Browser tests of the studio as a newcomer uses it (issue 40, item 6):
// Chromium (playwright-core) against the real `runwire-serve --demo`, each
// item at 1280 and at 390 px.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/asused.test.mjs   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { failedToolCorpus } from './corpus.mjs';
import { REPO, guard, launchBrowser, postRun, removeTempDirs, startServer, tempDir, waitFor } from './harness.mjs';

/** The one list of run statuses: spec/LAYOUT.md, "## Run statuses" (its `- \`name\`:` items). */
function layoutStatuses() {
  const spec = readFileSync(path.join(REPO, 'spec/LAYOUT.md'), 'utf8');
  const section = spec.split('\n## Run statuses\n')[1].split('\n## ')[0];
  const list = [...section.matchAll(/^- `([a-z_]+)`:/gm)].map((m) => m[1]);
  assert.ok(list.length >= 5, `statuses parsed from spec/LAYOUT.md: ${list}`);
  return list;
}

const SIZES = [
  { name: '1280', viewport: { width: 1280, height: 800 } },
  { name: '390', viewport: { width: 390, height: 844 } },
];

let browser;
let server;
/** A server whose one run is over (a finished batch run of the stub engine), and that run. */
let batch;
let finished;

before(async () => {
  browser = await launchBrowser();
  server = await startServer({ args: ['--demo'] });
  const corpus = path.join(tempDir('asused'), 'failed-tool.claude.jsonl');
  writeFileSync(corpus, failedToolCorpus());
  batch = await startServer({ args: ['--agent', 'claude'], env: { STUB_STREAM: corpus, STUB_DELAY: '0' } });
  await postRun(batch.url, { threadId: 't-over', runId: 'r-over', prompt: 'fix the build' });
  finished = await waitFor(async () => (await (await fetch(`${batch.url}/runs`)).json()).runs.find((r) => r.slug === 'agui-r-over' && ['done', 'failed'].includes(r.status)), { what: 'the batch run over' });
});

after(async () => {
  if (server) await server.stop();
  if (batch) await batch.stop();
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

    test('the AskUserQuestion call reads as its question and options, not as JSON', async () => {
      const { p, g, context } = await page(viewport);
      await toApproval(p, 'Ask me something');
      await finishTurn(p);
      const tool = p.locator('.tool').filter({ hasText: 'AskUserQuestion' }).first();
      const preview = await tool.locator('.tool-preview').textContent();
      assert.match(preview, /Which should the demo do next\?/);
      assert.doesNotMatch(preview, /[{}"\[]|questions:/, preview);
      await tool.locator('.tool-toggle').click();
      const args = await tool.locator('.tool-args').textContent();
      assert.match(args, /^Next: Which should the demo do next\?\n/);
      const options = args.split('\n').filter((l) => l.startsWith('  • '));
      assert.ok(options.length >= 2, args);
      assert.doesNotMatch(args, /[{}"]/, args);
      g.check();
      await context.close();
    });

    test('a steer sent at once shows after the agent\'s greeting, before its reply to the steer', async () => {
      const { p, g, context } = await page(viewport);
      await p.goto(`${server.url}/#/chat`);
      await send(p, 'Say hello');
      await p.locator('form.live-steer').waitFor({ state: 'visible', timeout: 30000 });
      await p.fill('#chat-steer', 'Use tabs please');
      await p.press('#chat-steer', 'Enter');
      await p.locator('section.request[data-state="open"]').waitFor({ timeout: 30000 });
      await p.locator('.steer').waitFor({ timeout: 15000 });
      const order = await p.evaluate(() => [...document.querySelector('.exchange .transcript').children].map((e) =>
        e.classList.contains('steer') ? 'steer' : /^Hi! I am/.test(e.textContent) ? 'greeting' : /Steer received/.test(e.textContent) ? 'reply' : e.classList.contains('tool') ? 'tool' : 'other'));
      assert.deepEqual(order.filter((x) => x !== 'other'), ['greeting', 'steer', 'reply', 'tool']);
      g.check();
      await context.close();
    });

    test('the approval card shows its whole input (the command wraps, nothing scrolled away) and no empty band', async () => {
      const { p, g, context } = await page(viewport);
      const card = await toApproval(p, 'Make a file');
      const input = card.locator('textarea.request-input');
      const m = await input.evaluate((el) => ({ sh: el.scrollHeight, ch: el.clientHeight, sw: el.scrollWidth, cw: el.clientWidth, top: el.scrollTop, value: el.value }));
      assert.match(m.value, /touch demo\.txt && ls/);
      assert.ok(m.sh <= m.ch + 1, `the input is ${m.sh}px high in a ${m.ch}px box: part of it is scrolled away`);
      assert.ok(m.sw <= m.cw + 1, `the input is ${m.sw}px wide in a ${m.cw}px box`);
      assert.equal(m.top, 0);
      const expiry = await card.locator('.request-expiry').boundingBox();
      const box = await card.boundingBox();
      assert.match(await card.locator('.request-expiry').textContent(), /^Denied automatically in \d+ min\.$/);
      const band = box.y + box.height - (expiry.y + expiry.height);
      assert.ok(band <= 30, `${band}px under the expiry line`);
      g.check();
      await context.close();
    });

    test('the question card says what happens to a question: dismissed if unanswered, answered once answered; never denied', async () => {
      const { p, g, context } = await page(viewport);
      await toApproval(p, 'Show me a question');
      await p.locator('section.request[data-kind="tool_approval"] button[data-action="approve"]').click();
      const q = p.locator('section.request[data-kind="question"]');
      await q.locator('input[type=radio]').first().waitFor({ timeout: 30000 });
      assert.match(await q.locator('.request-expiry').textContent(), /^Dismissed automatically in \d+ min\.$/);
      assert.doesNotMatch(await q.evaluate((el) => el.innerText), /Denied|denied/);
      await q.locator('input[type=radio]').first().check();
      await q.locator('button[type=submit]').click();
      await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 30000 });
      assert.match(await q.locator('summary.request-record').textContent(), /^Answered: /);
      assert.doesNotMatch(await q.evaluate((el) => el.textContent), /Denied|denied/);
      g.check();
      await context.close();
    });

    test('the Compare tab says how to give it evidence once', async () => {
      const { p, g, context } = await page(viewport);
      g.allow(/status of 404/);
      await p.goto(`${server.url}/#/compare`);
      await p.locator('.view-compare .problem').waitFor({ timeout: 15000 });
      const text = await p.locator('.view-compare').evaluate((el) => el.innerText);
      assert.equal(text.split('--evidence DIR').length - 1, 1, text);
      // What the tab is for, and a verdict to see now.
      assert.match(text, /baseline and a candidate/);
      assert.match(text, /--evidence fixtures\/verdict\/accept\.verdict\.json/);
      g.check();
      await context.close();
    });

    test('a run that is over says so once on its page', async () => {
      const { p, g, context } = await page(viewport);
      await p.goto(`${batch.url}/#/runs/${encodeURIComponent(finished.runId)}/tasks/agent`);
      await p.locator('section[aria-labelledby="run-sum-h"] .control-slot[data-live="false"]').waitFor({ timeout: 15000 });
      await p.locator('section[aria-labelledby="task-h"] .control-slot[data-live="false"]').waitFor({ state: 'attached', timeout: 15000 });
      const text = await p.locator('main, body').first().evaluate((el) => el.innerText);
      assert.equal(text.split('is over').length - 1, 1, text);
      g.check();
      await context.close();
    });

    test('every status shown is one of spec/LAYOUT.md\'s run statuses; a chat run\'s page shows no task state for it', async () => {
      const statuses = layoutStatuses();
      const { p, g, context } = await page(viewport);
      await toApproval(p, 'Status check');
      const runId = await p.locator('article.exchange').first().getAttribute('data-run-id');
      await p.goto(`${server.url}/#/`);
      await runRow(p, runId).waitFor({ timeout: 15000 });
      await waitFor(async () => (await runRow(p, runId).getAttribute('data-status')) === 'needs_input', { what: 'the waiting chat needs input' });
      const shown = await p.locator('table.runs .status-cell .badge').allTextContents();
      assert.ok(shown.length >= 1);
      for (const s of shown) assert.ok(statuses.includes(s.replace(/ /g, '_')), `"${s}" is not a run status of spec/LAYOUT.md (${statuses})`);
      const full = await runRow(p, runId).getAttribute('data-run-id');
      await p.goto(`${server.url}/#/runs/${encodeURIComponent(full)}/tasks/agent`);
      const facts = p.locator('section[aria-labelledby="run-sum-h"] dl.facts');
      await waitFor(async () => /Status/.test(await facts.textContent()), { what: 'the run facts' });
      const pairs = await facts.evaluate((dl) => Object.fromEntries([...dl.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
      assert.ok(statuses.includes(pairs.Status.replace(/ /g, '_')), JSON.stringify(pairs));
      assert.doesNotMatch(pairs.Tasks ?? '', /leased/, JSON.stringify(pairs));
      assert.match(await p.locator('.view-run, main').first().textContent(), /Status check · agui-thread-/, 'the run line leads with the thread name');
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

describe('the studio as used: coming back to a thread', () => {
  test('the address names the thread from its first message; a reload comes back to it; a message sent while an approval waits says it was not sent', async () => {
    const { p, g, context } = await page({ width: 1280, height: 800 });
    await toApproval(p, 'Come back to this');
    const thread = await p.locator('code.thread-id').textContent();
    await waitFor(async () => (await p.evaluate(() => location.hash)) === `#/chat/${encodeURIComponent(thread)}`, { what: 'the address naming the thread' });
    await p.reload();
    await p.locator('code.thread-id').waitFor();
    assert.equal(await p.locator('code.thread-id').textContent(), thread, 'the reload opened the same thread');
    // The approval still waits: a new message is not sent to the agent, and the page says so.
    await send(p, 'Something else meanwhile');
    const note = p.locator('ul.warnings li[data-code="input_not_sent"]');
    await note.waitFor({ timeout: 30000 });
    assert.match(await note.textContent(), /not sent/);
    assert.equal(await p.locator('article.exchange').last().locator('.msg.user.not-sent').count(), 1);
    g.check();
    await context.close();
  });

  test('at 390 px a card that needs you is marked whole, its bar beside the name, not over it', async () => {
    const { p, g, context } = await page({ width: 390, height: 844 });
    await toApproval(p, 'Mark me');
    const runId = await p.locator('article.exchange').first().getAttribute('data-run-id');
    await p.goto(`${server.url}/#/`);
    const row = p.locator(`tr.needs-you[data-run-id$="${runId}"]`);
    await row.waitFor({ timeout: 15000 });
    const m = await row.evaluate((tr) => {
      const th = tr.querySelector('th');
      const a = th.querySelector('a');
      return {
        tr: tr.getBoundingClientRect().left,
        name: a.getBoundingClientRect().left,
        thShadow: getComputedStyle(th).boxShadow,
        thBg: getComputedStyle(th).backgroundColor,
        trBg: getComputedStyle(tr).backgroundColor,
      };
    });
    assert.ok(m.name >= m.tr + 8, `the name starts ${m.name - m.tr}px into the card, under the 4px bar`);
    assert.equal(m.thShadow, 'none', 'the bar is the card\'s, not the cell\'s');
    assert.notEqual(m.trBg, 'rgba(0, 0, 0, 0)', 'the card itself is marked');
    g.check();
    await context.close();
  });

  test('a failed run says why in the runs list itself, not only in a tooltip', async () => {
    // A run whose agent fails (the stub engine exits 1), beside one that did not fail.
    const failing = await startServer({ args: ['--agent', 'claude'], env: { STUB_MODE: 'fail' } });
    try {
      await postRun(failing.url, { threadId: 't-fail', runId: 'r-fail', prompt: 'break' });
      const failed = await waitFor(async () => (await (await fetch(`${failing.url}/runs`)).json()).runs.find((r) => r.slug === 'agui-r-fail' && r.status === 'failed'), { what: 'the failed run' });
      assert.ok(failed.reason, JSON.stringify(failed));
      const { p, g, context } = await page({ width: 390, height: 844 });
      g.allow(/Failed to load resource/);
      await p.goto(`${failing.url}/#/runs`);
      const row = p.locator(`tr[data-run-id="${failed.runId}"]`);
      await row.waitFor({ timeout: 15000 });
      const reason = row.locator('.status-cell .reason');
      assert.ok(await reason.isVisible(), 'the reason is shown');
      assert.equal((await reason.textContent()).trim(), failed.reason);
      await p.goto(`${batch.url}/#/runs`);
      const over = p.locator(`tr[data-run-id="${finished.runId}"]`);
      await over.waitFor({ timeout: 15000 });
      if (finished.status !== 'failed') assert.equal(await over.locator('.status-cell .reason').isVisible(), false);
      g.check();
      await context.close();
    } finally {
      await failing.stop();
    }
  });
});
