// What the server is, from GET /api/info, in words for the page: the header's
// short label and, for a demo, the note the chat shows so nobody mistakes it
// for a real agent. No DOM.
//
// /api/info has no demo field: a replay (`mode: "replay"`) never reaches an
// agent, and `--demo` is the one way to be interactive in replay mode (the
// flag `--interactive` needs `--agent` and refuses `--replay`). A `demo`
// field ("replay" or "agent"), should the server send one, is used first.

export const REPLAY_NOTE = 'Demo: replays a recorded run; your prompt is not sent to any agent.';
export const DEMO_AGENT_NOTE =
  'Demo agent: no model, runs nothing. It asks to run a command, then asks a question: try Approve, Deny, a steer and Stop.';

/** 'replay', 'agent' (the built-in demo agent) or null (a real agent). */
export function demoKind(info) {
  if (!info || typeof info !== 'object') return null;
  if (info.demo === 'replay' || info.demo === 'agent') return info.demo;
  if (info.mode !== 'replay') return null;
  return info.interactive === true ? 'agent' : 'replay';
}

/** `{label, note}`: the header's words, and the chat's note ('' for a real agent). */
export function describeServer(info) {
  const b = info && typeof info === 'object' ? info : {};
  const kind = demoKind(b);
  const version = typeof b.version === 'string' ? `runwire-serve ${b.version}` : null;
  let what;
  if (kind === 'replay') what = 'demo: recorded replay';
  else if (kind === 'agent') what = 'demo agent';
  else what = [typeof b.agent === 'string' ? `agent ${b.agent}` : null, b.interactive === true ? 'interactive' : null].filter(Boolean).join(', ');
  return {
    label: [what, version].filter(Boolean).join(' · '),
    note: kind === 'replay' ? REPLAY_NOTE : kind === 'agent' ? DEMO_AGENT_NOTE : '',
    demo: kind,
  };
}
