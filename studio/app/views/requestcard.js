// A request card: what the agent waits for (a tool approval, a question, a
// plan approval) and the controls to answer it. Native buttons, inputs and
// fieldsets only, so every control works by keyboard; the card reflows to
// one column on a narrow screen (style.css, .request). A question that takes
// the person's own words (card question freeText) adds "Other…" with a text
// box: typing in it chooses "Other"; a question with no options is the text
// box alone. `onDecide(decision)` sends the answer and resolves to {ok, text}.
// Once answered, the card collapses to a one-line record (a <details> whose
// summary is the record: the whole card stays a click away), so a long
// conversation is not a stack of stale cards; `onClosed(view)` is told.

import { cardMessage, cardTitle, decide, decisionText, expiresText, isExpired, recordLine } from '../state/requests.js';
import { h, nextId, setText } from './dom.js';

export class RequestCardView {
  constructor(card, onDecide, { onClosed = null } = {}) {
    this.card = card;
    this.onDecide = onDecide;
    this.onClosed = onClosed;
    const titleId = nextId('req-h');
    this.titleId = titleId;
    this.status = h('p.request-status', { role: 'status' });
    this.expiry = h('p.request-expiry');
    this.buttons = [];
    const body = [];
    // Each thing once: the heading names the tool; the message only when it adds to it.
    const message = cardMessage(card);
    if (message) body.push(h('p.request-message', null, message));
    if (card.kind === 'question') {
      this.fields = card.questions.map((q, qi) => this.question(q, qi));
      body.push(...this.fields.map((f) => f.el));
      const send = h('button.primary', { type: 'submit' }, 'Send answer');
      this.buttons.push(send);
      body.push(h('div.request-actions', null, send));
    } else {
      const inputId = nextId('req-input');
      this.input = h('textarea.request-input', {
        id: inputId,
        rows: String(Math.min(12, Math.max(3, card.inputText.split('\n').length))),
        spellcheck: 'false',
        readonly: card.editable ? null : true,
        'aria-describedby': `${inputId}-hint`,
      });
      this.input.value = card.inputText;
      body.push(
        h('label', { for: inputId }, card.editable ? 'Input (edit to approve a changed call)' : 'Input'),
        this.input,
        h('p.hint', { id: `${inputId}-hint` }, card.editable ? 'Edits replace the whole input.' : ''),
      );
      if (card.suggestions.length) {
        body.push(
          h('details.request-suggestions', null, h('summary', null, 'The agent’s suggestion'), h('pre', null, JSON.stringify(card.suggestions, null, 2))),
        );
      }
      // What "Approve for session" / "Always allow" grant: each kept update with the
      // resolved place it reaches, and a rule that runs any command said in words.
      const grants = (card.grants ?? []).filter((g) => card.scopes?.session || card.scopes?.always);
      if (grants.length) {
        body.push(
          h('div.request-grants', null,
            h('p.request-grants-h', null, 'Approving for the session or always also grants:'),
            h('ul', null, ...grants.map((g) => h('li', { 'data-runs-anything': g.runsAnything ? 'true' : null },
              g.effect,
              // The effect names the resolved places runwire knows of; any other is added.
              g.reaches.some((r) => !g.effect.includes(r)) ? h('span.sub', null, ` — reaches ${g.reaches.join(', ')}`) : null,
              g.runsAnything ? h('strong.request-runs-anything', null, ` Runs any command: ${g.runsAnything}`) : null)))),
        );
      }
      // Suggested grants runwire drops (they need --grant-all): said, never silently applied.
      if (card.dropped) body.push(h('p.request-dropped', { role: 'note' }, `Not applied: ${card.dropped}`));
      const reasonId = nextId('req-reason');
      const told = card.tellsReason !== false;
      this.reason = h('input', { id: reasonId, type: 'text', name: 'reason', placeholder: told ? 'Why (told to the agent)' : 'Why (kept in the record; this agent is not told)', maxlength: '2000' });
      const approve = h('button.primary', { type: 'submit', 'data-action': 'approve' }, 'Approve');
      const scopes = card.scopes ?? { session: 'for this session', always: null };
      const session = scopes.session
        ? h('button', { type: 'button', 'data-action': 'approve-session', title: scopes.session, onclick: () => this.send({ type: 'approve', scope: 'session', edited: this.input.value }) }, 'Approve for session')
        : null;
      const always = scopes.always
        ? h('button', { type: 'button', 'data-action': 'approve-always', title: scopes.always, onclick: () => this.send({ type: 'approve', scope: 'always', edited: this.input.value }) }, 'Always allow (saved by the agent)')
        : null;
      const deny = h('button.danger', { type: 'button', 'data-action': 'deny', onclick: () => this.send({ type: 'deny', reason: this.reason.value }) }, 'Deny');
      const actions = [approve, session, always, deny].filter(Boolean);
      this.buttons.push(...actions);
      body.push(
        h('div.request-deny', null, h('label', { for: reasonId }, 'Reason for a denial'), this.reason),
        h('div.request-actions', null, ...actions),
      );
    }
    this.form = h(
      'form.request-form',
      {
        onsubmit: (e) => {
          e.preventDefault();
          if (card.kind === 'question') this.send({ type: 'answer', answers: this.answers() });
          else this.send({ type: 'approve', edited: this.input.value });
        },
      },
      ...body,
      this.expiry,
      this.status,
    );
    const title = cardTitle(card);
    const heading = card.kind === 'tool_approval' && card.tool
      ? ['Allow ', h('code', null, card.tool), '?']
      : title;
    this.heading = h('h3.request-h', { id: titleId }, heading);
    this.el = h(
      'section.request',
      { 'aria-labelledby': titleId, 'data-request-id': card.id, 'data-kind': card.kind, 'data-state': 'open' },
      this.heading,
      this.form,
    );
    this.tick();
    this.timer = setInterval(() => this.tick(), 1000);
  }

