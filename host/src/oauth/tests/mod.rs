//! Unit tests of the OAuth glue, one file per module they exercise; the helpers they
//! share (a store adapter, saving a token response) live here.

use super::*;
use rmcp::transport::auth::{CredentialStore, OAuthTokenResponse, StoredCredentials};

use super::store::{ClientRegistration, StoreAdapter};
use crate::secrets::SecretStore;

fn token_response(value: serde_json::Value) -> OAuthTokenResponse {
    serde_json::from_value(value).expect("a token response")
}

fn adapter(store: &SecretStore, service: &str, url: &str) -> StoreAdapter {
    StoreAdapter::new(
        store,
        service,
        url,
        ClientRegistration {
            client_id: "client-1".into(),
            client_secret: Some("client-secret".into()),
            redirect_uri: "http://127.0.0.1:1/callback".into(),
            subject: None,
        },
    )
}

async fn save(
    store: &SecretStore,
    service: &str,
    url: &str,
    token: serde_json::Value,
    received_at: u64,
) {
    let credentials = StoredCredentials::new(
        "client-1".into(),
        Some(token_response(token)),
        vec![],
        Some(received_at),
    );
    adapter(store, service, url)
        .save(credentials)
        .await
        .expect("saved");
}

mod api;
mod callback;
mod flow;
mod store;
