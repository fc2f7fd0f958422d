//! `Mcp-Param-*` headers for a session-era client's `tools/call` to a 2026-07-28 server:
//! the tool's `x-mcp-header` annotations (learned from `tools/list`), and the headers its
//! arguments give, as the 2026-07-28 client SDKs send them.

use std::collections::HashMap;

use mcpgate_jsonrpc::modern::encode_header_value;
use serde_json::Value;

/// Per tool: each annotated property's header name and its path from the arguments'
/// root (through `properties` only, as the spec allows).
pub type Annotations = HashMap<String, Vec<(String, Vec<String>)>>;

/// The annotations of every tool in a `tools/list` result.
pub fn annotations(tools_list_result: &Value) -> Annotations {
    let mut out = Annotations::new();
    let tools = tools_list_result.get("tools").and_then(Value::as_array);
    for t in tools.into_iter().flatten() {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut found = Vec::new();
        if let Some(schema) = t.get("inputSchema") {
            walk(schema, &mut Vec::new(), &mut found);
        }
        if !found.is_empty() {
            out.insert(name.to_owned(), found);
        }
    }
    out
}

fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<(String, Vec<String>)>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, s) in props {
        path.push(k.clone());
        if let Some(h) = s.get("x-mcp-header").and_then(Value::as_str) {
            found.push((h.to_owned(), path.clone()));
        }
        walk(s, path, found);
        path.pop();
    }
}

/// The `Mcp-Param-*` headers (lowercase name, encoded value) of a call with `args` to a
/// tool with `annotated` properties: one per present, non-null string, integer or boolean.
pub fn param_headers(annotated: &[(String, Vec<String>)], args: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (header, path) in annotated {
        let mut v = args;
        for k in path {
            match v.get(k) {
                Some(x) => v = x,
                None => {
                    v = &Value::Null;
                    break;
                }
            }
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => continue,
        };
        out.push((
            format!("mcp-param-{}", header.to_ascii_lowercase()),
            encode_header_value(&text),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotated_arguments_become_headers() {
        let list = json!({"tools": [
            {"name": "q", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {"type": "object", "properties": {"prio": {"type": "integer", "x-mcp-header": "Priority"}}},
                "plain": {"type": "string"}}}},
            {"name": "none", "inputSchema": {"type": "object"}}]});
        let a = annotations(&list);
        assert_eq!(a.len(), 1);
        let q = &a["q"];
        let h = param_headers(
            q,
            &json!({"region": "ü-1", "opts": {"prio": 3}, "plain": "x"}),
        );
        // Properties in key order: opts.prio, then region.
        assert_eq!(
            h,
            vec![
                ("mcp-param-priority".to_owned(), "3".to_owned()),
                (
                    "mcp-param-region".to_owned(),
                    "=?base64?w7wtMQ==?=".to_owned()
                ),
            ]
        );
        assert!(param_headers(q, &json!({"region": null})).is_empty());
    }
}
