// The compare model: GET /api/evidence's answer → what the Compare view
// shows. No DOM, never throws: whatever the server says (a summary, a
// malformed-evidence report, no evidence configured, something unexpected),
// the result is a view model with something readable in it.

import { formatDuration, formatPercent, formatUsd, trimNumber } from './format.js';

const STATUS_TONE = {
  accept: 'good',
  need_more_work: 'warn',
  reject: 'bad',
  insufficient_evidence: 'warn',
  infrastructure_error: 'bad',
};

const VARIANTS = ['baseline', 'candidate'];

function num(v) {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function text(v) {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v);
}

/** One per-variant row, in the columns verdict-check prints. */
export function variantRow(name, agg) {
  const a = agg && typeof agg === 'object' ? agg : {};
  const passed = num(a.passedTrials);
  const completed = num(a.completedTrials);
  return {
    variant: name,
    trials: num(a.trials),
    passedCompleted: passed !== null && completed !== null ? `${passed}/${completed}` : '',
    passRate: num(a.passRate) !== null ? formatPercent(a.passRate) : '',
    meanScore: num(a.meanScore) !== null ? trimNumber(a.meanScore, 6) : '',
    infraErrors: num(a.infrastructureErrors) !== null ? String(a.infrastructureErrors) : '',
    totalCost: num(a.totalCostUsd) !== null ? trimNumber(a.totalCostUsd, 6) : '',
    costPerCompleted: num(a.costPerCompletedTrialUsd) !== null ? trimNumber(a.costPerCompletedTrialUsd, 6) : '',
    credits: num(a.totalCredits) !== null ? trimNumber(a.totalCredits, 6) : '',
  };
}

/** "2 matched pairs (2 required): candidate wins 2, baseline wins 0, ties 0; mean score delta 48" */
export function evidenceLine(ev) {
  const e = ev && typeof ev === 'object' ? ev : {};
  if (num(e.pairs) === null) return '';
  const req = num(e.minimumMatchedPairs) !== null ? ` (${e.minimumMatchedPairs} required)` : '';
  const parts = [`${e.pairs} matched pair${e.pairs === 1 ? '' : 's'}${req}`];
  const wins = [];
  if (num(e.candidateWins) !== null) wins.push(`candidate wins ${e.candidateWins}`);
  if (num(e.baselineWins) !== null) wins.push(`baseline wins ${e.baselineWins}`);
  if (num(e.ties) !== null) wins.push(`ties ${e.ties}`);
  let line = parts[0];
  if (wins.length) line += `: ${wins.join(', ')}`;
  if (num(e.meanScoreDelta) !== null) line += `; mean score delta ${trimNumber(e.meanScoreDelta, 6)}`;
  return line;
}

/** "per completed trial 1.272727x the baseline's, within the 1.3x guardrail" */
export function costLine(ev) {
  const e = ev && typeof ev === 'object' ? ev : {};
  if (num(e.costRatio) === null) return '';
  let line = `per completed trial ${trimNumber(e.costRatio, 6)}x the baseline's`;
  if (num(e.maxCostRatio) !== null) {
    const within = e.withinCostGuardrail === false ? 'above' : 'within';
    line += `, ${within} the ${trimNumber(e.maxCostRatio, 6)}x guardrail`;
  }
  return line;
}

/** A trial row as the trials table shows it. */
export function trialRow(t) {
  const r = t && typeof t === 'object' ? t : {};
  const g = r.grade && typeof r.grade === 'object' ? r.grade : {};
  const m = r.metrics && typeof r.metrics === 'object' ? r.metrics : {};
  const duration = num(r.durationMs) ?? num(m.durationMs);
  return {
    variant: text(r.variant),
    trial: num(r.trial) !== null ? String(r.trial) : text(r.trial),
    harness: text(r.harnessId),
    classification: text(r.classification),
    score: num(g.score) !== null ? trimNumber(g.score, 6) : '',
    passed: typeof g.passed === 'boolean' ? (g.passed ? 'yes' : 'no') : '',
    cost: num(m.costUsd) !== null ? formatUsd(m.costUsd) : '',
    turns: num(m.turns) !== null ? String(m.turns) : '',
    duration: duration !== null ? formatDuration(duration) : '',
    exit: num(r.executorExitCode) !== null ? String(r.executorExitCode) : '',
    error: text(r.executorError),
    revision: text(r.revisionId),
  };
}

