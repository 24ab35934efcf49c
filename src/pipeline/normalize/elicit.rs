//! An MCP server's elicitation (codex's `mcpServer/elicitation/request`)
//! read as runwire asks it: the one reading of its schema, which the codex
//! session (it asks and answers the elicitation, [`crate::session::codex`])
//! and the codex app-server normalizer (it says why one was declined) share.
//! No IO.

use crate::pipeline::events::Question;
use serde_json::{json, Value};

/// How an MCP server's elicitation is put to a person.
pub enum Elicit {
    /// A form: one question per field.
    Form(Vec<Field>),
    /// Accepted or declined: a URL to visit (`content` none), or a form with
    /// no fields (`content` is `{}`).
    Confirm { content: Option<Value> },
}

fn text_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.trim().is_empty())
}

/// An MCP elicitation (`mcpServer/elicitation/request` params) as runwire
/// asks it, or why it cannot: a `form` whose fields are text, numbers,
/// booleans or single choices is a question per field; a `url` (a page to
/// visit) or a form with no fields is accepted or declined; a multi-select
/// or unknown field, OpenAI's free-schema forms and a device verification
/// (`openai/userVerification`, a proof only the person's device gives) are
/// not representable.
pub fn elicitation(p: &Value) -> Result<Elicit, String> {
    match p.get("mode").and_then(Value::as_str).unwrap_or("form") {
        "url" if text_of(p, "url").is_some() => Ok(Elicit::Confirm { content: None }),
        "url" => Err("a URL elicitation without a URL".into()),
        "form" => {
            let Some(props) = p.pointer("/requestedSchema/properties").and_then(Value::as_object) else {
                return Err("a form elicitation without requestedSchema.properties".into());
            };
            if props.is_empty() {
                return Ok(Elicit::Confirm { content: Some(json!({})) });
            }
            let mut fields: Vec<Field> = Vec::new();
            for (name, f) in props {
                let strings = |k: &str| -> Option<Vec<String>> {
                    f.get(k)?.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect()
                };
                let kind = match f.get("type").and_then(Value::as_str).unwrap_or("") {
                    "string" if f.get("enum").is_some() => {
                        let values = strings("enum").filter(|v| !v.is_empty());
                        let Some(values) = values else { return Err(format!("field {name:?} has an empty enum")) };
                        let labels = strings("enumNames").filter(|l| l.len() == values.len());
                        FieldKind::Choice(labels.unwrap_or_else(|| values.clone()).into_iter().zip(values).collect())
                    }
                    "string" if f.get("oneOf").is_some() => {
                        let opts: Option<Vec<(String, String)>> = f["oneOf"].as_array().map(|os| {
                            os.iter()
                                .filter_map(|o| Some((text_of(o, "title")?.to_string(), text_of(o, "const")?.to_string())))
                                .collect()
                        });
                        match opts.filter(|o| !o.is_empty()) {
                            Some(o) => FieldKind::Choice(o),
                            None => return Err(format!("field {name:?} offers no choices")),
                        }
                    }
                    "string" => FieldKind::Text,
                    "number" => FieldKind::Number { integer: false },
                    "integer" => FieldKind::Number { integer: true },
                    "boolean" => FieldKind::Bool,
                    other => {
                        return Err(format!(
                            "field {name:?} is of type {other:?} (a multi-select or a type runwire does not know), which runwire cannot ask"
                        ))
                    }
                };
                let mut question =
                    text_of(f, "description").or_else(|| text_of(f, "title")).unwrap_or(name).to_string();
                if fields.iter().any(|x| x.question == question) {
                    question = format!("{question} ({name})");
                }
                fields.push(Field { name: name.clone(), question, kind });
            }
            Ok(Elicit::Form(fields))
        }
        "openai/userVerification" => {
            Err("a device verification (openai/userVerification) needs a proof only the person's own device can give"
                .into())
        }
        m @ ("openai/form" | "openaiForm") => Err(format!("an {m} form has a free schema runwire does not render")),
        other => Err(format!("elicitation mode {other:?} is unknown to runwire")),
    }
}

/// Why runwire declines the MCP elicitation `p` (the params of
/// `mcpServer/elicitation/request`) at once, or `None` when it asks a person.
pub fn refusal(p: &Value) -> Option<String> {
    elicitation(p).err()
}

impl Field {
    pub fn as_question(&self) -> Question {
        let options = match &self.kind {
            FieldKind::Choice(o) => o.iter().map(|(l, _)| l.as_str()).collect(),
            FieldKind::Bool => vec!["yes", "no"],
            FieldKind::Text | FieldKind::Number { .. } => vec![],
        };
        Question {
            question: self.question.clone(),
            header: Some(self.name.clone()),
            options: options
                .into_iter()
                .map(|l| crate::pipeline::events::QuestionOption { label: l.to_string(), description: None })
                .collect(),
            multi_select: false,
            free_text: false,
        }
    }

    /// The field's value for the answer `t`, or why `t` is none.
    pub fn value(&self, t: &str) -> Result<Value, String> {
        match &self.kind {
            FieldKind::Text => Ok(json!(t)),
            FieldKind::Bool => Ok(json!(t == "yes")),
            FieldKind::Choice(o) => {
                o.iter().find(|(l, _)| l == t).map(|(_, v)| json!(v)).ok_or_else(|| format!("{t:?} is no choice"))
            }
            FieldKind::Number { integer: true } => t
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("the answer to {:?} must be a whole number, not {t:?}", self.question)),
            FieldKind::Number { integer: false } => t
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
                .ok_or_else(|| format!("the answer to {:?} must be a number, not {t:?}", self.question)),
        }
    }
}

/// One field of an MCP form elicitation, as a question.
#[derive(Debug, Clone)]
pub struct Field {
    /// The field's key in the form's content.
    pub name: String,
    /// The question asked for it (unique in its form).
    pub question: String,
    kind: FieldKind,
}

#[derive(Debug, Clone)]
enum FieldKind {
    Text,
    Number {
        integer: bool,
    },
    Bool,
    /// The labels shown and the values sent.
    Choice(Vec<(String, String)>),
}
