//! The console's pages, rendered on the server (maud escapes every value): services,
//! calls, one retained output, grants and policy, plugins, and the login page.

use std::collections::{BTreeMap, BTreeSet};

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use super::view::{CallRow, Flash, Operator};
use super::{Console, ConsoleState, off_runtime};
use crate::airlock::{AccessMode, ServiceReport, ServiceStatus};

/// The pages in the navigation bar: (path, label).
const NAV: [(&str, &str); 4] = [
    ("/console/services", "Services"),
    ("/console/calls", "Calls"),
    ("/console/grants", "Grants & policy"),
    ("/console/plugins", "Plugins"),
];

fn layout(
    title: &str,
    active: &str,
    flash: Option<Flash>,
    operator: &Operator,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Airlock" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header {
                    span.brand { "Airlock" }
                    nav {
                        @for (path, label) in NAV {
                            a href=(path) class=[(path == active).then_some("active")] { (label) }
                        }
                    }
                    form.logout method="post" action="/console/logout" {
                        input type="hidden" name="csrf" value=(operator.csrf);
                        button type="submit" { "Sign out" }
                    }
                }
                main {
                    h1 { (title) }
                    @if let Some(flash) = flash {
                        p.flash.failed[flash.failed] role="status" { (flash.text) }
                    }
                    (body)
                }
            }
        }
    }
}

/// A small form that posts to `action` with the CSRF token and `fields`.
fn action_button(
    operator: &Operator,
    action: &str,
    fields: &[(&str, &str)],
    label: &str,
) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(operator.csrf);
            @for (name, value) in fields {
                input type="hidden" name=(name) value=(value);
            }
            button type="submit" { (label) }
        }
    }
}

async fn page(
    console: &Console,
    operator: &Operator,
    title: &str,
    active: &str,
    body: Markup,
) -> Markup {
    let flash = console.sessions.take_flash(operator).await;
    layout(title, active, flash, operator, body)
}

pub(super) use crate::gateway::routes::encode as segment;

fn clock(unix: u64) -> String {
    let day = unix % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
    }
}

/// The catalog's freshness: what the status says about the tested catalog.
fn freshness(report: &ServiceReport) -> (&'static str, Option<&str>) {
    match &report.status {
        ServiceStatus::Untested {
            reason,
            stale: true,
        } => ("stale", Some(reason)),
        ServiceStatus::Untested { reason, .. } => ("untested", Some(reason)),
        ServiceStatus::Disabled => ("—", None),
        ServiceStatus::Failed { .. } => ("none", None),
        _ => ("fresh", None),
    }
}

/// How Airlock reaches the service: `stdio`, or for an `http` server the transport
/// its latest session used (`streamable-http` or `sse`), `http` before any.
fn transport(report: &ServiceReport) -> &'static str {
    match &report.server {
        Some(server) if report.transport == "http" => server.transport.as_str(),
        _ => report.transport,
    }
}

fn tools_of(status: &ServiceStatus) -> Option<usize> {
    match status {
        ServiceStatus::Disconnected { tools }
        | ServiceStatus::Connecting { tools }
        | ServiceStatus::Connected { tools, .. } => Some(*tools),
        _ => None,
    }
}

