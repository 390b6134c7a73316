//! Budget sweeps (`lessrt bench --sweep ROLE.FIELD=V1,V2,…`): which field of which role's budget takes which values,
//! each run's label for its value, and the sweep's totals per value and mode (the points of the Pareto plot of a
//! role's budget: billed tokens against tasks solved).

use serde::{Deserialize, Serialize};

use less_runtime::WireMode;

use super::BenchRun;
use super::billing::{ModeTotals, Price};

/// What a sweep sets: one field of one role's budget, to each value in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// The role whose budget is set.
    pub role: String,
    /// The budget's field.
    pub field: String,
    /// The values, in the order given (each once).
    pub values: Vec<u64>,
}

impl Sweep {
    /// Parses `ROLE.FIELD=V1,V2,…` (whole numbers ≥ 0, at least one, none twice). Whether the role and field exist
    /// and the budget takes the value is the scenario's to say (`Scenario::with_budget`).
    pub fn parse(text: &str) -> Result<Sweep, String> {
        let expected = "give --sweep ROLE.FIELD=V1,V2,… (e.g. auditor.max_deref_tokens_total=250,1000)";
        let (target, values) = text.split_once('=').ok_or_else(|| format!("{text:?} has no '=': {expected}"))?;
        let (role, field) =
            target.split_once('.').ok_or_else(|| format!("{target:?} is not ROLE.FIELD: {expected}"))?;
        if role.trim().is_empty() || field.trim().is_empty() {
            return Err(format!("{target:?} is not ROLE.FIELD: {expected}"));
        }
        let mut parsed = Vec::new();
        for value in values.split(',').map(str::trim) {
            let n: u64 = value.parse().map_err(|_| format!("{value:?} is not a whole number ≥ 0: {expected}"))?;
            if parsed.contains(&n) {
                return Err(format!("{n} is given twice: {expected}"));
            }
            parsed.push(n);
        }
        Ok(Sweep { role: role.trim().to_owned(), field: field.trim().to_owned(), values: parsed })
    }

    /// The label of a run at `value`: `role.field=value` (`BenchRun::sweep`, and the out directory's segment).
    pub fn label(&self, value: u64) -> String {
        format!("{}.{}={value}", self.role, self.field)
    }
}

/// A sweep's results in `bench.json`: per value, per mode, the totals over every scenario and repeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// The role whose budget was set.
    pub role: String,
    /// The budget's field.
    pub field: String,
    /// One entry per value, in the order swept.
    pub values: Vec<SweepValue>,
}

/// One value of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepValue {
    /// The value the field was set to.
    pub value: u64,
    /// Per mode: solved, graded, billed, wire (inline + deref) and billed per solved task.
    pub modes: Vec<ModeTotals>,
}

impl SweepReport {
    /// The report of `sweep` over `runs` (each run labelled with its value), for `modes`.
    pub fn of(sweep: &Sweep, runs: &[BenchRun], modes: &[WireMode], price: Option<&Price>) -> SweepReport {
        let values = sweep
            .values
            .iter()
            .map(|&value| {
                let label = sweep.label(value);
                let at: Vec<&BenchRun> = runs.iter().filter(|r| r.sweep.as_deref() == Some(label.as_str())).collect();
                let modes = modes.iter().map(|&m| ModeTotals::of(&at, m, Some(&label), price)).collect();
                SweepValue { value, modes }
            })
            .collect();
        SweepReport { role: sweep.role.clone(), field: sweep.field.clone(), values }
    }
}
