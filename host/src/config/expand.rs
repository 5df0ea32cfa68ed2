//! `${VAR}` expansion in env values, header values and URLs.

use super::SettingError;
/// Expands every `${NAME}` in `text` with `lookup`. An unset variable is an error whose
/// message names it: `environment variable "X" (referenced as "${X}") is not set`.
pub fn expand_vars(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SettingError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated \"${{\" in {text:?}"))?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("\"${{{name}}}\" is not a valid variable reference").into());
        }
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => {
                return Err(format!(
                    "environment variable \"{name}\" (referenced as \"${{{name}}}\") is not set"
                )
                .into());
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_names_missing_variables() {
        let env = |k: &str| (k == "TOKEN").then(|| "abc".to_string());
        assert_eq!(
            expand_vars("Bearer ${TOKEN}!", &env).unwrap(),
            "Bearer abc!"
        );
        assert_eq!(expand_vars("plain", &env).unwrap(), "plain");
        let err = expand_vars("${NOPE}", &env).unwrap_err().message;
        assert!(err.contains("\"NOPE\"") && err.contains("not set"), "{err}");
        assert!(expand_vars("${oops", &env).is_err());
    }
}
