//! Property tests (proptest, bounded: a few hundred cases each, seconds in all), and the
//! committed fuzz corpus replayed through the same entry points:
//! - redaction: no known secret survives in any block, field or position, whatever
//!   surrounds it, and redacting twice changes nothing more;
//! - the host's scrubber: the same, for text and JSON (keys included);
//! - naming: names are always valid and unique, and the same input names the same way;
//! - content conversion: no block is ever dropped, and valid blocks round-trip;
//! - config parsing: any document or entry gives a config or an error naming the
//!   server — never a panic;
//! - sandboxed redaction: the bundled plugin in wasm (its vector prefilter) gives exactly
//!   what the same policy gives natively, on text dense with prefixes and near misses;
//! - framing: whatever a server writes, the frame guard passes only decodable lines,
//!   valid ones unchanged and in order.

use airlock_guest::names::{is_valid_name, qualify_tools};
use airlock_guest::{
    BlobResource, Config as GuestConfig, ContentBlock, EmbeddedResource, MediaBlock,
    ResourceContents, ResourceLink, Secret, TextBlock, TextResource, Tool, ToolResult,
    UnknownBlock,
};
use airlock_host::plugin::{PluginRuntime, Stage, StageInstance, convert as host_convert};
use airlock_host::secrets::KnownSecrets;
use airlock_plugin_standard::content;
use airlock_plugin_standard::redaction::RedactionPolicy;
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    }
}

/// Secrets contain a digit (so the `[REDACTED:secret:NAME]` marker can never spell one)
/// and may contain JSON's special characters.
fn secret() -> impl Strategy<Value = String> {
    ("[a-zA-Z\"\\\\/ _.:-]{3,12}", 0u8..10, "[a-z!@#%&*]{1,8}")
        .prop_map(|(a, d, b)| format!("{a}{d}{b}"))
}

/// Text around the secrets: anything, unicode included.
fn filler() -> impl Strategy<Value = String> {
    ".{0,24}"
}

/// `secret` put somewhere in `around`.
fn embed(around: &str, secret: &str, at: usize) -> String {
    let mut cut = at.min(around.len());
    while !around.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{secret}{}", &around[..cut], &around[cut..])
}

/// A result where `s` appears in every field a block can carry.
fn leaky_result(s: &str, f: &str, at: usize) -> ToolResult {
    let e = |x: &str| embed(x, s, at);
    let j = |x: &str| json!({ e(x): [e(x), {"k": e(x)}] }).to_string();
    ToolResult {
        content: vec![
            ContentBlock::Text(TextBlock {
                text: e(f),
                annotations: Some(j(f)),
                meta: Some(j(f)),
            }),
            ContentBlock::Image(MediaBlock {
                data: e(f),
                mime_type: e("image/png"),
                annotations: Some(j(f)),
                meta: None,
            }),
            ContentBlock::Audio(MediaBlock {
                data: e(f),
                mime_type: e("audio/wav"),
                annotations: None,
                meta: Some(j(f)),
            }),
            ContentBlock::ResourceLink(ResourceLink {
                uri: e("file:///x"),
                name: e(f),
                title: Some(e(f)),
                description: Some(e(f)),
                mime_type: Some(e(f)),
                size: Some(3),
                annotations: Some(j(f)),
                meta: Some(j(f)),
            }),
            ContentBlock::Embedded(EmbeddedResource {
                contents: ResourceContents::Text(TextResource {
                    uri: e("mem://t"),
                    mime_type: Some(e(f)),
                    text: e(f),
                    meta: Some(j(f)),
                }),
                annotations: Some(j(f)),
                meta: Some(j(f)),
            }),
            ContentBlock::Embedded(EmbeddedResource {
                contents: ResourceContents::Blob(BlobResource {
                    uri: e("mem://b"),
                    mime_type: Some(e(f)),
                    blob: e(f),
                    meta: Some(j(f)),
                }),
                annotations: None,
                meta: None,
            }),
            ContentBlock::Unknown(UnknownBlock {
                kind: e("hologram"),
                raw: j(f),
            }),
            ContentBlock::Unknown(UnknownBlock {
                kind: "broken".into(),
                raw: e("{not json"),
            }),
        ],
        structured_content: Some(j(f)),
        is_error: false,
        meta: Some(j(f)),
    }
}

