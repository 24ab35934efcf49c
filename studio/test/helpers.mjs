// Shared by the unit tests: the repository's own golden files (real outputs
// of the translator and the normalizer), read as JSON lines.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repo = fileURLToPath(new URL('../../', import.meta.url));

export function jsonLines(rel) {
  return readFileSync(repo + rel, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}
