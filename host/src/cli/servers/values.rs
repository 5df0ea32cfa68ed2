//! Values given on the command line: env vars and headers (`--env K=V`,
//! `--header "Name: value"`), parsed into maps with each name given once, and the auth
//! flags, whose secrets are read from the environment or a file.

use std::collections::BTreeMap;

use anyhow::{Context, anyhow, bail};

use super::AuthArgs;
use crate::config::{AuthKind, process_env};
use crate::servers::{AuthChanges, GivenValue, parse_env_arg, parse_header_arg};

fn given_map(
    pairs: Vec<(String, GivenValue)>,
    what: &str,
) -> anyhow::Result<BTreeMap<String, GivenValue>> {
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        if map.insert(k.clone(), v).is_some() {
            bail!("{what} \"{k}\" is given twice");
        }
    }
    Ok(map)
}

pub(super) fn env_pairs(
    args: &[String],
    secrets: &[String],
) -> anyhow::Result<BTreeMap<String, GivenValue>> {
    let pairs = args
        .iter()
        .map(|a| parse_env_arg(a, secrets, &process_env))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--env")
}

pub(super) fn header_pairs(
    args: &[String],
    secrets: &[String],
) -> anyhow::Result<BTreeMap<String, GivenValue>> {
    let pairs = args
        .iter()
        .map(|a| parse_header_arg(a, secrets))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--header")
}

/// The auth changes the flags ask for. The client secret comes from the named
/// environment variable and the key from the file; messages name them, never the value.
pub(super) fn auth_changes(args: &AuthArgs) -> anyhow::Result<AuthChanges> {
    let kind = args
        .auth
        .as_deref()
        .map(|k| {
            AuthKind::parse(k).with_context(|| {
                format!("--auth must be \"oauth\", \"client_credentials\" or \"none\", got \"{k}\"")
            })
        })
        .transpose()?;
    let client_secret = args
        .client_secret_env
        .as_deref()
        .map(|var| match process_env(var) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(anyhow!(
                "--client-secret-env {var}: {var} is not set (or empty) in this environment"
            )),
        })
        .transpose()?;
    let private_key = args
        .private_key_file
        .as_ref()
        .map(|path| {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("--private-key-file {}", path.display()))?;
            if !pem.contains("-----BEGIN") || !pem.contains("PRIVATE KEY-----") {
                bail!(
                    "--private-key-file {}: not a PEM private key (expected \"-----BEGIN … PRIVATE KEY-----\")",
                    path.display()
                );
            }
            Ok(pem)
        })
        .transpose()?;
    let scopes = match args.scopes.as_slice() {
        [] => None,
        [only] if only.is_empty() => Some(Vec::new()),
        many => Some(many.iter().filter(|s| !s.is_empty()).cloned().collect()),
    };
    Ok(AuthChanges {
        kind,
        client_id: args.client_id.clone(),
        client_secret,
        private_key,
        client_metadata_url: args.client_metadata_url.clone(),
        scopes,
    })
}