/// Every string a result carries, one per line (JSON fields decoded, keys included).
fn everything(result: &ToolResult) -> String {
    fn decode(raw: &Option<String>, all: &mut Vec<String>) {
        if let Some(raw) = raw {
            all.push(raw.clone());
            if let Ok(v) = serde_json::from_str::<Value>(raw) {
                all.push(format!("{v:#}"));
                collect(&v, all);
            }
        }
    }
    let mut all = vec![airlock_guest::json::result_to_mcp(result).to_string()];
    decode(&result.structured_content, &mut all);
    decode(&result.meta, &mut all);
    for block in &result.content {
        all.push(format!("{block:?}"));
        if let ContentBlock::Unknown(u) = block {
            decode(&Some(u.raw.clone()), &mut all);
        }
    }
    all.join("\n")
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                collect(v, out);
            }
        }
        _ => {}
    }
}

fn policy() -> RedactionPolicy {
    RedactionPolicy::from_config(
        &GuestConfig::from_value(json!({"patterns": ["acme_[a-z0-9]{8}"]})).unwrap(),
    )
    .unwrap()
}

/// A secret for the sandbox comparison.
const SANDBOX_SECRET: &str = "s3cr3t-v4lue";

/// The bundled plugin's redaction stage, in wasm, configured as [`policy`] is (built
/// once for every case).
fn sandboxed_redaction() -> &'static StageInstance {
    static STAGE: std::sync::OnceLock<(
        std::sync::Arc<PluginRuntime>,
        std::sync::Arc<StageInstance>,
    )> = std::sync::OnceLock::new();
    let (_, stage) = STAGE.get_or_init(|| {
        let runtime = PluginRuntime::new(Default::default(), None).unwrap();
        let standard = runtime
            .load(&airlock_host::config::PluginRef::Builtin("standard".into()))
            .unwrap();
        let stage = runtime
            .bind(
                standard,
                Stage::Redaction,
                "props",
                &json!({"patterns": ["acme_[a-z0-9]{8}"]}),
            )
            .unwrap();
        (runtime, stage)
    });
    stage
}

