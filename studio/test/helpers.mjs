// Shared by the unit tests: the repository's own golden files (real outputs
// of the translator and the normalizer), read as JSON lines; a scripted SSE
// response for the followers' tests.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repo = fileURLToPath(new URL('../../', import.meta.url));

export function jsonLines(rel) {
  return readFileSync(repo + rel, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** A Response whose body yields `chunks` (SSE text), then ends ('eof'),
 * errors ('broken', as a dropped connection) or hangs: what the followers'
 * tests script fetch with. */
export function sseResponse(status, chunks, end = 'eof') {
  const enc = new TextEncoder();
  const body = new ReadableStream({
    async pull(ctrl) {
      if (chunks.length) {
        ctrl.enqueue(enc.encode(chunks.shift()));
        return;
      }
      await new Promise((r) => setTimeout(r, 5));
      if (end === 'hang') return new Promise(() => {});
      if (end === 'broken') ctrl.error(new TypeError('network error'));
      else ctrl.close();
    },
  });
  return new Response(body, { status, headers: { 'Content-Type': 'text/event-stream' } });
}
