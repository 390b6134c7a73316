//! Symbols and context capsules: the shared vocabulary of a project, carried by briefs instead of re-explaining.
//!
//! A symbol is a short id for a recurring artifact (`F12` → `src/billing/invoice.rs`). A capsule is at most
//! [`MAX_CAPSULE_LINES`] lines of finished work (what, where, decision, gotcha, what it depends on); a reader gets
//! a capsule together with the transitive closure of its `depends`, dependencies first, and nothing else
//! ([`closure`]). The rendering and the closure live here so that a run's briefs and the store's shared tables
//! (`lessrt mcp`) agree on both.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Violation};

/// Most lines of a capsule.
pub const MAX_CAPSULE_LINES: usize = 10;

/// Most characters of one line of a capsule's field (a scenario's capsule field is one such line).
pub const MAX_CAPSULE_LINE_CHARS: usize = 200;

/// Most characters of a rendered capsule.
pub const MAX_CAPSULE_CHARS: usize = 2_000;

/// Most capsules one capsule depends on directly (the scenario schema's limit).
pub const MAX_CAPSULE_DEPENDS: usize = 8;

/// Most characters of a symbol's value.
pub const MAX_SYMBOL_CHARS: usize = 500;

/// A capsule as it is written (a scenario's `[[capsules]]` entry, or `less_capsule_write`'s arguments).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCapsule {
    /// Its id (`w2`).
    pub id: String,
    /// What was done.
    pub what: String,
    /// Where (a path, a symbol id).
    #[serde(default, rename = "where")]
    pub location: Option<String>,
    /// The decision taken.
    #[serde(default)]
    pub decision: Option<String>,
    /// What bit, and will bite again.
    #[serde(default)]
    pub gotcha: Option<String>,
    /// The capsules it builds on.
    #[serde(default)]
    pub depends: Vec<String>,
}

/// A capsule as it is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capsule {
    /// Its id.
    pub id: String,
    /// Its lines, as an agent reads them.
    pub text: String,
    /// The capsules it builds on.
    pub depends: Vec<String>,
}

fn argument(path: &str, message: impl Into<String>) -> Violation {
    Violation::new(ErrorCode::ArgumentInvalid, path, message)
}

/// A symbol or capsule id: 1 to 64 of `A-Z a-z 0-9 _ - . :`.
pub fn check_shared_id(path: &str, id: &str) -> Result<(), Violation> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if ok { Ok(()) } else { Err(argument(path, format!("{id:?} is not an id: 1 to 64 of A-Z a-z 0-9 _ - . :"))) }
}

/// A symbol's value: 1 to [`MAX_SYMBOL_CHARS`] characters on one line.
pub fn check_symbol_value(path: &str, value: &str) -> Result<(), Violation> {
    if value.trim().is_empty() || value.chars().count() > MAX_SYMBOL_CHARS || value.contains('\n') {
        return Err(argument(path, format!("a symbol's value is 1 to {MAX_SYMBOL_CHARS} characters on one line")));
    }
    Ok(())
}

impl NewCapsule {
    /// The capsule as read: one line per field given, refused when it says nothing, depends on itself or on more
    /// than [`MAX_CAPSULE_DEPENDS`] capsules, has a line of over [`MAX_CAPSULE_LINE_CHARS`] characters, or renders
    /// to more than [`MAX_CAPSULE_LINES`] lines or [`MAX_CAPSULE_CHARS`] characters (compact it instead). Whether
    /// its dependencies exist is the caller's check (a store, a scenario).
    pub fn render(&self) -> Result<Capsule, Violation> {
        check_shared_id("/id", &self.id)?;
        if self.what.trim().is_empty() {
            return Err(argument("/what", "a capsule says what was done"));
        }
        let fields = [
            ("what", Some(&self.what)),
            ("where", self.location.as_ref()),
            ("decision", self.decision.as_ref()),
            ("gotcha", self.gotcha.as_ref()),
        ];
        for (name, value) in fields {
            let longest = value.into_iter().flat_map(|v| v.lines()).map(|l| l.chars().count()).max().unwrap_or(0);
            if longest > MAX_CAPSULE_LINE_CHARS {
                return Err(argument(
                    &format!("/{name}"),
                    format!(
                        "a line of {name} has {longest} characters; a capsule's lines have at most \
                         {MAX_CAPSULE_LINE_CHARS}: compact it, and point at the detail instead of pasting it"
                    ),
                ));
            }
        }
        if self.depends.len() > MAX_CAPSULE_DEPENDS {
            return Err(argument(
                "/depends",
                format!(
                    "{} dependencies; a capsule depends on at most {MAX_CAPSULE_DEPENDS} directly: name the capsules \
                     that depend on the rest instead",
                    self.depends.len()
                ),
            ));
        }
        for (i, dep) in self.depends.iter().enumerate() {
            check_shared_id(&format!("/depends/{i}"), dep)?;
            if *dep == self.id {
                return Err(argument(&format!("/depends/{i}"), "a capsule cannot depend on itself"));
            }
        }
        let mut lines = vec![format!("{}: {}", self.id, self.what.trim())];
        for (label, value) in [("where", &self.location), ("decision", &self.decision), ("gotcha", &self.gotcha)] {
            if let Some(value) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
                lines.push(format!("{label}: {value}"));
            }
        }
        if !self.depends.is_empty() {
            lines.push(format!("depends: {}", self.depends.join(", ")));
        }
        let text = lines.join("\n");
        let n_lines = text.lines().count();
        if n_lines > MAX_CAPSULE_LINES {
            return Err(argument(
                "",
                format!("a capsule is at most {MAX_CAPSULE_LINES} lines; this one has {n_lines}: compact it"),
            ));
        }
        let n_chars = text.chars().count();
        if n_chars > MAX_CAPSULE_CHARS {
            return Err(argument(
                "",
                format!("a capsule is at most {MAX_CAPSULE_CHARS} characters; this one has {n_chars}: compact it"),
            ));
        }
        Ok(Capsule { id: self.id.clone(), text, depends: self.depends.clone() })
    }
}