/// Text dense with what the patterns start with: bytes of their prefixes, whole tokens,
/// the secret, a configured pattern's match, private-key headers with and without an
/// END, dash runs, near misses and unicode (a word character before a token), in any
/// order, so
/// matches fall on every lane of a 16-byte block and across block edges.
fn prefix_dense_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[ghpsk_AKIxoeyJ3r-]{0,40}",
        Just(format!("ghp_{}", "a".repeat(36))),
        Just(format!("github_pat_{}", "b".repeat(22))),
        Just("AKIAABCDEFGHIJKLMNOP ".to_string()),
        Just("sk-ant-abcdefghijklmnopqrstuv".to_string()),
        Just("sk-proj-abcdefghijklmnopqrstuv".to_string()),
        Just("eyJabcdefghij.eyJabcdefghij.abcdefghij".to_string()),
        Just("xoxb-0123456789".to_string()),
        Just("acme_1234abcd".to_string()),
        Just(SANDBOX_SECRET.to_string()),
        Just("s3cr3t-v4lu".to_string()),
        Just("-----BEGIN RSA PRIVATE KEY-----\n".to_string()),
        Just("\n-----END RSA PRIVATE KEY-----".to_string()),
        Just("|---|-----|".to_string()),
        Just("é".to_string()),
        ".{0,20}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sandboxed_redaction_matches_the_native_policy(text in prefix_dense_text()) {
        let stage = sandboxed_redaction();
        let secrets = vec![airlock_host::plugin::Secret {
            name: "TOKEN".into(),
            value: SANDBOX_SECRET.into(),
        }];
        let scrub: KnownSecrets = [("TOKEN".to_string(), SANDBOX_SECRET.to_string())]
            .into_iter()
            .collect();
        let result = host_convert::result_from_mcp(&json!({"content": [{"type": "text", "text": text}]}));
        let wasm = airlock_host::plugin::redact_now(stage, result, &secrets, &scrub).unwrap();
        let native = policy()
            .redact(
                ToolResult {
                    content: vec![ContentBlock::Text(TextBlock { text: text.clone(), annotations: None, meta: None })],
                    structured_content: None,
                    is_error: false,
                    meta: None,
                },
                &[Secret { name: "TOKEN".into(), value: SANDBOX_SECRET.into() }],
            )
            .unwrap();
        let wasm_json = host_convert::result_to_mcp(&wasm.result);
        let ContentBlock::Text(native_text) = &native.result.content[0] else { unreachable!() };
        prop_assert_eq!(wasm_json["content"][0]["text"].as_str().unwrap(), native_text.text.as_str());
        let wasm_marks: Vec<_> = wasm.marks.iter().map(|m| (&m.location, &m.rule, m.count)).collect();
        let native_marks: Vec<_> = native.marks.iter().map(|m| (&m.location, &m.rule, m.count)).collect();
        prop_assert_eq!(wasm_marks, native_marks);
    }

    #[test]
    fn no_secret_survives_redaction_anywhere(
        secrets in prop::collection::vec(secret(), 1..4),
        f in filler(),
        at in 0usize..30,
    ) {
        let policy = policy();
        let known: Vec<Secret> = secrets
            .iter()
            .enumerate()
            .map(|(i, v)| Secret { name: format!("TOKEN_{}", ["A", "B", "C", "D"][i]), value: v.clone() })
            .collect();
        for s in &secrets {
            let redacted = policy.redact(leaky_result(s, &f, at), &known).unwrap();
            let seen = everything(&redacted.result);
            for t in &secrets {
                prop_assert!(!seen.contains(t.as_str()), "{t:?} survived:\n{seen}");
            }
            prop_assert!(!redacted.marks.is_empty());
            let again = policy.redact(redacted.result.clone(), &known).unwrap();
            prop_assert_eq!(
                format!("{:?}", again.result),
                format!("{:?}", redacted.result),
                "redaction is idempotent"
            );
            prop_assert!(again.marks.is_empty());
        }
    }

    #[test]
    fn the_host_scrubber_leaves_no_secret_in_text_or_json(
        secrets in prop::collection::vec(secret(), 1..4),
        f in filler(),
        at in 0usize..30,
    ) {
        let known: KnownSecrets = secrets
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("TOKEN_{}", ["A", "B", "C", "D"][i]), v.clone()))
            .collect();
        for s in &secrets {
            let text = embed(&f, s, at);
            let scrubbed = known.scrub_owned(&text);
            prop_assert!(!scrubbed.contains(s.as_str()));
            prop_assert_eq!(known.scrub_owned(&scrubbed), scrubbed.clone());
            let mut value = json!({ text.clone(): [text.clone(), {"k": text}] });
            known.scrub_json(&mut value);
            let mut strings = Vec::new();
            collect(&value, &mut strings);
            for t in &secrets {
                prop_assert!(strings.iter().all(|x| !x.contains(t.as_str())));
            }
        }
    }

    #[test]
    fn names_are_valid_unique_and_stable(
        names in prop::collection::vec(".{1,80}", 1..40),
        namespace in "(|[a-z_]{1,24})",
    ) {
        let tools: Vec<Tool> = names
            .iter()
            .map(|n| Tool {
                name: n.clone(),
                title: None,
                description: None,
                input_schema: None,
                output_schema: None,
                annotations: None,
                meta: None,
            })
            .collect();
        let named = qualify_tools(&namespace, tools.clone(), None);
        prop_assert_eq!(named.len(), tools.len());
        let mut seen = std::collections::HashSet::new();
        for (tool, raw) in named.iter().zip(&names) {
            prop_assert!(is_valid_name(&tool.name), "{:?}", tool.name);
            prop_assert!(seen.insert(tool.name.clone()), "{:?} twice", tool.name);
            prop_assert_eq!(&tool.raw_name, raw);
        }
        prop_assert_eq!(
            format!("{named:?}"),
            format!("{:?}", qualify_tools(&namespace, tools, None)),
            "deterministic"
        );
    }

    #[test]
    fn content_conversion_never_drops_a_block(blocks in prop::collection::vec(mcp_block(), 0..12)) {
        let wire = json!({"content": blocks, "isError": true});
        let parsed = airlock_host::plugin::convert::result_from_mcp(&wire);
        prop_assert_eq!(parsed.content.len(), blocks.len());
        prop_assert!(parsed.is_error);
        let back = airlock_host::plugin::convert::result_to_mcp(&parsed);
        prop_assert_eq!(&back["content"], &wire["content"], "valid blocks round-trip");
        let guest: ToolResult = airlock_guest::json::result_from_mcp(&wire);
        let lossless = content::convert(guest);
        prop_assert_eq!(lossless.content.len(), blocks.len());
        prop_assert!(lossless.is_error);
    }

    #[test]
    fn config_parsing_never_panics(doc in "(?s).{0,300}", key in "[a-z_]{1,12}", value in any_json()) {
        let _ = airlock_host::config::Config::from_str(std::path::Path::new("p.toml"), &doc, &|_| None);
        let _ = airlock_host::config::Config::from_str(std::path::Path::new("p.json"), &doc, &|_| None);
        let entry = json!({"command": "x", key.clone(): value});
        match airlock_host::config::Config::parse_entry(
            "svc-name",
            &airlock_host::config::Source::File("p.toml".into()),
            &entry,
            &|_| Some("v".into()),
        ) {
            Ok(server) => prop_assert_eq!(server.name, "svc-name"),
            Err(e) => prop_assert!(e.to_string().contains("svc-name"), "{e}"),
        }
    }

    #[test]
    fn the_frame_guard_passes_only_decodable_lines_and_valid_ones_unchanged(
        lines in prop::collection::vec(prop_oneof![
            any_json().prop_map(|v| json!({"jsonrpc": "2.0", "id": 1, "result": v}).to_string().into_bytes()),
            prop::collection::vec(any::<u8>(), 0..60),
        ], 0..20),
        chunk in 1usize..64,
    ) {
        let mut input = Vec::new();
        for line in &lines {
            input.extend(line.iter().copied().filter(|b| *b != b'\n'));
            input.push(b'\n');
        }
        let out = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
            let reader = Chunked { data: input, at: 0, chunk };
            let mut guard = airlock_host::transport::guard::FrameGuard::new(reader, 1 << 20);
            let mut out = Vec::new();
            guard.read_to_end(&mut out).await.unwrap();
            out
        });
        let expected: Vec<Vec<u8>> = lines
            .iter()
            .map(|l| l.iter().copied().filter(|b| *b != b'\n').collect::<Vec<u8>>())
            .filter(|l| serde_json::from_slice::<Value>(l).is_ok())
            .collect();
        let passed: Vec<&[u8]> = out.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
        for line in &passed {
            prop_assert!(serde_json::from_slice::<Value>(line).is_ok(), "an undecodable line passed");
        }
        let mut valid = expected.iter().peekable();
        for line in passed {
            if valid.peek().is_some_and(|e| e.as_slice() == line) {
                valid.next();
            }
        }
        prop_assert!(valid.next().is_none(), "a valid line was lost or changed");
    }
}

