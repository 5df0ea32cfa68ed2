//! Env var and header values given on the command line (`--env K=V`,
//! `--header "Name: value"`), parsed into maps with each name given once.

use std::collections::BTreeMap;

use crate::config::process_env;
use crate::servers::{GivenValue, parse_env_arg, parse_header_arg};

fn given_map(
    pairs: Vec<(String, GivenValue)>,
    what: &str,
) -> Result<BTreeMap<String, GivenValue>, String> {
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        if map.insert(k.clone(), v).is_some() {
            return Err(format!("{what} \"{k}\" is given twice"));
        }
    }
    Ok(map)
}

pub(super) fn env_pairs(
    args: &[String],
    secrets: &[String],
) -> Result<BTreeMap<String, GivenValue>, String> {
    let pairs = args
        .iter()
        .map(|a| parse_env_arg(a, secrets, &process_env).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--env")
}

pub(super) fn header_pairs(
    args: &[String],
    secrets: &[String],
) -> Result<BTreeMap<String, GivenValue>, String> {
    let pairs = args
        .iter()
        .map(|a| parse_header_arg(a, secrets).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    given_map(pairs, "--header")
}
