import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { compareModel, costLine, evidenceLine } from '../app/state/compare.js';
import { repo } from './helpers.mjs';

// What GET /api/evidence answers: the verdict-check summary (the repository's
// golden `verdict-check --format json` output) plus source, policy and trials.
function sample() {
  const summary = JSON.parse(readFileSync(`${repo}fixtures/verdict/golden/accept.json`, 'utf8'));
  const verdict = JSON.parse(readFileSync(`${repo}fixtures/verdict/accept.verdict.json`, 'utf8'));
  return { ok: true, source: '/e/verdict.json', ...summary, policy: verdict.policy, trials: verdict.trials };
}

test('the accept sample: status, reason, variant rows, evidence and cost lines, trials', () => {
  const m = compareModel({ httpStatus: 200, body: sample() });
  assert.equal(m.kind, 'ok');
  assert.equal(m.status, 'accept');
  assert.equal(m.tone, 'good');
  assert.match(m.reason, /^Candidate won 2\/2 matched pairs/);
  // the same figures as verdict-check's table (fixtures/verdict/golden/accept.table)
  const table = readFileSync(`${repo}fixtures/verdict/golden/accept.table`, 'utf8');
  for (const row of m.variants) {
    const line = table.split('\n').find((l) => l.startsWith(row.variant));
    const cells = line.trim().split(/\s+/).slice(1);
    assert.deepEqual(
      [row.passedCompleted, row.passRate, row.meanScore, row.infraErrors, row.totalCost, row.costPerCompleted, row.credits],
      cells,
      row.variant,
    );
  }
  assert.ok(table.includes(`evidence  ${m.evidenceLine}`), m.evidenceLine);
  assert.ok(table.includes(`cost      ${m.costLine}`), m.costLine);
  assert.equal(m.trials.length, 4);
  assert.deepEqual(
    m.trials.map((t) => [t.variant, t.trial, t.classification, t.score, t.passed]),
    [['baseline', '1', 'failed', '42', 'no'], ['baseline', '2', 'failed', '42', 'no'], ['candidate', '1', 'passed', '90', 'yes'], ['candidate', '2', 'passed', '90', 'yes']],
  );
  assert.equal(m.trials[2].duration, '1m 15s');
  assert.ok(m.policy.some((p) => p.key === 'maxCostRatio' && p.value === '1.3'));
});

test('malformed evidence: the error sentence and every finding, with the count of the rest', () => {
  const body = {
    ok: false,
    error: 'verdict.json does not hold up: 2 findings.',
    findings: [{ source: 'verdict.json', path: 'candidate.passRate', message: 'candidate.passRate is 0.5, but passedTrials / completedTrials is 1' }],
    total: 3,
  };
  const m = compareModel({ httpStatus: 422, body });
  assert.equal(m.kind, 'invalid');
  assert.equal(m.message, body.error);
  assert.equal(m.findings[0].path, 'candidate.passRate');
  assert.equal(m.more, 2);
});

test('no evidence: what the page is for, and how to see one now', () => {
  const m = compareModel({ httpStatus: 404, body: { error: 'no evidence: start runwire-serve with --evidence DIR' } });
  assert.equal(m.kind, 'absent');
  assert.match(m.about, /baseline and a candidate/);
  assert.match(m.about, /recomputes/);
  assert.match(m.hint, /^DIR is a directory/);
  assert.match(m.hint, /--evidence fixtures\/verdict\/accept\.verdict\.json$/);
  // The server's message already says how to start it: the hint does not say it again.
  assert.equal(m.hint.match(/--evidence DIR/g), null);
});

test('no evidence, a server error, a non-JSON body, a network failure: never blank', () => {
  const cases = [
    [{ httpStatus: 404, body: { error: 'no --evidence given' } }, 'absent', 'no --evidence given'],
    [{ httpStatus: 500, body: { error: 'boom' } }, 'error', 'boom'],
    [{ httpStatus: 502, body: '<html>Bad gateway</html>' }, 'error', '<html>Bad gateway</html>'],
    [{ httpStatus: null, body: null, networkError: 'Failed to fetch' }, 'error', 'Failed to fetch'],
    [{ httpStatus: 200, body: [] }, 'error', 'The server did not answer with a JSON object.'],
  ];
  for (const [answer, kind, message] of cases) {
    const m = compareModel(answer);
    assert.equal(m.kind, kind, JSON.stringify(answer));
    assert.equal(m.message, message);
    assert.ok(m.title.length > 0);
  }
});

test('partial summaries degrade to empty cells, not exceptions', () => {
  const m = compareModel({ httpStatus: 200, body: { status: 'reject', reason: 'r', evidence: { pairs: 1 }, trials: [null, { variant: 'baseline' }] } });
  assert.equal(m.tone, 'bad');
  assert.equal(m.evidenceLine, '1 matched pair');
  assert.equal(m.costLine, '');
  assert.equal(m.variants[0].passedCompleted, '');
  assert.equal(m.trials.length, 2);
  assert.equal(evidenceLine(undefined), '');
  assert.equal(costLine({ costRatio: 1.5, maxCostRatio: 1.3, withinCostGuardrail: false }), "per completed trial 1.5x the baseline's, above the 1.3x guardrail");
});
