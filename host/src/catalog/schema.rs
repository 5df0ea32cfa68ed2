//! Tool input schemas that common model APIs reject. Such tools are listed as
//! incompatible, with the reason, instead of failing when a model tries to call them.

use serde_json::Value;

/// Keys that make a schema depend on references model APIs do not resolve.
const REFERENCE_KEYS: &[&str] = &["$ref", "$defs", "definitions", "$dynamicRef"];

/// Why `schema` would be rejected by common model APIs, or `None` when it is fine.
pub fn incompatibility(schema: &Value) -> Option<String> {
    let Value::Object(root) = schema else {
        return Some("the input schema is not a JSON object".into());
    };
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None if root.contains_key("properties") => {}
        Some(other) => {
            return Some(format!(
                "the input schema's root type is {other}, not \"object\""
            ));
        }
        None => return Some("the input schema's root has no \"type\": \"object\"".into()),
    }
    for key in ["oneOf", "anyOf", "allOf", "not"] {
        if root.contains_key(key) {
            return Some(format!("the input schema's root uses \"{key}\""));
        }
    }
    find_unsupported(schema, "#")
}

fn find_unsupported(value: &Value, path: &str) -> Option<String> {
    match value {
        Value::Object(map) => {
            for key in REFERENCE_KEYS {
                if map.contains_key(*key) {
                    return Some(format!("the input schema uses \"{key}\" at {path}"));
                }
            }
            if let Some(Value::Array(types)) = map.get("type")
                && types.len() > 1
            {
                return Some(format!(
                    "the input schema uses a union type {} at {path}",
                    Value::Array(types.clone())
                ));
            }
            map.iter()
                .find_map(|(k, v)| find_unsupported(v, &format!("{path}/{k}")))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_unsupported(v, &format!("{path}/{i}"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_what_model_apis_reject() {
        assert_eq!(
            incompatibility(&json!({"type": "object", "properties": {"a": {"type": "string"}}})),
            None
        );
        assert_eq!(incompatibility(&json!({"properties": {}})), None);
        assert!(
            incompatibility(&json!({"type": "array"}))
                .unwrap()
                .contains("root type")
        );
        assert!(
            incompatibility(&json!(true))
                .unwrap()
                .contains("not a JSON object")
        );
        assert!(
            incompatibility(&json!({"type": "object", "$defs": {}}))
                .unwrap()
                .contains("$defs")
        );
        let r =
            incompatibility(&json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}))
                .unwrap();
        assert!(r.contains("$ref") && r.contains("#/properties/x"), "{r}");
        assert!(
            incompatibility(
                &json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}})
            )
            .unwrap()
            .contains("union type")
        );
        assert!(
            incompatibility(&json!({"type": "object", "anyOf": []}))
                .unwrap()
                .contains("anyOf")
        );
    }
}