/// `GET /console/services`.
pub(super) async fn services(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
) -> Markup {
    let console = &state.console;
    let airlock = &console.airlock;
    let mut sessions: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for s in airlock.services().sessions() {
        sessions
            .entry(s.service)
            .or_default()
            .push((s.agent, s.session));
    }
    let body = html! {
        table #services {
            thead { tr {
                th { "Service" } th { "Source" } th { "Transport" } th { "State" }
                th { "Server" } th { "Protocol" } th { "Tools" } th { "Catalog" }
                th { "Live sessions" } th { "Actions" }
            } }
            tbody {
                @for report in airlock.services().status() {
                    @let name = report.service.as_str();
                    @let state_name = report.status.name();
                    @let (fresh, why) = freshness(&report);
                    tr id={ "service-" (name) } data-state=(state_name) {
                        td.name { (name) }
                        td { (report.source.to_string()) }
                        td {
                            (transport(&report))
                        }
                        td {
                            span class={ "badge state-" (state_name) } { (state_name) }
                            @if let ServiceStatus::Failed { reason } = &report.status {
                                div.reason { (reason) }
                            }
                        }
                        td {
                            @if let Some(server) = report.server.as_ref().filter(|s| !s.name.is_empty()) {
                                (server.name) " " (server.version)
                            } @else { "—" }
                        }
                        td {
                            @if let Some(server) = report.server.as_ref().filter(|s| !s.protocol_version.is_empty()) {
                                (server.protocol_version)
                            } @else { "—" }
                        }
                        td.tools { @if let Some(n) = tools_of(&report.status) { (n) } @else { "—" } }
                        td {
                            span class={ "badge fresh-" (fresh) } { (fresh) }
                            @if let Some(why) = why { div.reason { (why) } }
                        }
                        td.sessions {
                            @for (agent, number) in sessions.get(name).map(Vec::as_slice).unwrap_or_default() {
                                div.session {
                                    span { (agent) " #" (number) }
                                    (action_button(&operator, &format!("/console/sessions/{}/{}/disconnect", segment(agent), segment(name)), &[], "Disconnect"))
                                    (action_button(&operator, &format!("/console/sessions/{}/{}/reset", segment(agent), segment(name)), &[], "Reset"))
                                }
                            }
                        }
                        td.actions {
                            (action_button(&operator, &format!("/console/services/{}/test", segment(name)), &[], "Test"))
                            @if matches!(report.status, ServiceStatus::Disabled) {
                                (action_button(&operator, &format!("/console/services/{}/enable", segment(name)), &[], "Enable"))
                            } @else {
                                (action_button(&operator, &format!("/console/services/{}/disable", segment(name)), &[], "Disable"))
                            }
                        }
                    }
                }
            }
        }
    };
    page(console, &operator, "Services", "/console/services", body).await
}

/// One call's row (the calls page, and each live update).
pub(crate) fn call_row(row: &CallRow) -> Markup {
    html! {
        tr id={ "call-" (row.id) } class="call" data-status=(row.status) {
            td { (clock(row.started)) }
            td.agent { (row.agent) }
            td.service { (row.service) }
            td.tool { (row.tool) }
            td { span class={ "badge status-" (if row.status == "ok" { "ok" } else if row.status == "running" { "running" } else { "failed" }) } { (row.status) } }
            td.elapsed { @if let Some(ms) = row.elapsed_ms { (ms) " ms" } }
            td.progress {
                @if let Some((done, total)) = row.progress {
                    @if let Some(total) = total { (done) " / " (total) } @else { (done) }
                    @if let Some(message) = &row.message { " · " (message) }
                }
            }
            td.size { @if let Some(bytes) = row.size { (size(bytes)) } }
            td { @if row.redacted { span.badge.redacted { "redacted" } } }
            td {
                @if let Some(id) = &row.output_id {
                    a.output href={ "/console/output/" (segment(&row.agent)) "/" (segment(&row.service)) "/" (segment(id)) } { "View output" }
                }
            }
        }
    }
}

/// `GET /console/calls`: recent calls, and new ones as they happen.
pub(super) async fn calls(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
) -> Markup {
    let console = &state.console;
    let rows = console.log.calls();
    let body = html! {
        p.hint { "Calls since this gateway started, newest first; new calls appear as they run." }
        table #calls data-feed="/console/feed" {
            thead { tr {
                th { "Time (UTC)" } th { "Agent" } th { "Service" } th { "Tool" } th { "Status" }
                th { "Elapsed" } th { "Progress" } th { "Size" } th { "Credentials" } th { "Output" }
            } }
            tbody { @for row in &rows { (call_row(row)) } }
        }
    };
    page(console, &operator, "Calls", "/console/calls", body).await
}

/// Where a page of an output starts.
#[derive(Deserialize)]
pub(super) struct At {
    #[serde(default)]
    offset: usize,
}

/// The redaction marks in `text` (which starts at `offset` of the output): each
/// `[REDACTED:rule]` with the byte offset where it stands.
fn marks_in(text: &str, offset: usize) -> Vec<(usize, &str)> {
    const OPEN: &str = "[REDACTED:";
    text.match_indices(OPEN)
        .filter_map(|(at, _)| {
            let rest = &text[at + OPEN.len()..];
            let end = rest.find(']')?;
            Some((offset + at, &rest[..end]))
        })
        .collect()
}

