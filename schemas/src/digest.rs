//! Content digests: `blake3:<64 lowercase hex>`, the form every dereference returns and every citing engram records.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{ErrorCode, Violation};

/// A blake3 digest of some content.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(blake3::Hash);

/// The textual prefix of every digest.
pub const DIGEST_PREFIX: &str = "blake3:";

impl Digest {
    /// The digest of `content`.
    pub fn of(content: &[u8]) -> Digest {
        Digest(blake3::hash(content))
    }

    /// Wraps an already computed blake3 hash (for example a keyed MAC).
    pub fn from_hash(hash: blake3::Hash) -> Digest {
        Digest(hash)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    /// Parses `blake3:<64 lowercase hex>`; anything else is [`ErrorCode::DigestInvalid`].
    pub fn parse(text: &str) -> Result<Digest, Violation> {
        let invalid = || {
            Violation::new(ErrorCode::DigestInvalid, "", format!("digest {text:?} is not blake3:<64 lowercase hex>"))
        };
        let hex = text.strip_prefix(DIGEST_PREFIX).ok_or_else(invalid)?;
        let well_formed = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !well_formed {
            return Err(invalid());
        }
        blake3::Hash::from_hex(hex).map(Digest).map_err(|_| invalid())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{DIGEST_PREFIX}{}", self.0.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = Violation;

    fn from_str(text: &str) -> Result<Digest, Violation> {
        Digest::parse(text)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Digest, D::Error> {
        let text = String::deserialize(deserializer)?;
        Digest::parse(&text).map_err(|v| serde::de::Error::custom(v.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_round_trips_and_rejects_bad_forms() {
        let digest = Digest::of(b"hello");
        let text = digest.to_string();
        assert_eq!(text.len(), DIGEST_PREFIX.len() + 64);
        assert_eq!(Digest::parse(&text).expect("own output parses"), digest);
        for bad in [
            "",
            "blake3:",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "blake3:ABCDEF0000000000000000000000000000000000000000000000000000000000",
            "blake3:000000000000000000000000000000000000000000000000000000000000000",
            "blake3:00000000000000000000000000000000000000000000000000000000000000000",
            "blake3:zz00000000000000000000000000000000000000000000000000000000000000",
        ] {
            let err = Digest::parse(bad).expect_err(bad);
            assert_eq!(err.code, ErrorCode::DigestInvalid, "{bad}");
        }
    }
}
