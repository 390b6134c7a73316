//! Grants: a parent's permission for one descendant to dereference beyond its budget, or to inline code.
//!
//! A grant is unforgeable: its `mac` is a keyed blake3 over every other field, with the run's secret as the key.
//! Changing any field (grantee, patterns, counts, expiry, uses) without the secret makes [`Grant::verify`] fail.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{ErrorCode, Violation};
use crate::schema::DocKind;
use crate::valid::Contract;

/// Domain separation for grant MACs, so a MAC over another kind of document can never pass as a grant's.
const GRANT_MAC_CONTEXT: &[u8] = b"lessrt grant v0.1\n";

/// What a grant allows; everything the MAC covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantTerms {
    /// Unique id, quoted by the grantee in deref requests and messages.
    pub grant_id: String,
    /// The parent that issued it.
    pub issuer: String,
    /// The only agent that may present it.
    pub grantee: String,
    /// Pointer patterns in text form; `*` matches within a path segment, `**` across segments.
    pub patterns: Vec<String>,
    /// Most dereferences it covers in all.
    pub max_derefs: u32,
    /// Most tokens of dereferenced content it covers in all.
    pub max_tokens: u32,
    /// Tokens of code the grantee may inline in messages (0 when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inline_code_tokens: u32,
    /// RFC 3339 expiry.
    pub expires_at: String,
    /// How many requests may present it.
    pub uses: u32,
}

/// A signed grant: `schemas/grant.v0.1.json`.
///
/// Unknown fields are refused by the schema (deserialize through [`crate::Valid`]); serde cannot deny them
/// through the flattened terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The terms the MAC covers.
    #[serde(flatten)]
    pub terms: GrantTerms,
    /// Keyed blake3 of the terms with the run's secret.
    pub mac: Digest,
}

impl Contract for Grant {
    const KIND: DocKind = DocKind::Grant;
}

impl Grant {
    /// Signs `terms` with the run's `secret`.
    pub fn issue(terms: GrantTerms, secret: &[u8; 32]) -> Grant {
        let mac = mac_of(&terms, secret);
        Grant { terms, mac }
    }

    /// Checks the MAC: [`ErrorCode::GrantInvalid`] when any field was changed or another secret signed it.
    pub fn verify(&self, secret: &[u8; 32]) -> Result<(), Violation> {
        // Digest equality is blake3::Hash equality, which is constant-time: the comparison leaks nothing about
        // the expected MAC.
        if mac_of(&self.terms, secret) == self.mac {
            Ok(())
        } else {
            Err(Violation::new(
                ErrorCode::GrantInvalid,
                "/mac",
                format!("grant {:?} was not issued by this run or was altered", self.terms.grant_id),
            ))
        }
    }
}

fn mac_of(terms: &GrantTerms, secret: &[u8; 32]) -> Digest {
    let mut hasher = blake3::Hasher::new_keyed(secret);
    hasher.update(GRANT_MAC_CONTEXT);
    // Field order is the struct's declaration order, so the bytes are canonical; serializing strings and
    // integers cannot fail.
    hasher.update(&serde_json::to_vec(terms).unwrap_or_default());
    Digest::from_hash(hasher.finalize())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::valid::Valid;

    fn terms() -> GrantTerms {
        GrantTerms {
            grant_id: "g-1".into(),
            issuer: "director".into(),
            grantee: "programmer".into(),
            patterns: vec!["repo:src/**".into()],
            max_derefs: 2,
            max_tokens: 600,
            inline_code_tokens: 0,
            expires_at: "2026-01-08T12:00:00Z".into(),
            uses: 1,
        }
    }

    #[test]
    fn issued_grants_verify_and_altered_ones_do_not() {
        let secret = [7u8; 32];
        let grant = Grant::issue(terms(), &secret);
        assert!(grant.verify(&secret).is_ok());
        assert!(Valid::new(grant.clone()).is_ok(), "an issued grant satisfies its schema");

        let other_secret = [8u8; 32];
        assert_eq!(grant.verify(&other_secret).expect_err("other run").code, ErrorCode::GrantInvalid);

        let mut forged = grant.clone();
        forged.terms.grantee = "reviewer".into();
        assert_eq!(forged.verify(&secret).expect_err("grantee changed").code, ErrorCode::GrantInvalid);

        let mut forged = grant;
        forged.terms.uses = 100;
        assert_eq!(forged.verify(&secret).expect_err("uses changed").code, ErrorCode::GrantInvalid);
    }

    /// The shipped example is a real grant, signed with the documented example secret (32 zero bytes).
    #[test]
    fn the_example_grant_is_signed_with_the_example_secret() {
        let text = include_str!("../../schemas/examples/grant.json");
        let grant = Valid::<Grant>::from_json(text).expect("example is valid");
        let resigned = Grant::issue(grant.terms.clone(), &[0u8; 32]);
        assert_eq!(grant.mac, resigned.mac, "expected mac {}", resigned.mac);
        assert!(grant.verify(&[0u8; 32]).is_ok());
    }
}