/// `GET /console/output/{agent}/{service}/{id}?offset=N`: one page of a retained output,
/// read as the agent whose call produced it (its access checked again).
pub(super) async fn output(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
    Path((agent, service, id)): Path<(String, String, String)>,
    Query(at): Query<At>,
) -> Response {
    let console = &state.console;
    let title = format!("Output {id}");
    let base = format!(
        "/console/output/{}/{}/{}",
        segment(&agent),
        segment(&service),
        segment(&id)
    );
    let read = console
        .airlock
        .outputs()
        .read_as(&agent, &service, &id, at.offset)
        .await;
    let page_of = match read {
        Ok(page_of) => page_of,
        Err(e) => {
            let body = html! { p.flash.failed role="alert" { (e.message) } };
            return (
                StatusCode::NOT_FOUND,
                page(console, &operator, &title, "/console/calls", body).await,
            )
                .into_response();
        }
    };
    let end = at.offset + page_of.text.len();
    let marks = marks_in(&page_of.text, at.offset);
    let body = html! {
        p { "Service " b { (service) } ", agent " b { (agent) } ". Bytes " span #range { (at.offset) "–" (end) } "." }
        nav.pager {
            @if at.offset > 0 { a #first href=(base) { "First page" } }
            @if let Some(next) = page_of.next_offset.filter(|_| !page_of.eof) {
                a #next href={ (base) "?offset=" (next) } { "Next page" }
            } @else {
                span #end { "End of output" }
            }
            (action_button(&operator, &format!("{base}/save"), &[], "Save as artifact"))
        }
        section {
            h2 { "Redaction marks on this page" }
            @if marks.is_empty() { p #marks.none { "None." } } @else {
                ul #marks { @for (at, rule) in &marks { li { "byte " (at) ": " code { (rule) } } } }
            }
        }
        pre #text { (page_of.text) }
    };
    page(console, &operator, &title, "/console/calls", body)
        .await
        .into_response()
}

/// `GET /console/grants`: grants per agent and service, remembered approvals, and the
/// policies' recent decisions.
pub(super) async fn grants(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
) -> Markup {
    let console = &state.console;
    let airlock = &console.airlock;
    let services: Vec<String> = airlock
        .services()
        .status()
        .into_iter()
        .map(|r| r.service)
        .collect();
    // Grants, approvals and token agents are registry queries: on a blocking thread.
    let (grants, approvals, token_agents) = {
        let (airlock, guard) = (airlock.clone(), state.guard.clone());
        off_runtime(move || {
            let token_agents: Vec<String> = guard
                .tokens
                .list()
                .map(|tokens| tokens.into_iter().map(|t| t.agent).collect())
                .unwrap_or_default();
            (
                airlock.access().all_grants(),
                airlock.access().approvals(None),
                token_agents,
            )
        })
        .await
    };
    let (granted, error) = match grants {
        Ok(all) => (all.into_iter().collect::<BTreeSet<_>>(), None),
        Err(e) => (BTreeSet::new(), Some(e.message)),
    };
    let mut agents: BTreeSet<String> = granted.iter().map(|(a, _)| a.clone()).collect();
    agents.insert(state.guard.default_agent.clone());
    agents.extend(airlock.services().sessions().into_iter().map(|s| s.agent));
    agents.extend(console.log.agents());
    agents.extend(token_agents);
    let decisions = console.log.decisions();
    let body = html! {
        @if airlock.access().mode() == AccessMode::Open {
            p.hint { "Access is open: every agent may use every enabled service. Grants are kept, and apply when the gateway runs with --access grants." }
        }
        @if let Some(error) = error { p.flash.failed role="alert" { (error) } }
        h2 { "Grants" }
        table #grants {
            thead { tr { th { "Agent" } @for s in &services { th { (s) } } } }
            tbody {
                @for agent in &agents {
                    tr data-agent=(agent) {
                        td.agent { (agent) }
                        @for service in &services {
                            @let has = granted.contains(&(agent.clone(), service.clone()));
                            td data-service=(service) data-granted=(has) {
                                @if has {
                                    span.badge.status-ok { "granted" }
                                    (action_button(&operator, "/console/grants", &[("agent", agent), ("service", service), ("action", "revoke")], "Revoke"))
                                } @else {
                                    (action_button(&operator, "/console/grants", &[("agent", agent), ("service", service), ("action", "grant")], "Grant"))
                                }
                            }
                        }
                    }
                }
            }
        }
        form.grant-new method="post" action="/console/grants" {
            input type="hidden" name="csrf" value=(operator.csrf);
            input type="hidden" name="action" value="grant";
            label { "Agent " input type="text" name="agent" required; }
            label { "Service " select name="service" { @for s in &services { option value=(s) { (s) } } } }
            button type="submit" { "Grant" }
        }
        h2 { "Remembered approvals" }
        @match approvals {
            Err(e) => p.flash.failed role="alert" { (e.message) },
            Ok(list) if list.is_empty() => p.none { "None." },
            Ok(list) => table #approvals {
                thead { tr { th { "Agent" } th { "Service" } th { "Tool" } th { "Arguments" } th { "Policy" } th { "Rule" } th { "Expires" } th {} } }
                tbody { @for a in &list { tr {
                    td { (a.agent) } td { (a.service) } td { code { (a.tool) } } td { code { (a.arguments) } }
                    td { (a.plugin) } td { (a.rule) }
                    td { @if let Some(ms) = a.expires_at { (clock((ms / 1000) as u64)) " UTC" } @else { "never" } }
                    td { (action_button(&operator, &format!("/console/approvals/{}/revoke", a.id), &[], "Revoke")) }
                } } }
            },
        }
        h2 { "Recent policy decisions" }
        @if decisions.is_empty() { p.none { "None since the gateway started." } } @else {
            table #decisions {
                thead { tr { th { "Time (UTC)" } th { "Agent" } th { "Service" } th { "Tool" } th { "Policy" } th { "Rule" } th { "Decision" } th { "Mode" } th { "Reason" } } }
                tbody { @for d in &decisions { tr {
                    td { (clock(d.at)) } td { (d.agent) } td { (d.service) } td { (d.tool) } td { (d.plugin) }
                    td { (d.rule) } td { span class={ "badge decision-" (d.decision) } { (d.decision) } } td { (d.mode) }
                    td { (d.reason.as_deref().unwrap_or("")) }
                } } }
            }
        }
    };
    page(
        console,
        &operator,
        "Grants & policy",
        "/console/grants",
        body,
    )
    .await
}

