//! Retained results in an S3 bucket (AWS or any S3-compatible server), through the
//! `object_store` crate, so several hosts page each other's outputs. Objects are
//! `<prefix>/<service folder>/<id>.txt` and `.json`. A single PUT is atomic in S3: an
//! object is whole or absent, and the record is put only after its text, so a record
//! always names a text that was kept. Pages are ranged GETs of the blocks they touch.
//!
//! The requests run on the storage runtime ([`crate::storage`]).

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use super::backend::{Backend, Item};
use crate::config::S3Location;
use crate::storage;

/// How many objects of one batch are put at once.
const PARALLEL_PUTS: usize = 16;

/// How long a readiness probe waits for the bucket.
const PROBE_WITHIN: Duration = Duration::from_secs(2);

/// How long the start-up check waits for the bucket.
const VERIFY_WITHIN: Duration = Duration::from_secs(5);

/// The key of the probe object: written at start-up, looked at by readiness checks.
const PROBE_KEY: &str = "airlock-readiness-probe";

/// What the start-up check found wrong.
#[derive(Debug)]
pub(crate) enum Unverified {
    /// The bucket answered, and refused Airlock's credentials: fatal, with the reason.
    Refused(String),
    /// The bucket did not answer (down, stalled, unreachable): worth a warning only.
    Unreachable(String),
}

/// An S3 bucket and key prefix.
pub(crate) struct S3Backend {
    store: Arc<AmazonS3>,
    prefix: String,
    /// `s3://bucket/prefix (endpoint)`, for messages.
    location: String,
}

impl S3Backend {
    /// Connects to the bucket `location` names; `secret_access_key` is the resolved
    /// value (the location may name a secret-store entry instead). Nothing is sent
    /// until [`S3Backend::verify`] or the first request.
    pub fn new(
        location: &S3Location,
        secret_access_key: Option<String>,
    ) -> std::io::Result<S3Backend> {
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&location.bucket)
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(10))
                    .with_timeout(Duration::from_secs(120)),
            )
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(30),
                ..Default::default()
            });
        if let Some(endpoint) = &location.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"))
                .with_virtual_hosted_style_request(false);
        }
        builder = builder.with_region(location.region.as_deref().unwrap_or("us-east-1"));
        if let Some(id) = &location.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(key) = secret_access_key {
            builder = builder.with_secret_access_key(key);
        }
        let store = builder.build().map_err(|e| {
            std::io::Error::other(format!("[results] store s3://{}: {e}", location.bucket))
        })?;
        let prefix = location.prefix.clone();
        let described = match &location.endpoint {
            Some(endpoint) => format!("s3://{}/{prefix} at {endpoint}", location.bucket),
            None => format!("s3://{}/{prefix}", location.bucket),
        };
        Ok(S3Backend {
            store: Arc::new(store),
            prefix,
            location: described,
        })
    }

    /// The probe object's path under the prefix.
    fn probe_path(&self) -> Path {
        if self.prefix.is_empty() {
            Path::from(PROBE_KEY)
        } else {
            Path::from(format!("{}/{PROBE_KEY}", self.prefix))
        }
    }

    /// Checks at start-up that the bucket takes Airlock's credentials, the way the
    /// store will use them: the probe object is put, then read back. A put needs only
    /// what retention needs (no listing, no delete), so a least-privilege key passes.
    /// A wrong key, an unknown key or a missing permission is [`Unverified::Refused`]
    /// with the store's own words; no answer is [`Unverified::Unreachable`].
    pub fn verify(&self) -> Result<(), Unverified> {
        let (store, path) = (self.store.clone(), self.probe_path());
        let location = self.location.clone();
        storage::wait(async move {
            let check = async {
                store
                    .put(&path, PutPayload::from_static(b"airlock"))
                    .await?;
                store.head(&path).await.map(|_| ())
            };
            match tokio::time::timeout(VERIFY_WITHIN, check).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(
                    e @ (object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }),
                )) => Err(Unverified::Refused(format!(
                    "[results] store {location} refused Airlock's credentials (check access_key_id and secret_access_key, and that the key may put and get objects under the prefix): {e}"
                ))),
                Ok(Err(e)) => Err(Unverified::Unreachable(format!(
                    "[results] store {location} could not be checked at start-up: {e}"
                ))),
                Err(_) => Err(Unverified::Unreachable(format!(
                    "[results] store {location} did not answer within {VERIFY_WITHIN:?} at start-up"
                ))),
            }
        })
    }

    fn path(&self, dir_name: &str, id: &str, extension: &str) -> Path {
        let name = format!("{dir_name}/{id}.{extension}");
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }
}

