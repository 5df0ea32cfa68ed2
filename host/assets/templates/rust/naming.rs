//! `{{name}}`: an Airlock naming plugin. Tools are named `<prefix>_<service>__<tool>`
//! (`prefix` default `"ext"`), sanitized and unique, with the SDK's helpers.
//!
//! Configure it per service: `adapters = { naming = "./{{crate}}.wasm" }` and
//! `adapter_config = { naming = { prefix = "team" } }`

use airlock_guest::names::{MAX_NAME_LEN, sanitize, unique_namespace};
use airlock_guest::{Config, Naming, Plugin, ServiceInfo, Stage, export_plugin};

/// The namespace prefix.
pub struct Prefixed {
    prefix: String,
}

impl Plugin for Prefixed {
    const NAME: &'static str = "{{name}}";

    fn new(_stage: Stage, config: Config) -> Result<Self, String> {
        config.deny_unknown(&["prefix"])?;
        let prefix = config.string("prefix")?.unwrap_or_else(|| "ext".to_string());
        Ok(Prefixed { prefix: sanitize(&prefix) })
    }
}

impl Naming for Prefixed {
    fn namespace(&self, service: &ServiceInfo, taken: &[String]) -> Result<String, String> {
        let base = format!("{}_{}", self.prefix, sanitize(&service.id));
        Ok(unique_namespace(&base, taken, MAX_NAME_LEN))
    }
    // `qualify` keeps the SDK's default: `<namespace>__<tool>`, sanitized and unique.
}

export_plugin!(Prefixed, stages: [naming]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_carry_the_prefix_and_stay_unique() {
        let plugin = Prefixed::new(Stage::Naming, Config::parse(r#"{"prefix": "team"}"#).unwrap()).unwrap();
        let service = ServiceInfo { id: "notes".into(), label: None, description: None };
        assert_eq!(plugin.namespace(&service, &[]).unwrap(), "team_notes");
        let again = plugin.namespace(&service, &["team_notes".to_string()]).unwrap();
        assert_ne!(again, "team_notes");
    }
}
