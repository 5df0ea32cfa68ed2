//! `sha256:` digests of bytes: retained outputs, launch digests, preview keys. A leaf:
//! it imports nothing of Airlock's.

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
