//! Adjudication files: a valid one reads back by (task, engram); each kind of mistake is refused with its code and
//! path, all of them in one pass.

use super::*;

const VALID: &str = r#"
scenario = "real-ignore"
[[answer]]
task = "parallel-threads"
engram = "eg_1"
claim = "It uses 12 threads."
verdict = "wrong"
why = "The count is the CPUs, at most 12."

[[answer]]
task = "max-below-min"
engram = "eg_2"
claim = "max_depth is overridden to min_depth."
verdict = "right"
why = "Raised to min_depth."
"#;

#[test]
fn a_valid_file_reads_back_by_task_and_engram() {
    let adjudication = Adjudication::from_toml(VALID).expect("valid");
    assert_eq!(adjudication.scenario, "real-ignore");
    assert_eq!(adjudication.answers.len(), 2);
    assert_eq!(adjudication.verdict("parallel-threads", "eg_1").map(|j| j.verdict), Some(Verdict::Wrong));
    assert_eq!(adjudication.verdict("max-below-min", "eg_2").map(|j| j.verdict), Some(Verdict::Right));
    assert!(adjudication.verdict("max-below-min", "eg_1").is_none());
    let empty = Adjudication::from_toml("scenario = \"x\"\n").expect("no answers yet");
    assert!(empty.answers.is_empty());
}

#[test]
fn mistakes_are_refused_with_their_code_and_path() {
    let cases: [(&str, String, ErrorCode, &str); 6] = [
        ("an unknown verdict", VALID.replace("\"wrong\"", "\"maybe\""), ErrorCode::SchemaInvalid, "/answer/0/verdict"),
        (
            "a missing field",
            VALID.replace("why = \"Raised to min_depth.\"\n", ""),
            ErrorCode::SchemaInvalid,
            "/answer/1/why",
        ),
        (
            "a field of another type",
            VALID.replace("engram = \"eg_2\"", "engram = 2"),
            ErrorCode::SchemaInvalid,
            "/answer/1/engram",
        ),
        (
            "an answer judged twice",
            VALID.replace("eg_2", "eg_1").replace("max-below-min", "parallel-threads"),
            ErrorCode::IdConflict,
            "/answer/1",
        ),
        (
            "an unknown field",
            VALID.replace("why = \"Raised", "score = 1\nwhy = \"Raised"),
            ErrorCode::SchemaInvalid,
            "/answer/1/score",
        ),
        ("no scenario", VALID.replace("scenario = \"real-ignore\"", ""), ErrorCode::SchemaInvalid, "/scenario"),
    ];
    for (name, text, code, path) in cases {
        let problems = Adjudication::from_toml(&text).expect_err(name);
        assert!(problems.0.iter().any(|v| v.code == code && v.path == path), "{name}: {problems}");
    }
    let both = VALID.replace("\"wrong\"", "\"maybe\"").replace("engram = \"eg_2\"\n", "");
    assert_eq!(Adjudication::from_toml(&both).expect_err("two problems").0.len(), 2, "every problem in one pass");
    let broken = Adjudication::from_toml("scenario = ").expect_err("not TOML");
    assert_eq!(broken.code(), Some(ErrorCode::JsonMalformed));
}