/// A reader handing out `chunk` bytes at a time (to cut lines anywhere).
struct Chunked {
    data: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl tokio::io::AsyncRead for Chunked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self
            .chunk
            .min(self.data.len() - self.at)
            .min(buf.remaining());
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(()))
    }
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid MCP content block (any type), or one of a future type.
fn mcp_block() -> impl Strategy<Value = Value> {
    let text = ".{0,20}";
    prop_oneof![
        text.prop_map(|t| json!({"type": "text", "text": t})),
        (text, "[a-z]+/[a-z]+")
            .prop_map(|(d, m)| json!({"type": "image", "data": d, "mimeType": m})),
        (text, "[a-z]+/[a-z]+")
            .prop_map(|(d, m)| json!({"type": "audio", "data": d, "mimeType": m})),
        (text, text).prop_map(|(u, n)| json!({"type": "resource_link", "uri": u, "name": n})),
        (text, text)
            .prop_map(|(u, t)| json!({"type": "resource", "resource": {"uri": u, "text": t}})),
        (text, text)
            .prop_map(|(u, b)| json!({"type": "resource", "resource": {"uri": u, "blob": b}})),
        ("[a-z]{1,8}", any_json())
            .prop_map(|(k, v)| json!({"type": format!("x-{k}"), "payload": v})),
    ]
}

/// The committed fuzz corpus (`fuzz/corpus/<target>/`) replayed through the same entry
/// points the fuzz targets drive, so every case found once stays fixed.
#[test]
fn the_fuzz_corpus_replays_cleanly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut replayed = 0;
    for target in ["config", "frames", "results"] {
        let dir = root.join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            panic!("the corpus {} is missing", dir.display());
        };
        for entry in entries.flatten() {
            let data = std::fs::read(entry.path()).unwrap();
            match target {
                "config" => {
                    let text = String::from_utf8_lossy(&data);
                    let _ = airlock_host::config::Config::from_str(
                        std::path::Path::new("f.toml"),
                        &text,
                        &|_| None,
                    );
                    let _ = airlock_host::config::Config::from_str(
                        std::path::Path::new("f.json"),
                        &text,
                        &|_| None,
                    );
                }
                "frames" => {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    rt.block_on(async {
                        let mut guard =
                            airlock_host::transport::guard::FrameGuard::new(&data[..], 4096);
                        let mut out = Vec::new();
                        guard.read_to_end(&mut out).await.unwrap();
                        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                            serde_json::from_slice::<Value>(line).unwrap();
                        }
                    });
                }
                _ => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&data) {
                        let parsed = airlock_host::plugin::convert::result_from_mcp(&v);
                        let n = v["content"].as_array().map_or(0, Vec::len);
                        assert_eq!(parsed.content.len(), n);
                        let _ = airlock_host::plugin::convert::result_to_mcp(&parsed);
                    }
                }
            }
            replayed += 1;
        }
    }
    assert!(
        replayed >= 9,
        "the corpus holds cases for every target ({replayed})"
    );
}
