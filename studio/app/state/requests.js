// The request card model: what the agent is waiting for (a tool approval, a
// question, a plan approval), read from an AG-UI interrupt (chat) or an
// events/v1 input_request (task view), and the answer a person gives, written
// as an AG-UI resume entry or as the body of POST …/tasks/:tid/answer.
// No DOM.

import { argPreview } from './toolcards.js';

function str(v) {
  return typeof v === 'string' ? v : null;
}

function obj(v) {
  return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
}

function questionsOf(list) {
  if (!Array.isArray(list)) return [];
  return list
    .filter((q) => obj(q) && typeof q.question === 'string')
    .map((q) => ({
      question: q.question,
      header: str(q.header),
      multiSelect: q.multiSelect === true || q.multi_select === true,
      // The question takes the person's own words besides its options
      // (claude's "Other", codex's isOther): AG-UI metadata or events/v1.
      freeText: q.freeText === true || q.free_text === true,
      options: (Array.isArray(q.options) ? q.options : [])
        .filter((o) => obj(o) && typeof o.label === 'string')
        .map((o) => ({ label: o.label, description: str(o.description) })),
    }));
}

function kindOf(k, reason) {
  if (k === 'tool_approval' || k === 'question' || k === 'plan_approval') return k;
  return reason === 'input_required' ? 'question' : 'tool_approval';
}

/** Pretty JSON of a tool input, or '' when there is none. */
export function inputText(input) {
  if (input === undefined || input === null) return '';
  try {
    return JSON.stringify(input, null, 2);
  } catch {
    return '';
  }
}

function card(fields) {
  return {
    answered: null,
    error: null,
    ...fields,
    inputText: inputText(fields.input),
  };
}

/**
 * The scopes an interrupt offers beyond "once" (its responseSchema's scope
 * enum), each with what it grants in words (metadata.runwire.scopes):
 * {session: text|null, always: text|null}; absent ones are null.
 */
function scopesOf(props, meta) {
  const list = Array.isArray(obj(props?.scope)?.enum) ? props.scope.enum : [];
  const words = obj(meta.scopes) ?? {};
  const one = (name, dflt) => (list.includes(name) ? str(words[name]) ?? dflt : null);
  return { session: one('session', 'for this session'), always: one('always', 'always, saved by the agent') };
}

/**
 * The suggested grants runwire applies if the person approves for the
 * session or always (metadata.runwire.permissionUpdates, the applied ones):
 * [{effect, reaches: [resolved path…], runsAnything: why|null}]. `effect`
 * already names each directory's resolved path; `reaches` is where a path
 * rule or directory reaches once symlinks, `..` and claude's anchors are
 * resolved; `runsAnything` says why a command rule runs any command.
 */
export function grantsOf(list) {
  if (!Array.isArray(list)) return [];
  return list
    .filter((u) => obj(u) && u.applied === true && typeof u.effect === 'string')
    .map((u) => ({
      effect: u.effect,
      reaches: Array.isArray(u.reaches) ? u.reaches.filter((p) => typeof p === 'string') : [],
      runsAnything: str(u.runsAnything),
    }));
}

/** A card from an AG-UI Interrupt (RUN_FINISHED.outcome.interrupts[i]); null if it is not one. */
export function fromInterrupt(i) {
  if (!obj(i) || typeof i.id !== 'string' || typeof i.reason !== 'string') return null;
  const meta = obj(obj(i.metadata)?.runwire) ?? {};
  const props = obj(obj(i.responseSchema)?.properties);
  return card({
    source: 'agui',
    id: i.id,
    reason: i.reason,
    kind: kindOf(meta.kind, i.reason),
    tool: str(meta.tool),
    toolCallId: str(i.toolCallId),
    input: meta.input ?? null,
    suggestions: Array.isArray(meta.suggestions) ? meta.suggestions : [],
    questions: questionsOf(meta.questions),
    message: str(i.message),
    expiresAt: str(i.expiresAt),
    // Only a schema offering editedArgs may be answered with edits.
    editable: !!obj(props?.editedArgs),
    // Each scope only where the agent offers it; the deny reason only where it reaches the agent.
    scopes: scopesOf(props, meta),
    tellsReason: !!obj(props?.message),
    // Suggested grants runwire will not apply (they need --grant-all): the card says so.
    dropped: str(meta.droppedUpdates),
    // The ones it applies on "for this session"/"always", where they reach and what runs anything.
    grants: grantsOf(meta.permissionUpdates),
  });
}

