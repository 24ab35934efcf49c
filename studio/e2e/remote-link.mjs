// Issue 39: an approval link answered from a phone, through the reverse
// proxy of examples/remote/Caddyfile with TLS. Driven by
// tests/it/remote.rs, which starts runwire-serve on a unix socket and Caddy
// in front of it, and has put Caddy's root certificate into the NSS store
// under $HOME (so Chromium trusts it as a phone that imported it would; no
// certificate error is ignored).
//
//   STUDIO_CHROMIUM=… LINK=https://rw.test:PORT/a/TOKEN MAP="MAP rw.test 127.0.0.1" node e2e/remote-link.mjs
//
// Prints one JSON line: what the page showed, whether it fits 390 px, what
// the Approve button answered, and what an unpublished route answered.

import { chromium } from 'playwright-core';

const link = process.env.LINK;
const browser = await chromium.launch({
  executablePath: process.env.STUDIO_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  env: { ...process.env },
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    `--host-resolver-rules=${process.env.MAP}`,
  ],
});
const out = {};
try {
  // A phone's viewport, touch and all.
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  // A Content-Security-Policy refusal (of the page's own style, say) is a
  // console error (the 404s of the favicon and the unpublished route are not problems).
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(m.text()); });
  const res = await page.goto(link);
  out.status = res.status();
  out.secure = new URL(page.url()).protocol === 'https:';
  out.text = await page.locator('body').innerText();
  out.scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  out.clientWidth = await page.evaluate(() => document.documentElement.clientWidth);
  // The page's own style applied (its policy allows it by hash): 40em at 16px.
  out.bodyMaxWidth = await page.evaluate(() => getComputedStyle(document.body).maxWidth);
  const approve = page.locator('form:has(input[name="decision"][value="allow"]) button[type="submit"]');
  const box = await approve.boundingBox();
  out.approveFits = !!box && box.x >= 0 && box.x + box.width <= 390;
  await Promise.all([page.waitForNavigation(), approve.tap()]);
  out.after = await page.locator('body').innerText();
  // What the proxy does not publish.
  const other = await page.goto(new URL('/api/info', link).href);
  out.unpublished = other.status();
  out.problems = problems;
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
