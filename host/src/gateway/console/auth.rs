//! Who may use the console: the gateway's `Host`/`Origin` checks first; then a console
//! session (a cookie), made on loopback without a token, or from the operator's bearer
//! token (in a header, or pasted into the login page). Each session has a CSRF token that
//! every action must carry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{ConsoleState, pages};
use crate::gateway::http::bearer_of;

const COOKIE: &str = "airlock_console";
/// Most console sessions kept at once (the oldest is forgotten first).
const MAX_SESSIONS: usize = 256;
/// How long a console session lasts; then the operator signs in again.
const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// A message shown once on the next page (what an action did, or why it failed).
#[derive(Debug, Clone)]
pub(crate) struct Flash {
    /// Whether it reports a failure.
    pub failed: bool,
    /// The message.
    pub text: String,
}

struct Session {
    csrf: String,
    created: Instant,
    flash: Option<Flash>,
}

/// The console's sessions, by cookie value.
#[derive(Default)]
pub(super) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// The operator behind a request: their console session and its CSRF token.
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    id: String,
    /// The token every form of this session carries.
    pub csrf: String,
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sessions {
    fn open(&self) -> Operator {
        let mut map = self.by_id.lock().expect("console sessions poisoned");
        map.retain(|_, s| s.created.elapsed() < SESSION_LIFETIME);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(id, _)| id.clone())
        {
            map.remove(&oldest);
        }
        let operator = Operator {
            id: random_token(),
            csrf: random_token(),
        };
        map.insert(
            operator.id.clone(),
            Session {
                csrf: operator.csrf.clone(),
                created: Instant::now(),
                flash: None,
            },
        );
        operator
    }

    fn find(&self, id: &str) -> Option<Operator> {
        let map = self.by_id.lock().expect("console sessions poisoned");
        map.get(id)
            .filter(|s| s.created.elapsed() < SESSION_LIFETIME)
            .map(|s| Operator {
                id: id.to_string(),
                csrf: s.csrf.clone(),
            })
    }

    fn close(&self, id: &str) {
        self.by_id
            .lock()
            .expect("console sessions poisoned")
            .remove(id);
    }

    /// Leaves a message for the session's next page.
    pub(super) fn flash(&self, operator: &Operator, flash: Flash) {
        if let Some(s) = self
            .by_id
            .lock()
            .expect("console sessions poisoned")
            .get_mut(&operator.id)
        {
            s.flash = Some(flash);
        }
    }

    /// Takes the session's pending message.
    pub(super) fn take_flash(&self, operator: &Operator) -> Option<Flash> {
        self.by_id
            .lock()
            .expect("console sessions poisoned")
            .get_mut(&operator.id)
            .and_then(|s| s.flash.take())
    }
}

impl Operator {
    /// Whether `offered` is this session's CSRF token (compared in constant time).
    pub(super) fn csrf_matches(&self, offered: &str) -> bool {
        let (a, b) = (self.csrf.as_bytes(), offered.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    if let Some(operator) = cookie_of(request.headers()).and_then(|id| sessions.find(id)) {
        request.extensions_mut().insert(operator);
        return next.run(request).await;
    }
    let made = match bearer_of(request.headers()) {
        Some(token) => match state.guard.agent_of_token(token) {
            Ok(agent) if agent.0 == state.guard.default_agent => Some(sessions.open()),
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
        None if !state.guard.token_required => Some(sessions.open()),
        None => None,
    };
    match made {
        Some(operator) => {
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
    match state.guard.agent_of_token(form.token.trim()) {
        Ok(agent) if agent.0 == state.guard.default_agent => {
            let operator = state.console.sessions.open();
            let mut response = Redirect::to("/console/services").into_response();
            set_cookie(&mut response, &operator);
            response
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
            state.console.sessions.close(&op.id);
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