/** A card from an events/v1 input_request's data; null if it is not one. */
export function fromInputRequest(d) {
  if (!obj(d) || typeof d.id !== 'string') return null;
  return card({
    source: 'task',
    id: d.id,
    // runwire's id for the request: the supervisor's answer takes it, never
    // the agent's own id (another process of the task may reuse that).
    interruptId: str(d.interrupt_id),
    reason: d.kind === 'question' ? 'input_required' : 'tool_call',
    kind: kindOf(d.kind, null),
    tool: str(d.tool),
    toolCallId: str(d.tool_call_id),
    input: d.input ?? null,
    suggestions: Array.isArray(d.suggestions) ? d.suggestions : [],
    questions: questionsOf(d.questions),
    message: str(d.message),
    expiresAt: str(d.expires_at),
    editable: d.kind !== 'question',
    // The task route checks the scope against what the agent offered.
    scopes: { session: 'for this session', always: null },
    tellsReason: true,
    dropped: null,
    grants: [],
  });
}

/** True when `now` (ms) is past the card's expiresAt. */
export function isExpired(c, now = Date.now()) {
  if (!c.expiresAt) return false;
  const t = Date.parse(c.expiresAt);
  return Number.isFinite(t) && now >= t;
}

/** A short human line for the card's deadline ('' without one). */
export function expiresText(c, now = Date.now()) {
  if (!c.expiresAt) return '';
  const t = Date.parse(c.expiresAt);
  if (!Number.isFinite(t)) return '';
  const s = Math.round((t - now) / 1000);
  // A question is not denied: left unanswered, it is dismissed.
  const what = c.kind === 'question' ? 'dismissed' : 'denied';
  if (s <= 0) return `Expired: ${what} automatically.`;
  const When = what[0].toUpperCase() + what.slice(1);
  if (s < 120) return `${When} automatically in ${s} s.`;
  return `${When} automatically in ${Math.round(s / 60)} min.`;
}

/**
 * Reads an action into a decision, or `{error}`.
 * Actions: {type: 'approve', scope?: 'once'|'session'|'always', edited?: string (JSON text)},
 * {type: 'deny', reason?: string}, {type: 'answer', answers: {question: label | [labels]}}
 * (a label may be the person's own text where the question takes free text: at most one
 * per question, never blank; the server checks the same),
 * {type: 'cancel'}.
 */
export function decide(c, action) {
  if (!obj(action)) return { error: 'no action' };
  switch (action.type) {
    case 'approve': {
      if (c.kind === 'question') return { error: 'a question is answered, not approved' };
      const scope = ['session', 'always'].includes(action.scope) ? action.scope : 'once';
      if (scope !== 'once' && !(c.scopes && c.scopes[scope])) return { error: `the agent offers no “${scope}” grant for this request` };
      const d = { decision: 'allow', scope };
      const text = typeof action.edited === 'string' ? action.edited.trim() : '';
      if (text && text !== c.inputText.trim()) {
        let v;
        try {
          v = JSON.parse(text);
        } catch (e) {
          return { error: `the edited input is not valid JSON: ${e.message}` };
        }
        if (!obj(v)) return { error: 'the edited input must be a JSON object (the whole input)' };
        d.input = v;
      }
      return d;
    }
    case 'deny': {
      const reason = typeof action.reason === 'string' ? action.reason.trim() : '';
      return { decision: 'deny', message: reason || 'Denied from the studio.' };
    }
    case 'answer': {
      if (c.kind !== 'question') return { error: 'only a question takes answers' };
      const given = obj(action.answers) ?? {};
      const answers = {};
      for (const q of c.questions) {
        const v = given[q.question];
        const list = (Array.isArray(v) ? v : [v]).filter((x) => typeof x === 'string');
        // A blank entry is an "Other" chosen with nothing typed.
        if (list.some((x) => x.trim() === '')) return { error: `type your own answer to “${q.question}”, or choose an option` };
        if (list.length === 0) return { error: `choose an answer to “${q.question}”` };
        if (!q.multiSelect && list.length > 1) return { error: `“${q.question}” takes one answer` };
        const own = q.options.length ? list.filter((x) => !q.options.some((o) => o.label === x)) : [];
        if (own.length && !q.freeText) return { error: `“${own[0]}” is not one of the choices of “${q.question}”` };
        if (own.length > 1) return { error: `“${q.question}” takes at most one answer of your own` };
        answers[q.question] = q.multiSelect ? list : list[0];
      }
      return { decision: 'answer', answers };
    }
    case 'cancel':
      return { decision: 'cancelled' };
    default:
      return { error: `unknown action ${String(action.type)}` };
  }
}

