// Chat: a prompt box that starts an AG-UI run through POST /agui on a
// thread, the assistant's text as it streams, reasoning collapsed by
// default, tool cards, and the run's status or error.

import { errorText, followFeed, getJson, headers, postCommand, randomId, readBody, readSse, unauthorized } from '../api.js';
import { applyAgui, createRun, failRun, isTerminal, runCost, takeDirty } from '../state/agui.js';
import { addSent, applyMessageEvent, createThreadMessages, history } from '../state/messages.js';
import { answeredElsewhere, decisionText, fromInterrupt, resumeEntry } from '../state/requests.js';
import { RequestCardView } from './requestcard.js';
import { formatInt, formatUsd } from '../state/format.js';
import { turnRunId } from '../state/runs.js';
import { nameFromMessage, setThreadName, threadName } from '../state/threads.js';
import { chatForwardedProps, describeServer, pickNode, upNodes } from '../state/server.js';
import { h, scheduler, setText } from './dom.js';
import { TranscriptView } from './transcript.js';

/** A message's text: its content string, or the text parts of a multimodal one. */
function messageText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.filter((p) => p && p.type === 'text' && typeof p.text === 'string').map((p) => p.text).join('\n');
}

/** A message the agent is still saying (a tool call or a subagent is a block of its own). */
function underWay(it) {
  return !it.done && it.kind !== 'tool' && it.kind !== 'subagent';
}

