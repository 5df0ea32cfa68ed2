//! Resource URIs and prompt names as the downstream client sees them, unique across
//! services, and the way back to (service, the server's own URI or name).
//!
//! A URI or name that only one service offers passes through unchanged, so a gateway in
//! front of one server is transparent. When two services offer the same one, each gets
//! a service-qualified form: `airlock://SERVICE/<percent-encoded URI>` for resources,
//! `SERVICE__NAME` for prompts. A URI no listing has shown (a resource template's
//! instance, say) is routed by the templates, or to the only service with resources.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use super::results::rpc_error;
use crate::Airlock;

const AIRLOCK_SCHEME: &str = "airlock://";

/// Percent-encodes everything but unreserved characters (also the console's path
/// segments).
pub(super) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether `uri` is an instance of the RFC 6570 level-1 `template` (`{var}` matches one
/// or more characters other than `/`; `{+var}` and friends match anything).
pub fn matches_template(template: &str, uri: &str) -> bool {
    fn walk(t: &str, u: &str) -> bool {
        match t.find('{') {
            None => t == u,
            Some(open) => {
                let Some(rest_u) = u.strip_prefix(&t[..open]) else {
                    return false;
                };
                let Some(close) = t[open..].find('}') else {
                    return false;
                };
                let var = &t[open + 1..open + close];
                let after = &t[open + close + 1..];
                let any = var.starts_with(['+', '#', '/', '.', ';', '?', '&']);
                (1..=rest_u.len())
                    .filter(|&n| rest_u.is_char_boundary(n))
                    .take_while(|&n| any || !rest_u[..n].contains('/'))
                    .any(|n| walk(after, &rest_u[n..]))
            }
        }
    }
    walk(template, uri)
}

/// Resource URIs across services.
#[derive(Default)]
pub struct ResourceRoutes {
    /// Exposed URI -> (service, server URI).
    by_exposed: HashMap<String, (String, String)>,
    /// (service, server URI) -> exposed URI.
    by_server: HashMap<(String, String), String>,
    /// (service, URI template).
    templates: Vec<(String, String)>,
    /// Services that listed resources or templates.
    services: std::collections::BTreeSet<String>,
}

impl ResourceRoutes {
    /// Learns a listing (`Airlock::list_resources`: each item has `service` and `uri`)
    /// and returns it as the client sees it.
    pub fn learn_resources(&mut self, listed: Vec<Value>) -> Vec<Value> {
        let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for item in &listed {
            if let (Some(service), Some(uri)) = (item["service"].as_str(), item["uri"].as_str()) {
                owners
                    .entry(uri.to_string())
                    .or_default()
                    .push(service.to_string());
            }
        }
        listed
            .into_iter()
            .filter_map(|mut item| {
                let service = item["service"].as_str()?.to_string();
                let uri = item["uri"].as_str()?.to_string();
                let shared = owners.get(&uri).is_some_and(|o| o.len() > 1);
                let exposed = if shared {
                    format!("{AIRLOCK_SCHEME}{service}/{}", encode(&uri))
                } else {
                    uri.clone()
                };
                self.services.insert(service.clone());
                self.by_exposed
                    .insert(exposed.clone(), (service.clone(), uri.clone()));
                self.by_server.insert((service, uri), exposed.clone());
                item["uri"] = json!(exposed);
                strip_service(&mut item);
                Some(item)
            })
            .collect()
    }

    /// Learns a template listing and returns it as the client sees it (templates pass
    /// through; an instance is routed by matching them).
    pub fn learn_templates(&mut self, listed: Vec<Value>) -> Vec<Value> {
        self.templates.clear();
        listed
            .into_iter()
            .filter_map(|mut item| {
                let service = item["service"].as_str()?.to_string();
                let template = item["uriTemplate"].as_str()?.to_string();
                self.services.insert(service.clone());
                self.templates.push((service, template));
                strip_service(&mut item);
                Some(item)
            })
            .collect()
    }

    /// The (service, server URI) behind `exposed`, if it can be told.
    pub fn route(&self, exposed: &str) -> Option<(String, String)> {
        if let Some(found) = self.by_exposed.get(exposed) {
            return Some(found.clone());
        }
        if let Some(rest) = exposed.strip_prefix(AIRLOCK_SCHEME)
            && let Some((service, encoded)) = rest.split_once('/')
        {
            return Some((service.to_string(), decode(encoded)?));
        }
        let by_template: Vec<&String> = self
            .templates
            .iter()
            .filter(|(_, t)| matches_template(t, exposed))
            .map(|(s, _)| s)
            .collect();
        if let [service] = by_template.as_slice() {
            return Some(((*service).clone(), exposed.to_string()));
        }
        if self.services.len() == 1 {
            let service = self.services.iter().next().expect("one service");
            return Some((service.clone(), exposed.to_string()));
        }
        None
    }

    /// How the client knows `service`'s `uri`.
    pub fn exposed(&self, service: &str, uri: &str) -> String {
        self.by_server
            .get(&(service.to_string(), uri.to_string()))
            .cloned()
            .unwrap_or_else(|| uri.to_string())
    }
}

/// Prompt names across services.
#[derive(Default)]
pub struct PromptRoutes {
    by_exposed: HashMap<String, (String, String)>,
    services: std::collections::BTreeSet<String>,
}

impl PromptRoutes {
    /// Learns a listing (`Airlock::list_prompts`: each item has `service` and `name`)
    /// and returns it as the client sees it.
    pub fn learn(&mut self, listed: Vec<Value>) -> Vec<Value> {
        let mut owners: HashMap<String, usize> = HashMap::new();
        for item in &listed {
            if let Some(name) = item["name"].as_str() {
                *owners.entry(name.to_string()).or_default() += 1;
            }
        }
        self.by_exposed.clear();
        listed
            .into_iter()
            .filter_map(|mut item| {
                let service = item["service"].as_str()?.to_string();
                let name = item["name"].as_str()?.to_string();
                let exposed = if owners[&name] > 1 {
                    format!("{service}__{name}")
                } else {
                    name.clone()
                };
                self.services.insert(service.clone());
                self.by_exposed.insert(exposed.clone(), (service, name));
                item["name"] = json!(exposed);
                strip_service(&mut item);
                Some(item)
            })
            .collect()
    }

    /// The (service, server prompt name) behind `exposed`, if it can be told.
    pub fn route(&self, exposed: &str) -> Option<(String, String)> {
        if let Some(found) = self.by_exposed.get(exposed) {
            return Some(found.clone());
        }
        if let Some((service, name)) = exposed.split_once("__")
            && self.services.contains(service)
        {
            return Some((service.to_string(), name.to_string()));
        }
        None
    }
}

/// One downstream session's routes: learned from its listings, consulted for every read,
/// get, subscription and completion.
#[derive(Default)]
pub struct Routes {
    resources: Mutex<ResourceRoutes>,
    prompts: Mutex<PromptRoutes>,
}

impl Routes {
    /// The agent's resources across services, as the client sees them.
    pub async fn list_resources(
        &self,
        airlock: &Airlock,
        agent: &str,
    ) -> Result<Vec<Value>, McpError> {
        let listed = airlock
            .resources()
            .list_resources(agent, None)
            .await
            .map_err(rpc_error)?;
        Ok(self
            .resources
            .lock()
            .expect("routes poisoned")
            .learn_resources(listed))
    }

    /// The agent's resource templates across services, as the client sees them.
    pub async fn list_templates(
        &self,
        airlock: &Airlock,
        agent: &str,
    ) -> Result<Vec<Value>, McpError> {
        let listed = airlock
            .resources()
            .list_resource_templates(agent, None)
            .await
            .map_err(rpc_error)?;
        Ok(self
            .resources
            .lock()
            .expect("routes poisoned")
            .learn_templates(listed))
    }

    /// The agent's prompts across services, as the client sees them.
    pub async fn list_prompts(
        &self,
        airlock: &Airlock,
        agent: &str,
    ) -> Result<Vec<Value>, McpError> {
        let listed = airlock
            .resources()
            .list_prompts(agent, None)
            .await
            .map_err(rpc_error)?;
        Ok(self.prompts.lock().expect("routes poisoned").learn(listed))
    }

    /// The (service, server URI) a downstream resource URI names: from the last listing,
    /// the explicit `airlock://SERVICE/…` form, a matching template, or the only service
    /// offering resources; the listings are read again once before giving up.
    pub async fn resource(
        &self,
        airlock: &Airlock,
        agent: &str,
        exposed: &str,
    ) -> Result<(String, String), McpError> {
        if let Some(found) = self
            .resources
            .lock()
            .expect("routes poisoned")
            .route(exposed)
        {
            return Ok(found);
        }
        self.list_resources(airlock, agent).await?;
        self.list_templates(airlock, agent).await?;
        self.resources
            .lock()
            .expect("routes poisoned")
            .route(exposed)
            .ok_or_else(|| {
                McpError::resource_not_found(
                    format!("no service offers the resource \"{exposed}\""),
                    None,
                )
            })
    }

    /// The (service, server prompt name) a downstream prompt name names.
    pub async fn prompt(
        &self,
        airlock: &Airlock,
        agent: &str,
        exposed: &str,
    ) -> Result<(String, String), McpError> {
        if let Some(found) = self.prompts.lock().expect("routes poisoned").route(exposed) {
            return Ok(found);
        }
        self.list_prompts(airlock, agent).await?;
        self.prompts
            .lock()
            .expect("routes poisoned")
            .route(exposed)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("no service offers the prompt \"{exposed}\""),
                    None,
                )
            })
    }

    /// How the client knows `service`'s `uri`.
    pub fn exposed(&self, service: &str, uri: &str) -> String {
        self.resources
            .lock()
            .expect("routes poisoned")
            .exposed(service, uri)
    }
}

/// Removes the `service` field Airlock's aggregated listings add (not part of MCP).
fn strip_service(item: &mut Value) {
    if let Some(map) = item.as_object_mut() {
        map.remove("service");
    }
}

#[cfg(test)]
mod tests;