/** The AG-UI resume entry for a decision (see decide). */
export function resumeEntry(c, d) {
  if (d.decision === 'cancelled') return { interruptId: c.id, status: 'cancelled' };
  let payload;
  if (d.decision === 'answer') payload = { answers: d.answers };
  else if (d.decision === 'deny') payload = { approved: false, message: d.message };
  else {
    payload = { approved: true };
    if (d.scope === 'session' || d.scope === 'always') payload.scope = d.scope;
    if (d.input) payload.editedArgs = d.input;
  }
  return { interruptId: c.id, status: 'resolved', payload };
}

/** The body of POST /runs/:id/tasks/:tid/answer for a decision. */
export function answerBody(c, d) {
  const b = { request: c.interruptId ?? c.id, decision: d.decision, by: 'studio' };
  if (d.decision === 'allow') {
    if (d.scope === 'session' || d.scope === 'always') b.scope = d.scope;
    if (d.input) b.updated_input = d.input;
  }
  if (d.decision === 'deny') b.message = d.message;
  if (d.decision === 'answer') b.answers = d.answers;
  return b;
}

function scopeWords(scope) {
  if (scope === 'session') return ' for the session';
  if (scope === 'always') return ' always (saved by the agent)';
  return '';
}

/** An approved plan's permission mode, as the journal and the answer line say it. */
function modeWords(mode) {
  return typeof mode === 'string' && mode ? `, carried out in ${mode}` : '';
}

/** Words for a decision, shown on the card once it is answered. */
export function decisionText(d, kind = null) {
  // What happens to a question: answered, dismissed (refused unanswered) or expired; never "denied".
  if (kind === 'question' && d.decision === 'deny') return d.message && !STOCK_DENIALS.includes(d.message.trim()) ? `Dismissed: ${d.message}` : 'Dismissed.';
  if (kind === 'question' && d.decision === 'expired') return 'Expired: dismissed unanswered.';
  switch (d.decision) {
    case 'allow':
      return `Approved${scopeWords(d.scope)}${d.input ? ' with edits' : ''}${modeWords(d.mode)}.`;
    case 'deny':
      return `Denied: ${d.message}`;
    case 'answer':
      return `Answered: ${Object.values(d.answers)
        .map((v) => (Array.isArray(v) ? v.join(', ') : v))
        .join('; ')}.`;
    case 'cancelled':
      return 'Cancelled.';
    case 'expired':
      return 'Expired: denied automatically.';
    default:
      return String(d.decision);
  }
}

/**
 * The open requests of a task stream: input_request opens a card,
 * input_answer closes it (with how). `cards` is a Map id -> card.
 */
export function applyInput(cards, type, data) {
  if (type === 'input_request') {
    const c = fromInputRequest(data);
    if (c && !cards.has(c.id)) cards.set(c.id, c);
    return c;
  }
  if (type === 'input_answer' && obj(data) && typeof data.id === 'string') {
    const c = cards.get(data.id);
    if (c && !c.answered) {
      c.answered = {
        decision: str(data.decision) ?? 'answered',
        scope: str(data.scope),
        input: obj(data.updated_input),
        mode: str(data.mode),
        message: str(data.message) ?? '',
        answers: obj(data.answers) ?? {},
        by: str(data.by),
        at: str(data.at),
      };
    }
    return c ?? null;
  }
  return null;
}

/** The card's heading: what is asked, naming the tool once ("Allow Bash?"). */
export function cardTitle(c) {
  if (c.kind === 'question') return 'The agent asks';
  if (c.kind === 'plan_approval') return 'Approve the plan?';
  return c.tool ? `Allow ${c.tool}?` : 'Allow this tool call?';
}

/**
 * The request's message when it says more than the card shows already: not
 * the server's stock "Allow TOOL?" (the heading says it), nor a question's
 * own text (its fieldset says it). null when there is nothing to add.
 */
export function cardMessage(c) {
  const m = typeof c.message === 'string' ? c.message.trim() : '';
  if (!m) return null;
  if (c.kind === 'question') {
    const qs = c.questions.map((q) => q.question.trim());
    const lines = m.split('\n').map((l) => l.trim()).filter(Boolean);
    if (lines.every((l) => qs.includes(l))) return null;
    return m;
  }
  const tool = c.tool || 'a tool';
  if ([`Allow ${tool}?`, `Approve the plan and start ${tool}?`, cardTitle(c)].includes(m)) return null;
  return m;
}