/// An `object_store` error as an I/O error: a missing object is `NotFound`.
fn io(e: object_store::Error) -> std::io::Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, e.to_string())
}

impl Backend for S3Backend {
    fn put_batch(&self, items: &[Item<'_>]) -> Vec<std::io::Result<()>> {
        let jobs: Vec<(Path, PutPayload, Path, PutPayload)> = items
            .iter()
            .map(|item| {
                (
                    self.path(item.dir_name, item.id, "txt"),
                    PutPayload::from(item.text.to_vec()),
                    self.path(item.dir_name, item.id, "json"),
                    PutPayload::from(item.record.clone()),
                )
            })
            .collect();
        let store = self.store.clone();
        storage::wait(async move {
            futures::stream::iter(jobs)
                .map(|(text_path, text, record_path, record)| {
                    let store = store.clone();
                    async move {
                        store.put(&text_path, text).await.map_err(io)?;
                        store.put(&record_path, record).await.map_err(io)?;
                        Ok(())
                    }
                })
                .buffered(PARALLEL_PUTS)
                .collect::<Vec<_>>()
                .await
        })
    }

    fn record(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
        self.text_like(self.path(dir_name, id, "json"))
    }

    fn text_range(&self, dir_name: &str, id: &str, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let (store, path) = (self.store.clone(), self.path(dir_name, id, "txt"));
        storage::wait(async move {
            let bytes = store.get_range(&path, range).await.map_err(io)?;
            Ok(bytes.to_vec())
        })
    }

    fn text(&self, dir_name: &str, id: &str) -> std::io::Result<Vec<u8>> {
        self.text_like(self.path(dir_name, id, "txt"))
    }

    fn list(&self) -> std::io::Result<Vec<(String, String)>> {
        let store = self.store.clone();
        let prefix = (!self.prefix.is_empty()).then(|| Path::from(self.prefix.clone()));
        let depth = prefix.as_ref().map_or(0, |p| p.parts().count());
        storage::wait(async move {
            let mut listing = store.list(prefix.as_ref());
            let mut found = Vec::new();
            while let Some(object) = listing.next().await {
                let object = object.map_err(io)?;
                let parts: Vec<String> = object
                    .location
                    .parts()
                    .skip(depth)
                    .map(|p| p.as_ref().to_string())
                    .collect();
                if let [dir_name, file] = parts.as_slice()
                    && let Some(id) = file.strip_suffix(".json")
                {
                    found.push((dir_name.clone(), id.to_string()));
                }
            }
            Ok(found)
        })
    }

    fn describe(&self) -> String {
        self.location.clone()
    }

    fn shared(&self) -> bool {
        true
    }

    fn reachable(&self) -> std::io::Result<()> {
        // A HEAD of the probe object written at start-up; "not found" (it was removed
        // since) is an answer from the bucket too.
        let path = self.probe_path();
        let store = self.store.clone();
        storage::wait(async move {
            let probe = tokio::time::timeout(PROBE_WITHIN, store.head(&path));
            match probe.await {
                Ok(Ok(_)) | Ok(Err(object_store::Error::NotFound { .. })) => Ok(()),
                Ok(Err(e)) => Err(io(e)),
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {PROBE_WITHIN:?}"),
                )),
            }
        })
    }
}

impl S3Backend {
    fn text_like(&self, path: Path) -> std::io::Result<Vec<u8>> {
        let store = self.store.clone();
        storage::wait(async move {
            let got = store.get(&path).await.map_err(io)?;
            Ok(got.bytes().await.map_err(io)?.to_vec())
        })
    }
}
