//! `GET /oauth/callback`: where the browser comes back after an agent signs in to a
//! service it must authorize itself. The authorization was started by the agent's call
//! ([`crate::oauth::Authorizations`]); its `state` finds it (once), the code is
//! exchanged, the agent's tokens stored, and the waiting call goes on. The browser gets a
//! small page saying how it went; the log names the outcome, never the code or state.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::oauth::{Authorizations, Redirect, server_refusal};

/// The path of the gateway's redirect URI.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// The redirect for authorizations started by calls through the gateway at `bound`:
/// `public_url` (the gateway as browsers reach it) if given; else the gateway's own
/// address when it serves loopback (the browser is on this machine); else the origin of
/// `[serve.auth] audience`; else none (an agent is told the command to run instead).
pub fn redirect_for(
    public_url: Option<&str>,
    bound: SocketAddr,
    audience: Option<&str>,
) -> Option<Redirect> {
    let base = match (public_url, audience) {
        (Some(url), _) => url.trim_end_matches('/').to_string(),
        (None, _) if bound.ip().is_loopback() => format!("http://{bound}"),
        (None, Some(audience)) => {
            let url = reqwest::Url::parse(audience).ok()?;
            url.origin().ascii_serialization()
        }
        (None, None) => return None,
    };
    Some(Redirect::At(format!("{base}{CALLBACK_PATH}")))
}

/// The callback route.
pub fn router(authorizations: Arc<Authorizations>) -> axum::Router {
    axum::Router::new()
        .route(CALLBACK_PATH, get(callback))
        .with_state(authorizations)
}

async fn callback(
    State(authorizations): State<Arc<Authorizations>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let Some(state) = params.get("state") else {
        return page(
            StatusCode::BAD_REQUEST,
            "this link is not an authorization's way back (it carries no state)",
        );
    };
    if let Some(error) = params.get("error") {
        let why = server_refusal(error, params.get("error_description").map(String::as_str));
        authorizations.fail(state, &why);
        tracing::info!("OAuth: a browser came back with an error");
        return page(StatusCode::BAD_REQUEST, &why);
    }
    let Some(code) = params.get("code") else {
        return page(
            StatusCode::BAD_REQUEST,
            "the authorization server sent no code",
        );
    };
    let issuer = params.get("iss").map(String::as_str);
    match authorizations.finish(state, code, issuer).await {
        Ok(_) => page(
            StatusCode::OK,
            "signed in. You can close this tab; your call goes on.",
        ),
        Err(e) => {
            tracing::info!("OAuth: a browser came back and the authorization failed");
            page(StatusCode::BAD_REQUEST, &format!("sign-in failed: {e}"))
        }
    }
}

/// A small HTML page saying `what` (escaped by `maud`, as the console's pages are).
fn page(status: StatusCode, what: &str) -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html { head { meta charset="utf-8"; title { "Airlock" } } body { p { "Airlock: " (what) } } }
    }
    .into_string();
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_is_the_public_url_else_loopback_else_the_audience_origin() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let remote: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(
            redirect_for(Some("https://gw.example.com/"), remote, None),
            Some(Redirect::At(
                "https://gw.example.com/oauth/callback".to_string()
            ))
        );
        assert_eq!(
            redirect_for(None, local, Some("https://gw.example.com/mcp")),
            Some(Redirect::At(
                "http://127.0.0.1:8080/oauth/callback".to_string()
            ))
        );
        assert_eq!(
            redirect_for(None, remote, Some("https://gw.example.com:8443/mcp")),
            Some(Redirect::At(
                "https://gw.example.com:8443/oauth/callback".to_string()
            ))
        );
        assert_eq!(redirect_for(None, remote, None), None);
    }

    #[tokio::test]
    async fn pages_escape_what_the_server_said() {
        let response = page(StatusCode::BAD_REQUEST, "<b>\"x\" & y</b>");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            body.contains("Airlock: &lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;"),
            "{body}"
        );
    }
}