const STOCK_DENIALS = ['Denied from the studio.', 'The user denied this.'];

/** `12:04` (local time) of a Date, ISO string or epoch ms; '' when unreadable. */
export function clockTime(at) {
  const d = at instanceof Date ? at : new Date(at);
  return Number.isFinite(d.getTime()) ? d.toTimeString().slice(0, 5) : '';
}

/**
 * The one-line record an answered card collapses to, e.g. Approved Bash
 * `rm -rf build` · 12:04. Returns its parts (`code` is shown as code) and
 * `text`, the whole line. `at`: when it was answered; `by`: who, when it was
 * not this page.
 */
export function recordLine(c, d, { at = null, by = null } = {}) {
  const subject = c.kind === 'plan_approval' ? 'the plan' : c.kind === 'question' ? '' : c.tool || 'the tool call';
  const input = d.input || c.input;
  const code = c.kind === 'tool_approval' && input && typeof input === 'object'
    ? argPreview({ args: input, argsText: '', argsDone: true, argsValid: true }, 60)
    : '';
  let lead;
  let tail = '';
  switch (d.decision) {
    case 'allow':
      lead = `Approved${scopeWords(d.scope)}`;
      if (d.input) tail = ' with edits';
      tail += modeWords(d.mode);
      break;
    case 'deny':
      lead = c.kind === 'question' ? 'Dismissed' : 'Denied';
      if (d.message && !STOCK_DENIALS.includes(d.message.trim())) tail = `: ${d.message.trim()}`;
      break;
    case 'expired':
      lead = c.kind === 'question' ? 'Expired, dismissed unanswered' : 'Expired, denied automatically:';
      break;
    case 'cancelled':
      lead = 'Cancelled:';
      break;
    case 'answer': {
      const answers = Object.values(d.answers || {}).map((v) => (Array.isArray(v) ? v.join(', ') : String(v)));
      lead = `Answered: ${answers.join('; ')}`;
      break;
    }
    default:
      lead = `Closed (${String(d.decision)})`;
  }
  const who = by ? ` by ${by}` : '';
  const time = at === null ? '' : clockTime(at);
  const head = [lead, d.decision === 'answer' ? '' : subject].filter(Boolean).join(' ');
  const text = `${head}${code ? ` \`${code}\`` : ''}${tail}${who}${time ? ` · ${time}` : ''}`;
  return { head, code, tail: `${tail}${who}`, time, text };
}

/**
 * The cards of `cards` (a Map id → card of an AG-UI run's interrupts, keyed
 * by runwire's interrupt id) that the run's journal says were answered
 * while this page had them open: in another page, through the task view,
 * an approval link or another client. `answers`: `GET /runs/:id`'s
 * `answers` (journal records: interrupt, decision, by, detail, ts, and
 * what an allow granted: scope, updated_input, mode).
 * `cards` holds only the cards whose answer this page has not sent (a card
 * only noted here, to be sent with the others, is one). Returns
 * [{ id, d: { decision, scope, input, mode, message, answers, by, at } }],
 * one per card, from the first answer the journal holds for it.
 */
export function answeredElsewhere(answers, cards) {
  if (!Array.isArray(answers)) return [];
  const out = [];
  for (const a of answers) {
    if (!obj(a) || typeof a.interrupt !== 'string') continue;
    const c = cards.get(a.interrupt);
    if (!c || out.some((o) => o.id === c.id)) continue;
    const decision = str(a.decision) ?? 'answered';
    let detailAnswers = null;
    if (decision === 'answer' && typeof a.detail === 'string') {
      try {
        detailAnswers = obj(JSON.parse(a.detail));
      } catch {
        detailAnswers = null;
      }
    }
    // The edited input as the journal keeps it: JSON text, redacted, maybe clipped (then unparsed, still an edit).
    let input = null;
    if (typeof a.updated_input === 'string') {
      try {
        input = obj(JSON.parse(a.updated_input)) ?? {};
      } catch {
        input = {};
      }
    }
    out.push({
      id: c.id,
      d: {
        decision,
        scope: str(a.scope),
        input,
        mode: str(a.mode),
        message: decision === 'answer' ? '' : str(a.detail) ?? '',
        answers: detailAnswers ?? {},
        by: str(a.by),
        at: str(a.ts),
      },
    });
  }
  return out;
}
