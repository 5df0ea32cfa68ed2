//! The console's actions. Each is a POST that carries the session's CSRF token, calls the
//! same library function as the CLI, leaves what happened (or the typed error's
//! message) for the next page, and redirects back (303).

use axum::Extension;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::auth::CsrfForm;
use super::pages::{refusal, segment};
use super::view::{Flash, Operator};
use super::{ConsoleState, off_runtime};
use crate::error::CallError;

/// Refuses (403) a form that does not carry the session's CSRF token.
#[allow(clippy::result_large_err)] // the refusal is the response itself, sent at once
fn check_csrf(operator: &Operator, offered: &str) -> Result<(), Response> {
    if operator.csrf_matches(offered) {
        return Ok(());
    }
    Err((
        StatusCode::FORBIDDEN,
        refusal("the form's CSRF token is missing or wrong; reload the page and try again"),
    )
        .into_response())
}

/// A refusal of an action the console does not have.
fn unknown(status: StatusCode, why: &str) -> Response {
    (status, refusal(why)).into_response()
}

/// Leaves the outcome for the next page and redirects to `back`.
async fn done(
    state: &ConsoleState,
    operator: &Operator,
    outcome: Result<String, CallError>,
    back: &str,
) -> Result<Response, Response> {
    let flash = match outcome {
        Ok(text) => Flash {
            failed: false,
            text,
        },
        Err(e) => Flash {
            failed: true,
            text: format!("{} ({})", e.message, e.code.as_str()),
        },
    };
    state.console.sessions.flash(operator, flash).await;
    Ok(Redirect::to(back).into_response())
}

/// `POST /console/services/{name}/{test|enable|disable}`.
pub(super) async fn service(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Path((name, action)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Response> {
    check_csrf(&operator, &form.csrf)?;
    let airlock = &state.console.airlock;
    let outcome = match action.as_str() {
        "test" => airlock.services().test(&name).await.map(|report| {
            format!(
                "tested \"{name}\": {} {} on protocol {}, {} tools",
                report.server.name,
                report.server.version,
                report.server.protocol_version,
                report.tools.len()
            )
        }),
        "enable" => airlock
            .services()
            .set_enabled(&name, true)
            .await
            .map(|()| format!("enabled \"{name}\"")),
        "disable" => airlock
            .services()
            .set_enabled(&name, false)
            .await
            .map(|()| format!("disabled \"{name}\" on every replica until it is enabled again")),
        other => {
            return Err(unknown(
                StatusCode::NOT_FOUND,
                &format!("no service action \"{other}\""),
            ));
        }
    };
    done(&state, &operator, outcome, "/console/services").await
}

/// `POST /console/sessions/{agent}/{service}/{disconnect|reset}`.
pub(super) async fn session(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Path((agent, service, action)): Path<(String, String, String)>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Response> {
    check_csrf(&operator, &form.csrf)?;
    let airlock = &state.console.airlock;
    let outcome = match action.as_str() {
        "disconnect" => {
            airlock.services().disconnect(&agent, &service).await;
            Ok(format!("disconnected agent \"{agent}\" from \"{service}\""))
        }
        "reset" => airlock
            .services()
            .reset(&agent, &service)
            .await
            .map(|()| format!("reset agent \"{agent}\"'s session with \"{service}\"")),
        other => {
            return Err(unknown(
                StatusCode::NOT_FOUND,
                &format!("no session action \"{other}\""),
            ));
        }
    };
    done(&state, &operator, outcome, "/console/services").await
}

/// What the grants form sends.
#[derive(Deserialize)]
pub(super) struct GrantForm {
    #[serde(default)]
    csrf: String,
    agent: String,
    service: String,
    action: String,
}

/// `POST /console/grants`: grant or revoke (a revoke also closes the agent's session).
pub(super) async fn grant(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Form(form): Form<GrantForm>,
) -> Result<Response, Response> {
    check_csrf(&operator, &form.csrf)?;
    let airlock = &state.console.airlock;
    let (agent, service) = (form.agent.trim(), form.service.as_str());
    let outcome = match form.action.as_str() {
        "grant" if crate::gateway::tokens::valid_agent(agent) => {
            // A registry write: on a blocking thread.
            let (airlock, a, s) = (airlock.clone(), agent.to_string(), service.to_string());
            off_runtime(move || airlock.access().grant(&a, &s))
                .await
                .map(|()| format!("granted \"{service}\" to agent \"{agent}\""))
        }
        "grant" => Err(CallError::new(
            crate::ErrorCode::InvalidArguments,
            format!(
                "invalid agent name {agent:?}: use 1 to 64 letters, digits, '_', '-', '.' or '@'"
            ),
        )),
        "revoke" => airlock
            .access()
            .revoke(agent, service)
            .await
            .map(|()| format!("revoked agent \"{agent}\"'s grant of \"{service}\"")),
        other => {
            return Err(unknown(
                StatusCode::BAD_REQUEST,
                &format!("no grant action \"{other}\""),
            ));
        }
    };
    done(&state, &operator, outcome, "/console/grants").await
}

/// `POST /console/approvals/{id}/revoke`: forgets a remembered approval.
pub(super) async fn revoke_approval(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Path(id): Path<i64>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Response> {
    check_csrf(&operator, &form.csrf)?;
    let airlock = state.console.airlock.clone();
    let outcome = off_runtime(move || airlock.access().revoke_approval(id))
        .await
        .map(|had| {
            if had {
                format!("forgot approval {id}; the calls it covered are asked about again")
            } else {
                format!("there was no approval {id}")
            }
        });
    done(&state, &operator, outcome, "/console/grants").await
}

/// `POST /console/output/{agent}/{service}/{id}/save`: exports the whole output into
/// `<data dir>/artifacts/<service>-<id>/`, as `airlock output --save` does.
pub(super) async fn save_output(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Path((agent, service, id)): Path<(String, String, String)>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Response> {
    check_csrf(&operator, &form.csrf)?;
    let console = state.console.clone();
    let folder = console
        .artifacts
        .join(format!("{}-{}", segment(&service), segment(&id)));
    // Exporting writes and syncs files (off the runtime's threads, inside).
    let outcome = console
        .airlock
        .outputs()
        .export(&agent, &service, &id, &folder, None)
        .await
        .map(|export| {
            format!(
                "saved {} bytes ({}) to {}",
                export.size,
                export.digest,
                folder.display()
            )
        });
    let back = format!(
        "/console/output/{}/{}/{}",
        segment(&agent),
        segment(&service),
        segment(&id)
    );
    done(&state, &operator, outcome, &back).await
}
