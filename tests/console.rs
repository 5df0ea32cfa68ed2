//! The operator console (`/console` on `airlock serve --http`) as an operator uses it: in
//! Debian's Chromium, driven headless by Playwright, while the Python SDK client calls
//! through the same gateway; and the refusals it owes a request without a token, with a
//! token of another agent, from another origin, or without the form's CSRF token.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{FIXTURE_SECRET, HttpGateway, Workspace, python, python_server, secret_entry};

/// The console's base URL (`http://127.0.0.1:PORT`) from the gateway's `/mcp` URL.
fn base_of(gateway: &HttpGateway) -> String {
    gateway.url.trim_end_matches("/mcp").to_string()
}

#[test]
fn the_console_in_a_real_browser() {
    // An audit policy on fx: its decisions show on the grants and policy page.
    let ws = Workspace::new(&secret_entry(
        "fx",
        "adapters = { policy = \"builtin:policy\" }\n\
         adapter_config = { policy = { deny = [\"big_*\"], mode = \"audit\" } }",
    ));
    let (made, _) = ws.json(&["--agent", "alice", "serve", "tokens", "add"], &[]);
    let token = made["token"].as_str().expect("a token").to_string();
    let out = ws.run(&["--agent", "alice", "grants", "add", "fx"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gateway = HttpGateway::start(&ws, &["--access", "grants"]);
    // The screenshots the README shows are the ones this test takes.
    let shots = support::root().join("docs/console");
    let out = Command::new(python())
        .arg(python_server("console_browser.py"))
        .args(["--base", &base_of(&gateway), "--token", &token])
        .args(["--secret", FIXTURE_SECRET])
        .arg("--shots")
        .arg(&shots)
        .output()
        .expect("run console_browser.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON report");

    // 1-2. The console opened on loopback without a token and showed fx connected.
    assert!(
        report["services"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/console/services")
    );
    assert_eq!(report["services"]["fx_state"], "connected", "{report:#}");
    assert_ne!(report["services"]["fx_tools"], "—");
    assert_eq!(report["services"]["fx_catalog"], "fresh");

    // 3. Both calls appeared live (no reload), as alice's, with sizes and the badge.
    let calls = &report["calls"];
    assert_eq!(calls["reloaded"], false, "{report:#}");
    assert_eq!(calls["leak"]["agent"], "alice");
    assert_eq!(calls["leak"]["redacted_badge"], 1, "{report:#}");
    assert_eq!(calls["big"]["redacted_badge"], 0);
    assert!(calls["leak"]["size"].as_str().unwrap().ends_with(" B"));
    assert_eq!(calls["big"]["size"], "146.5 KiB", "{report:#}");
    let running = calls["running_progress"].as_str().unwrap();
    assert!(
        running.contains(" / 20") && running.contains("step"),
        "{running}"
    );
    assert_eq!(calls["worked"]["text"], "done");
    let leaked = calls["client_saw_leak"]["text"].as_str().unwrap();
    assert!(leaked.contains("[REDACTED:"), "{leaked}");

    // 4. The redacted output lists its marks; the large one pages to its end, whole.
    let marks = report["leak_output"]["marks"].as_array().unwrap();
    assert!(!marks.is_empty(), "{report:#}");
    assert!(marks[0].as_str().unwrap().contains("secret"), "{marks:?}");
    let big = &report["big_output"];
    assert!(big["pages"].as_u64().unwrap() >= 3, "{report:#}");
    assert_eq!(big["chars"], 150_000);
    assert_eq!(big["all_x"], true);
    assert_eq!(big["end_shown"], 1);
    assert!(big["range"].as_str().unwrap().ends_with("150000"), "{big}");
    let saved = report["saved"].as_str().unwrap();
    assert!(saved.starts_with("saved 150000 bytes"), "{saved}");
    let artifacts = ws.data().join("artifacts");
    let exported: Vec<_> = support::files_under(&artifacts);
    assert_eq!(exported.len(), 1, "{exported:?}");
    assert_eq!(std::fs::metadata(&exported[0]).unwrap().len(), 150_000);

    // 5. The grant was revoked in the console, and alice's next call was refused.
    assert_eq!(report["grant_before"], "true");
    assert_eq!(report["grant_after"], "false", "{report:#}");
    assert!(report["revoke_flash"].as_str().unwrap().contains("revoked"));
    let after = &report["after_revoke"];
    assert_eq!(after["is_error"], true, "{report:#}");
    assert!(!after["text"].as_str().unwrap().contains("hi"), "{after}");

    // The audit policy's decision about big_text is listed (and did not stop the call).
    let decisions = report["decisions"].as_array().unwrap();
    assert!(
        decisions.iter().any(|d| {
            let d = d.as_str().unwrap();
            d.contains("mcp__fx__big_text") && d.contains("deny") && d.contains("audit")
        }),
        "{decisions:?}"
    );

    // The plugins page names the bundled plugins and the limits.
    let fx = report["plugins"]["fx"].as_array().unwrap();
    assert!(fx.len() >= 3, "{fx:?}");
    assert!(fx.iter().any(|r| r.as_str().unwrap().contains("redaction")));
    assert!(fx.iter().any(|r| {
        let r = r.as_str().unwrap();
        r.contains("policy") && r.contains("audit")
    }));
    assert!(
        report["plugins"]["limits"]
            .as_str()
            .unwrap()
            .contains("ms per call")
    );

    // No page showed the service's credential.
    assert_eq!(report["pages_checked"], 6);
    assert_eq!(report["secret_seen"], false);
    for page in ["services", "calls", "output", "grants", "plugins"] {
        let png = shots.join(format!("{page}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
            "{page}.png"
        );
    }
}

/// A form-encoded body (what a browser's form posts).
fn form_body(fields: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// The CSRF token in a console page.
fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..at + 64].to_string()
}

fn cookie_of(response: &reqwest::Response) -> String {
    let set = response
        .headers()
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    set.split(';').next().unwrap().to_string()
}

/// The console as a script (or a browser without JavaScript) uses it: plain requests,
/// redirects not followed, and once signed in, the session's cookie and CSRF token.
struct Client {
    http: reqwest::Client,
    base: String,
    cookie: String,
    csrf: String,
}

impl Client {
    fn new(base: &str) -> Client {
        Client {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_string(),
            cookie: String::new(),
            csrf: String::new(),
        }
    }

    /// A request to `path` (with the session's cookie, once there is one).
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if !self.cookie.is_empty() {
            request = request.header("Cookie", &self.cookie);
        }
        request
    }

    /// A form posted to `path`.
    fn form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::POST, path)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form_body(fields))
    }

    /// Keeps the session a response opened, and the CSRF token of its page.
    async fn sign_in_from(&mut self, response: reqwest::Response) -> String {
        self.cookie = cookie_of(&response);
        let page = response.text().await.unwrap();
        if page.contains("name=\"csrf\"") {
            self.csrf = csrf_of(&page);
        }
        page
    }

    /// GETs a page: its status and body.
    async fn page(&self, path: &str) -> (u16, String) {
        let r = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Posts an action with the session's CSRF token: its status.
    async fn act(&self, path: &str) -> u16 {
        let csrf = self.csrf.clone();
        let r = self.form(path, &[("csrf", &csrf)]).send().await.unwrap();
        r.status().as_u16()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_refuses_what_it_must() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let (made, _) = ws.json(&["serve", "tokens", "add"], &[]);
    let operator = made["token"].as_str().unwrap().to_string();
    let (made, _) = ws.json(&["--agent", "alice", "serve", "tokens", "add"], &[]);
    let alice = made["token"].as_str().unwrap().to_string();
    // --require-token: loopback is treated as remote (the suite binds loopback only).
    let gateway = HttpGateway::start(&ws, &["--require-token"]);
    let mut client = Client::new(&base_of(&gateway));
    let get = reqwest::Method::GET;

    // Without a token: 401 and the login page; the MCP endpoint refuses too.
    let r = client
        .request(get.clone(), "/console/services")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let body = r.text().await.unwrap();
    assert!(body.contains("action=\"/console/login\""), "{body}");
    assert!(!body.contains("fx"), "no service is named before sign-in");
    let r = client
        .request(reqwest::Method::POST, "/mcp")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // A token of another agent is not the operator's; a wrong token is not a token.
    let r = client
        .request(get.clone(), "/console/services")
        .bearer_auth(&alice);
    assert_eq!(r.send().await.unwrap().status(), 403);
    for (token, status) in [(alice.as_str(), 403), ("alk_wrong", 401)] {
        let r = client
            .form("/console/login", &[("token", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{token}");
    }

    // The operator's token, pasted into the login page, opens a session.
    let r = client
        .form("/console/login", &[("token", operator.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    client.sign_in_from(r).await;
    let r = client
        .request(get.clone(), "/console/services")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains("id=\"service-fx\""), "{page}");
    assert!(!page.contains(FIXTURE_SECRET));
    client.csrf = csrf_of(&page);
    let disable = "/console/services/fx/disable";

    // A cross-origin action is refused before it runs, even with the cookie and token.
    let csrf = client.csrf.clone();
    let r = client
        .form(disable, &[("csrf", &csrf)])
        .header("Origin", "http://evil.example.com");
    assert_eq!(r.send().await.unwrap().status(), 403);
    // An action without the session's CSRF token is refused.
    for forged in ["", "0".repeat(64).as_str()] {
        let r = client
            .form(disable, &[("csrf", forged)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "csrf {forged:?}");
    }
    // A request for another host (DNS rebinding) is refused.
    let r = client
        .request(get.clone(), "/console/services")
        .header("Host", "evil.example.com");
    assert_eq!(r.send().await.unwrap().status(), 403);
    let (_, page) = client.page("/console/services").await;
    assert!(
        !page.contains("data-state=\"disabled\""),
        "nothing ran: {page}"
    );

    // The same action, same-origin with the token, runs; a failing one shows its error.
    let r = client
        .form(disable, &[("csrf", &csrf)])
        .header("Origin", &client.base);
    assert_eq!(r.send().await.unwrap().status(), 303);
    let (_, page) = client.page("/console/services").await;
    assert!(
        page.contains("id=\"service-fx\" data-state=\"disabled\""),
        "{page}"
    );
    assert!(
        page.contains("disabled &quot;fx&quot;"),
        "the page says what was done: {page}"
    );
    assert_eq!(client.act("/console/services/nope/test").await, 303);
    let (_, page) = client.page("/console/services").await;
    assert!(
        page.contains("class=\"flash failed\"") && page.contains("no service named"),
        "{page}"
    );

    // A bearer header works directly (for scripts), and signing out ends the session.
    let r = client
        .request(get.clone(), "/console/services")
        .bearer_auth(&operator);
    assert_eq!(r.send().await.unwrap().status(), 200);
    assert_eq!(client.act("/console/logout").await, 303);
    assert_eq!(client.page("/console/services").await.0, 401);
}

/// Runs one scenario of the Python SDK client (`gateway_client.py`) against the gateway
/// and returns its report.
fn run_client(gateway: &HttpGateway, scenario: &str) -> Value {
    let out = Command::new(python())
        .arg(python_server("gateway_client.py"))
        .args([scenario, "--http", &gateway.url])
        .output()
        .expect("run gateway_client.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON report")
}

/// The tools the agent sees, and what `mcp__fx__echo` answers.
fn client_view(gateway: &HttpGateway) -> Value {
    run_client(gateway, "hidden")
}

fn has_tool(view: &Value, prefix: &str) -> bool {
    view["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t.as_str().unwrap().starts_with(prefix))
}

/// A console session on a loopback gateway (no token needed), opened by its first page.
async fn loopback_session(gateway: &HttpGateway, first: &str) -> (Client, String) {
    let mut client = Client::new(&base_of(gateway));
    let r = client
        .request(reqwest::Method::GET, first)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = client.sign_in_from(r).await;
    (client, page)
}

#[tokio::test(flavor = "multi_thread")]
async fn console_actions_test_in_place_and_disable_at_run_time() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    // A registry service, added but never tested: it offers no tools yet.
    let cmd = [
        python().display().to_string(),
        python_server("fixture_server.py").display().to_string(),
    ];
    let out = ws.run(
        &[
            "servers",
            "add",
            "reg",
            "--",
            cmd[0].as_str(),
            cmd[1].as_str(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gateway = HttpGateway::start(&ws, &[]);
    let services = "/console/services";
    let (client, page) = loopback_session(&gateway, services).await;
    assert!(
        page.contains("id=\"service-reg\" data-state=\"untested\""),
        "{page}"
    );
    assert!(page.contains("fresh-untested"), "{page}");
    assert!(!has_tool(&client_view(&gateway), "mcp__reg__"));

    // Test in place: the catalog is read and saved, and the service offers its tools.
    assert_eq!(client.act("/console/services/reg/test").await, 303);
    let (_, page) = client.page(services).await;
    assert!(page.contains("tested &quot;reg&quot;"), "{page}");
    assert!(
        page.contains("id=\"service-reg\" data-state=\"connected\""),
        "{page}"
    );
    assert!(has_tool(&client_view(&gateway), "mcp__reg__"));

    // Disable at run time: tools hidden, calls refused, sessions closed; then enabled.
    assert_eq!(client.act("/console/services/fx/disable").await, 303);
    let view = client_view(&gateway);
    assert!(!has_tool(&view, "mcp__fx__"), "{view}");
    assert_eq!(view["call"]["is_error"], true, "{view}");
    assert!(
        view["call"]["text"].as_str().unwrap().contains("disabled"),
        "{view}"
    );
    let (_, page) = client.page(services).await;
    assert!(
        page.contains("id=\"service-fx\" data-state=\"disabled\""),
        "{page}"
    );
    assert_eq!(client.act("/console/services/fx/enable").await, 303);
    let view = client_view(&gateway);
    assert!(has_tool(&view, "mcp__fx__"), "{view}");
    assert_eq!(view["call"]["text"], "hi", "{view}");

    // A session's Disconnect closes it (the next call reconnects). Testing fx opens the
    // default agent's session (the client's closed with it when it left).
    assert_eq!(client.act("/console/services/fx/test").await, 303);
    let disconnect = "/console/sessions/default/fx/disconnect";
    let (_, page) = client.page(services).await;
    assert!(page.contains(disconnect), "{page}");
    assert_eq!(client.act(disconnect).await, 303);
    let (_, page) = client.page(services).await;
    assert!(!page.contains(disconnect), "the session is gone: {page}");
}

#[tokio::test(flavor = "multi_thread")]
async fn remembered_approvals_and_policy_decisions_are_listed_and_revoked() {
    // A policy that asks before destructive calls; the client answers yes, remembered.
    let ws = Workspace::new(&format!(
        "[mcp_servers.p]\ncommand = {}\nargs = [{}]\n\
         adapters = {{ policy = \"builtin:policy\" }}\n\
         adapter_config = {{ policy = {{ ask_destructive = true }} }}\n",
        support::toml_str(python().display().to_string()),
        support::toml_str(python_server("policy_server.py").display().to_string()),
    ));
    let gateway = HttpGateway::start(&ws, &[]);
    run_client(&gateway, "remember");

    let (client, page) = loopback_session(&gateway, "/console/grants").await;
    // The question, the person's answer, and the remembered approval are all shown.
    for shown in [
        "id=\"decisions\"",
        "decision-ask",
        "decision-approved",
        "id=\"approvals\"",
        "wipe_notes",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
    let (listed, _) = ws.json(&["grants", "list"], &[]);
    let id = listed["approvals"][0]["id"].as_i64().expect("one approval");
    let revoke = format!("/console/approvals/{id}/revoke");
    assert!(page.contains(&revoke), "{page}");

    assert_eq!(client.act(&revoke).await, 303);
    let (_, page) = client.page("/console/grants").await;
    assert!(page.contains(&format!("forgot approval {id}")), "{page}");
    assert!(!page.contains("id=\"approvals\""), "{page}");
    let (listed, _) = ws.json(&["grants", "list"], &[]);
    assert_eq!(listed["approvals"], serde_json::json!([]), "{listed}");
}

/// Console sessions live in the registry: a login made through one replica works
/// through another, an action's message is shown by whichever replica serves the next
/// page, and signing out through one ends the session on both.
#[tokio::test(flavor = "multi_thread")]
async fn a_console_login_works_through_every_replica() {
    let ws = Workspace::new(&secret_entry("fx", ""));
    let (made, _) = ws.json(&["serve", "tokens", "add"], &[]);
    let operator = made["token"].as_str().unwrap().to_string();
    let a = HttpGateway::start(&ws, &["--require-token"]);
    let b = HttpGateway::start(&ws, &["--require-token"]);
    let mut on_a = Client::new(&base_of(&a));
    let r = on_a
        .form("/console/login", &[("token", operator.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    on_a.sign_in_from(r).await;
    let (status, page) = on_a.page("/console/services").await;
    assert_eq!(status, 200);
    on_a.csrf = csrf_of(&page);
    let mut on_b = Client::new(&base_of(&b));
    on_b.cookie = on_a.cookie.clone();
    on_b.csrf = on_a.csrf.clone();

    // Signed in on A, the same cookie opens B's pages; an action taken through B leaves
    // its message for the page A serves next.
    let (status, _) = on_b.page("/console/services").await;
    assert_eq!(status, 200);
    assert_eq!(on_b.act("/console/services/fx/disable").await, 303);
    let (_, page) = on_a.page("/console/services").await;
    assert!(
        page.contains("disabled &quot;fx&quot; on every replica"),
        "{page}"
    );
    assert_eq!(on_a.act("/console/services/fx/enable").await, 303);

    // Signed out through B: A no longer knows the session.
    assert_eq!(on_b.act("/console/logout").await, 303);
    let (status, page) = on_a.page("/console/services").await;
    assert_eq!(status, 401, "{page}");
}
