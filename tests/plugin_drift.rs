//! The bundled plugins embedded in the host binary are exactly what their sources under
//! plugins/ build to: a rebuild is compared byte for byte.

mod support;

#[test]
fn embedded_plugins_match_a_rebuild_of_their_sources() {
    let out = std::process::Command::new("bash")
        .arg(support::root().join("scripts/build-plugins.sh"))
        .arg("--check")
        .output()
        .expect("run scripts/build-plugins.sh --check");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report.matches("ok: ").count(), 3, "{report}");
}
