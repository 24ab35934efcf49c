// What the server is, from GET /api/info, in words for the page: the header's
// short label and, for a replay or the demo agent, the note the chat shows so
// nobody mistakes it for a real agent. No DOM.
//
// /api/info's `mode` is one of the server's four words (runwire-serve --help,
// its start line): `replay` (no --agent: a recorded run, no agent), `demo`
// (--demo: the built-in demo agent), `agent` (with `agent`, its name), `hub`
// (--cluster URL --hub: a chat runs on a node). The page uses the same words.

export const REPLAY_NOTE = 'Replay: each prompt replays a recorded run; it is not sent to any agent.';
export const DEMO_AGENT_NOTE =
  'Demo: runwire\'s demo agent, no model, runs nothing. It asks to run a command, then asks a question: try Approve, Deny, a steer and Stop.';

const MODES = ['replay', 'demo', 'agent', 'hub'];

/** The page's footer: where the data it shows lives (index.html has the first, for before /api/info answers). */
export const LOCAL_FOOTER = 'Served by runwire-serve from files embedded in the binary. Data stays on this machine.';
export const HUB_FOOTER =
  'Served by runwire-serve from files embedded in the binary. The runs are those of the cluster\'s nodes, ' +
  'mirrored on this machine; answers, steers, stops and chats go to the node that owns them.';

/** The server's mode word, or null when /api/info names none of the four. */
export function serverMode(info) {
  if (!info || typeof info !== 'object') return null;
  return MODES.includes(info.mode) ? info.mode : null;
}

/** `{label, note, mode}`: the header's words, and the chat's note ('' for a real agent or a hub). */
export function describeServer(info) {
  const b = info && typeof info === 'object' ? info : {};
  const mode = serverMode(b);
  const version = typeof b.version === 'string' ? `runwire-serve ${b.version}` : null;
  let what = mode;
  if (mode === 'agent') {
    const agent = typeof b.agent === 'string' ? `agent: ${b.agent}` : 'agent';
    what = b.interactive === true ? `${agent}, interactive` : agent;
  }
  return {
    label: [what, version].filter(Boolean).join(' · '),
    note: mode === 'replay' ? REPLAY_NOTE : mode === 'demo' ? DEMO_AGENT_NOTE : '',
    mode,
  };
}

const NODE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * At a hub, the nodes a new chat can run on: the `up` ones of /api/info's
 * `nodes` (`[{node, state, since}]`, the hub's judgement of each node's
 * heartbeats, spec/CLUSTER.md "Nodes"), by name. A lost node is left out (a
 * run sent there gets 503 or waits out its budget); so is any name a hub
 * would refuse. Empty anywhere else.
 */
export function upNodes(info) {
  if (serverMode(info) !== 'hub' || !Array.isArray(info.nodes)) return [];
  const names = info.nodes
    .filter((n) => n && typeof n === 'object' && n.state === 'up' && typeof n.node === 'string' && NODE_NAME.test(n.node))
    .map((n) => n.node);
  return [...new Set(names)].sort();
}

/**
 * The picker's choice after the list changed: the one chosen before while
 * it is still up, else the first up node, else '' (none: a new chat at this
 * hub cannot start).
 */
export function pickNode(nodes, chosen) {
  if (chosen && nodes.includes(chosen)) return chosen;
  return nodes[0] ?? '';
}

/**
 * The `forwardedProps` of a chat's run: at a hub, `{node}` for the node
 * this page started the thread on (every run of it names the same node, so
 * a first run the node never took can be sent again); `{}` for a thread
 * opened from elsewhere (`node` null: the hub knows its node, from the
 * cluster) and anywhere but a hub.
 */
export function chatForwardedProps(mode, node) {
  return mode === 'hub' && typeof node === 'string' && NODE_NAME.test(node) ? { node } : {};
}

/** The footer for this server: a hub's data comes from its nodes, any other server's stays on its machine. */
export function footerText(info) {
  return serverMode(info) === 'hub' ? HUB_FOOTER : LOCAL_FOOTER;
}
