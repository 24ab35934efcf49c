// Browser test of an approval link in the studio (issue 39): Chromium
// (playwright-core) against the real runwire-serve --agent claude
// --interactive --public-url … --link-secret-file …, whose agent is
// examples/trust-agent (beside the server binary). The task view's card of
// the open request offers "Copy approval link"; the copied link is the one
// journaled with the request; its page (no bearer token) approves once, and
// the card closes saying who answered: the link. At 1280 and 390 px.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/links.test.mjs   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { guard, launchBrowser, removeTempDirs, serverBinary, startServer, tempDir, waitFor, jsonLines } from './harness.mjs';

const SIZES = [{ width: 1280, height: 800 }, { width: 390, height: 844 }];
const PUBLIC = 'https://rw.example.test';

function trustAgent() {
  return path.join(path.dirname(serverBinary()), 'examples', 'trust-agent');
}

const haveAgent = existsSync(trustAgent());
if (!haveAgent && process.env.CI) {
  throw new Error(`${trustAgent()} is missing: cargo build --example trust-agent`);
}

let browser;
const servers = [];

before(async () => {
  if (haveAgent) browser = await launchBrowser();
});

after(async () => {
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

/** The server's journal records (serve/runstate/*.jsonl, not the agents' logs). */
function journal(s) {
  const dir = path.join(s.home, 'serve', 'runstate');
  return readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl') && !n.includes('.agent.') && !n.includes('.steer.'))
    .flatMap((n) => jsonLines(path.join(dir, n)));
}

function allows(log) {
  return jsonLines(log).map((l) => l.line)
    .filter((l) => l.type === 'control_response' && l.response.response.behavior === 'allow').length;
}

describe('an approval link in the studio', { skip: !haveAgent && 'no trust-agent built' }, () => {
  for (const size of SIZES) {
    test(`at ${size.width} px: the card copies the request's link; the link approves once; the card says by whom`, async () => {
      const logs = tempDir('links-log');
      const log = path.join(logs, 'agent-input.jsonl');
      const secret = path.join(logs, 'link-secret');
      writeFileSync(secret, '0123456789abcdef0123456789abcdef-secret\n');
      const requests = [{ request_id: 'b1', tool_name: 'Bash', input: { command: 'npm test' } }];
      const s = await startServer({
        args: ['--agent', 'claude', '--interactive', '--agent-cmd', trustAgent(), '--public-url', PUBLIC, '--link-secret-file', secret],
        env: { TRUST_PROTO: 'claude', TRUST_LOG: log, TRUST_STATE: path.join(logs, 'processes'), TRUST_REQUESTS: JSON.stringify(requests) },
      });
      servers.push(s);
      const res = await fetch(`${s.url}/agui`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ threadId: 'lk', runId: 'lk-1', messages: [{ id: 'm1', role: 'user', content: 'test it' }] }),
      });
      const body = await res.text();
      assert.match(body, /"outcome":\{"type":"interrupt"/);
      const run = /"run":"([^"]+)"/.exec(body)[1];
      const journaled = await waitFor(() => journal(s).find((r) => r.input === 'requested')?.links?.[0], { what: 'the journaled link' });
      const context = await browser.newContext({ viewport: size, permissions: ['clipboard-read', 'clipboard-write'] });
      const p = await context.newPage();
      const g = guard(p);
      await p.goto(`${s.url}/#/runs/${encodeURIComponent(run)}/tasks/agent`);
      await p.locator('section.request[data-state="open"]').waitFor({ timeout: 30000 });
      // Found by its request, whatever its state.
      const card = p.locator(`section.request[data-request-id="${await p.locator('section.request').first().getAttribute('data-request-id')}"]`);
      const copy = card.locator('button[data-action="copy-link"]');
      await copy.waitFor({ timeout: 30000 });
      const box = await copy.boundingBox();
      assert.ok(box && box.x >= 0 && box.x + box.width <= size.width, `the button fits ${size.width} px: ${JSON.stringify(box)}`);
      await copy.click();
      await waitFor(async () => /Copied/.test(await card.locator('.request-link-row').innerText()), { what: 'the copy said' });
      const copied = await p.evaluate(() => navigator.clipboard.readText());
      assert.equal(copied, journaled);
      // The link answers without the studio or a bearer token (its own capability).
      const linkPath = copied.slice(PUBLIC.length);
      const post = () => fetch(`${s.url}${linkPath}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ decision: 'allow' }) });
      assert.equal((await post()).status, 200);
      await waitFor(() => allows(log) === 1, { what: 'the allow at the agent' });
      await waitFor(async () => (await card.getAttribute('data-state')) === 'answered', { what: 'the card answered' });
      assert.match(await card.locator('summary').innerText(), /link/);
      assert.ok([409, 410].includes((await post()).status), 'a second POST is refused');
      assert.equal(await card.locator('button[data-action="copy-link"]').count(), 0, 'no link offered for an answered request');
      assert.equal(allows(log), 1);
      g.check();
      await context.close();
    });
  }
});
