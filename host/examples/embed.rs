//! Embedding Airlock: the smallest complete program an agent platform would copy. It
//! starts Airlock on one MCP server, lists the tools, calls one whose result is larger
//! than the preview a model gets, pages the rest back, and closes (no server process
//! outlives it).
//!
//! ```sh
//! cargo run -p airlock-host --example embed                       # the bundled demo server
//! cargo run -p airlock-host --example embed -- npx -y @modelcontextprotocol/server-everything
//! ```
//!
//! With a server of your own, it lists the tools and calls none.

use airlock_host::config::{Config, process_env};
use airlock_host::{Airlock, AirlockOptions};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server: a command and its arguments (never through a shell), here the demo
    // server inside the `airlock` binary unless the command line names another.
    let mut command: Vec<String> = std::env::args().skip(1).collect();
    let demo = command.is_empty();
    if demo {
        let airlock = std::env::current_exe()?.with_file_name("airlock");
        let airlock = match airlock.exists() {
            true => airlock,
            // `cargo run --example` puts examples one folder below the binaries.
            false => std::env::current_exe()?
                .parent()
                .and_then(|examples| examples.parent())
                .map(|dir| dir.join("airlock"))
                .ok_or("cannot find the airlock binary")?,
        };
        command = vec![airlock.display().to_string(), "demo-server".into()];
    }
    let (program, args) = command.split_first().ok_or("no server command")?;
    let config = format!(
        "[mcp_servers.demo]\ntype = \"stdio\"\ncommand = {}\nargs = {}\n",
        json!(program),
        json!(args)
    );
    let config = Config::from_str(std::path::Path::new("embed.toml"), &config, &process_env)?;

    // Start: state lives in the data directory; every server is connected and its tools
    // named (`mcp__demo__echo`).
    let data = std::env::temp_dir().join(format!("airlock-embed-{}", std::process::id()));
    let airlock = Airlock::start(config, AirlockOptions::new(&data)).await?;
    for report in airlock.services().status() {
        println!("service {}: {}", report.service, report.status.name());
    }
    for tool in airlock.catalog().tools() {
        println!("tool {} ({})", tool.name, tool.raw_name);
    }

    if demo {
        // A call: its result is converted, redacted and kept; the model gets a preview.
        let text = "0123456789abcdef".repeat(6 * 1024);
        let out = airlock
            .calls()
            .call("mcp__demo__echo", json!({ "text": text }), None)
            .await?;
        println!(
            "called {}: {} bytes, preview {} bytes, complete: {}",
            out.tool,
            out.retained.size,
            out.preview.len(),
            out.retained.complete
        );
        // The rest, page by page, by the output id the result names.
        let id = out
            .retained
            .output_id
            .clone()
            .ok_or("the result was kept")?;
        let mut offset = 0;
        let mut whole = String::new();
        loop {
            let page = airlock.outputs().read(&out.service, &id, offset).await?;
            whole.push_str(&page.text);
            match page.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        println!(
            "paged back {} bytes: same text: {}",
            whole.len(),
            whole == text
        );
    }

    // Close: every session, and the process group of every server, ends here.
    airlock.close().await;
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
