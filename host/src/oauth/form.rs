//! One form-encoded POST to a token endpoint (RFC 6749 §4), as the token exchange and
//! identity-assertion grants send them: the client authenticated with HTTP Basic (its id
//! and secret form-encoded first, §2.3.1), the JSON answer read, a refusal's `error` and
//! `error_description` kept. No redirect is followed; nothing here logs the form.

use std::time::Duration;

use serde_json::Value;

use super::clip;

/// Why a token request did not give an answer to read.
pub(super) enum FormFailure {
    /// The request could not be sent or its answer read.
    Transport(String),
    /// The endpoint refused: its `error` and `error_description`, or the status.
    Refused(String),
}

/// POSTs `form` to `endpoint` (with `basic` client authentication when given) and
/// returns the JSON answer of a success.
pub(super) async fn post_form(
    endpoint: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Result<Value, FormFailure> {
    let transport = |e: reqwest::Error| FormFailure::Transport(e.without_url().to_string());
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(transport)?;
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().copied())
        .finish();
    let mut request = http
        .post(endpoint)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let Some((id, secret)) = basic {
        let encoded = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        request = request.basic_auth(encoded(id), Some(encoded(secret)));
    }
    let answer = request.send().await.map_err(transport)?;
    let status = answer.status();
    let body = answer.bytes().await.map_err(transport)?;
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(answer);
    }
    let code = answer.get("error").and_then(Value::as_str).unwrap_or("");
    let text = answer
        .get("error_description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let reason = format!("{code} {text}").trim().to_string();
    Err(FormFailure::Refused(if reason.is_empty() {
        format!("HTTP {status}")
    } else {
        clip(&reason, 300)
    }))
}