/**
 * @param {{httpStatus: number|null, body: any, networkError?: string}} answer
 *   httpStatus null with networkError when the request itself failed; body is
 *   the parsed JSON, or a string when the body was not JSON.
 */
export function compareModel(answer) {
  const a = answer && typeof answer === 'object' ? answer : {};
  const status = a.httpStatus;
  const body = a.body;
  if (status === null || status === undefined) {
    return { kind: 'error', title: 'The evidence could not be fetched', message: text(a.networkError) || 'network error' };
  }
  if (status === 404) {
    const msg = body && typeof body === 'object' && typeof body.error === 'string' ? body.error : '';
    return {
      kind: 'absent',
      title: 'No compare verdict on this server',
      message: msg || 'This server was started without --evidence.',
      // What the page is for, to someone who has not met a verdict yet.
      about:
        'Compare shows the verdict of a harness compare run: the same tasks run by a baseline and a candidate ' +
        '(agents, models or settings), every trial, and whether the candidate is accepted. Before showing it, ' +
        'runwire recomputes every figure and the decision from the trial rows (verdict-check), so a verdict ' +
        'with invented numbers is shown as invalid, not as a result.',
      // Said once: the server's message may already say how to start it.
      hint: `${/--evidence DIR/.test(msg) ? 'DIR is a directory holding verdict.json, or a verdict file.' : 'Start runwire-serve with --evidence DIR (a directory holding verdict.json, or a verdict file).'} ` +
        'To see one now, from a clone of runwire: runwire-serve --evidence fixtures/verdict/accept.verdict.json',
    };
  }
  if (status === 401) {
    return { kind: 'error', title: 'Not authorised', message: 'This server needs a token: open the page as /#token=YOUR_TOKEN.' };
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    return {
      kind: 'error',
      title: `Unexpected answer (HTTP ${status})`,
      message: typeof body === 'string' && body.trim() ? body.trim().slice(0, 500) : 'The server did not answer with a JSON object.',
    };
  }
  if (status === 422 || body.ok === false) {
    const findings = Array.isArray(body.findings) ? body.findings : [];
    const total = num(body.total) ?? findings.length;
    return {
      kind: 'invalid',
      title: 'The evidence does not hold up',
      message: text(body.error) || 'The evidence is malformed.',
      findings: findings.map((f) => ({
        source: text(f && f.source),
        path: text(f && f.path),
        message: text(f && f.message),
      })),
      total,
      more: Math.max(0, total - findings.length),
    };
  }
  if (status < 200 || status >= 300) {
    return {
      kind: 'error',
      title: `The server answered HTTP ${status}`,
      message: text(body.error) || text(body.detail) || 'no detail given',
    };
  }
  const verdictStatus = text(body.status);
  const trials = Array.isArray(body.trials) ? body.trials : [];
  const policy = body.policy && typeof body.policy === 'object' ? body.policy : null;
  return {
    kind: 'ok',
    title: verdictStatus ? verdictStatus.replace(/_/g, ' ') : 'unknown status',
    status: verdictStatus,
    tone: STATUS_TONE[verdictStatus] || 'warn',
    reason: text(body.reason),
    source: text(body.source),
    variants: VARIANTS.map((v) => variantRow(v, body[v])),
    evidenceLine: evidenceLine(body.evidence),
    costLine: costLine(body.evidence),
    policy: policy
      ? Object.entries(policy)
          .filter(([, v]) => typeof v !== 'object')
          .map(([k, v]) => ({ key: k, value: String(v) }))
      : [],
    trials: trials.map(trialRow),
  };
}
