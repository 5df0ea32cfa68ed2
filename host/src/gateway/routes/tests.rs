use serde_json::json;

use super::*;

#[test]
fn templates_match_level_one_expressions() {
    assert!(matches_template(
        "test://template/{id}/data",
        "test://template/123/data"
    ));
    assert!(!matches_template(
        "test://template/{id}/data",
        "test://template/1/2/data"
    ));
    assert!(!matches_template(
        "test://template/{id}/data",
        "test://template//data"
    ));
    assert!(matches_template("file:///{+path}", "file:///a/b/c.txt"));
    assert!(!matches_template("a://{x}", "b://1"));
}

#[test]
fn unique_uris_pass_through_and_shared_ones_are_qualified() {
    let mut routes = ResourceRoutes::default();
    let shown = routes.learn_resources(vec![
        json!({"service": "a", "uri": "mem://only-a", "name": "x"}),
        json!({"service": "a", "uri": "mem://shared", "name": "s"}),
        json!({"service": "b", "uri": "mem://shared", "name": "s"}),
    ]);
    assert_eq!(shown[0]["uri"], "mem://only-a");
    assert!(shown[0].get("service").is_none());
    assert_eq!(shown[1]["uri"], "airlock://a/mem%3A%2F%2Fshared");
    assert_eq!(
        routes.route("airlock://b/mem%3A%2F%2Fshared"),
        Some(("b".into(), "mem://shared".into()))
    );
    assert_eq!(
        routes.route("mem://only-a"),
        Some(("a".into(), "mem://only-a".into()))
    );
    assert_eq!(
        routes.route("mem://unknown"),
        None,
        "two services: no guess"
    );
    routes.learn_templates(vec![json!({"service": "b", "uriTemplate": "t://{id}"})]);
    assert_eq!(routes.route("t://9"), Some(("b".into(), "t://9".into())));
    assert_eq!(
        routes.exposed("b", "mem://shared"),
        "airlock://b/mem%3A%2F%2Fshared"
    );
}

#[test]
fn prompt_names_are_unique_across_services() {
    let mut routes = PromptRoutes::default();
    let shown = routes.learn(vec![
        json!({"service": "a", "name": "greet"}),
        json!({"service": "b", "name": "greet"}),
        json!({"service": "b", "name": "solo"}),
    ]);
    let names: Vec<&str> = shown.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a__greet", "b__greet", "solo"]);
    assert_eq!(routes.route("b__greet"), Some(("b".into(), "greet".into())));
    assert_eq!(routes.route("solo"), Some(("b".into(), "solo".into())));
}
