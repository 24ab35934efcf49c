// Synthetic Claude Code stream-json corpora for the browser tests (our own
// data, shaped like the capture in fixtures/claude/bb-turn-tools.partial.jsonl):
// reasoning, streamed text, a tool call whose result is an error larger than
// the normalizer's 64 KiB cap (so it arrives failed and truncated), and a
// streamed answer. Written to a file for the stub engine's STUB_STREAM.

const SESSION = '5e55a1d0-0000-4000-8000-00000000c0de';

function ev(event) {
  return { type: 'stream_event', event, session_id: SESSION, parent_tool_use_id: null };
}

function message(id, content) {
  return { type: 'assistant', message: { id, model: 'claude-stub', type: 'message', role: 'assistant', content }, parent_tool_use_id: null, session_id: SESSION };
}

/** Text split into pieces of about `n` characters. */
function pieces(text, n) {
  const out = [];
  for (let i = 0; i < text.length; i += n) out.push(text.slice(i, i + n));
  return out;
}

export const BIG_OUTPUT_BYTES = 70 * 1024 + 123;
export const ANSWER =
  'The build failed because the linker could not find libfoo. Install libfoo-dev, then run make again; ' +
  'the rest of the tree compiles cleanly.';
export const REASONING = 'The user wants the build fixed. First run make and read the error.';
export const TOOL_ID = 'toolu_studio_make';

export function failedToolCorpus() {
  const lines = [];
  lines.push({ type: 'system', subtype: 'init', cwd: '/work/demo', session_id: SESSION, tools: ['Bash'], model: 'claude-stub' });
  // Turn 1: reasoning, a short text, then the tool call, streamed.
  const m1 = 'msg_studio_1';
  lines.push(ev({ type: 'message_start', message: { model: 'claude-stub', id: m1, type: 'message', role: 'assistant', content: [] } }));
  lines.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } }));
  for (const p of pieces(REASONING, 24)) lines.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: p } }));
  lines.push(message(m1, [{ type: 'thinking', thinking: REASONING, signature: 'c2ln' }]));
  lines.push(ev({ type: 'content_block_stop', index: 0 }));
  lines.push(ev({ type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }));
  const intro = 'Let me run the build to see the error.';
  for (const p of pieces(intro, 10)) lines.push(ev({ type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: p } }));
  lines.push(message(m1, [{ type: 'text', text: intro }]));
  lines.push(ev({ type: 'content_block_stop', index: 1 }));
  const input = { command: 'make -j4 all', description: 'Build everything' };
  const json = JSON.stringify(input);
  lines.push(ev({ type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: TOOL_ID, name: 'Bash', input: {} } }));
  for (const p of pieces(json, 12)) lines.push(ev({ type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: p } }));
  lines.push(message(m1, [{ type: 'tool_use', id: TOOL_ID, name: 'Bash', input }]));
  lines.push(ev({ type: 'content_block_stop', index: 2 }));
  lines.push(ev({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 10, output_tokens: 40 } }));
  lines.push(ev({ type: 'message_stop' }));
  // The result: an error, bigger than 64 KiB.
  const head = 'make: *** [Makefile:12: all] Error 2\nld: cannot find -lfoo\n';
  let body = head;
  let n = 0;
  while (body.length < BIG_OUTPUT_BYTES) body += `cc -c src/file${n++}.c -o build/file.o\n`;
  body = body.slice(0, BIG_OUTPUT_BYTES);
  lines.push({ type: 'user', message: { role: 'user', content: [{ tool_use_id: TOOL_ID, type: 'tool_result', content: body, is_error: true }] }, parent_tool_use_id: null, session_id: SESSION });
  // The agent thinks for a while (status lines the normalizer maps to nothing):
  // the failed card is settled well before the answer streams.
  for (let i = 0; i < 10; i++) lines.push({ type: 'system', subtype: 'status', status: 'requesting', session_id: SESSION });
  // Turn 2: the answer, streamed in small pieces.
  const m2 = 'msg_studio_2';
  lines.push(ev({ type: 'message_start', message: { model: 'claude-stub', id: m2, type: 'message', role: 'assistant', content: [] } }));
  lines.push(ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
  for (const p of pieces(ANSWER, 8)) lines.push(ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } }));
  lines.push(message(m2, [{ type: 'text', text: ANSWER }]));
  lines.push(ev({ type: 'content_block_stop', index: 0 }));
  lines.push(ev({ type: 'message_stop' }));
  lines.push({ type: 'result', subtype: 'success', is_error: false, duration_ms: 5100, duration_api_ms: 4800, num_turns: 2, result: ANSWER, session_id: SESSION, total_cost_usd: 0.0421, usage: { input_tokens: 20, output_tokens: 90 } });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

export const HANG_TEXT = 'Working on it: reading the parser first.';

/**
 * Two lines for the stub's `hang` mode, which plays a corpus's first two
 * lines and then waits until killed: the init (the session id) and one
 * assistant message, so a hanging task has something in its stream.
 */
export function hangCorpus() {
  return [
    { type: 'system', subtype: 'init', cwd: '/work/demo', session_id: SESSION, tools: ['Bash'], model: 'claude-stub' },
    message('msg_studio_hang', [{ type: 'text', text: HANG_TEXT }]),
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';
}
