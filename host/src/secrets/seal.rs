//! Sealing entries for a store other hosts read: AES-256-GCM under a key every replica
//! is given (`[registry] token_key`), a fresh random nonce per entry, and the entry's
//! name as associated data, so a sealed value moved to another entry does not open.
//! The store sees `v1.` and base64; a wrong key or a changed value fails to open, with
//! an error that says so and carries neither the key nor the value.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The prefix of a sealed value (the format's version).
const VERSION: &str = "v1.";

/// Why a sealed value does not open (or a value cannot be sealed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The key is not 32 bytes.
    #[error("the sealing key must be 32 bytes")]
    KeyLength,
    /// No random nonce could be drawn.
    #[error("the system's random source failed")]
    Random,
    /// The value is not one this format wrote.
    #[error("the stored value is not a sealed entry (expected \"v1.\" and base64)")]
    Format,
    /// It does not open: another key sealed it, it was sealed for another entry, or it
    /// was changed.
    #[error(
        "the stored value does not open with this host's key (another token_key sealed it, or it was changed)"
    )]
    Open,
}

/// Seals and opens entries under one key.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(AES-256-GCM)")
    }
}

impl Sealer {
    /// A sealer under the 32-byte `key`.
    pub fn new(key: &[u8]) -> Result<Sealer, SealError> {
        let unbound = UnboundKey::new(&AES_256_GCM, key).map_err(|_| SealError::KeyLength)?;
        Ok(Sealer {
            key: LessSafeKey::new(unbound),
            random: SystemRandom::new(),
        })
    }

    /// `value` sealed for the entry `name`.
    pub fn seal(&self, name: &str, value: &str) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut sealed = value.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SealError::Open)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(format!("{VERSION}{}", STANDARD_NO_PAD.encode(out)))
    }

    /// The value sealed for the entry `name`.
    pub fn open(&self, name: &str, sealed: &str) -> Result<String, SealError> {
        let bytes = sealed
            .strip_prefix(VERSION)
            .and_then(|b64| STANDARD_NO_PAD.decode(b64).ok())
            .filter(|bytes| bytes.len() >= NONCE_LEN + AES_256_GCM.tag_len())
            .ok_or(SealError::Format)?;
        let (nonce, body) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Format)?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut body)
            .map_err(|_| SealError::Open)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_for_its_entry() {
        let sealer = Sealer::new(&[7u8; 32]).unwrap();
        let sealed = sealer.seal("oauth:jira.agent-1", "the token").unwrap();
        assert!(sealed.starts_with("v1.") && !sealed.contains("the token"));
        assert_eq!(
            sealer.open("oauth:jira.agent-1", &sealed).unwrap(),
            "the token"
        );
        // Two seals of one value differ (a fresh nonce each).
        assert_ne!(
            sealer.seal("oauth:jira.agent-1", "the token").unwrap(),
            sealed
        );
        assert_eq!(
            sealer.open("oauth:jira.agent-2", &sealed),
            Err(SealError::Open)
        );
        let other = Sealer::new(&[8u8; 32]).unwrap();
        assert_eq!(
            other.open("oauth:jira.agent-1", &sealed),
            Err(SealError::Open)
        );
        assert_eq!(sealer.open("x", "plain text"), Err(SealError::Format));
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(sealer.open("oauth:jira.agent-1", &tampered).is_err());
        assert_eq!(Sealer::new(&[1u8; 16]).err(), Some(SealError::KeyLength));
    }
}
