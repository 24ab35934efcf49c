// Run / task: a run's plan (waves, tasks, states) and, with a task picked,
// its details, controls and live stream. The stream reconnects by itself
// with Last-Event-ID; the events/v1 reducer drops anything already shown,
// so the event log shows each seq once, in order. The run's facts are
// fetched when the view opens and again on each change the feed
// (GET /runs/events?run=ID) reports: no periodic requests.

import { errorText, followFeed, followStream, getJson, postCommand } from '../api.js';
import { applyEvent, createTask, endWithoutExit, takeDirty } from '../state/events.js';
import { answerBody, applyInput } from '../state/requests.js';
import { RequestCardView } from './requestcard.js';
import { formatDuration, formatUsd } from '../state/format.js';
import { statusCounts } from '../state/toolcards.js';
import { liveControls, staleOnLostNode, supervisorGone, taskReason, threadOf } from '../state/runs.js';
import { clear, h, scheduler, setText, tableRegion, timeText } from './dom.js';
import { notifyEvent, statusText, tasksText, tokensText } from './runs.js';
import { threadName } from '../state/threads.js';
import { TranscriptView } from './transcript.js';

const LOG_ROWS_MAX = 5000;

const STATUS_TEXT = {
  200: 'OK',
  202: 'Accepted',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** The server's answer to a control verb, as one readable line. */
export function answerText(verb, answer) {
  if (answer.status === null) return `${verb}: ${answer.error || 'the server could not be reached'}`;
  const b = answer.body && typeof answer.body === 'object' ? answer.body : {};
  const code = `${answer.status} ${STATUS_TEXT[answer.status] || ''}`.trim();
  const detail = typeof b.detail === 'string' ? b.detail : typeof b.error === 'string' ? b.error : errorText(answer);
  const state = typeof b.state === 'string' ? ` (state: ${b.state})` : '';
  return `${verb}: ${code}: ${detail}${state}`;
}

/**
 * A line of the page's own (not a server answer) in an answer slot: the
 * status and styling of an earlier answer go with the text they described.
 */
function note(out, text) {
  setText(out, text);
  delete out.dataset.httpStatus;
  out.classList.remove('refused');
}

export class RunView {
  constructor() {
    this.el = h('section.view.view-run');
    this.active = false;
    this.runId = null;
    this.tid = null;
  }

  mount(params) {
    const [runId, tid] = params;
    this.active = true;
    if (runId !== this.runId || tid !== this.tid) this.build(runId, tid);
    else this.resume();
  }

  unmount() {
    this.active = false;
    if (this.feed) this.feed.stop();
    this.feed = null;
    // The stream keeps following only while the view is shown.
    if (this.stream) {
      this.stream.stop();
      this.stream = null;
      this.streamPaused = true;
    }
  }

  resume() {
    this.follow();
    if (this.streamPaused && this.task) this.startStream();
  }

  build(runId, tid) {
    if (this.stream) this.stream.stop();
    this.stream = null;
    this.streamPaused = false;
    this.runId = runId;
    this.tid = tid || null;
    this.planKey = null;
    clear(this.el);
    const enc = encodeURIComponent;
    this.heading = h('h1', { tabindex: '-1' }, tid ? `Task ${tid}` : 'Run');
    this.runLine = h('p.lede');
    this.summary = h('dl.facts');
    this.error = h('p.error', { hidden: true, role: 'alert' });
    this.runAnswer = h('p.answer', { role: 'status' });
    this.waves = h('div.waves');
    const runControls = (this.runControls = h(
      'div.controls',
      { role: 'group', 'aria-label': 'Run controls' },
      h('button', { type: 'button', onclick: () => this.verb('Pause', `/runs/${enc(runId)}/pause`) }, 'Pause run'),
      h('button', { type: 'button', onclick: () => this.verb('Resume', `/runs/${enc(runId)}/resume`) }, 'Resume run'),
    ));
    // Where the controls go while the run is live; a line saying why not once it is over.
    this.runSlot = h('div.control-slot', null, runControls);
    this.runStatus = null;
    this.taskState = null;
    this.taskSlot = null;
    this.el.append(
      h('nav.crumbs', { 'aria-label': 'Breadcrumb' }, h('a', { href: '#/runs' }, 'Runs'), ' / ', tid ? h('a', { href: `#/runs/${enc(runId)}` }, runId) : h('span', { 'aria-current': 'page' }, runId), tid ? [' / ', h('span', { 'aria-current': 'page' }, tid)] : null),
      this.heading,
      this.runLine,
      this.error,
      h(
        'div.split',
        null,
        h('section.panel', { 'aria-labelledby': 'run-sum-h' }, h('h2', { id: 'run-sum-h' }, 'Run'), this.summary, this.runSlot, this.runAnswer),
        h('section.panel', { 'aria-labelledby': 'plan-h' }, h('h2', { id: 'plan-h' }, 'Plan'), this.waves),
      ),
    );
    this.task = null;
    if (tid) this.buildTask(runId, tid);
    this.follow();
  }

  /** Follows the run's changes; the facts are fetched once caught up, then on each change. */
  follow() {
    if (this.feed) this.feed.stop();
    const runId = this.runId;
    this.feed = followFeed(`?run=${encodeURIComponent(runId)}`, {
      onEvent: (ev) => {
        // At a hub the feed also brings the run's node lost or up again (spec/CLUSTER.md, "Nodes"): the facts again.
        if (ev.type === 'node' && typeof ev.node === 'string' && runId.startsWith(`${ev.node}.`)) {
          this.refresh();
          return;
        }
        if (ev.runId !== runId) return;
        notifyEvent(ev);
        this.refresh();
      },
      onReady: (id, first) => {
        if (first) this.refresh();
      },
      onState: (st) => {
        this.el.dataset.feed = st.state;
      },
    });
  }

  buildTask(runId, tid) {
    const enc = encodeURIComponent;
    const base = `/runs/${enc(runId)}/tasks/${enc(tid)}`;
    this.taskFacts = h('dl.facts');
    this.taskAnswer = h('p.answer', { role: 'status' });
    const msg = h('textarea', { id: 'steer-msg', name: 'msg', rows: '2', required: true, maxlength: '65536' });
    const interrupt = h('input', { type: 'checkbox', id: 'steer-interrupt', name: 'interrupt' });
    const steer = h(
      'form.steer',
      {
        onsubmit: (e) => {
          e.preventDefault();
          const text = msg.value.trim();
          if (!text) {
            note(this.taskAnswer, 'Steer: write a message first.');
            return;
          }
          // The box empties once the server took the message, so a second press cannot resend it by mistake.
          this.verb('Steer', `${base}/steer`, { msg: text, interrupt: interrupt.checked }, this.taskAnswer).then((a) => {
            if ((a.status === 200 || a.status === 202) && msg.value.trim() === text) msg.value = '';
          });
        },
      },
      h('label', { for: 'steer-msg' }, 'Steer message'),
      msg,
      h('div.row', null, h('label.check', null, interrupt, ' Interrupt the current turn'), h('button', { type: 'submit' }, 'Send steer')),
    );
    // Killing stops the agent's whole process group: the first press arms, the second (within 10 s) sends.
    const kill = h('button.danger', { type: 'button' }, 'Kill task');
    let armed = null;
    kill.addEventListener('click', () => {
      if (armed) {
        clearTimeout(armed);
        armed = null;
        setText(kill, 'Kill task');
        this.verb('Kill', `${base}/kill`, undefined, this.taskAnswer);
        return;
      }
      setText(kill, 'Confirm kill');
      note(this.taskAnswer, 'Kill: press “Confirm kill” to stop the task’s process group.');
      armed = setTimeout(() => {
        armed = null;
        setText(kill, 'Kill task');
        note(this.taskAnswer, '');
      }, 10000);
    });
    // An interactive session's graceful stop: the turn is interrupted, the session stays.
    const stopTurn = h('button', { type: 'button', onclick: () => this.verb('Stop', `${base}/stop`, {}, this.taskAnswer) }, 'Stop turn');
    this.taskControls = [h('div.controls', { role: 'group', 'aria-label': 'Task controls' }, stopTurn, kill), steer];
    this.taskSlot = h('div.control-slot', null, this.taskControls);
    this.requestBase = base;
    this.requests = new Map();
    this.requestViews = new Map();
    this.requestList = h('div.requests', { 'aria-live': 'polite' });
    this.streamState = h('p.stream-state', { role: 'status' });
    this.toolSummary = h('p.tool-summary');
    this.transcript = h('div.transcript', { 'aria-label': 'Task transcript' });
    this.warnings = h('ul.warnings');
    this.logBody = h('tbody');
    this.logCount = h('span');
    const log = h(
      'details.event-log',
      null,
      h('summary', null, 'Event log (', this.logCount, ')'),
      tableRegion(
        'Event log',
        h('table.events', null, h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'seq'), h('th', { scope: 'col' }, 'type'), h('th', { scope: 'col' }, 'summary'))), this.logBody),
      ),
    );
    this.el.append(
      h(
        'section.panel',
        { 'aria-labelledby': 'task-h' },
        h('h2', { id: 'task-h' }, 'Task details'),
        this.taskFacts,
        this.taskSlot,
        this.taskAnswer,
      ),
      h(
        'section.panel',
        { 'aria-labelledby': 'stream-h' },
        h('h2', { id: 'stream-h' }, 'Live stream'),
        this.streamState,
        this.requestList,
        this.toolSummary,
        this.warnings,
        this.transcript,
        log,
      ),
    );
    this.task = createTask();
    this.view = new TranscriptView(this.transcript, this.task);
    this.logShown = 0;
    this.flush = scheduler(() => this.render());
    this.streamUrl = `${base}/stream`;
    this.startStream();
  }

  startStream() {
    this.streamPaused = false;
    const task = this.task;
    this.stream = followStream(this.streamUrl, {
      onEvent: (rec) => {
        applyEvent(task, rec);
        if (rec && (rec.type === 'input_request' || rec.type === 'input_answer')) this.request(rec);
        this.flush();
      },
      onState: (s) => {
        this.connState = s;
        if (s.noExit) endWithoutExit(task, s.detail);
        this.flush();
      },
      isDone: () => task.status === 'exited',
      lastId: () => (task.lastSeq === null ? null : String(task.lastSeq)),
    });
  }

  /** A request of the agent (a card to answer) or its answer (the card closes). */
  request(rec) {
    const c = applyInput(this.requests, rec.type, rec.data);
    if (!c) return;
    let view = this.requestViews.get(c.id);
    if (!view) {
      view = new RequestCardView(c, async (d) => {
        const a = await postCommand(`${this.requestBase}/answer`, answerBody(c, d));
        return { ok: a.status === 200, text: a.status === 200 ? '' : `Refused (HTTP ${a.status}): ${errorText(a)}` };
      });
      this.requestViews.set(c.id, view);
      this.requestList.appendChild(view.el);
      this.offerLink(c.id, view);
    }
    if (c.answered && view.el.dataset.state !== 'answered') {
      const a = c.answered;
      view.close(a, `${a.decision === 'expired' ? (c.kind === 'question' ? 'Expired: dismissed unanswered' : 'Expired: denied automatically') : c.kind === 'question' && a.decision === 'deny' ? 'Dismissed' : `Closed: ${a.decision}`}${a.by ? ` by ${a.by}` : ''}${a.message ? ` (${a.message})` : ''}.`, {
        at: a.at || rec.ts || new Date(),
        // Named only when not one of the studio's own ways of answering (this page, a chat).
        by: a.by === 'studio' || a.by === 'agui' ? null : a.by,
      });
    }
  }

  /** The card's approval link, once the run's facts name one for it. */
  offerLink(id, view) {
    const c = this.requests.get(id);
    const link = c && this.links ? this.links.get(c.interruptId ?? c.id) : null;
    if (link) view.setLink(link);
  }

  render() {
    const t = this.task;
    if (!t) return;
    const { keys } = takeDirty(t);
    this.view.sync(keys);
    const s = this.connState || { state: 'connecting', connections: 0, detail: '' };
    let text;
    if (t.status === 'exited') {
      text = `Agent exited with status ${t.exit.rc}${t.exit.detail ? ` (${t.exit.detail})` : ''}${t.exit.ok ? '' : ' — failed'}.`;
    } else if (s.state === 'live') {
      text = 'Live: following the task.';
    } else if (s.state === 'reconnecting') {
      text = `Reconnecting${s.detail ? `: ${s.detail}` : ''}…`;
    } else if (s.state === 'waiting') {
      text = 'Waiting for the task to start…';
    } else if (s.state === 'failed') {
      text = `The stream failed: ${s.detail}`;
    } else if (s.state === 'ended') {
      text = s.detail ? `Ended: ${s.detail}.` : 'Ended.';
    } else {
      text = 'Connecting…';
    }
    setText(this.streamState, text);
    this.streamState.dataset.state = t.status === 'exited' ? 'exited' : s.state;
    this.streamState.dataset.connections = String(s.connections || 0);
    this.streamState.dataset.duplicates = String(t.duplicates);
    const counts = statusCounts(t.tools);
    const parts = Object.entries(counts).map(([k, n]) => `${n} ${k.replace('-', ' ')}`);
    setText(this.toolSummary, parts.length ? `Tool calls: ${parts.join(', ')}.` : '');
    while (this.warnings.children.length < t.warnings.length) {
      const w = t.warnings[this.warnings.children.length];
      this.warnings.appendChild(h('li', null, `seq ${w.seq}: ${w.code ? `${w.code}: ` : ''}${w.reason}`));
    }
    for (; this.logShown < t.log.length; this.logShown++) {
      const e = t.log[this.logShown];
      this.logBody.appendChild(h('tr', { 'data-seq': String(e.seq) }, h('td.num', null, String(e.seq)), h('td', null, e.type), h('td', null, e.summary)));
      if (this.logBody.children.length > LOG_ROWS_MAX) this.logBody.firstElementChild.remove();
    }
    setText(this.logCount, `${t.log.length} event${t.log.length === 1 ? '' : 's'}${t.duplicates ? `, ${t.duplicates} duplicate${t.duplicates === 1 ? '' : 's'} skipped` : ''}`);
  }

  async verb(name, path, body, out = this.runAnswer) {
    note(out, `${name}: sending…`);
    const answer = await postCommand(path, body);
    setText(out, answerText(name, answer));
    out.dataset.httpStatus = String(answer.status ?? 'none');
    out.classList.toggle('refused', answer.status !== 200 && answer.status !== 202);
    this.refresh();
    return answer;
  }

  async refresh() {
    // One refresh at a time; a change during one asks for one more after it.
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      do {
        this.refreshAgain = false;
        await this.fetchFacts();
      } while (this.refreshAgain && this.active);
    } finally {
      this.refreshing = false;
    }
  }

  async fetchFacts() {
    const enc = encodeURIComponent;
    const [run, task] = await Promise.all([
      getJson(`/runs/${enc(this.runId)}`),
      this.tid ? getJson(`/runs/${enc(this.runId)}/tasks/${enc(this.tid)}`) : Promise.resolve(null),
    ]);
    if (!this.active) return;
    if (run.status === 200 && run.body && typeof run.body === 'object') {
      this.error.hidden = true;
      this.renderRun(run.body);
    } else {
      this.error.hidden = false;
      setText(this.error, `Could not load run ${this.runId}: ${errorText(run)}`);
    }
    if (task) {
      if (task.status === 200 && task.body) this.renderTask(task.body);
      else this.renderFacts(this.taskFacts, [['Task', `not available: ${errorText(task)}`]]);
    }
  }

  /**
   * Live controls only where something can still be paused, steered or
   * killed; a line saying why not elsewhere (the run over, a run the server
   * records, a run whose supervisor is gone: nothing would take the command).
   */
  renderControls() {
    const live = liveControls(this.runStatus, this.taskState);
    const over = (what) => h('p.over', null, `This ${what} is over: nothing to ${what === 'run' ? 'pause or resume' : 'stop, steer or kill'}.`);
    const gone = live.run ? this.gone : null;
    let run;
    if (gone) {
      run = ['gone', () => [h('p.over.gone', null, `Nothing can pause or resume this run: ${gone.why}.`)]];
    } else if (this.recorded && live.run) {
      const chat = () =>
        this.chatThread ? [' ', h('a.continue-chat', { href: `#/chat/${encodeURIComponent(this.chatThread)}` }, 'Continue this thread in Chat')] : [];
      run = ['recorded', () => [h('p.over', null, 'A run runwire-serve records: no supervisor to pause or resume.', ...chat())]];
    } else {
      run = [String(live.run), () => (live.run ? [this.runControls] : [over('run')])];
    }
    // Replaced only when what it shows changes: focus in a control survives an update.
    if (this.runSlot.dataset.live !== run[0]) {
      this.runSlot.dataset.live = run[0];
      this.runSlot.replaceChildren(...run[1]());
    }
    if (!this.taskSlot) return;
    const task = gone && live.task ? 'gone' : String(live.task);
    if (this.taskSlot.dataset.live !== task) {
      this.taskSlot.dataset.live = task;
      // Said once: once the run is over, the run's line says it for its tasks too.
      this.taskSlot.replaceChildren(
        ...(task === 'gone'
          ? [h('p.over.gone', null, `Nothing can stop, steer or kill this task: ${gone.why}.`)]
          : live.task
            ? this.taskControls
            : live.run
              ? [over('task')]
              : []),
      );
    }
  }

  renderRun(body) {
    const r = body.run && typeof body.run === 'object' ? body.run : {};
    // Open requests' approval links (GET /runs/:id inputRequests[].links), by interrupt id.
    this.links = new Map(
      (Array.isArray(body.inputRequests) ? body.inputRequests : [])
        .filter((q) => q && typeof q.interrupt === 'string' && Array.isArray(q.links) && typeof q.links[0] === 'string')
        .map((q) => [q.interrupt, q.links[0]]),
    );
    for (const [id, view] of this.requestViews ?? []) this.offerLink(id, view);
    this.runStatus = r.status;
    // A run runwire-serve records (a chat turn, a POST /agui run) has no
    // supervisor: Pause and Resume could only fail (409). Its thread, where
    // known, continues in Chat.
    this.recorded = typeof r.slug === 'string' && r.slug.startsWith('agui-');
    this.chatThread = threadOf(r);
    // Its supervisor gone (GET /runs/:id's supervisor): nothing takes a command, and the page says why.
    this.gone = supervisorGone(r);
    this.renderControls();
    // A chat turn leads with its thread's name, where this browser knows it.
    const name = threadName(threadOf(r));
    setText(this.runLine, `${name ? `${name} · ` : ''}${r.slug || this.runId} · ${r.runId || this.runId}`);
    if (!this.tid) setText(this.heading, `Run ${r.slug || this.runId}`);
    // At a hub: a run still going on a node the hub lost says so, not "running" (GET /runs/:id's nodeState);
    // a run whose supervisor is gone too (its Reason says why).
    this.renderFacts(this.summary, [
      ['Status', staleOnLostNode(r) ?? (this.gone ? `${this.gone.text} (last status ${statusText(r.status)})` : statusText(r.status))],
      ['Node', typeof r.node === 'string' ? `${r.node} · ${r.nodeState || 'unknown'}` : ''],
      ['Reason', r.reason],
      ['Wave', r.wave],
      ['Tasks', tasksText(r)],
      ['Cost', typeof r.costUsd === 'number' ? formatUsd(r.costUsd) : ''],
      ['Tokens', tokensText(r.tokens)],
      ['Repository', r.repo || r.repoRoot],
      ['Branch', r.branch],
      ['Last run record', body.lastRunRecord && typeof body.lastRunRecord === 'object' ? body.lastRunRecord.run || body.lastRunRecord.kind || '' : ''],
    ]);
    const plan = body.plan && typeof body.plan === 'object' ? body.plan : null;
    const states = body.tasks && typeof body.tasks === 'object' ? body.tasks : {};
    const key = JSON.stringify([plan, states]);
    if (key === this.planKey) return;
    this.planKey = key;
    clear(this.waves);
    if (!plan || !Array.isArray(plan.waves)) {
      this.waves.appendChild(h('p.empty', null, 'This run has no plan on disk.'));
      return;
    }
    const byId = new Map((plan.tasks || []).map((t) => [t.id, t]));
    const enc = encodeURIComponent;
    plan.waves.forEach((wave, i) => {
      const list = h('ul.tasks');
      for (const id of wave) {
        const t = byId.get(id) || {};
        const st = states[id] && typeof states[id] === 'object' ? states[id] : {};
        const state = st.state || 'pending';
        const current = id === this.tid;
        list.appendChild(
          h(
            'li.task',
            { 'data-task-id': id, 'data-state': state },
            h('a', { href: `#/runs/${enc(this.runId)}/tasks/${enc(id)}`, 'aria-current': current ? 'page' : null }, id),
            h('span.sub', null, t.adapter || ''),
            h(`span.badge.task-${String(state).replace(/[^a-z-]/g, '')}`, null, state + (typeof st.rc === 'number' ? ` (rc ${st.rc})` : '')),
            taskReason(state, st.detail) ? h('span.why', null, taskReason(state, st.detail)) : null,
          ),
        );
      }
      this.waves.appendChild(h('section.wave', { 'aria-label': `Wave ${i + 1}` }, h('h3', null, `Wave ${i + 1}`), list));
    });
  }

  renderTask(b) {
    // Idle time means "quiet while running": a task that ended is not idle.
    const ended = ['committed', 'halted', 'failed'].includes(b.state) || b.alive === false;
    this.taskState = b.state;
    this.renderControls();
    this.renderFacts(this.taskFacts, [
      ['State', b.state + (typeof b.rc === 'number' ? ` (rc ${b.rc})` : '')],
      ['Reason', taskReason(b.state, b.detail)],
      ['Adapter', b.adapter],
      ['Session', b.sessionId],
      ['Pid', b.pid],
      ['Alive', b.alive === true ? 'yes' : b.alive === false ? 'no' : ''],
      ['Runtime', typeof b.runtimeS === 'number' ? formatDuration(b.runtimeS * 1000) : ''],
      ['Idle', typeof b.idleS === 'number' && !ended ? formatDuration(b.idleS * 1000) : ''],
      ['Cost', typeof b.costUsd === 'number' ? formatUsd(b.costUsd) : ''],
      // A refused log (a FIFO, a link out of the run) has no path, only why.
      ['Log', b.logfile || (b.reason ? `refused: ${b.reason}` : '')],
      ['Read at', timeText()],
    ]);
  }

  renderFacts(dl, pairs) {
    const shown = pairs.filter(([, v]) => v !== undefined && v !== null && v !== '');
    const key = JSON.stringify(shown.filter(([k]) => k !== 'Read at'));
    if (dl._key === key) return;
    dl._key = key;
    clear(dl);
    for (const [k, v] of shown) dl.append(h('dt', null, k), h('dd', null, String(v)));
  }
}
