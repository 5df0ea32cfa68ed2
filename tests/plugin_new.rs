//! `airlock plugin new`: for each language and stage, the project it writes passes its
//! own test with no edits; for one stage per language it also builds into a component
//! that `airlock plugin check` loads and `airlock plugin run --expect` replays.
//!
//! Rust projects build against this checkout's SDK with the workspace's lock copied in
//! (the same versions, from the cargo cache the workspace build filled), sharing one
//! target folder (`target/plugin-new`) so the SDK compiles once. The
//! JavaScript project installs its pinned componentize-qjs from the npm cache the test command warmed;
//! the Python project installs its pinned componentize-py from pip's cache the same way.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::Workspace;

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// `airlock plugin new NAME --stage STAGE --lang LANG --dir DIR`: the project's folder.
fn scaffold(ws: &Workspace, name: &str, stage: &str, lang: &str) -> std::path::PathBuf {
    scaffold_with_next(ws, name, stage, lang).0
}

/// The project's folder and the commands `plugin new` says to run next.
fn scaffold_with_next(
    ws: &Workspace,
    name: &str,
    stage: &str,
    lang: &str,
) -> (std::path::PathBuf, Vec<String>) {
    let dir = ws.dir.path().join(name);
    let dir_text = dir.display().to_string();
    let (out, _) = ws.json(
        &[
            "plugin", "new", name, "--stage", stage, "--lang", lang, "--dir", &dir_text,
        ],
        &[],
    );
    assert_eq!(out["ok"], json!(true), "{out}");
    let next: Vec<String> = out["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert!(!next.is_empty(), "{out}");
    (dir, next)
}

/// A cargo command for a scaffolded project, free of the outer `cargo test`'s settings.
fn cargo(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(args)
        .current_dir(dir)
        .env(
            "CARGO_TARGET_DIR",
            support::root().join("target/plugin-new"),
        )
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    cmd
}

/// Checks a built policy component with `plugin check`, then replays a recorded call
/// the templates deny through it with `plugin run`, keeping the output as a golden file
/// that a second run must match.
fn check_and_replay_policy(ws: &Workspace, wasm: &Path) {
    let (stage, input, config) = (
        "policy",
        json!({"call": {"tool": "delete_note", "arguments": {"id": 7}}}),
        json!({"deny_prefixes": ["delete_"]}),
    );
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    let wasm_text = wasm.display().to_string();
    let (checked, _) = ws.json(&["plugin", "check", &wasm_text], &[]);
    assert_eq!(checked["ok"], json!(true), "{checked}");
    assert_eq!(checked["contract"], json!("0.2.0"), "{checked}");
    assert_eq!(checked["stages"], json!([stage]), "{checked}");
    let input_path = ws.dir.path().join(format!("{stage}-input.json"));
    std::fs::write(&input_path, input.to_string()).unwrap();
    let input_text = input_path.display().to_string();
    let config_text = config.to_string();
    let args = [
        "plugin",
        "run",
        &wasm_text,
        "--stage",
        stage,
        "--input",
        &input_text,
        "--plugin-config",
        &config_text,
    ];
    let first = ws.run(&args, &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let golden = ws.dir.path().join(format!("{stage}-expected.json"));
    std::fs::write(&golden, &first.stdout).unwrap();
    let golden_text = golden.display().to_string();
    let mut again = args.to_vec();
    again.extend(["--expect", &golden_text]);
    let second = ws.run(&again, &[]);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let output: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(output["verdict"]["run"], json!(false), "{output}");
    assert!(
        output["verdict"]["denied"]
            .as_str()
            .unwrap_or_default()
            .contains("delete_"),
        "the template denies delete_*: {output}"
    );
}

#[test]
fn rust_projects_pass_their_tests_and_build_into_components() {
    let ws = Workspace::new("");
    for stage in ["policy", "redaction", "content", "naming"] {
        let dir = scaffold(&ws, &format!("rust-{stage}"), stage, "rust");
        run(
            &mut cargo(&dir, &["test"]),
            &format!("cargo test ({stage})"),
        );
    }
    let dir = ws.dir.path().join("rust-policy");
    run(
        &mut cargo(&dir, &["build", "--release", "--target", "wasm32-wasip2"]),
        "cargo build (policy)",
    );
    let wasm = support::root().join("target/plugin-new/wasm32-wasip2/release/rust_policy.wasm");
    check_and_replay_policy(&ws, &wasm);
}

#[test]
fn javascript_projects_pass_their_tests_and_build_into_components() {
    let ws = Workspace::new("");
    let npm = |dir: &Path, args: &[&str]| {
        let mut cmd = Command::new("npm");
        cmd.args(args).current_dir(dir);
        cmd
    };
    for stage in ["policy", "redaction", "content", "naming"] {
        let dir = scaffold(&ws, &format!("js-{stage}"), stage, "js");
        // Only the policy project needs its tools installed (to build); the others'
        // tests run on Node alone.
        if stage == "policy" {
            run(
                &mut npm(
                    &dir,
                    &[
                        "install",
                        "--prefer-offline",
                        "--no-audit",
                        "--no-fund",
                        "--loglevel=error",
                    ],
                ),
                "npm install",
            );
        }
        run(&mut npm(&dir, &["test"]), &format!("npm test ({stage})"));
    }
    let dir = ws.dir.path().join("js-policy");
    run(&mut npm(&dir, &["run", "build"]), "npm run build (policy)");
    check_and_replay_policy(&ws, &dir.join("js-policy.wasm"));
}

#[test]
fn python_projects_pass_their_tests_and_build_into_components() {
    let ws = Workspace::new("");
    let venv_bin = support::python().parent().unwrap().to_path_buf();
    for stage in ["redaction", "content", "naming"] {
        // The test venv's componentize-py (the same pinned version) makes the bindings.
        let dir = scaffold(&ws, &format!("py-{stage}"), stage, "python");
        let world = format!("{stage}-plugin");
        run(
            Command::new(venv_bin.join("componentize-py"))
                .args(["-d", "wit", "-w", &world, "bindings", "bindings"])
                .current_dir(&dir),
            &format!("componentize-py bindings ({stage})"),
        );
        run(
            Command::new(support::python())
                .args(["-m", "unittest", "test_app"])
                .current_dir(&dir),
            &format!("unittest ({stage})"),
        );
    }
    // The policy project runs exactly the commands `plugin new` printed, in its own venv.
    let (dir, next) = scaffold_with_next(&ws, "py-policy", "policy", "python");
    for command in &next {
        if command.starts_with("airlock ") {
            continue;
        }
        run(
            Command::new("sh")
                .args(["-c", command.as_str()])
                .current_dir(&dir),
            command,
        );
    }
    check_and_replay_policy(&ws, &dir.join("py-policy.wasm"));
}

#[test]
fn bad_requests_are_refused_and_touch_nothing() {
    let ws = Workspace::new("");
    let taken = ws.dir.path().join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();
    let taken_text = taken.display().to_string();
    for (args, says) in [
        (
            vec!["plugin", "new", "Bad_Name", "--stage", "policy"],
            "plugin name \"Bad_Name\"",
        ),
        (
            vec!["plugin", "new", "good", "--stage", "police"],
            "--stage must be",
        ),
        (
            vec![
                "plugin",
                "new",
                "good",
                "--stage",
                "policy",
                "--dir",
                &taken_text,
            ],
            "not empty",
        ),
        (
            vec![
                "plugin",
                "new",
                "good",
                "--stage",
                "policy",
                "--sdk",
                "/nonexistent/sdk",
            ],
            "--sdk",
        ),
    ] {
        let out = ws.run(&args, &[]);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_to_string(taken.join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(!ws.dir.path().join("good").exists());
}
