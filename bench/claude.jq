# claude.jq: `normalize-events claude` written in jq, as the benchmark's
# baseline. Claude Code stream-json lines in, events/v1-like records out.
#
#   jq -n -c -R --arg now 2026-01-01T00:00:00.000Z -f bench/claude.jq < run.jsonl
#
# Streams: `foreach inputs` carries the state a line-at-a-time mapping needs
# (line number, session id, the open message per agent, which messages were
# streamed). Mapping:
#   system/init                          -> turn_start {model, cwd}
#   stream_event text/thinking deltas    -> token_delta {text, channel, message}
#   assistant text/thinking (not streamed before) -> token_delta
#   assistant tool_use                   -> tool_call {id, name, args, message}
#   user tool_result                     -> tool_result {id, output, is_error, truncated, bytes}
#   result                               -> turn_end {ok, reason?, cost_usd, usage, durations}
#   a line that is not JSON              -> error {code: not_json}
#   an unknown type                      -> error {code: unknown_kind}
# Subagent lines (parent_tool_use_id set) carry "parent". Not done here, unlike
# the Rust adapter: secret redaction, exact byte-cut of long outputs,
# suffix-only dedupe of partially streamed text, RFC 3339 re-formatting of ts.

def text_of:
  if type == "string" then .
  elif type == "array" then map(if .type == "text" then .text else "[\(.type)]" end) | join("\n")
  elif . == null then ""
  else tojson
  end;

def with_parent($p): if $p == "" then . else . + {parent: $p} end;

def usage_of:
  if (.usage.input_tokens | type) == "number" then
    {input_tokens: .usage.input_tokens, output_tokens: (.usage.output_tokens // 0)}
    + (if .usage.cache_read_input_tokens then {cached_input_tokens: .usage.cache_read_input_tokens} else {} end)
    + (if .usage.cache_creation_input_tokens then {cache_write_input_tokens: .usage.cache_creation_input_tokens} else {} end)
  else null
  end;

def drop_nulls: with_entries(select(.value != null));

def tool_result($p):
  (.content | text_of) as $out
  | ($out | utf8bytelength) as $bytes
  | {
      id: (.tool_use_id // ""),
      output: (if $bytes > 65536 then $out[:65536] else $out end),
      is_error: (.is_error == true),
      truncated: ($bytes > 65536),
      bytes: $bytes
    }
  | with_parent($p);

# One line -> {state, out: [[type, data], ...]}.
def step($l; $n):
  ($l.parent_tool_use_id // "") as $p
  | .out = []
  | if $l.__raw then
      .out = [["error", {reason: "not a JSON object", code: "not_json", raw: ($l.__raw[:4096]), fatal: false}]]
    else
      (if $l.type != "system" and .session == null and $l.session_id then .session = $l.session_id else . end)
      | if $l.type == "system" then
          if $l.subtype == "init" then
            .session = ($l.session_id // .session)
            | .out = [["turn_start", ({model: $l.model, cwd: $l.cwd} | drop_nulls)]]
          else .
          end
        elif $l.type == "stream_event" then
          $l.event as $e
          | if $e.type == "message_start" then
              .msg[$p] = ($e.message.id // "L\($n)")
            elif $e.type == "content_block_delta" then
              (.msg[$p] // "L\($n)") as $m
              | if $e.delta.type == "text_delta" and ($e.delta.text // "") != "" then
                  .streamed[$m] = true
                  | .out = [["token_delta", ({text: $e.delta.text, channel: "text", message: $m} | with_parent($p))]]
                elif $e.delta.type == "thinking_delta" and ($e.delta.thinking // "") != "" then
                  .streamed[$m] = true
                  | .out = [["token_delta", ({text: $e.delta.thinking, channel: "reasoning", message: $m} | with_parent($p))]]
                else .
                end
            else .
            end
        elif $l.type == "assistant" then
          ($l.message.id // "L\($n)") as $m
          | (.streamed[$m] == true) as $seen
          | .out = [
              ($l.message.content | if type == "string" then [{type: "text", text: .}] else (. // []) end)[]
              | if .type == "text" and ($seen | not) and (.text // "") != "" then
                  ["token_delta", ({text: .text, channel: "text", message: $m} | with_parent($p))]
                elif .type == "thinking" and ($seen | not) and (.thinking // "") != "" then
                  ["token_delta", ({text: .thinking, channel: "reasoning", message: $m} | with_parent($p))]
                elif .type == "tool_use" or .type == "server_tool_use" then
                  ["tool_call", ({id: (.id // ""), name: (.name // ""), args: (.input // {}), message: $m} | with_parent($p))]
                else empty
                end
            ]
        elif $l.type == "user" then
          .out = [
            ($l.message.content | if type == "array" then .[] else empty end)
            | select(.type == "tool_result")
            | ["tool_result", tool_result($p)]
          ]
        elif $l.type == "result" then
          (($l.is_error == true) or ($l.subtype != "success")) as $failed
          | .msg = {}
          | .streamed = {}
          | .out = [[
              "turn_end",
              ({
                ok: ($failed | not),
                reason: (if $failed then "\($l.result // "") (\($l.subtype))" | ltrimstr(" ") else null end),
                cost_usd: ($l.total_cost_usd // $l.cost_usd),
                usage: ($l | usage_of),
                duration_ms: $l.duration_ms,
                duration_api_ms: $l.duration_api_ms,
                num_turns: $l.num_turns
              } | drop_nulls)
            ]]
        elif ($l.type | IN("rate_limit_event", "control_request", "control_response", "control_cancel_request", "command_lifecycle", "keep_alive")) then
          .
        else
          .out = [["error", {reason: "unknown kind \($l.type)", code: "unknown_kind", raw: ($l | tojson | .[:4096]), fatal: false}]]
        end
    end;

foreach (inputs | . as $raw | (try fromjson catch null) | if type == "object" then . else {__raw: $raw} end) as $l (
  {n: 0, session: null, msg: {}, streamed: {}, out: [], ts: null};
  .n += 1
  | .ts = ($l.timestamp // $now)
  | step($l; .n);
  . as $s
  | ($s.out | length) as $k
  | range(0; $k) as $i
  | {v: "events/v1"}
    + (if $s.session then {session: $s.session} else {} end)
    + {
        seq: (if $k == 1 then $s.n else "\($s.n).\($i + 1)" end),
        ts: $s.ts,
        type: $s.out[$i][0],
        data: $s.out[$i][1]
      }
)
