//! Claude Code's `stream_event` lines (`--include-partial-messages`): the
//! API's streaming events, one content block at a time.

use super::*;

impl Claude {
    pub(super) fn stream_event(&mut self, ctx: &mut Ctx, raw: &[u8], ev: StreamEvent, parent: Parent) {
        let index = ev.index.as_i64().unwrap_or(-1);
        match ev.kind.as_str().unwrap_or("") {
            "message_start" => {
                let id = ev.message.0.as_ref().and_then(|m| m.id.as_str()).map(str::to_string);
                let id = id.unwrap_or_else(|| ctx.line_id());
                // A message of the same agent still open was cut off (killed turn): drop it.
                let k = key(&parent);
                self.streams.retain(|s| s.parent.as_deref() != k);
                let parent = k.map(str::to_string);
                let s = Stream { id, parent, blocks: Default::default(), dropped: 0, assistant_seen: 0 };
                super::super::fields::push_bounded(&mut self.streams, s);
            }
            "content_block_start" => {
                let is_main = parent.is_none();
                if self.stream_mut(&parent).is_none() {
                    // Nothing shown is lost yet: the deltas that would fill it are reported.
                    return;
                }
                let b = ev.content_block.0.unwrap_or_default();
                let kind = match b.kind.as_str() {
                    Some("text") => Kind::Text,
                    Some("thinking") => Kind::Thinking,
                    Some("tool_use" | "server_tool_use" | "mcp_tool_use") => Kind::Tool,
                    _ => Kind::Other,
                };
                if kind == Kind::Text && is_main {
                    self.last_text = Seen::default();
                }
                let s = self.stream_mut(&parent).expect("checked above");
                if s.blocks.len() == MAX_BLOCKS {
                    s.blocks.pop_front();
                    s.dropped += 1;
                }
                // Past the first few blocks, text is remembered by length and hash only.
                let seen = if s.blocks.len() + s.dropped < KEPT_BLOCKS { Seen::default() } else { Seen::hashed() };
                s.blocks.push_back(SBlock {
                    index,
                    kind,
                    seen,
                    input: String::new(),
                    input_over: 0,
                    tool_id: b.id.as_str().unwrap_or("").to_string(),
                    tool_name: b.name.as_str().unwrap_or("").to_string(),
                    tool_emitted: false,
                });
            }
            "content_block_delta" => {
                let Some(d) = ev.delta.0 else {
                    return ctx.invalid(raw, "content_block_delta without a \"delta\" object");
                };
                let is_main = parent.is_none();
                // Text with nowhere to go (its message_start was never seen) is reported, not dropped.
                let orphan = |ctx: &mut Ctx, what: &str| {
                    let n = d.text.as_str().or(d.thinking.as_str()).or(d.partial_json.as_str()).map_or(0, str::len);
                    // Signatures and citations carry nothing a viewer reads.
                    if n > 0 {
                        ctx.error("orphan_delta", format!("{what}: a delta of {n} bytes was not shown"), raw, false)
                    }
                };
                let Some(s) = self.stream_mut(&parent) else { return orphan(ctx, "delta with no open message") };
                let msg = s.id.clone();
                let Some(b) = s.blocks.iter_mut().rev().find(|b| b.index == index) else {
                    return orphan(ctx, &format!("delta for content block {index}, which was never started"));
                };
                match d.kind.as_str().unwrap_or("") {
                    "text_delta" => {
                        let t = d.text.as_str().unwrap_or("");
                        b.seen.push(t);
                        if is_main {
                            self.last_text.push(t);
                        }
                        if let Some(e) = text_event(t, Channel::Text, &msg, &parent) {
                            ctx.emit(e);
                        }
                    }
                    "thinking_delta" => {
                        let t = d.thinking.as_str().unwrap_or("");
                        b.seen.push(t);
                        if let Some(e) = text_event(t, Channel::Reasoning, &msg, &parent) {
                            ctx.emit(e);
                        }
                    }
                    "input_json_delta" => {
                        let j = d.partial_json.as_str().unwrap_or("");
                        // Bounded like a line: a tool input streamed past the cap is not kept.
                        if b.input_over == 0 && b.input.len() + j.len() <= crate::util::lines::MAX_LINE {
                            b.input.push_str(j);
                        } else {
                            b.input_over += j.len();
                        }
                    }
                    "signature_delta" | "citations_delta" => {}
                    other => ctx.unknown(raw, &format!("stream_event/content_block_delta/{other}")),
                }
            }
            "content_block_stop" => {
                let Some(s) = self.stream_mut(&parent) else { return };
                let msg = s.id.clone();
                let Some(b) = s.blocks.iter_mut().rev().find(|b| b.index == index) else { return };
                // No assistant line delivered this tool call (older builds, or it never came): use the streamed input.
                if b.kind == Kind::Tool && !b.tool_emitted {
                    b.tool_emitted = true;
                    if b.tool_id.is_empty() {
                        return ctx.missing_id(raw, "streamed tool_use");
                    }
                    let args = if b.input_over > 0 {
                        let n = b.input.len() + b.input_over;
                        Value::String(format!("(a streamed input of {n} bytes, over the line cap: not kept)"))
                    } else if b.input.trim().is_empty() {
                        Value::Object(Default::default())
                    } else {
                        serde_json::from_str(&b.input).unwrap_or_else(|_| Value::String(b.input.clone()))
                    };
                    let (id, name) = (b.tool_id.clone(), b.tool_name.clone());
                    self.note_spawn(&id, &name, &args, &parent);
                    ctx.emit(tool_call(id, name, args, Some(msg), parent));
                }
            }
            "message_stop" => {
                let k = key(&parent);
                if let Some(pos) = self.streams.iter().rposition(|s| s.parent.as_deref() == k) {
                    self.streams.remove(pos);
                }
            }
            "message_delta" | "ping" => {}
            "error" => {
                let msg = ev.error.map(|e| e.get().to_string()).unwrap_or_default();
                ctx.error("agent_error", format!("API stream error: {msg}"), raw, false);
            }
            other => ctx.unknown(raw, &format!("stream_event/{other}")),
        }
    }
}