export class ChatView {
  constructor() {
    this.threadId = randomId('thread');
    // The thread's messages as this page holds them, with the stream's ids:
    // each run sends them as its history (state/messages.js).
    this.thread = createThreadMessages();
    this.current = null;
    // The feed of the run whose requests wait here (`ask`).
    this.watching = null;
    this.heading = h('h1', { tabindex: '-1' }, 'Chat');
    this.threadLine = h('code.thread-id');
    // The thread's address: opened in another page (or device), it continues
    // the thread; the conversation so far comes with its first reply.
    this.threadLink = h('a.thread-link', { href: '#/chat' }, 'Link');
    // The thread's name (its first message until renamed here), kept in this browser.
    this.threadName = h('input.thread-name', {
      id: 'thread-name', type: 'text', maxlength: '200', autocomplete: 'off', placeholder: 'Named by its first message',
      'aria-label': 'Thread name (rename)',
    });
    this.threadName.addEventListener('change', () => {
      this.threadName.value = setThreadName(this.threadId, this.threadName.value) ?? '';
    });
    // What a replay or demo server is, said where the prompt goes (app.js tells us, from /api/info).
    this.demoNote = h('p.demo-note', { hidden: true, role: 'note' });
    // At a hub: the node a new thread runs on (the nodes that are up, from
    // /api/info; looked at again for each new thread and when the picker is
    // opened). A thread keeps its node: the picker is fixed once it started.
    this.mode = null;
    this.nodes = [];
    this.threadStarted = false;
    this.nodeSelect = h('select', { id: 'chat-node', name: 'node', onfocus: () => this.refreshNodes() });
    this.nodeSelect.addEventListener('change', () => { this.node = this.nodeSelect.value; });
    this.node = '';
    this.threadNode = null;
    this.nodeNote = h('span.hint.node-note');
    this.nodePicker = h('div.node-picker.row', { hidden: true }, h('label', { for: 'chat-node' }, 'Node'), this.nodeSelect, this.nodeNote);
    this.log = h('div.chat-log');
    // Announces the run's state to assistive technology; each exchange shows it visibly.
    this.status = h('p.run-status.visually-hidden', { role: 'status' });
    this.prompt = h('textarea', { id: 'chat-prompt', name: 'prompt', rows: '3', required: true, placeholder: 'Ask the agent…' });
    this.send = h('button', { type: 'submit' }, 'Send');
    this.stop = h('button', { type: 'button', disabled: true, onclick: () => this.abort() }, 'Stop');
    // Live steer, shown while an interactive session's turn runs.
    this.steerMsg = h('input', { id: 'chat-steer', name: 'steer', type: 'text', maxlength: '65536', placeholder: 'Tell the agent now, mid-turn…' });
    this.steerInterrupt = h('input', { type: 'checkbox', id: 'chat-steer-interrupt' });
    this.steerNote = h('p.answer', { role: 'status' });
    this.steerForm = h(
      'form.live-steer',
      { hidden: true, onsubmit: (e) => { e.preventDefault(); this.steer(); } },
      h('label', { for: 'chat-steer' }, 'Steer the running turn'),
      this.steerMsg,
      h('div.row', null, h('label.check', null, this.steerInterrupt, ' Interrupt the turn first'), h('button', { type: 'button', onclick: () => this.steer() }, 'Steer')),
      this.steerNote,
    );
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
        'Each message starts an AG-UI run through POST /agui on this thread; the next one resumes the agent’s session.',
      ),
      h(
        'div.thread-line',
        null,
        h('label', { for: 'thread-name' }, 'Thread'),
        this.threadName,
        this.threadLine,
        this.threadLink,
        h('button.link', { type: 'button', onclick: () => this.newThread() }, 'New thread'),
      ),
      this.demoNote,
      this.nodePicker,
      this.log,
      this.status,
      this.steerForm,
      this.form,
    );
    this.heading.id = 'chat-h';
    this.showThread();
  }

  /** The thread's id (whole in its tooltip: the line may cut it with an ellipsis) and name. */
  showThread() {
    setText(this.threadLine, this.threadId);
    this.threadLine.title = this.threadId;
    this.threadName.value = threadName(this.threadId) ?? '';
    this.threadLink.setAttribute('href', `#/chat/${encodeURIComponent(this.threadId)}`);
    this.threadLink.title = 'This thread, to open elsewhere';
  }

  /** `#/chat/THREAD`: continues that thread (unless a run is under way). */
  mount([threadId] = []) {
    if (!threadId || threadId === this.threadId || this.current) return;
    this.stopWatching();
    this.threadId = threadId;
    this.thread = createThreadMessages();
    // Its node is the hub's to know (the cluster keeps it).
    this.threadStarted = true;
    this.threadNode = null;
    this.showNodes();
    this.showThread();
    this.log.replaceChildren(h('p.empty.thread-opened', null, 'Opening the thread…'));
    setText(this.status, 'Thread opened.');
    this.loadThread(threadId);
  }

  /** The opened thread's conversation so far, from the server's record
   * (GET /agui/thread; at a hub, its node's, read over the cluster); where
   * none can be read, it comes with the reply to the next message, as a
   * snapshot. */
  async loadThread(threadId) {
    let a = await getJson(`/agui/thread?threadId=${encodeURIComponent(threadId)}`);
    // Another page is reading a thread (the server reads one at a time): again shortly.
    for (let tries = 0; a.status === 503 && tries < 10 && threadId === this.threadId; tries += 1) {
      await new Promise((r) => setTimeout(r, 1000));
      a = await getJson(`/agui/thread?threadId=${encodeURIComponent(threadId)}`);
    }
    // Another thread opened, or a run started, meanwhile: this answer is stale.
    if (threadId !== this.threadId || this.current) return;
    const messages = a.status === 200 && a.body && Array.isArray(a.body.messages) ? a.body.messages : null;
    const shown = messages ? applyMessageEvent(this.thread, { type: 'MESSAGES_SNAPSHOT', messages }) : [];
    const block = this.earlierBlock(shown);
    if (block) {
      this.log.replaceChildren(block);
      setText(this.status, `Thread opened: ${shown.length} earlier message${shown.length === 1 ? '' : 's'}.`);
      return;
    }
    const why = a.status === 404 || a.status === 200
      ? 'An existing thread: its conversation so far comes with the reply to your next message.'
      : `An existing thread: its conversation could not be read (${errorText(a)}); it comes with the reply to your next message.`;
    this.log.replaceChildren(h('p.empty.thread-opened', null, why));
  }

  unmount() {}

  /** The server's /api/info: a replay or the demo agent says so above the conversation. */
  setServer(info) {
    const { note, mode } = describeServer(info);
    setText(this.demoNote, note);
    this.demoNote.hidden = !note;
    this.demoNote.dataset.mode = mode || '';
    this.mode = mode;
    this.setNodes(upNodes(info));
  }

  /** At a hub: the nodes that are up now, from /api/info. */
  async refreshNodes() {
    if (this.mode !== 'hub' || this.threadStarted) return;
    const a = await getJson('/api/info');
    if (a.status === 200 && a.body && typeof a.body === 'object') this.setNodes(upNodes(a.body));
  }

  /** While a new thread has no node to start on, asks again every few seconds:
   * a disabled picker takes no focus, so its refresh on focus never came. */
  watchNodes() {
    if (this.nodeTimer || this.mode !== 'hub') return;
    this.nodeTimer = setInterval(() => {
      if (this.mode !== 'hub' || this.threadStarted || this.nodes.length > 0 || !this.el.isConnected) {
        clearInterval(this.nodeTimer);
        this.nodeTimer = null;
        return;
      }
      this.refreshNodes();
    }, 3000);
  }

  setNodes(nodes) {
    this.nodes = nodes;
    this.node = pickNode(nodes, this.node);
    this.showNodes();
  }

  /** The picker: shown at a hub only; fixed (the thread's node) once the thread started. */
  showNodes() {
    this.nodePicker.hidden = this.mode !== 'hub';
    if (this.nodePicker.hidden) return;
    if (this.threadStarted) {
      const mine = this.threadNode ? [this.threadNode] : [];
      this.nodeSelect.replaceChildren(...mine.map((n) => h('option', { value: n }, n)));
      this.nodeSelect.disabled = true;
      setText(this.nodeNote, this.threadNode ? 'This thread runs on this node.' : 'This thread runs on the node it started on.');
      return;
    }
    this.nodeSelect.replaceChildren(...this.nodes.map((n) => h('option', { value: n }, n)));
    this.nodeSelect.value = this.node;
    this.nodeSelect.disabled = this.nodes.length === 0;
    setText(this.nodeNote, this.nodes.length ? '' : 'No node is up: a new thread cannot start.');
    if (this.nodes.length === 0) this.watchNodes();
  }

  newThread() {
    if (this.current) return;
    this.stopWatching();
    this.threadId = randomId('thread');
    this.thread = createThreadMessages();
    this.threadStarted = false;
    this.threadNode = null;
    this.showNodes();
    this.refreshNodes();
    this.showThread();
    this.log.replaceChildren();
    if (location.hash.startsWith('#/chat/')) window.history.replaceState(null, '', '#/chat');
    setText(this.status, 'New thread.');
  }

  abort() {
    if (!this.current) return;
    const session = this.current.run.session;
    if (session && typeof session.stop === 'string') {
      // An interactive session stops gracefully: the turn is interrupted, the
      // session stays, and the run ends with the cancelled outcome.
      postCommand(session.stop, {}).then((a) => {
        if (a.status !== 200 && this.current) this.current.ctrl.abort();
      });
      return;
    }
    this.current.ctrl.abort();
  }

  async steer() {
    const text = this.steerMsg.value.trim();
    const session = this.current && this.current.run.session;
    if (!text || !session || typeof session.steer !== 'string') return;
    setText(this.steerNote, 'Steer: sending…');
    const exchange = this.current.exchange;
    const a = await postCommand(session.steer, { msg: text, interrupt: this.steerInterrupt.checked });
    if (a.status === 200) {
      if (this.steerMsg.value.trim() === text) this.steerMsg.value = '';
      const detail = a.body && a.body.detail ? a.body.detail : 'sent';
      setText(this.steerNote, `Steer: ${detail}.`);
      // Kept in the conversation where it happened, with what the agent made of
      // it (written into the turn, or, over ACP, the turn cancelled and prompted
      // again): the box's note goes away with the run.
      if (exchange) {
        const node = h('div.steer', null, h('p.steer-text', null, h('span.who', null, 'You, mid-turn: '), text), h('p.steer-detail', null, `${detail}.`));
        // In the agent's order: it takes a steer once the message it is saying
        // is done, and before it said anything, after its first (the reply to
        // the prompt): the echo waits for that message, then goes after it.
        exchange.view.sync([]);
        const last = exchange.run.items.at(-1);
        if (last && !underWay(last)) exchange.view.container.appendChild(node);
        else (exchange.steers ??= []).push({ node, key: last ? last.key : null });
        this.placeSteers(exchange);
      }
    } else {
      setText(this.steerNote, `Steer refused (HTTP ${a.status}): ${errorText(a)}`);
    }
  }

  /** Puts each waiting steer echo after the message it waited for, once that is done (all, at the run's end). */
  placeSteers(exchange, final = false) {
    if (!exchange.steers || !exchange.steers.length) return;
    const { run, view } = exchange;
    exchange.steers = exchange.steers.filter((st) => {
      const it = st.key ? run.byId.get(st.key) : run.items[0];
      const later = it ? run.items.indexOf(it) < run.items.length - 1 : false;
      if (!final && (!it || (underWay(it) && !later))) return true;
      let at = it ? view.nodes.get(it.key) : null;
      if (!at || at.parentNode !== view.container) {
        view.container.appendChild(st.node);
        return false;
      }
      // After the steers already placed there, in the order they were sent.
      while (at.nextSibling && at.nextSibling.classList && at.nextSibling.classList.contains('steer')) at = at.nextSibling;
      at.after(st.node);
      return false;
    });
  }

  async submit() {
    const text = this.prompt.value.trim();
    if (!text || this.current) return;
    const forwardedProps = chatForwardedProps(this.mode, this.threadStarted ? this.threadNode : this.node);
    if (this.mode === 'hub' && !this.threadStarted && !forwardedProps.node) {
      setText(this.nodeNote, 'Pick a node: a new thread at a hub runs on one.');
      this.nodeSelect.focus();
      return;
    }
    if (!this.threadStarted) {
      this.threadNode = forwardedProps.node ?? null;
      this.threadStarted = true;
      this.showNodes();
      // The address names the thread from its first message on: a reload
      // (or the address copied) comes back to it, not to a new one.
      if (location.hash.startsWith('#/chat')) window.history.replaceState(null, '', `#/chat/${encodeURIComponent(this.threadId)}`);
    }
    const runId = turnRunId(this.threadId, randomId('run'));
    // The first message names the thread, unless the person already did.
    if (!threadName(this.threadId)) this.threadName.value = setThreadName(this.threadId, nameFromMessage(text)) ?? '';
    const userMsg = { id: randomId('msg'), role: 'user', content: text };
    addSent(this.thread, userMsg);
    const messages = history(this.thread);
    const run = createRun({ threadId: this.threadId, runId });
    const transcript = h('div.transcript');
    const runLine = h('p.run-line');
    // What the server said of the run besides its events (a message not
    // sent while a request waits: runwire.input_not_sent).
    const notes = h('ul.warnings', { 'aria-live': 'polite' });
    const cards = h('div.requests');
    const ex = h(
      'article.exchange',
      { 'data-run-id': runId },
      h('div.msg.user', { 'data-message-id': userMsg.id }, h('h2.who', null, 'You'), h('p.user-text', null, text)),
      h('div.msg.assistant', null, h('h2.who', null, 'Agent'), transcript, cards, runLine, notes),
    );
    this.log.appendChild(ex);
    const exchange = { el: ex, run, view: new TranscriptView(transcript, run), runLine, cards, notes };
    this.prompt.value = '';
    await this.stream(exchange, { threadId: this.threadId, runId, messages, tools: [], context: [], state: {}, forwardedProps });
  }

  /** Streams one AG-UI run into the exchange (a first run, or a resume of it). */
  async stream(exchange, body) {
    const { run, view, runLine, notes } = exchange;
    const ctrl = new AbortController();
    this.current = { run, ctrl, exchange };
    this.send.disabled = true;
    this.stop.disabled = false;
    const render = () => {
      const { keys } = takeDirty(run);
      view.sync(keys);
      this.placeSteers(exchange);
      const line = this.statusLine(run);
      setText(runLine, line);
      runLine.dataset.status = run.status;
      setText(this.status, line);
      this.status.dataset.status = run.status;
      while (notes && notes.children.length < run.warnings.length) {
        const w = run.warnings[notes.children.length];
        notes.appendChild(h('li', { 'data-code': w.code ?? '' }, w.reason));
        // The person's own message did not reach the agent: the bubble says so too.
        if (w.code === 'input_not_sent') exchange.el.querySelector('.msg.user')?.classList.add('not-sent');
      }
      this.steerForm.hidden = !(run.session && run.session.steer) || isTerminal(run);
    };
    const flush = scheduler(render);
    run.status = 'starting';
    run.statusDirty = true;
    run.interrupts = [];
    render();
    let res = null;
    try {
      res = await fetch('/agui', {
        method: 'POST',
        // The runId is made per click: it is the run's idempotency key too
        // (the server binds the key to this body; the runId replays the run).
        headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream', 'Idempotency-Key': body.runId }),
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
          // What the thread held before this run (a snapshot's messages this
          // page never showed) goes above the exchange; the rest is the run's.
          const earlier = applyMessageEvent(this.thread, ev);
          if (earlier.length) this.showEarlier(exchange, earlier);
          applyAgui(run, ev);
          flush();
          return true;
        },
        ctrl.signal,
      );
      if (!isTerminal(run)) {
        failRun(
          run,
          end === 'aborted' ? 'stopped: the connection was closed, so the server stopped the agent' : 'the stream ended before the run finished',
          end === 'aborted' ? 'stopped' : 'incomplete',
        );
      }
    }
    render();
    this.placeSteers(exchange, true);
    this.current = null;
    this.send.disabled = false;
    this.stop.disabled = true;
    if (run.status === 'waiting') this.ask(exchange);
  }

  /** Messages of the thread from before this page's runs (a snapshot's), shown above the exchange. */
  showEarlier(exchange, messages) {
    const block = this.earlierBlock(messages);
    if (block) this.log.insertBefore(block, exchange.el);
  }

  /** The block of earlier messages (what a person reads of them); null when none shows. */
  earlierBlock(messages) {
    const block = h('div.earlier', { 'aria-label': 'Earlier in this thread' });
    for (const m of messages) {
      const text = messageText(m.content);
      if (m.role === 'user' && text) {
        block.appendChild(h('div.msg.user', { 'data-message-id': m.id }, h('h2.who', null, 'You'), h('p.user-text', null, text)));
      } else if (m.role === 'assistant') {
        const who = m.subagentRunId ? 'Subagent' : 'Agent';
        const calls = Array.isArray(m.toolCalls) ? m.toolCalls.map((c) => c && c.function && c.function.name).filter(Boolean) : [];
        if (!text && !calls.length) continue;
        block.appendChild(
          h(
            'div.msg.assistant',
            { 'data-message-id': m.id },
            h('h2.who', null, who),
            text ? h('div.assistant-text', null, text) : null,
            calls.length ? h('p.earlier-tools', null, `Tool calls: ${calls.join(', ')}`) : null,
          ),
        );
      }
    }
    return block.childElementCount ? block : null;
  }

  /** The run ended with interrupts: one card each; when all are answered, the resume run goes. */
  ask(exchange) {
    const { run, cards } = exchange;
    const open = run.interrupts.map(fromInterrupt).filter(Boolean);
    const entries = new Map();
    // Cards closed because their request was answered somewhere else.
    const elsewhere = new Set();
    const pending = () => open.filter((c) => !elsewhere.has(c.id));
    this.send.disabled = true;
    // Every open interrupt this page still holds is addressed in one input, as AG-UI requires.
    const resume = () => {
      this.stopWatching();
      const runId = turnRunId(this.threadId, randomId('run'));
      this.stream(exchange, {
        threadId: this.threadId,
        runId,
        messages: history(this.thread),
        tools: [],
        context: [],
        state: {},
        forwardedProps: {},
        resume: [...entries.values()],
      });
    };
    const views = new Map();
    for (const c of open) {
      const view = new RequestCardView(c, async (d) => {
        entries.set(c.id, resumeEntry(c, d));
        const left = pending().length - entries.size;
        if (left <= 0) {
          setTimeout(resume, 0);
          return { ok: true };
        }
        return { ok: true, text: `Noted; ${left} more to answer before the agent continues.` };
      }, {
        // The answered card's record goes where it happened in the conversation:
        // after what the agent said so far, before what it says next.
        onClosed: (v) => exchange.view.container.appendChild(v.el),
      });
      views.set(c.id, view);
      cards.appendChild(view.el);
    }
    // A request answered elsewhere (another page, the task view, a link)
    // closes here too, saying so: its card must not stay open to be
    // answered twice. The run's journal says, and the feed says when it changes.
    const recorded = run.session && typeof run.session.run === 'string' ? run.session.run : null;
    if (recorded) {
      // The cards whose answer this page has not sent (one only noted here
      // is not sent until every card is answered): any may be answered elsewhere.
      const unsent = new Map(open.map((c) => [c.id, c]));
      const look = async () => {
        const a = await getJson(`/runs/${encodeURIComponent(recorded)}`);
        if (a.status !== 200 || !a.body || this.watching !== watch) return;
        for (const { id, d } of answeredElsewhere(a.body.answers, unsent)) {
          // The note taken here is dropped: the request was decided elsewhere first.
          entries.delete(id);
          unsent.delete(id);
          elsewhere.add(id);
          const who = d.by && d.by !== 'studio' && d.by !== 'agui' ? ` by ${d.by}` : '';
          views.get(id).close(d, `Answered elsewhere${who}: ${decisionText(d, open.find((c) => c.id === id).kind)}`, { at: d.at || new Date(), by: d.by && d.by !== 'studio' && d.by !== 'agui' ? d.by : 'another page' });
        }
        if (!elsewhere.size) return;
        const left = pending().length;
        if (left === 0) {
          // Nothing left to answer here: the page that answered streams the agent's reply.
          this.stopWatching();
          this.send.disabled = false;
          const said = 'Answered elsewhere: the agent went on in the page that answered; its reply shows here with your next message.';
          setText(exchange.runLine, said);
          exchange.runLine.dataset.status = 'answered-elsewhere';
          setText(this.status, said);
          this.status.dataset.status = 'answered-elsewhere';
        } else if (entries.size >= left) {
          resume();
        }
      };
      const watch = followFeed(`?run=${encodeURIComponent(recorded)}`, { onReady: look, onEvent: look });
      this.stopWatching();
      this.watching = watch;
    }
    const first = cards.querySelector('section.request[data-state="open"] textarea, section.request[data-state="open"] input');
    if (first) first.focus();
  }

  /** Stops following the run whose requests are open (they were answered, or a new run or thread began). */
  stopWatching() {
    if (this.watching) this.watching.stop();
    this.watching = null;
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
      case 'waiting': {
        const n = run.interrupts.length;
        return `Waiting for your answer${n > 1 ? ` to ${n} requests` : ''}${toolText}.`;
      }
      case 'cancelled':
        return `Stopped${toolText}: the turn was interrupted; the session stays for the next message.`;
      case 'error':
        return `Error: ${run.error ? run.error.message : 'the run failed'}${run.error && run.error.code ? ` (${run.error.code})` : ''}.`;
      default:
        return run.status;
    }
  }
}