/// `GET /console/plugins`: what each service runs, and the limits in force.
pub(super) async fn plugins(
    State(state): State<ConsoleState>,
    Extension(operator): Extension<Operator>,
) -> Markup {
    let console = &state.console;
    let all = console.airlock.services().plugins();
    let body = html! {
        @if let Some(first) = all.first() {
            p #limits {
                "Every plugin instance runs with a CPU deadline of " (first.limits.deadline.as_millis()) " ms per call, "
                (size(first.limits.memory_bytes)) " of linear memory and " (size(first.limits.stack_bytes)) " of stack."
            }
        }
        @for service in &all {
            section.plugins id={ "plugins-" (service.service) } {
                h2 { (service.service) }
                @if service.plugins.is_empty() { p.none { "No plugins loaded (the service is disabled in its config, or its plugins were refused: see Services)." } } @else {
                    table {
                        thead { tr { th { "Stage" } th { "Plugin" } th { "Version" } th { "Contract" } th { "Reference" } th { "SHA-256" } th { "Size" } th { "Mode" } } }
                        tbody { @for p in &service.plugins { tr {
                            td { (p.stage) } td { (p.name) } td { (p.version) } td { (p.contract) }
                            td { code { (p.reference) } }
                            td { code title=(p.sha256) { (p.sha256.get(..16).unwrap_or(&p.sha256)) "…" } }
                            td { (size(p.size)) }
                            td { @if let Some(mode) = p.mode { (format!("{mode:?}").to_lowercase()) } }
                        } } }
                    }
                }
            }
        }
    };
    page(console, &operator, "Plugins", "/console/plugins", body).await
}

/// The login page, with why the last attempt failed.
pub(crate) fn login(failed: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Sign in · Airlock" }
                link rel="stylesheet" href="/console/assets/console.css";
            }
            body.login {
                main {
                    h1 { "Airlock console" }
                    p { "Paste a gateway token of the operator agent (" code { "airlock serve tokens add" } ")." }
                    @if let Some(why) = failed { p.flash.failed role="alert" { (why) } }
                    form method="post" action="/console/login" {
                        input type="password" name="token" autocomplete="off" required;
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// A refusal as a small page.
pub(crate) fn refusal(why: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Refused · Airlock" } }
            body { p role="alert" { (why) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_found_with_their_offsets() {
        let text = "a [REDACTED:secret:TOKEN] b [REDACTED:aws-key] [REDACTED:";
        assert_eq!(
            marks_in(text, 100),
            vec![(102, "secret:TOKEN"), (128, "aws-key")]
        );
    }
}
