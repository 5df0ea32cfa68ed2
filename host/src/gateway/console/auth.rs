//! Who may use the console: the gateway's `Host`/`Origin` checks first; then a console
//! session (a cookie), made on loopback without a token, or from the operator's bearer
//! token (in a header, or pasted into the login page). Each session has a CSRF token that
//! every action must carry.

use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::view::{Flash, Operator};
use super::{ConsoleState, pages};
use crate::digest;
use crate::gateway::guard::bearer_of;
use crate::registry::console::ConsoleSession;
use crate::registry::{Registry, RegistryError};

const COOKIE: &str = "airlock_console";
/// Most console sessions kept at once (the oldest is forgotten first).
const MAX_SESSIONS: usize = 256;
/// How long a console session lasts; then the operator signs in again.
const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// The console's sessions, kept in the registry (by the digest of each cookie), so a
/// login made through one replica works through all of them.
pub(super) struct Sessions {
    registry: Arc<Registry>,
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Sessions made before this are expired.
fn expired_before_ms() -> i64 {
    now_ms() - SESSION_LIFETIME.as_millis() as i64
}

/// Why the console's session store could not answer.
#[derive(Debug, thiserror::Error)]
enum SessionStoreError {
    /// The registry failed.
    #[error(transparent)]
    Registry(RegistryError),
    /// The blocking task running the query panicked.
    #[error("the console session store panicked: {0}")]
    Panicked(String),
}

impl Sessions {
    /// The sessions kept in `registry`.
    pub(super) fn new(registry: Arc<Registry>) -> Self {
        Sessions { registry }
    }

    /// Runs `job` on the registry off the async threads.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Registry) -> Result<T, RegistryError> + Send + 'static,
    ) -> Result<T, SessionStoreError> {
        let registry = self.registry.clone();
        match tokio::task::spawn_blocking(move || job(&registry)).await {
            Ok(done) => done.map_err(SessionStoreError::Registry),
            Err(e) => Err(SessionStoreError::Panicked(e.to_string())),
        }
    }

    async fn open(&self) -> Result<Operator, SessionStoreError> {
        let operator = Operator {
            id: random_token(),
            csrf: random_token(),
        };
        let (digest, session) = (
            digest::sha256(operator.id.as_bytes()),
            ConsoleSession {
                csrf: operator.csrf.clone(),
                created_ms: now_ms(),
            },
        );
        self.run(move |registry| {
            registry.open_console_session(&digest, &session, expired_before_ms(), MAX_SESSIONS)
        })
        .await?;
        Ok(operator)
    }

    async fn find(&self, id: &str) -> Option<Operator> {
        let (id, digest) = (id.to_string(), digest::sha256(id.as_bytes()));
        match self
            .run(move |registry| registry.console_session(&digest, expired_before_ms()))
            .await
        {
            Ok(found) => found.map(|s| Operator { id, csrf: s.csrf }),
            Err(e) => {
                tracing::warn!("cannot look up a console session: {e}");
                None
            }
        }
    }

    async fn close(&self, id: &str) {
        let digest = digest::sha256(id.as_bytes());
        if let Err(e) = self
            .run(move |registry| registry.close_console_session(&digest))
            .await
        {
            tracing::warn!("cannot end a console session: {e}");
        }
    }

    /// Leaves a message for the session's next page.
    pub(super) async fn flash(&self, operator: &Operator, flash: Flash) {
        let digest = digest::sha256(operator.id.as_bytes());
        if let Err(e) = self
            .run(move |registry| registry.set_console_flash(&digest, flash.failed, &flash.text))
            .await
        {
            tracing::warn!("cannot keep the console's message: {e}");
        }
    }

    /// Takes the session's pending message.
    pub(super) async fn take_flash(&self, operator: &Operator) -> Option<Flash> {
        let digest = digest::sha256(operator.id.as_bytes());
        match self
            .run(move |registry| registry.take_console_flash(&digest))
            .await
        {
            Ok(flash) => flash.map(|(failed, text)| Flash { failed, text }),
            Err(e) => {
                tracing::warn!("cannot read the console's message: {e}");
                None
            }
        }
    }
}

