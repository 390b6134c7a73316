//! Scenario files: the only module that knows TOML. A scenario is parsed into a JSON document and checked against
//! `schemas/scenario.v0.1.json` like any other document.

use serde_json::Value;

use crate::error::{ErrorCode, Violation};

/// Parses a scenario's TOML text into the JSON document the schema describes.
pub fn scenario_document(toml_text: &str) -> Result<Value, Violation> {
    let table: toml::Table = toml::from_str(toml_text)
        .map_err(|err| Violation::new(ErrorCode::JsonMalformed, "", format!("TOML: {}", err.message())))?;
    serde_json::to_value(table)
        .map_err(|err| Violation::new(ErrorCode::JsonMalformed, "", format!("TOML value has no JSON form: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::DocKind;
    use crate::validate::validate;

    #[test]
    fn a_toml_scenario_becomes_a_checked_document() {
        let doc = scenario_document(
            r#"
            name = "tiny"
            [[agents]]
            id = "lead"
            role = "architect"
            [[agents]]
            id = "dev"
            role = "programmer"
            parent = "lead"
            "#,
        )
        .expect("valid TOML");
        assert_eq!(doc["agents"][1]["parent"], "lead");
        assert!(validate(DocKind::Scenario, &doc).is_empty());
    }

    #[test]
    fn broken_toml_is_malformed_not_a_panic() {
        let err = scenario_document("name = \"x\"\n[[agents]\n").expect_err("unclosed table header");
        assert_eq!(err.code, ErrorCode::JsonMalformed);
    }
}
