use serde_json::json;

use super::*;

fn known(pairs: &[(&str, &str)]) -> KnownSecrets {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn scrubs_every_value_in_one_pass_and_borrows_when_clean() {
    let k = known(&[("TOKEN", "abcd1234"), ("PASS", "abcd"), ("SHORT", "xy")]);
    assert_eq!(
        k.scrub("a abcd1234 b abcd c xy"),
        "a [REDACTED:secret:TOKEN] b [REDACTED:secret:PASS] c xy"
    );
    assert!(matches!(k.scrub("nothing here"), Cow::Borrowed(_)));
    assert!(k.appears_in("..abcd.."));
    assert!(
        !k.appears_in("..xy.."),
        "values under 4 bytes are not scrubbed"
    );
    let twice = k.scrub_owned(&k.scrub_owned("abcd1234abcd"));
    assert_eq!(
        twice,
        k.scrub_owned("abcd1234abcd"),
        "scrubbing is idempotent"
    );
}

#[test]
fn json_strings_and_keys_are_scrubbed() {
    let k = known(&[("TOKEN", "s3cr3t-value")]);
    let mut v = json!({"a": ["x s3cr3t-value y", 1], "s3cr3t-value": {"b": "s3cr3t-value"}});
    assert_eq!(k.scrub_json(&mut v), 3);
    assert!(!v.to_string().contains("s3cr3t-value"), "{v}");
}

#[test]
fn learning_dedupes_and_debug_masks() {
    let k = known(&[("A", "value-one")]);
    let k2 = k
        .with("A", "value-one")
        .with("B", "value-two")
        .with("C", "");
    assert_eq!(k2.len(), 2);
    assert_eq!(k.len(), 1, "with() leaves the original untouched");
    let u = k.union(&known(&[("other", "value-one"), ("D", "value-3")]));
    assert_eq!(u.len(), 2);
    let shown = format!("{k2:?}");
    assert!(!shown.contains("value-") && shown.contains("A="), "{shown}");
}