  /**
   * The request's approval link (runwire-serve --public-url): a button that
   * copies it, to pass to someone who answers from a phone. Shown once, while
   * the card is open; where the clipboard cannot be written (a page not
   * served from a secure origin) the link is shown selected to copy by hand.
   */
  setLink(url) {
    if (this.linkRow || this.card.answered || typeof url !== 'string' || !url) return;
    const shown = h('input.request-link', { type: 'text', readonly: true, value: url, 'aria-label': 'Approval link', hidden: true });
    const note = h('span.sub', { role: 'status' });
    const copy = h('button', {
      type: 'button',
      'data-action': 'copy-link',
      title: 'Anyone with this link can answer this one request, once, until it expires',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(url);
          setText(note, ' Copied: anyone with it can answer this request once.');
        } catch {
          shown.hidden = false;
          shown.select();
          setText(note, ' Copy it from the box.');
        }
      },
    }, 'Copy approval link');
    this.linkRow = h('div.request-link-row', null, copy, note, shown);
    this.form.insertBefore(this.linkRow, this.expiry);
  }

  question(q, qi) {
    const name = nextId(`q${qi}`);
    const type = q.multiSelect ? 'checkbox' : 'radio';
    const inputs = q.options.map((o) => {
      const id = nextId('opt');
      const input = h('input', { type, id, name, value: o.label });
      return { input, el: h('div.option', null, input, h('label', { for: id }, o.label, o.description ? h('span.sub', null, ` — ${o.description}`) : null)) };
    });
    const legend = h('legend', null, q.header ? `${q.header}: ${q.question}` : q.question);
    let other = null;
    let text = null;
    const parts = inputs.map((i) => i.el);
    if (q.freeText || q.options.length === 0) {
      const textId = nextId('own');
      text = h('input.request-own', {
        type: 'text',
        id: textId,
        name: `${name}-own`,
        maxlength: '2000',
        autocomplete: 'off',
        placeholder: 'Type your own answer',
      });
      if (q.options.length === 0) {
        parts.push(h('div.option-own', null, h('label', { for: textId }, 'Your answer'), text));
      } else {
        const otherId = nextId('opt');
        other = h('input', { type, id: otherId, name, value: '', 'data-other': 'true', 'aria-controls': textId });
        // Typing is choosing "Other"; clearing the box un-chooses it only for a checkbox
        // (a radio needs another option to be picked).
        text.addEventListener('input', () => {
          if (text.value.trim() !== '') other.checked = true;
          else if (q.multiSelect) other.checked = false;
          // A complaint about the empty box is stale once something is typed.
          if (this.status.dataset.kind === 'error') {
            setText(this.status, '');
            this.status.dataset.kind = '';
          }
        });
        other.addEventListener('change', () => {
          if (other.checked) text.focus();
        });
        parts.push(
          h('div.option-other', null, other, h('label', { for: otherId }, 'Other…')),
          h('div.option-own', null, h('label.sub', { for: textId }, 'Your own answer (Other)'), text),
        );
      }
    }
    const el = h('fieldset.request-question', null, legend, ...parts);
    return { q, inputs, other, text, el };
  }

  answers() {
    const out = {};
    for (const f of this.fields) {
      const chosen = f.inputs.filter((i) => i.input.checked).map((i) => i.input.value);
      // "Other" chosen (or a question with no options): the typed text, blank
      // included, so an empty "Other" is reported rather than dropped.
      if (f.text && (!f.other || f.other.checked)) {
        if (f.other || f.text.value.trim() !== '') chosen.push(f.text.value.trim());
      }
      out[f.q.question] = f.q.multiSelect ? chosen : chosen[0];
    }
    return out;
  }

  tick() {
    setText(this.expiry, this.card.answered ? '' : expiresText(this.card));
    if (!this.card.answered && isExpired(this.card)) this.close({ decision: 'expired' }, '', { at: this.card.expiresAt });
  }

  async send(action) {
    const d = decide(this.card, action);
    if (d.error) {
      setText(this.status, d.error);
      this.status.dataset.kind = 'error';
      return;
    }
    for (const b of this.buttons) b.disabled = true;
    setText(this.status, 'Sending…');
    this.status.dataset.kind = '';
    let r;
    try {
      r = await this.onDecide(d);
    } catch (e) {
      r = { ok: false, text: String(e && e.message ? e.message : e) };
    }
    if (r && r.ok) {
      this.close(d, r.text);
    } else {
      for (const b of this.buttons) b.disabled = false;
      setText(this.status, r && r.text ? r.text : 'The answer was refused.');
      this.status.dataset.kind = 'error';
    }
  }

  /**
   * Shows the card as answered (by this page or elsewhere) and collapses it
   * to its record. `at`: when it was answered (default now); `by`: who, when
   * it was not this page.
   */
  close(d, text, { at = new Date(), by = null } = {}) {
    const hadFocus = this.el.contains(document.activeElement);
    this.card.answered = d;
    clearInterval(this.timer);
    // A link is for an open request only.
    if (this.linkRow) this.linkRow.remove();
    for (const b of this.buttons) b.disabled = true;
    if (this.input) this.input.readOnly = true;
    for (const f of this.fields || []) if (f.text) f.text.readOnly = true;
    this.el.dataset.state = 'answered';
    this.el.dataset.decision = d.decision;
    setText(this.status, text || decisionText(d, this.card.kind));
    this.status.dataset.kind = '';
    setText(this.expiry, '');
    const rec = recordLine(this.card, d, { at, by });
    const when = at instanceof Date ? at : new Date(at);
    const recordId = nextId('req-rec');
    this.record = h(
      'summary.request-record',
      { id: recordId, title: Number.isFinite(when.getTime()) ? `Answered ${when.toLocaleString()}` : null },
      h('span.record-head', null, rec.head),
      rec.code ? [' ', h('code.record-code', null, rec.code)] : null,
      rec.tail ? h('span.record-tail', null, rec.tail) : null,
      rec.time ? h('span.record-time', null, ` · ${rec.time}`) : null,
    );
    this.details = h('details.request-details', null, this.record, this.heading, this.form);
    this.el.replaceChildren(this.details);
    this.el.setAttribute('aria-labelledby', recordId);
    if (this.onClosed) this.onClosed(this);
    // Keyboard users stay where they were: on the record that replaced the buttons.
    if (hadFocus) this.record.focus();
  }

  destroy() {
    clearInterval(this.timer);
  }
}