/// The transitive `depends` closure of `ids`, dependencies before what depends on them, each once, in the order
/// asked. `fetch` looks a capsule up (`Ok(None)`: there is none, refused with `LESS_POINTER_UNRESOLVED` at `/ids`).
pub fn closure<E: From<Violation>>(
    ids: &[String],
    mut fetch: impl FnMut(&str) -> Result<Option<Capsule>, E>,
) -> Result<Vec<Capsule>, E> {
    let mut all: BTreeMap<String, Capsule> = BTreeMap::new();
    let mut todo: Vec<String> = ids.to_vec();
    while let Some(id) = todo.pop() {
        if all.contains_key(&id) {
            continue;
        }
        let Some(capsule) = fetch(&id)? else {
            return Err(Violation::new(ErrorCode::PointerUnresolved, "/ids", format!("no capsule {id}")).into());
        };
        todo.extend(capsule.depends.iter().cloned());
        all.insert(id, capsule);
    }
    // Depth-first post-order from the asked ids: dependencies first. `placed` also stops a cycle.
    fn visit(id: &str, all: &BTreeMap<String, Capsule>, placed: &mut BTreeSet<String>, out: &mut Vec<Capsule>) {
        if !placed.insert(id.to_owned()) {
            return;
        }
        if let Some(capsule) = all.get(id) {
            for dep in &capsule.depends {
                visit(dep, all, placed, out);
            }
            out.push(capsule.clone());
        }
    }
    let mut ordered = Vec::new();
    let mut placed = BTreeSet::new();
    for id in ids {
        visit(id, &all, &mut placed, &mut ordered);
    }
    Ok(ordered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capsule(id: &str, depends: &[&str]) -> NewCapsule {
        NewCapsule {
            id: id.to_owned(),
            what: format!("did {id}"),
            depends: depends.iter().map(|d| (*d).to_owned()).collect(),
            ..NewCapsule::default()
        }
    }

    #[test]
    fn the_closure_is_dependencies_first_and_nothing_else() {
        let written: BTreeMap<String, Capsule> = [capsule("w1", &[]), capsule("w2", &["w1"]), capsule("w3", &[])]
            .iter()
            .map(|c| (c.id.clone(), c.render().expect("renders")))
            .collect();
        let got = closure::<Violation>(&["w2".to_owned()], |id| Ok(written.get(id).cloned())).expect("closure");
        let ids: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["w1", "w2"]);
        let err = closure::<Violation>(&["w9".to_owned()], |id| Ok(written.get(id).cloned())).expect_err("unknown");
        assert_eq!(err.code, ErrorCode::PointerUnresolved);
    }

    #[test]
    fn a_capsule_renders_one_line_per_field_and_refuses_what_it_cannot_be() {
        let full = NewCapsule {
            location: Some("F12".to_owned()),
            decision: Some("keep the seed fixed".to_owned()),
            gotcha: Some("the book diff is order-sensitive".to_owned()),
            ..capsule("w2", &["w1"])
        };
        let text = full.render().expect("renders").text;
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.starts_with("w2: did w2\nwhere: F12\n"), "{text}");
        assert!(capsule("w2", &["w2"]).render().is_err(), "a self-dependency is refused");
        let long = NewCapsule { what: "a\n".repeat(12), ..capsule("w4", &[]) };
        assert!(long.render().expect_err("too long").message.contains("at most 10 lines"));
        // One line may not hold what ten would not (issue 34), nor may a capsule lean on everything.
        let wide = NewCapsule { what: "x".repeat(MAX_CAPSULE_LINE_CHARS + 1), ..capsule("w5", &[]) };
        assert_eq!(wide.render().expect_err("a long line").path, "/what");
        let fits = NewCapsule { what: "x".repeat(MAX_CAPSULE_LINE_CHARS), ..capsule("w5", &[]) };
        assert!(fits.render().is_ok());
        let gotcha = NewCapsule { gotcha: Some(format!("ok\n{}", "y".repeat(1_000))), ..capsule("w5", &[]) };
        assert_eq!(gotcha.render().expect_err("a long second line").path, "/gotcha");
        let many: Vec<String> = (0..=MAX_CAPSULE_DEPENDS).map(|i| format!("d{i}")).collect();
        let leaning = NewCapsule { depends: many, ..capsule("w6", &[]) };
        assert_eq!(leaning.render().expect_err("too many dependencies").path, "/depends");
        let lines = (0..MAX_CAPSULE_LINES).map(|_| "z".repeat(MAX_CAPSULE_LINE_CHARS)).collect::<Vec<_>>();
        let heavy = NewCapsule { what: lines.join("\n"), ..capsule("w7", &[]) };
        assert!(heavy.render().expect_err("too many characters").message.contains("characters"));
        assert!(check_symbol_value("/v", "two\nlines").is_err());
    }
}
