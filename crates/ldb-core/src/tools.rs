//! Tool definitions sent with chat requests (`--tools FILE`,
//! `--tool-choice`): read, checked, and put in the OpenAI Chat Completions
//! shape, which is the only one the chat route takes.
//!
//! A file holds a JSON array; each entry is either OpenAI's
//! `{"type":"function","function":{"name","description","parameters"}}` or
//! Anthropic's `{"name","description","input_schema"}`. Anthropic entries
//! are converted (`input_schema` becomes `parameters`), so one file can be
//! used against any server.

use serde_json::{Map, Value, json};

/// The tools of a run and how the server is asked to use them.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSet {
    /// The definitions, each in the OpenAI chat shape.
    pub tools: Vec<Value>,
    /// `tool_choice`.
    pub choice: ToolChoice,
}

/// `--tool-choice`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (the API's default).
    #[default]
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call this function.
    Named(String),
}

impl ToolChoice {
    /// `auto`, `required`, `none`, or a function name.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "" => return Err("is empty (use auto, required, none or a function name)".into()),
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Named(name.to_string()),
        })
    }

    /// The request's `tool_choice` value.
    pub fn to_json(&self) -> Value {
        match self {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(n) => json!({"type": "function", "function": {"name": n}}),
        }
    }
}

impl ToolSet {
    /// Read a tools file's text and the choice; the error says what is wrong
    /// (the caller names the file).
    pub fn parse(text: &str, choice: ToolChoice) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        Self::from_value(v, choice)
    }

    /// The same from JSON already read (a trace row's `tools`).
    pub fn from_value(v: Value, choice: ToolChoice) -> Result<Self, String> {
        let Value::Array(items) = v else {
            return Err("must hold a JSON array of tool definitions".into());
        };
        if items.is_empty() {
            return Err("holds no tool definition".into());
        }
        let mut tools = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            tools.push(openai_tool(item).map_err(|e| format!("tool {}: {e}", i + 1))?);
        }
        let set = ToolSet { tools, choice };
        let names = set.names();
        if let Some(dup) = names
            .iter()
            .enumerate()
            .find_map(|(i, n)| names[..i].contains(n).then_some(n))
        {
            return Err(format!("names the function {dup:?} twice"));
        }
        if let ToolChoice::Named(n) = &set.choice
            && !names.contains(&n.as_str())
        {
            return Err(format!("has no function named {n:?} (--tool-choice)"));
        }
        Ok(set)
    }

    /// The function names, in file order.
    pub fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect()
    }

    /// Put `tools` and `tool_choice` into a chat request body.
    pub fn add_to(&self, body: &mut Value) {
        body["tools"] = Value::Array(self.tools.clone());
        body["tool_choice"] = self.choice.to_json();
    }
}

/// One definition in the OpenAI chat shape, whichever shape it came in.
fn openai_tool(item: Value) -> Result<Value, String> {
    let Value::Object(mut o) = item else {
        return Err("is not an object".into());
    };
    if o.contains_key("function") || o.get("type").is_some_and(|t| t == "function") {
        if o.get("type").and_then(Value::as_str) != Some("function") {
            return Err("an OpenAI tool needs \"type\": \"function\"".into());
        }
        let Some(Value::Object(f)) = o.get_mut("function") else {
            return Err("\"function\" must be an object".into());
        };
        check_function(f, "parameters")?;
        return Ok(Value::Object(o));
    }
    if o.contains_key("input_schema") || o.contains_key("name") {
        check_function(&mut o, "input_schema")?;
        let mut f = Map::new();
        f.insert("name".into(), o.remove("name").unwrap_or_default());
        if let Some(d) = o.remove("description") {
            f.insert("description".into(), d);
        }
        if let Some(s) = o.remove("input_schema") {
            f.insert("parameters".into(), s);
        }
        return Ok(json!({"type": "function", "function": f}));
    }
    Err("is neither an OpenAI ({\"type\":\"function\",\"function\":{…}}) nor an Anthropic ({\"name\",\"input_schema\"}) tool".into())
}

/// A function needs a non-empty string name; its schema, when given, must
/// be an object, and a description a string.
fn check_function(f: &mut Map<String, Value>, schema_key: &str) -> Result<(), String> {
    match f.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => {}
        Some(Value::String(_)) => return Err("the function's \"name\" is empty".into()),
        _ => return Err("the function has no string \"name\"".into()),
    }
    if f.get(schema_key).is_some_and(|s| !s.is_object()) {
        return Err(format!("\"{schema_key}\" must be a JSON schema object"));
    }
    if f.get("description").is_some_and(|d| !d.is_string()) {
        return Err("\"description\" must be a string".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAI: &str = r#"[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#;

    #[test]
    fn openai_and_anthropic_definitions_come_out_in_the_chat_shape() {
        let a = ToolSet::parse(OPENAI, ToolChoice::Auto).unwrap();
        let anthropic = r#"[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]"#;
        let b = ToolSet::parse(anthropic, ToolChoice::Auto).unwrap();
        assert_eq!(a.tools, b.tools);
        assert_eq!(a.names(), ["get_weather"]);
        let mut body = json!({"model": "m"});
        ToolSet::parse(OPENAI, ToolChoice::Named("get_weather".into()))
            .unwrap()
            .add_to(&mut body);
        assert_eq!(body["tool_choice"]["function"]["name"], "get_weather");
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["required"][0],
            "city"
        );
    }

    #[test]
    fn choices_parse_and_bad_files_say_what_is_wrong() {
        assert_eq!(ToolChoice::parse("required"), Ok(ToolChoice::Required));
        assert_eq!(ToolChoice::parse("none").unwrap().to_json(), json!("none"));
        assert!(ToolChoice::parse(" ").is_err());
        for (text, why) in [
            ("{", "not JSON"),
            ("{}", "array"),
            ("[]", "no tool"),
            ("[3]", "tool 1: is not an object"),
            (r#"[{"type":"function"}]"#, "\"function\" must be an object"),
            (r#"[{"type":"function","function":{"name":""}}]"#, "empty"),
            (r#"[{"name":"f","input_schema":"x"}]"#, "input_schema"),
            (r#"[{"name":7}]"#, "no string"),
            (r#"[{"description":"x"}]"#, "neither"),
            (
                r#"[{"name":"f"},{"type":"function","function":{"name":"f"}}]"#,
                "twice",
            ),
        ] {
            let e = ToolSet::parse(text, ToolChoice::Auto).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let e = ToolSet::parse(OPENAI, ToolChoice::Named("nope".into())).unwrap_err();
        assert!(e.contains("no function named \"nope\""), "{e}");
    }
}
