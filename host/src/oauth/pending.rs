//! Authorizations a call starts: an agent calls a service it must authorize itself
//! (`per_agent = true`) and has not, so the host begins the authorization-code flow for
//! that agent and hands the agent's user the URL to open. The browser comes back to the
//! host — to the gateway's `/oauth/callback` ([`Redirect::At`]), or, for a host on the
//! user's own machine, to a one-shot loopback listener ([`Redirect::Loopback`]) — and
//! [`Authorizations::finish`] exchanges the code and stores the tokens under that
//! agent's name for the service. The call waiting on [`Started::finished`] then goes on.
//!
//! A flow is found by its `state` (unguessable, single use) and lives at most
//! [`FLOW_TTL`]; an agent that calls again while its flow is open gets the same URL, so
//! a retrying client does not register a client per retry. Nothing here logs the URL,
//! the state or the code.
//!
//! Between replicas (the secret store shares sign-ins: `[registry] token_key`), what
//! finishing a flow takes is also kept, sealed, in the shared store
//! (`shared_flow.rs`): the browser may come back to any replica, which finishes the flow
//! there, and the replica whose call waits sees it finished.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::transport::auth::AuthorizationManager;
use tokio::sync::watch;

use crate::config::OAuthClient;
use crate::secrets::SecretStore;

use super::callback::{FAILURE_PAGE, SUCCESS_PAGE, respond, wait_for_callback};
use super::flow::{exchange, prepare};
use super::shared_flow::{self, FlowRecord};
use super::{CALLBACK_PATH, OAuthError, flow, scrub};

/// How long a started authorization waits for its browser.
pub const FLOW_TTL: Duration = Duration::from_secs(600);

/// Where the browser is sent back to after the user authorizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// A one-shot listener on `127.0.0.1` per flow: for a host on the user's machine
    /// (`airlock serve` over stdio).
    Loopback,
    /// This redirect URI, served by the host (the gateway's
    /// `https://airlock.example.com/oauth/callback`).
    At(String),
}

/// How a started authorization ended.
type Outcome = Option<Result<(), String>>;

/// One authorization waiting for its browser.
struct Flow {
    holder: String,
    url: String,
    id: String,
    started: Instant,
    /// Taken by the one [`Authorizations::finish`] that exchanges the code.
    manager: Option<AuthorizationManager>,
    done: watch::Sender<Outcome>,
    /// The loopback listener's task, stopped when the flow expires.
    listener: Option<tokio::task::AbortHandle>,
}

/// An authorization under way, as its caller sees it.
#[derive(Clone)]
pub struct Started {
    /// The URL the user opens (the authorization server's, with the PKCE challenge and
    /// the state).
    pub url: String,
    /// An id for the flow that carries no part of the URL (the URL elicitation's id).
    pub id: String,
    /// Whether the flow was open already (another call, or an earlier one, started it).
    pub joined: bool,
    done: watch::Receiver<Outcome>,
    /// The shared store and state, when another replica may finish the flow.
    shared: Option<(SecretStore, String)>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("id", &self.id)
            .field("joined", &self.joined)
            .finish_non_exhaustive()
    }
}

/// How often abandoned shared sign-ins are swept away (at most).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// How often a waiting call looks whether another replica finished its flow.
const SHARED_POLL: Duration = Duration::from_millis(500);

impl Started {
    /// Waits until the browser has come back and the tokens are stored, or the flow
    /// failed (why, in words carrying no code, state or token), or expired.
    pub async fn finished(&mut self) -> Result<(), String> {
        let shared = self.shared.clone();
        let elsewhere = async move {
            let Some((store, state)) = shared else {
                return std::future::pending().await;
            };
            while shared_flow::pending(&store, &state).await {
                tokio::time::sleep(SHARED_POLL).await;
            }
        };
        let here = self.done.wait_for(Option::is_some);
        let outcome = tokio::time::timeout(FLOW_TTL, async {
            tokio::select! {
                done = here => done.map(|done| (*done).clone().unwrap_or(Ok(()))),
                () = elsewhere => Ok(Ok(())),
            }
        })
        .await;
        match outcome {
            Ok(Ok(done)) => done,
            Ok(Err(_)) => Err("the authorization was abandoned".into()),
            Err(_) => Err(format!(
                "no browser came back within {} minutes",
                FLOW_TTL.as_secs() / 60
            )),
        }
    }
}

/// The authorizations started by calls, by state; where their browsers return.
pub struct Authorizations {
    redirect: RwLock<Option<Redirect>>,
    flows: Mutex<HashMap<String, Flow>>,
    /// Where the tokens go; when it shares sign-ins, where a flow another replica
    /// started is found.
    store: SecretStore,
    /// When abandoned shared sign-ins were last swept away.
    swept: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Authorizations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizations")
            .field("redirect", &self.redirect())
            .finish_non_exhaustive()
    }
}

