//! The desk's grants in `desk.sqlite`, behind the enforcement core's [`GrantStore`]: a row per grant, with the signed
//! document and what is left of it. A row is verified again (MAC, grantee, issuer an ancestor) each time it is read,
//! and a use is spent in one `IMMEDIATE` transaction, so two processes on one store never spend the same use.

use rusqlite::{Connection, OptionalExtension, params};

use crate::enforce::{GrantLeft, GrantStore, HeldGrant, Spend, no_uses_left};
use less_contract::{ErrorCode, Grant, Violation};

use super::DeskConfig;

/// The grants of one desk's store, as the enforcement core reads and spends them.
pub(super) struct DeskGrants<'a> {
    /// The store's connection, locked by the caller for as long as this lives.
    pub(super) db: &'a mut Connection,
    /// The key grants are signed with.
    pub(super) key: &'a [u8; 32],
    /// Who is whose ancestor.
    pub(super) config: &'a DeskConfig,
}

/// Stores an issued `grant`, all of it left.
pub(super) fn keep(db: &Connection, grant: &Grant) -> Result<(), Violation> {
    let doc = serde_json::to_string(grant)
        .map_err(|err| Violation::new(ErrorCode::StoreFailed, "", format!("desk grant: {err}")))?;
    let terms = &grant.terms;
    db.execute(
        "INSERT INTO grants (grant_id, grantee, doc, uses_left, derefs_left, tokens_left) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![terms.grant_id, terms.grantee, doc, terms.uses, terms.max_derefs, terms.max_tokens],
    )
    .map_err(failed)?;
    Ok(())
}

fn failed(err: rusqlite::Error) -> Violation {
    Violation::new(ErrorCode::StoreFailed, "", format!("desk grants: {err}"))
}

/// One row of `grants`: the grant's document and what is left of it.
type Row = (String, u32, u32, u32);

/// The row `grant_id` of `holder`, verified into a held grant.
fn held_in(
    db: &Connection,
    key: &[u8; 32],
    config: &DeskConfig,
    grant_id: &str,
    holder: &str,
) -> Result<Option<HeldGrant>, Violation> {
    let row: Option<Row> = db
        .query_row(
            "SELECT doc, uses_left, derefs_left, tokens_left FROM grants WHERE grant_id = ?1 AND grantee = ?2",
            params![grant_id, holder],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(failed)?;
    row.map(|row| verified(row, key, config, holder)).transpose()
}

/// A row as the grant `holder` holds: the signature and the hierarchy checked, what is left restored.
fn verified(
    (doc, uses, derefs, tokens): Row,
    key: &[u8; 32],
    config: &DeskConfig,
    holder: &str,
) -> Result<HeldGrant, Violation> {
    let grant: Grant = serde_json::from_str(&doc)
        .map_err(|err| Violation::new(ErrorCode::StoreFailed, "", format!("desk grant: {err}")))?;
    let is_ancestor = config.is_ancestor(&grant.terms.issuer, holder);
    Ok(HeldGrant::accept(grant, holder, key, is_ancestor)?.with_left(GrantLeft { uses, derefs, tokens }))
}

impl GrantStore for DeskGrants<'_> {
    fn held(&self, grant_id: &str, holder: &str) -> Result<Option<HeldGrant>, Violation> {
        held_in(self.db, self.key, self.config, grant_id, holder)
    }

    fn held_by(&self, holder: &str) -> Result<Vec<HeldGrant>, Violation> {
        let mut statement = self
            .db
            .prepare("SELECT doc, uses_left, derefs_left, tokens_left FROM grants WHERE grantee = ?1 AND uses_left > 0")
            .map_err(failed)?;
        let rows = statement
            .query_map(params![holder], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|rows| rows.collect::<Result<Vec<Row>, _>>())
            .map_err(failed)?;
        // A row that no longer verifies passes nothing on.
        Ok(rows.into_iter().filter_map(|row| verified(row, self.key, self.config, holder).ok()).collect())
    }

    fn spend(
        &mut self,
        grant_id: &str,
        holder: &str,
        decide: &mut dyn FnMut(Option<&HeldGrant>) -> Result<Spend, Violation>,
    ) -> Result<(), Violation> {
        let (key, config) = (self.key, self.config);
        let tx = self.db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(failed)?;
        let held = held_in(&tx, key, config, grant_id, holder)?;
        let spend = decide(held.as_ref())?;
        if held.is_none() {
            return Ok(());
        }
        // Relative updates that hold only while enough is left: the read above and this write are one transaction,
        // and the condition keeps a use from being taken twice whatever happens between them.
        let spent = tx
            .execute(
                "UPDATE grants SET uses_left = uses_left - 1, derefs_left = derefs_left - ?2, tokens_left = tokens_left - ?3
                 WHERE grant_id = ?1 AND uses_left >= 1 AND derefs_left >= ?2 AND tokens_left >= ?3",
                params![grant_id, spend.derefs, spend.tokens],
            )
            .map_err(failed)?;
        if spent != 1 {
            return Err(no_uses_left(grant_id));
        }
        tx.commit().map_err(failed)
    }
}
