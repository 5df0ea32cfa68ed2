//! Signing Airlock in to a service's OAuth authorization server, and out: what
//! `airlock servers auth` and `logout` do. Tokens go to the secret store.

use std::time::Duration;

use super::Servers;
use crate::config::Auth;
use crate::oauth::{OAuthError, OpenUrl};

impl Servers {
    /// Authorizes Airlock for `service` (its MCP endpoint `url`, its `auth` setting).
    /// Client credentials: a token is obtained now, which checks them. OAuth: the
    /// authorization page is handed to `open` and the loopback callback awaited for at
    /// most `wait`. A service without OAuth has nothing to authorize.
    ///
    /// A service each agent authorizes itself (`per_agent = true`) is authorized for
    /// `agent` alone; other services ignore it.
    pub async fn authorize(
        &self,
        service: &str,
        agent: &str,
        url: &str,
        auth: &Auth,
        open: OpenUrl<'_>,
        wait: Duration,
    ) -> Result<(), OAuthError> {
        let holder = crate::oauth::token_holder(service, auth, agent);
        let service = holder.as_str();
        match auth {
            Auth::ClientCredentials(cc) => {
                crate::oauth::client_credentials_token(&self.store, service, url, cc, true)
                    .await
                    .map(drop)
            }
            Auth::IdentityAssertion(assertion) => {
                crate::oauth::identity_assertion_token(&self.store, service, url, assertion, true)
                    .await
                    .map(drop)
            }
            Auth::OAuth(client) => {
                crate::oauth::authorize(&self.store, service, url, client, open, wait).await
            }
            // Nothing to sign in to: each call exchanges its agent's own access token.
            Auth::None | Auth::TokenExchange(_) => Ok(()),
        }
    }

    /// Forgets `service`'s OAuth tokens (`agent`'s own, for a service each agent
    /// authorizes itself); false when none were stored.
    pub fn logout(&self, service: &str, agent: &str, auth: &Auth) -> Result<bool, OAuthError> {
        let holder = crate::oauth::token_holder(service, auth, agent);
        crate::oauth::logout(&self.store, &holder)
    }
}
