//! `[telemetry]`: where Airlock's spans go.
//!
//! ```toml
//! [telemetry]
//! otlp_endpoint = "http://127.0.0.1:4318"   # OTLP/HTTP; /v1/traces is appended
//! service_name = "airlock-gateway"           # default "airlock"
//! sample_ratio = 0.1                         # share of new traces kept; default 1
//! headers = { authorization = "Bearer ${COLLECTOR_TOKEN}" }
//! ```
//!
//! What the tables leave out, the standard `OTEL_*` variables fill in
//! ([`Settings::from_env`]). Later files win, key by key.

use super::SettingError;
use serde_json::Value;

use super::parse::read_documents;
use super::storage::{string, table};
use super::{ConfigError, ConfigSources};
use crate::telemetry::{Settings, traces_url};

/// The telemetry settings of `sources` (later files win, key by key), with the
/// `OTEL_*` variables of `env` for what no file sets. Only a `[telemetry]` table is an
/// error here: a file that cannot be read or parsed at all is left to the command that
/// loads the whole config, which names what is wrong with it.
pub fn load_telemetry(
    sources: &ConfigSources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let mut from_files = Partial::default();
    for (file, document) in read_documents(sources).unwrap_or_default() {
        if let Some(value) = &document.telemetry {
            parse(value, env, &mut from_files).map_err(|e| ConfigError::File {
                file: file.clone(),
                message: e.message,
            })?;
        }
    }
    let mut settings = Settings::from_env(env);
    if let Some(endpoint) = from_files.endpoint {
        settings.traces_endpoint = Some(traces_url(&endpoint));
    }
    if let Some(name) = from_files.service_name {
        settings.service_name = name;
    }
    if let Some(ratio) = from_files.sample_ratio {
        settings.sample_ratio = ratio;
    }
    settings.headers.extend(from_files.headers);
    Ok(settings)
}

#[derive(Default)]
struct Partial {
    endpoint: Option<String>,
    service_name: Option<String>,
    sample_ratio: Option<f64>,
    headers: Vec<(String, String)>,
}

fn parse(
    value: &Value,
    env: &dyn Fn(&str) -> Option<String>,
    into: &mut Partial,
) -> Result<(), SettingError> {
    for (key, v) in table("telemetry", value)? {
        match key.as_str() {
            "otlp_endpoint" => {
                let url = string("telemetry", key, v, env)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "\"telemetry.otlp_endpoint\" must be an http:// or https:// URL (OTLP/HTTP), got {url:?}"
                    ).into());
                }
                into.endpoint = Some(url);
            }
            "service_name" => {
                let name = string("telemetry", key, v, env)?;
                if name.trim().is_empty() {
                    return Err("\"telemetry.service_name\" must not be empty"
                        .to_string()
                        .into());
                }
                into.service_name = Some(name);
            }
            "sample_ratio" => match v.as_f64() {
                Some(ratio) if (0.0..=1.0).contains(&ratio) => into.sample_ratio = Some(ratio),
                _ => {
                    return Err(format!(
                        "\"telemetry.sample_ratio\" must be a number from 0 to 1, got {v}"
                    )
                    .into());
                }
            },
            "headers" => {
                for (name, header) in table("telemetry.headers", v)? {
                    let text = string("telemetry.headers", name, header, env)?;
                    into.headers.push((name.clone(), text));
                }
            }
            other => {
                return Err(format!(
                    "unknown key \"telemetry.{other}\" (expected otlp_endpoint, service_name, sample_ratio, headers)"
                ).into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(dir: &std::path::Path, text: &str) -> ConfigSources {
        let file = dir.join("airlock.toml");
        std::fs::write(&file, text).unwrap();
        ConfigSources {
            explicit: vec![file],
            ..Default::default()
        }
    }

    #[test]
    fn the_table_wins_and_the_variables_fill_in() {
        let dir = tempfile::tempdir().unwrap();
        let env = |name: &str| match name {
            "OTEL_SERVICE_NAME" => Some("from-env".to_string()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://env:4318".to_string()),
            "TOKEN" => Some("t0k".to_string()),
            _ => None,
        };
        let s = load_telemetry(
            &sources(
                dir.path(),
                "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\nheaders = { authorization = \"Bearer ${TOKEN}\" }\n",
            ),
            &env,
        )
        .unwrap();
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(s.service_name, "from-env");
        assert_eq!(s.headers["authorization"], "Bearer t0k");
    }

    #[test]
    fn a_bad_table_names_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for (text, says) in [
            (
                "[telemetry]\notlp_endpoint = \"grpc://x:4317\"\n",
                "telemetry.otlp_endpoint",
            ),
            ("[telemetry]\nsample_ratio = 2\n", "telemetry.sample_ratio"),
            (
                "[telemetry]\nexporter = \"zipkin\"\n",
                "unknown key \"telemetry.exporter\"",
            ),
        ] {
            let err = load_telemetry(&sources(dir.path(), text), &|_| None).unwrap_err();
            let message = err.to_string();
            assert!(message.contains(says), "{message}");
            assert!(message.contains("airlock.toml"), "{message}");
        }
    }
}
