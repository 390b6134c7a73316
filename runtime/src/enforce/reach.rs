//! Reach: what a reader may dereference without a grant, and the glob patterns reach and grants are written in.

use less_contract::{ErrorCode, Pointer, Violation};

/// What a reader may dereference without a grant: the patterns of its (or its nearest ancestor's) `reach`, or the
/// whole workspace.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// `(text, compiled)`; `None`: the whole workspace.
    patterns: Option<Vec<(String, GrantPattern)>>,
}

impl PartialEq for Reach {
    fn eq(&self, other: &Reach) -> bool {
        let texts = |r: &Reach| r.patterns.as_ref().map(|ps| ps.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
        texts(self) == texts(other)
    }
}

impl Reach {
    /// The reach of `patterns` (`None`: the whole workspace).
    pub fn new(patterns: Option<&[String]>) -> Reach {
        Reach { patterns: patterns.map(|ps| ps.iter().map(|p| (p.clone(), GrantPattern::new(p))).collect()) }
    }

    /// Whether `pointer` is within it.
    pub fn covers(&self, pointer: &Pointer) -> bool {
        let Some(patterns) = &self.patterns else { return true };
        let forms = Forms::of(pointer);
        if patterns.iter().any(|(_, pattern)| pattern.covers(&forms)) {
            return true;
        }
        // A section of a document is part of its file: a reach over the file (`repo:docs/**`) covers
        // `artifact:docs/guide.md#sec=…` too.
        pointer.ty() == less_contract::PointerType::Artifact
            && Pointer::new(less_contract::PointerType::Repo, pointer.location(), None)
                .is_ok_and(|file| patterns.iter().any(|(_, pattern)| pattern.covers(&Forms::of(&file))))
    }

    /// Whether it is the whole workspace (no `reach` configured).
    pub fn is_whole(&self) -> bool {
        self.patterns.is_none()
    }

    /// Whether everything `pattern` covers is within it.
    pub fn holds(&self, pattern: &str) -> bool {
        match &self.patterns {
            None => !less_contract::leaves_workspace(pattern),
            Some(patterns) => patterns.iter().any(|(outer, _)| less_contract::pattern_within(pattern, outer)),
        }
    }

    /// The patterns, for messages (`the workspace` when unrestricted).
    pub fn describe(&self) -> String {
        match &self.patterns {
            None => "the workspace".to_owned(),
            Some(patterns) => patterns.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// The refusal of a deref of `pointer`, outside `reader`'s reach, that presents no grant.
pub fn outside_reach(reader: &str, reach: &Reach, pointer: &Pointer) -> Violation {
    Violation::new(
        ErrorCode::DerefDenied,
        "",
        format!(
            "{pointer} is outside what {reader} may read without a grant ({}): ask the parent for a grant that covers \
             it",
            reach.describe()
        ),
    )
}

/// Whether the grant pattern `pattern` covers `pointer`, by the rule a grantee's gateway applies: a pattern without
/// `#` names files and covers any span of them, one with `#` is matched against the whole text form. For readers of a
/// finished run (`lessrt serve` names the grant that would have covered a denied deref).
pub fn pattern_covers(pattern: &str, pointer: &Pointer) -> bool {
    GrantPattern::new(pattern).covers(&Forms::of(pointer))
}

/// The two text forms of a pointer a pattern is matched against.
pub(super) struct Forms {
    /// The whole text form (`repo:src/a.rs#L1-L9@rev`).
    whole: String,
    /// The file form (`type:location`).
    file: String,
}

impl Forms {
    pub(super) fn of(pointer: &Pointer) -> Forms {
        Forms { whole: pointer.to_string(), file: format!("{}:{}", pointer.ty(), pointer.location()) }
    }
}

/// One pattern of a reach or a grant. A pattern without `#` names files (`repo:src/**`) and covers any span and
/// revision of them; a pattern with `#` is matched against the whole text form (`diff:a..b#**`,
/// `artifact:SPEC.md#sec=*`).
#[derive(Debug, Clone)]
pub(super) struct GrantPattern {
    whole: bool,
    /// None: too large to compile; it covers nothing (a grant fails closed).
    glob: Option<regex::Regex>,
}

impl GrantPattern {
    pub(super) fn new(pattern: &str) -> GrantPattern {
        GrantPattern { whole: pattern.contains('#'), glob: glob_regex(pattern) }
    }

    /// Whether it covers a pointer of these text forms.
    pub(super) fn covers(&self, forms: &Forms) -> bool {
        self.glob.as_ref().is_some_and(|glob| glob.is_match(if self.whole { &forms.whole } else { &forms.file }))
    }
}

/// A grant pattern as a regular expression: `**` matches anything, `*` anything but `/`, `?` one character but
/// `/`; everything else matches itself. Matching takes time linear in the text whatever the pattern (a parent's
/// model writes patterns; a backtracking matcher is exponential in the number of stars). None when the pattern is
/// too large to compile.
pub(crate) fn glob_regex(pattern: &str) -> Option<regex::Regex> {
    let mut expr = String::with_capacity(pattern.len() * 2 + 2);
    expr.push('^');
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = rest.strip_prefix("**") {
            expr.push_str("(?s:.*)");
            rest = tail;
            continue;
        }
        match c {
            '*' => expr.push_str("[^/]*"),
            '?' => expr.push_str("[^/]"),
            _ => expr.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
        }
        rest = &rest[c.len_utf8()..];
    }
    expr.push('$');
    regex::RegexBuilder::new(&expr).size_limit(1 << 20).build().ok()
}
