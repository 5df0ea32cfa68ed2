//! Authorization servers of the 2025-03-26 revision: no protected resource metadata; the
//! MCP server's origin serves `/.well-known/oauth-authorization-server` itself.
//!
//! That revision does not make the origin the issuer, and some servers name a path under
//! it (the conformance suite's `auth/2025-03-26-oauth-metadata-backcompat`, from 0.1.14
//! on, names `<origin>/oauth`). rmcp checks the issuer against the origin (RFC 8414
//! §3.3), which is right whenever the client learned the issuer first, from protected
//! resource metadata or from configuration. In the legacy discovery it did not: it
//! guessed the location from the server's URL. So here, and only here, the issuer is
//! taken as named — when the server publishes no protected resource metadata, when the
//! document is the one at the origin's root, and when the issuer is on the server's own
//! origin. Every other mismatch is still refused.

use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{AuthError, AuthorizationMetadata};

/// How long each legacy probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The metadata of a 2025-03-26 server whose issuer rmcp refused, when the refusal is
/// the legacy case described above; `None` otherwise (the refusal stands).
pub(super) async fn legacy_metadata(
    server_url: &str,
    error: &AuthError,
) -> Option<AuthorizationMetadata> {
    let AuthError::AuthorizationServerMismatch {
        expected_issuer,
        received_issuer,
    } = error
    else {
        return None;
    };
    let server = Url::parse(server_url).ok()?;
    if !legacy_issuer_acceptable(&server, expected_issuer, received_issuer) {
        return None;
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PROBE_TIMEOUT)
        .build()
        .ok()?;
    let origin = origin_of(&server);
    let path = server.path().trim_end_matches('/');
    for prm in [
        format!("{origin}/.well-known/oauth-protected-resource{path}"),
        format!("{origin}/.well-known/oauth-protected-resource"),
    ] {
        let status = client.get(&prm).send().await.ok()?.status();
        if status.is_success() {
            // The server publishes resource metadata: not a legacy server.
            return None;
        }
    }
    let response = client
        .get(format!("{origin}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let metadata: AuthorizationMetadata = response.json().await.ok()?;
    (metadata.issuer.as_deref() == Some(received_issuer.as_str())).then_some(metadata)
}

/// Whether a refused issuer is the legacy case: rmcp expected the origin itself (so it
/// read the root document) and the metadata names an issuer on that same origin.
fn legacy_issuer_acceptable(server: &Url, expected: &str, received: &str) -> bool {
    let origin = origin_of(server);
    let Ok(received) = Url::parse(received) else {
        return false;
    };
    expected.trim_end_matches('/') == origin
        && received.query().is_none()
        && received.fragment().is_none()
        && origin_of(&received) == origin
}

/// `scheme://host[:port]`, the port only when it is not the scheme's default.
fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_issuer_on_the_servers_own_origin_is_taken_in_legacy_discovery() {
        let server = Url::parse("http://localhost:8080/mcp").unwrap();
        let ok =
            |expected: &str, received: &str| legacy_issuer_acceptable(&server, expected, received);
        assert!(ok("http://localhost:8080/", "http://localhost:8080/oauth"));
        assert!(ok(
            "http://localhost:8080",
            "http://localhost:8080/tenant/a"
        ));
        // Another host, port or scheme is refused, as is a refusal of a path-based
        // issuer (rmcp then expected a path: the client knew the issuer).
        assert!(!ok("http://localhost:8080/", "http://evil.example/oauth"));
        assert!(!ok("http://localhost:8080/", "http://localhost:9090/oauth"));
        assert!(!ok(
            "http://localhost:8080/",
            "https://localhost:8080/oauth"
        ));
        assert!(!ok(
            "http://localhost:8080/tenant",
            "http://localhost:8080/oauth"
        ));
        assert!(!ok("http://localhost:8080/", "not a url"));
        assert!(!ok(
            "http://localhost:8080/",
            "http://localhost:8080/oauth?x=1"
        ));
    }
}