fn cookie_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
}

fn set_cookie(response: &mut Response, operator: &Operator) {
    let cookie = format!(
        "{COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict",
        operator.id
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

fn refused(status: StatusCode, why: &str) -> Response {
    (status, pages::refusal(why)).into_response()
}

/// Admits a console request: `Host` and `Origin` checked as for `/mcp`, then a session
/// found or made. Without one, the login page and the assets are all that is served.
pub(super) async fn admit(
    State(state): State<ConsoleState>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Err(refusal) = state.guard.check_host_and_origin(request.headers()) {
        return *refusal;
    }
    let sessions = &state.console.sessions;
    let cookie = cookie_of(request.headers()).map(str::to_string);
    if let Some(id) = cookie
        && let Some(operator) = sessions.find(&id).await
    {
        request.extensions_mut().insert(operator);
        return next.run(request).await;
    }
    let made = match bearer_of(request.headers()) {
        Some(token) => match state.guard.agent_of_token(token).await {
            Ok(agent) if agent.0 == state.guard.default_agent => Some(sessions.open().await),
            Ok(agent) => {
                tracing::warn!(agent = %agent.0, "refused the console to a token of another agent");
                return refused(
                    StatusCode::FORBIDDEN,
                    "this token's agent is not the gateway's operator agent (`airlock serve --agent`)",
                );
            }
            Err(_) => {
                return refused(StatusCode::UNAUTHORIZED, "the bearer token is not valid");
            }
        },
        None if !state.guard.token_required => Some(sessions.open().await),
        None => None,
    };
    match made {
        Some(Err(e)) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("cannot keep a console session: {e}"),
        ),
        Some(Ok(operator)) => {
            request.extensions_mut().insert(operator.clone());
            let mut response = next.run(request).await;
            set_cookie(&mut response, &operator);
            response
        }
        None => {
            let path = request.uri().path();
            if path == "/console/login" || path.starts_with("/console/assets/") {
                return next.run(request).await;
            }
            if request.method() == Method::GET {
                (StatusCode::UNAUTHORIZED, pages::login(None)).into_response()
            } else {
                refused(
                    StatusCode::UNAUTHORIZED,
                    "sign in to the console first (a bearer token of the operator agent)",
                )
            }
        }
    }
}

/// The login page (also shown, with 401, for any page asked for without a session).
pub(super) async fn login_page() -> Response {
    pages::login(None).into_response()
}

/// What the login form sends.
#[derive(Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// Exchanges the operator's bearer token for a console session.
pub(super) async fn login(
    State(state): State<ConsoleState>,
    Form(form): Form<LoginForm>,
) -> Response {
    match state.guard.agent_of_token(form.token.trim()).await {
        Ok(agent) if agent.0 == state.guard.default_agent => {
            match state.console.sessions.open().await {
                Ok(operator) => {
                    let mut response = Redirect::to("/console/services").into_response();
                    set_cookie(&mut response, &operator);
                    response
                }
                Err(e) => refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("cannot keep a console session: {e}"),
                ),
            }
        }
        Ok(_) => (
            StatusCode::FORBIDDEN,
            pages::login(Some(
                "this token's agent is not the gateway's operator agent",
            )),
        )
            .into_response(),
        Err(_) => (
            StatusCode::UNAUTHORIZED,
            pages::login(Some("the token is not valid")),
        )
            .into_response(),
    }
}

/// What every action's form carries.
#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// Ends the console session.
pub(super) async fn logout(
    State(state): State<ConsoleState>,
    operator: Option<axum::Extension<Operator>>,
    Form(form): Form<CsrfForm>,
) -> Response {
    match operator {
        Some(axum::Extension(op)) if op.csrf_matches(&form.csrf) => {
            state.console.sessions.close(&op.id).await;
            let mut response = Redirect::to("/console/login").into_response();
            response.headers_mut().append(
                header::SET_COOKIE,
                HeaderValue::from_static("airlock_console=; Path=/console; Max-Age=0"),
            );
            response
        }
        _ => refused(
            StatusCode::FORBIDDEN,
            "the form's CSRF token is missing or wrong",
        ),
    }
}
