// Chat: a prompt box that starts an AG-UI run through POST /agui on a
// thread, the assistant's text as it streams, reasoning collapsed by
// default, tool cards, and the run's status or error.

import { errorText, headers, randomId, readBody, readSse, unauthorized } from '../api.js';
import { applyAgui, assistantText, createRun, failRun, runCost, takeDirty } from '../state/agui.js';
import { formatInt, formatUsd } from '../state/format.js';
import { h, scheduler, setText } from './dom.js';
import { TranscriptView } from './transcript.js';

export class ChatView {
  constructor() {
    this.threadId = randomId('thread');
    this.history = [];
    this.current = null;
    this.heading = h('h1', { tabindex: '-1' }, 'Chat');
    this.threadLine = h('code.thread-id');
    this.log = h('div.chat-log');
    // Announces the run's state to assistive technology; each exchange shows it visibly.
    this.status = h('p.run-status.visually-hidden', { role: 'status' });
    this.prompt = h('textarea', { id: 'chat-prompt', name: 'prompt', rows: '3', required: true, placeholder: 'Ask the agent…' });
    this.send = h('button', { type: 'submit' }, 'Send');
    this.stop = h('button', { type: 'button', disabled: true, onclick: () => this.abort() }, 'Stop');
    this.prompt.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.form = h(
      'form.prompt',
      {
        onsubmit: (e) => {
          e.preventDefault();
          this.submit();
        },
      },
      h('label', { for: 'chat-prompt' }, 'Message'),
      this.prompt,
      h('div.row', null, h('span.hint', null, 'Ctrl+Enter sends'), this.stop, this.send),
    );
    this.el = h(
      'section.view.view-chat',
      { 'aria-labelledby': 'chat-h' },
      this.heading,
      h(
        'p.lede',
        null,
        'Each message starts an AG-UI run through POST /agui on this thread; the next one resumes the agent’s session. Thread ',
        this.threadLine,
        ' ',
        h('button.link', { type: 'button', onclick: () => this.newThread() }, 'New thread'),
      ),
      this.log,
      this.status,
      this.form,
    );
    this.heading.id = 'chat-h';
    setText(this.threadLine, this.threadId);
  }

  mount() {}

  unmount() {}

  newThread() {
    if (this.current) return;
    this.threadId = randomId('thread');
    this.history = [];
    setText(this.threadLine, this.threadId);
    this.log.replaceChildren();
    setText(this.status, 'New thread.');
  }

  abort() {
    if (this.current) this.current.ctrl.abort();
  }

  async submit() {
    const text = this.prompt.value.trim();
    if (!text || this.current) return;
    const runId = randomId('run');
    const userMsg = { id: randomId('msg'), role: 'user', content: text };
    const messages = [...this.history, userMsg];
    const run = createRun({ threadId: this.threadId, runId });
    const transcript = h('div.transcript');
    const runLine = h('p.run-line');
    const ex = h(
      'article.exchange',
      { 'data-run-id': runId },
      h('div.msg.user', null, h('h2.who', null, 'You'), h('p.user-text', null, text)),
      h('div.msg.assistant', null, h('h2.who', null, 'Agent'), transcript, runLine),
    );
    this.log.appendChild(ex);
    const view = new TranscriptView(transcript, run);
    const ctrl = new AbortController();
    this.current = { run, ctrl };
    this.prompt.value = '';
    this.send.disabled = true;
    this.stop.disabled = false;
    const render = () => {
      const { keys } = takeDirty(run);
      view.sync(keys);
      const line = this.statusLine(run);
      setText(runLine, line);
      runLine.dataset.status = run.status;
      setText(this.status, line);
      this.status.dataset.status = run.status;
    };
    const flush = scheduler(render);
    run.status = 'starting';
    run.statusDirty = true;
    render();
    const body = { threadId: this.threadId, runId, messages, tools: [], context: [], state: {}, forwardedProps: {} };
    let res = null;
    try {
      res = await fetch('/agui', {
        method: 'POST',
        headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
        body: JSON.stringify(body),
        signal: ctrl.signal,
        cache: 'no-store',
      });
    } catch {
      failRun(run, ctrl.signal.aborted ? 'stopped before the server answered' : 'the server could not be reached', 'network');
    }
    if (res && !res.ok) {
      let b = null;
      try {
        b = await readBody(res);
      } catch {
        b = null;
      }
      if (res.status === 401) unauthorized();
      failRun(run, `the server refused the run (HTTP ${res.status}): ${errorText({ status: res.status, body: b })}`, `http_${res.status}`);
    } else if (res) {
      const end = await readSse(
        res,
        (frame) => {
          let ev;
          try {
            ev = JSON.parse(frame.data);
          } catch {
            ev = null;
          }
          applyAgui(run, ev);
          flush();
          return true;
        },
        ctrl.signal,
      );
      if (run.status !== 'finished' && run.status !== 'error') {
        failRun(
          run,
          end === 'aborted' ? 'stopped: the connection was closed, so the server stopped the agent' : 'the stream ended before the run finished',
          end === 'aborted' ? 'stopped' : 'incomplete',
        );
      }
    }
    render();
    this.history = [...messages];
    const answer = assistantText(run);
    if (answer) this.history.push({ id: randomId('msg'), role: 'assistant', content: answer });
    this.current = null;
    this.send.disabled = false;
    this.stop.disabled = true;
  }

  statusLine(run) {
    const tools = run.tools.order.length;
    const toolText = tools ? ` · ${tools} tool call${tools === 1 ? '' : 's'}` : '';
    switch (run.status) {
      case 'starting':
        return 'Starting the run…';
      case 'idle':
      case 'running':
        return `Running${toolText}…`;
      case 'finished': {
        const cost = runCost(run);
        const u = Array.isArray(run.usage) && run.usage[0] ? run.usage[0] : null;
        const usage = u && typeof u.totalTokens === 'number' ? ` · ${formatInt(u.totalTokens)} tokens` : '';
        return `Finished${toolText}${cost !== null ? ` · ${formatUsd(cost)}` : ''}${usage}.`;
      }
      case 'error':
        return `Error: ${run.error ? run.error.message : 'the run failed'}${run.error && run.error.code ? ` (${run.error.code})` : ''}.`;
      default:
        return run.status;
    }
  }
}