impl Authorizations {
    /// Authorizations whose tokens go to `store`; a browser coming back for a flow
    /// another replica started is finished here when `store` shares sign-ins.
    pub fn new(store: SecretStore) -> Self {
        Authorizations {
            redirect: RwLock::default(),
            flows: Mutex::default(),
            store,
            swept: Mutex::default(),
        }
    }

    /// The store and `state`, when another replica may finish the flow `state`.
    fn shared(&self, state: &str) -> Option<(SecretStore, String)> {
        shared_flow::shares_flows(&self.store).then(|| (self.store.clone(), state.to_string()))
    }

    /// Sends browsers back to `redirect` from now on; `None` starts no authorization
    /// (an agent without one is told the command to run instead).
    pub fn redirect_to(&self, redirect: Option<Redirect>) {
        *self.redirect.write().unwrap_or_else(|e| e.into_inner()) = redirect;
    }

    /// Where browsers come back to, if authorizations can be started here.
    pub fn redirect(&self) -> Option<Redirect> {
        self.redirect
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts (or, when one is open, joins) the authorization of the tokens kept under
    /// `holder` (the service's per-agent name) for the server at `url`. `None` when no
    /// redirect is set.
    pub async fn begin(
        self: &Arc<Self>,
        holder: &str,
        url: &str,
        client: &OAuthClient,
    ) -> Result<Option<Started>, OAuthError> {
        let Some(redirect) = self.redirect() else {
            return Ok(None);
        };
        if let Some(open) = self.open_flow(holder) {
            // Another replica may have finished it meanwhile: then start anew.
            match &open.shared {
                Some((store, state)) if !shared_flow::pending(store, state).await => {
                    self.settle(state, Ok(()));
                }
                _ => return Ok(Some(open)),
            }
        }
        let (redirect_uri, listener) = match &redirect {
            Redirect::At(uri) => (uri.clone(), None),
            Redirect::Loopback => {
                let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .await
                    .map_err(|e| flow(holder, "loopback listener", e))?;
                let port = listener
                    .local_addr()
                    .map_err(|e| flow(holder, "loopback listener", e))?
                    .port();
                (
                    format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
                    Some(listener),
                )
            }
        };
        let store = &self.store;
        let (manager, auth_url, state, registration) =
            prepare(store, holder, url, None, client, &redirect_uri).await?;
        let shared = self.shared(&state);
        if shared.is_some() {
            self.sweep_abandoned();
            shared_flow::save(store, &state, &FlowRecord::new(holder, url, registration)).await?;
        }
        let (done, watching) = watch::channel(None);
        let id = uuid::Uuid::new_v4().to_string();
        let listening = listener.map(|listener| {
            let (book, state) = (self.clone(), state.clone());
            let holder = holder.to_string();
            tokio::spawn(async move {
                let waited =
                    tokio::time::timeout(FLOW_TTL, wait_for_callback(&listener, &state)).await;
                drop(listener);
                match waited {
                    Ok(Ok(hit)) => {
                        let outcome = book.finish(&state, &hit.code, hit.issuer.as_deref()).await;
                        let page = match outcome {
                            Ok(_) => ("200 OK", SUCCESS_PAGE),
                            Err(_) => ("400 Bad Request", FAILURE_PAGE),
                        };
                        respond(hit.stream, page.0, page.1).await;
                    }
                    Ok(Err(failure)) => {
                        book.fail(&state, &scrub(&failure.0, None, &state));
                    }
                    Err(_) => book.fail(&state, "no browser came back"),
                }
                tracing::debug!(service = %holder, "OAuth: loopback listener closed");
            })
            .abort_handle()
        });
        let started = Started {
            url: auth_url.clone(),
            id: id.clone(),
            joined: false,
            done: watching,
            shared,
        };
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.insert(
            state,
            Flow {
                holder: holder.to_string(),
                url: auth_url,
                id,
                started: Instant::now(),
                manager: Some(manager),
                done,
                listener: listening,
            },
        );
        tracing::info!(service = %holder, "OAuth: authorization started for a call; waiting for the browser");
        Ok(Some(started))
    }

    /// Deletes, at most once a minute, the shared records of sign-ins no browser came
    /// back for (older than [`FLOW_TTL`]), on a blocking thread.
    fn sweep_abandoned(&self) {
        {
            let mut swept = self.swept.lock().unwrap_or_else(|e| e.into_inner());
            if swept.is_some_and(|at| at.elapsed() < SWEEP_EVERY) {
                return;
            }
            *swept = Some(Instant::now());
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            for prefix in shared_flow::PREFIXES {
                match store.sweep_shared(prefix, FLOW_TTL + SWEEP_EVERY) {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!("OAuth: swept {n} abandoned sign-in records ({prefix}…)")
                    }
                    Err(e) => tracing::warn!("OAuth: cannot sweep abandoned sign-ins: {e}"),
                }
            }
        });
    }

    /// The open flow for `holder`, if one is fresh (expired ones are dropped here).
    fn open_flow(&self, holder: &str) -> Option<Started> {
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.retain(|_, flow| {
            let fresh = flow.started.elapsed() < FLOW_TTL;
            if !fresh && let Some(task) = &flow.listener {
                task.abort();
            }
            fresh
        });
        flows
            .iter()
            .find(|(_, flow)| flow.holder == holder && flow.manager.is_some())
            .map(|(state, flow)| Started {
                url: flow.url.clone(),
                id: flow.id.clone(),
                joined: true,
                done: flow.done.subscribe(),
                shared: self.shared(state),
            })
    }

    /// The browser came back with `code` for the flow `state`: exchanges it and stores
    /// the tokens. Returns the holder whose tokens were stored. An unknown or expired
    /// state, or a second use of one, is refused.
    pub async fn finish(
        &self,
        state: &str,
        code: &str,
        issuer: Option<&str>,
    ) -> Result<String, OAuthError> {
        let shares = Some(&self.store).filter(|store| shared_flow::shares_flows(store));
        let (holder, manager) = match (self.take(state), shares) {
            (Ok(local), None) => local,
            // Between replicas, taking the shared record decides who finishes.
            (Ok(local), Some(store)) => match shared_flow::take(store, state).await {
                Ok(Some(_)) => local,
                Ok(None) => {
                    self.settle(state, Err("another replica finished it".into()));
                    return Err(unknown_flow());
                }
                Err(e) => {
                    self.settle(state, Err(e.to_string()));
                    return Err(e);
                }
            },
            (Err(e), None) => return Err(e),
            (Err(_), Some(store)) => {
                let record = shared_flow::take(store, state)
                    .await?
                    .filter(|record| {
                        super::store::now_secs().saturating_sub(record.started_at)
                            < FLOW_TTL.as_secs()
                    })
                    .ok_or_else(unknown_flow)?;
                tracing::info!(service = %record.holder, "OAuth: finishing a sign-in another replica started");
                let manager = shared_flow::rebuild(store, &record).await?;
                return exchange(&manager, &record.holder, code, state, issuer)
                    .await
                    .map(|()| record.holder);
            }
        };
        let outcome = exchange(&manager, &holder, code, state, issuer).await;
        self.settle(
            state,
            outcome.as_ref().map(|_| ()).map_err(|e| e.to_string()),
        );
        outcome.map(|()| holder)
    }

    /// The browser came back with an error (the user refused, say) for the flow
    /// `state`; `why` is told to the call waiting on it.
    pub fn fail(&self, state: &str, why: &str) {
        if self.take(state).is_ok() {
            self.settle(state, Err(why.to_string()));
        }
    }

    /// Takes the flow's manager, leaving the flow to carry its outcome.
    fn take(&self, state: &str) -> Result<(String, AuthorizationManager), OAuthError> {
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let unknown = unknown_flow;
        let flow = flows.get_mut(state).ok_or_else(unknown)?;
        if flow.started.elapsed() >= FLOW_TTL {
            return Err(unknown());
        }
        let manager = flow.manager.take().ok_or_else(unknown)?;
        Ok((flow.holder.clone(), manager))
    }

    /// Tells the flow's waiters how it ended and forgets it.
    fn settle(&self, state: &str, outcome: Result<(), String>) {
        let flow = self
            .flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(state);
        if let Some(flow) = flow {
            flow.done.send_replace(Some(outcome));
        }
    }
}

/// The refusal of a callback no flow waits for.
fn unknown_flow() -> OAuthError {
    OAuthError::Flow {
        service: "(unknown)".into(),
        step: "browser callback",
        message: format!(
            "no authorization waits for this callback (it was finished already, or it expired after {} minutes): call the tool again for a new link",
            FLOW_TTL.as_secs() / 60
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_callback_no_flow_waits_for_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let book = Authorizations::new(SecretStore::open_file(dir.path()).unwrap());
        let refused = book.finish("made-up", "code", None).await.unwrap_err();
        assert!(
            refused.to_string().contains("no authorization waits"),
            "{refused}"
        );
        // An error answer for no flow changes nothing.
        book.fail("made-up", "access_denied");
        assert!(book.flows.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn nothing_starts_without_a_redirect() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::open_file(dir.path()).unwrap();
        let book = Arc::new(Authorizations::new(store));
        let client = OAuthClient::default();
        let started = book
            .begin("svc.agent-00", "http://127.0.0.1:9/mcp", &client)
            .await
            .unwrap();
        assert!(started.is_none());
    }
}
