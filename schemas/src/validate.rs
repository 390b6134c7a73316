//! Validation of untrusted documents: the JSON Schema first, then the semantic rules a schema cannot say.
//!
//! Every problem found is reported, each as a [`Violation`] with a stable code and an RFC 6901 path to the value.
//! Semantic checks run even when the schema fails, on whatever parts have the right shape, so one pass shows the
//! sender everything to fix.

use std::collections::{HashMap, HashSet};

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::brief::brief_line_count;
use crate::capsule::{MAX_CAPSULE_LINES, NewCapsule};
use crate::error::{ErrorCode, Violation};
use crate::pointer::{self, Pointer, PointerType};
use crate::schema::{COMPILED, DocKind};
use crate::ttl::Ttl;

/// The most lines a SharedBriefMicro may render to.
pub const MAX_BRIEF_LINES: usize = 30;

/// Validates `doc` as a document of `kind`; an empty result means valid.
pub fn validate(kind: DocKind, doc: &Value) -> Vec<Violation> {
    let mut out = schema_violations(kind, doc);
    let mut semantic = Vec::new();
    match kind {
        DocKind::Engram => check_engram(doc, "", &mut semantic),
        DocKind::Pointer => check_pointer(doc, "", &mut semantic),
        DocKind::Brief => check_brief(doc, "", &mut semantic),
        DocKind::Grant | DocKind::Budget => {}
        DocKind::Deref => check_deref(doc, "", &mut semantic),
        DocKind::Message => check_message(doc, "", &mut semantic),
        DocKind::Scenario => check_scenario(doc, &mut semantic),
    }
    // A schema failure at the same place already tells the sender what to fix.
    let schema_paths: HashSet<String> = out.iter().map(|v| v.path.clone()).collect();
    out.extend(semantic.into_iter().filter(|v| !schema_paths.contains(&v.path)));
    if out.is_empty()
        && let Some(why) = type_mismatch(kind, doc)
    {
        out.push(Violation::new(
            ErrorCode::SchemaInvalid,
            "",
            format!("a value does not fit the field that holds it ({why}); send integers without a fraction"),
        ));
    }
    out
}

/// Why a document the schema and the semantic rules accept still does not convert to its Rust type, if it does not.
///
/// JSON Schema counts `1.0` and `-0.0` as integers, which a counter field cannot hold; refusing them here keeps
/// `validate` and [`crate::Valid`] in agreement (found by fuzzing).
fn type_mismatch(kind: DocKind, doc: &Value) -> Option<String> {
    fn converts<T: serde::de::DeserializeOwned>(doc: &Value) -> Option<String> {
        T::deserialize(doc).err().map(|err| err.to_string())
    }
    match kind {
        DocKind::Engram => converts::<crate::Engram>(doc),
        DocKind::Pointer => converts::<Pointer>(doc),
        DocKind::Brief => converts::<crate::SharedBriefMicro>(doc),
        DocKind::Grant => converts::<crate::Grant>(doc),
        DocKind::Budget => converts::<crate::Budget>(doc),
        DocKind::Deref => converts::<crate::DerefRequest>(doc),
        DocKind::Message => converts::<crate::TypedMessage>(doc),
        DocKind::Scenario => crate::scenario::type_mismatch(doc),
    }
}

/// Validates `doc` against the kind it looks like; [`ErrorCode::KindUnknown`] when it looks like none.
pub fn validate_inferred(doc: &Value) -> (Option<DocKind>, Vec<Violation>) {
    match DocKind::infer(doc) {
        Some(kind) => (Some(kind), validate(kind, doc)),
        None => (
            None,
            vec![Violation::new(
                ErrorCode::KindUnknown,
                "",
                "cannot tell which kind of document this is from its fields",
            )],
        ),
    }
}

/// What a required property is for: the `description` its schema gives it, found beside the `required` keyword at
/// `schema_path` (local `$ref`s followed); `None` when the schema says nothing.
fn purpose(kind: DocKind, schema_path: &str, name: &str) -> Option<String> {
    let doc = crate::schema::schema_document(kind.schema_file())?;
    let mut node = &doc;
    let segments: Vec<&str> = schema_path.trim_start_matches('/').split('/').collect();
    let (last, parents) = segments.split_last()?;
    if *last != "required" {
        return None;
    }
    for segment in parents {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        node = if segment == "$ref" {
            doc.pointer(node.get("$ref")?.as_str()?.strip_prefix('#')?)?
        } else {
            match node {
                Value::Object(map) => map.get(&segment)?,
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            }
        };
    }
    node.get("properties")?.get(name)?.get("description")?.as_str().map(str::to_owned)
}

fn schema_violations(kind: DocKind, doc: &Value) -> Vec<Violation> {
    let validator = COMPILED.get(kind);
    let mut out: Vec<Violation> = Vec::new();
    let mut seen = HashSet::new();
    for error in validator.iter_errors(doc) {
        let base = error.instance_path().as_str().to_owned();
        let mut push = |path: String, message: String| {
            if seen.insert((path.clone(), message.clone())) {
                out.push(Violation::new(ErrorCode::SchemaInvalid, path, message));
            }
        };
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().map(str::to_owned).unwrap_or_else(|| property.to_string());
                let message = match purpose(kind, error.schema_path().as_str(), &name) {
                    Some(purpose) => format!("required property {name:?} is missing: {purpose}"),
                    None => format!("required property {name:?} is missing"),
                };
                push(join(&base, &name), message);
            }
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                for name in unexpected {
                    push(join(&base, name), format!("property {name:?} is not allowed here"));
                }
            }
            ValidationErrorKind::MaxLength { limit } => {
                let n_chars = lookup(doc, &base).and_then(Value::as_str).map_or(0, |s| s.chars().count());
                push(base, format!("is {n_chars} characters long; at most {limit} allowed"));
            }
            ValidationErrorKind::MaxItems { limit } => {
                let n_items = lookup(doc, &base).and_then(Value::as_array).map_or(0, Vec::len);
                push(base, format!("has {n_items} items; at most {limit} allowed"));
            }
            ValidationErrorKind::MinItems { limit } => {
                let n_items = lookup(doc, &base).and_then(Value::as_array).map_or(0, Vec::len);
                push(base, format!("has {n_items} items; at least {limit} required"));
            }
            ValidationErrorKind::Enum { options } => {
                let names: Vec<String> = options
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                    .collect();
                push(base, format!("must be one of: {}", names.join(", ")));
            }
            // The remaining kinds describe themselves well; the instance value is masked so a
            // 10 kB pasted body does not come back in the error.
            _ => push(base, error.masked().to_string()),
        }
    }
    out
}

fn check_pointer(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    if doc.get("type").and_then(Value::as_str).is_none() || doc.get("ref").and_then(Value::as_str).is_none() {
        return;
    }
    for mut violation in pointer::check_value(doc) {
        if violation.code == ErrorCode::SchemaInvalid {
            // Shape problems are the schema's to report.
            continue;
        }
        violation.path = format!("{base}{}", violation.path);
        out.push(violation);
    }
}

fn check_engram(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    for field in ["/id", "/claim", "/provenance/created_by"] {
        check_not_blank(doc, base, field, out);
    }
    check_no_control(doc, base, "/claim", out);
    if let Some(ttl) = doc.get("ttl").and_then(Value::as_str)
        && let Err(mut violation) = Ttl::parse(ttl)
    {
        violation.path = format!("{base}/ttl");
        out.push(violation);
    }
    let pointers = doc.get("pointers").and_then(Value::as_array);
    for (idx, pointer) in pointers.into_iter().flatten().enumerate() {
        check_pointer(pointer, &format!("{base}/pointers/{idx}"), out);
    }
    let kind = doc.get("kind").and_then(Value::as_str);
    if matches!(kind, Some("decision" | "risk"))
        && let Some(pointers) = pointers
    {
        let cites_source = pointers.iter().any(|p| {
            p.get("type")
                .and_then(|t| serde_json::from_value::<PointerType>(t.clone()).ok())
                .is_some_and(PointerType::is_resolvable)
        });
        if !cites_source {
            out.push(Violation::new(
                ErrorCode::SourceRequired,
                format!("{base}/pointers"),
                format!("a {} engram must cite a repo, artifact, sam, diff or test pointer", kind.unwrap_or_default()),
            ));
        }
    }
}

fn check_deref(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    let pointers = doc.get("pointers").and_then(Value::as_array);
    for (idx, pointer) in pointers.into_iter().flatten().enumerate() {
        check_pointer(pointer, &format!("{base}/pointers/{idx}"), out);
    }
}

fn check_brief(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    if let Some(packs) = doc.get("pointer_packs").and_then(Value::as_object) {
        for (role, pack) in packs {
            for (idx, text) in pack.as_array().into_iter().flatten().enumerate() {
                if let Some(text) = text.as_str()
                    && let Err(mut violation) = Pointer::parse(text)
                {
                    violation.path = format!("{base}/pointer_packs/{}/{idx}", escape(role));
                    out.push(violation);
                }
            }
        }
    }
    for (idx, capsule) in doc.get("capsules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let n_lines = capsule.as_str().map_or(0, |text| text.lines().count());
        if n_lines > MAX_CAPSULE_LINES {
            out.push(Violation::new(
                ErrorCode::BriefTooLong,
                format!("{base}/capsules/{idx}"),
                format!("a capsule is at most {MAX_CAPSULE_LINES} lines; this one has {n_lines}"),
            ));
        }
    }
    let n_lines = brief_line_count(doc);
    if n_lines > MAX_BRIEF_LINES {
        out.push(Violation::new(
            ErrorCode::BriefTooLong,
            base.to_owned(),
            format!("the brief renders to {n_lines} lines; at most {MAX_BRIEF_LINES} allowed"),
        ));
    }
}

fn check_message(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    for (idx, engram) in doc.get("engrams").and_then(Value::as_array).into_iter().flatten().enumerate() {
        check_engram(engram, &format!("{base}/engrams/{idx}"), out);
    }
    for (idx, request) in doc.get("deref_requests").and_then(Value::as_array).into_iter().flatten().enumerate() {
        check_deref(request, &format!("{base}/deref_requests/{idx}"), out);
    }
    for field in ["refs", "symbols"] {
        for (idx, text) in doc.get(field).and_then(Value::as_array).into_iter().flatten().enumerate() {
            check_reference(text, &format!("{base}/{field}/{idx}"), out);
        }
    }
    if let Some(text) = doc.get("report_ref") {
        check_reference(text, &format!("{base}/report_ref"), out);
    }
    for field in ["/reason", "/question", "/body"] {
        check_not_blank(doc, base, field, out);
    }
}

/// A reference in a message is either a short symbol id (`F12`) or a pointer in text form; a string that starts
/// with a pointer type prefix must parse as a pointer.
fn check_reference(text: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(text) = text.as_str() else { return };
    let looks_like_pointer = text.split_once(':').is_some_and(|(prefix, _)| PointerType::from_prefix(prefix).is_some());
    if looks_like_pointer && let Err(mut violation) = Pointer::parse(text) {
        violation.path = path.to_owned();
        out.push(violation);
    }
}

fn check_scenario(doc: &Value, out: &mut Vec<Violation>) {
    check_scenario_pointers(doc, out);
    check_scenario_shared(doc, out);
    check_scenario_memory(doc, out);
    // Placement is checked against the scenario's own nodes when it names any; a scenario without `[cluster]` is
    // placed by `lessrt run --cluster FILE`, which checks it then (`Scenario::check_placement`).
    if let Some(nodes) = doc.pointer("/cluster/nodes").and_then(Value::as_array) {
        let nodes: Vec<crate::scenario::ClusterNode> =
            nodes.iter().filter_map(|n| serde_json::from_value(n.clone()).ok()).collect();
        let placed = doc.get("agents").and_then(Value::as_array).into_iter().flatten().enumerate();
        let placed: Vec<(usize, String)> =
            placed.filter_map(|(i, a)| Some((i, a.get("node")?.as_str()?.to_owned()))).collect();
        out.extend(crate::scenario::placement_violations(&nodes, &placed, "/cluster/nodes"));
    }
    if let Some(workspace) = doc.get("workspace").and_then(Value::as_str)
        && let Err(message) = check_workspace(workspace)
    {
        out.push(Violation::new(ErrorCode::ScenarioInvalid, "/workspace", message));
    }
    let Some(agents) = doc.get("agents").and_then(Value::as_array) else { return };
    let n_before = out.len();
    let mut index_of: HashMap<&str, usize> = HashMap::new();
    for (idx, agent) in agents.iter().enumerate() {
        let Some(id) = agent.get("id").and_then(Value::as_str) else { continue };
        // The first agent with an id owns it; later duplicates are reported and not linked.
        if *index_of.entry(id).or_insert(idx) != idx {
            out.push(Violation::new(
                ErrorCode::ScenarioInvalid,
                format!("/agents/{idx}/id"),
                format!("agent id {id:?} is used twice"),
            ));
        }
    }
    let parent_of = |idx: usize| agents[idx].get("parent").and_then(Value::as_str);
    let mut roots = Vec::new();
    for (idx, agent) in agents.iter().enumerate() {
        match parent_of(idx) {
            None => roots.push(idx),
            Some(parent) if !index_of.contains_key(parent) => out.push(Violation::new(
                ErrorCode::ScenarioInvalid,
                format!("/agents/{idx}/parent"),
                format!("parent {parent:?} is not an agent of this scenario"),
            )),
            Some(_) => {
                let id = agent.get("id").and_then(Value::as_str).unwrap_or_default();
                let parent = |id: &str| index_of.get(id).and_then(|&i| parent_of(i));
                // A later agent with a taken id is not linked, so nothing loops back to it.
                if index_of.get(id) == Some(&idx) && crate::is_ancestor(id, id, parent) {
                    out.push(Violation::new(
                        ErrorCode::ScenarioInvalid,
                        format!("/agents/{idx}/parent"),
                        "the parent chain of this agent loops back to it",
                    ));
                }
            }
        }
    }
    if roots.len() > 1 {
        for &idx in &roots[1..] {
            out.push(Violation::new(
                ErrorCode::ScenarioInvalid,
                format!("/agents/{idx}"),
                "only one agent (the lead) may have no parent",
            ));
        }
    } else if roots.is_empty() && !agents.is_empty() {
        out.push(Violation::new(ErrorCode::ScenarioInvalid, "/agents", "no agent is without a parent: name one lead"));
    }
    // Steps are checked against a sound hierarchy only: a broken one is reported above, without an echo per step.
    if out.len() == n_before {
        let parent = |id: &str| index_of.get(id).and_then(|&idx| parent_of(idx));
        let own_reach = |id: &str| {
            let reach = index_of.get(id).and_then(|&idx| agents[idx].get("reach")).and_then(Value::as_array)?;
            Some(reach.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        };
        let hierarchy =
            Hierarchy { known: &|id: &str| index_of.contains_key(id), parent: &parent, own_reach: &own_reach };
        check_scenario_reach(agents, &hierarchy, out);
        check_scenario_steps(doc, &hierarchy, out);
        // Tasks are routed through the hierarchy: only a sound one says where a task may go.
        check_scenario_tasks(doc, out);
    }
}

/// Graded tasks: unique ids, an answering agent that exists below the lead, gold patterns that compile, something
/// for the claim to state, every task handed down by a brief of one of its agent's ancestors to a recipient on the
/// way to that agent, and room in each brief for its task lines.
fn check_scenario_tasks(doc: &Value, out: &mut Vec<Violation>) {
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let agents = list(doc.get("agents"));
    let parent: HashMap<String, Option<String>> =
        agents.iter().filter_map(|a| Some((str_of(a, "id")?, str_of(a, "parent")))).collect();
    // Whether `above` is `agent` or one of its ancestors.
    let at_or_above = |above: &str, agent: &str| {
        above == agent || crate::is_ancestor(above, agent, |id| parent.get(id).and_then(Option::as_deref))
    };
    let invalid = |path: String, message: String| Violation::new(ErrorCode::ScenarioInvalid, path, message);
    let tasks = list(doc.get("tasks"));
    let mut task_agent: HashMap<String, String> = HashMap::new();
    for (idx, task) in tasks.iter().enumerate() {
        let (Some(id), Some(agent)) = (str_of(task, "id"), str_of(task, "agent")) else { continue };
        if task_agent.insert(id.clone(), agent.clone()).is_some() {
            out.push(invalid(format!("/tasks/{idx}/id"), format!("task id {id:?} is used twice")));
        }
        match parent.get(&agent) {
            None => {
                out.push(invalid(format!("/tasks/{idx}/agent"), format!("{agent:?} is not an agent of this scenario")))
            }
            Some(None) => out.push(invalid(
                format!("/tasks/{idx}/agent"),
                format!("{agent:?} is the lead: nobody briefs it, so a task must go to an agent below it"),
            )),
            Some(Some(_)) => {}
        }
        for field in ["patterns", "wrong"] {
            for (p_idx, pattern) in list(task.pointer(&format!("/gold/{field}"))).iter().enumerate() {
                if let Some(Err(err)) =
                    pattern.as_str().map(|p| regex::RegexBuilder::new(p).case_insensitive(true).build())
                {
                    out.push(invalid(
                        format!("/tasks/{idx}/gold/{field}/{p_idx}"),
                        format!("not a regular expression: {err}"),
                    ));
                }
            }
        }
        // An empty gold (`gold = {}`) is a question only, handed down and never graded (what `lessrt ask` writes);
        // a gold answer names what to cite and something the claim must state.
        let gold_given = task.get("gold").and_then(Value::as_object).is_some_and(|g| !g.is_empty());
        if gold_given && task.pointer("/gold/cites").is_none() {
            out.push(Violation::new(
                ErrorCode::SchemaInvalid,
                format!("/tasks/{idx}/gold/cites"),
                "required: a graded task's gold names the spans to cite (leave gold empty, {}, for a question that is not graded)"
                    .to_owned(),
            ));
        }
        if !list(task.pointer("/gold/cites")).is_empty()
            && list(task.pointer("/gold/terms")).is_empty()
            && list(task.pointer("/gold/patterns")).is_empty()
        {
            out.push(invalid(
                format!("/tasks/{idx}/gold"),
                "a gold answer needs terms or patterns the claim must state (or leave gold empty for a question that is not graded)".to_owned(),
            ));
        }
    }
    // An engram that answers a task names a task of the scenario, and is reported by its agent or one below it.
    for (s_idx, step) in list(doc.get("steps")).iter().enumerate() {
        let Some(reporter) = str_of(step, "agent") else { continue };
        for (e_idx, engram) in list(step.get("engrams")).iter().enumerate() {
            let Some(task) = str_of(engram, "task") else { continue };
            let path = format!("/steps/{s_idx}/engrams/{e_idx}/task");
            match task_agent.get(&task) {
                None => out.push(invalid(path, format!("{task:?} is not a task of this scenario"))),
                // An unknown reporter or task agent is reported where it is named.
                Some(agent) if !parent.contains_key(agent) || !parent.contains_key(&reporter) => {}
                Some(agent) if !at_or_above(agent, &reporter) => out.push(invalid(
                    path,
                    format!(
                        "{reporter:?} answers {task:?}, but the task is {agent:?}'s and {reporter:?} is not below it"
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    let mut asked: HashSet<String> = HashSet::new();
    for (s_idx, step) in list(doc.get("steps")).iter().enumerate() {
        let ids = list(step.get("tasks"));
        if ids.is_empty() {
            continue;
        }
        let Some(briefer) = str_of(step, "agent") else { continue };
        let recipients: Vec<String> = match list(step.get("to")) {
            to if !to.is_empty() => to.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
            _ => parent
                .iter()
                .filter(|(_, p)| p.as_deref() == Some(briefer.as_str()))
                .map(|(id, _)| id.clone())
                .collect(),
        };
        for (t_idx, id) in ids.iter().enumerate() {
            let Some(id) = id.as_str() else { continue };
            let path = format!("/steps/{s_idx}/tasks/{t_idx}");
            // Named, so not "never handed down"; a wrong route is reported here.
            asked.insert(id.to_owned());
            match task_agent.get(id) {
                None => out.push(invalid(path, format!("no task {id:?} in this scenario's [[tasks]]"))),
                Some(agent) if !recipients.iter().any(|r| at_or_above(r, agent)) => out.push(invalid(
                    path,
                    format!("task {id:?} is for {agent:?}, who is neither a recipient of this brief nor below one"),
                )),
                Some(_) => {}
            }
        }
        let n_now = list(step.get("now")).len();
        if n_now + ids.len() > 10 {
            out.push(invalid(
                format!("/steps/{s_idx}/tasks"),
                format!(
                    "{n_now} now lines and {} task lines exceed the brief's 10 lines of what matters now",
                    ids.len()
                ),
            ));
        }
    }
    for (idx, task) in tasks.iter().enumerate() {
        if let Some(id) = str_of(task, "id")
            && !asked.contains(&id)
        {
            out.push(invalid(
                format!("/tasks/{idx}"),
                format!(
                    "task {id:?} is never handed down: name it in `tasks` of a brief by one of its agent's ancestors"
                ),
            ));
        }
    }
}

/// The agent tree as the step checks see it.
struct Hierarchy<'a> {
    known: &'a dyn Fn(&str) -> bool,
    parent: &'a dyn Fn(&str) -> Option<&'a str>,
    /// The `reach` an agent's entry names, if it names one.
    own_reach: &'a dyn Fn(&str) -> Option<Vec<String>>,
}

impl Hierarchy<'_> {
    /// What `agent` may read without a grant: its own `reach`, else the nearest ancestor's; `None`, the workspace.
    fn reach(&self, agent: &str) -> Option<Vec<String>> {
        std::iter::once(agent).chain(crate::ancestors(agent, |id| (self.parent)(id))).find_map(self.own_reach)
    }

    /// Whether `ancestor` is above `agent` (a cycle is reported apart).
    fn is_ancestor(&self, ancestor: &str, agent: &str) -> bool {
        crate::is_ancestor(ancestor, agent, |id| (self.parent)(id))
    }
}

/// Each agent's `reach` stays in the workspace and within its parent's: a child never reaches more than its parent
/// without a grant.
fn check_scenario_reach(agents: &[Value], hierarchy: &Hierarchy<'_>, out: &mut Vec<Violation>) {
    for (idx, agent) in agents.iter().enumerate() {
        let Some(reach) = agent.get("reach").and_then(Value::as_array) else { continue };
        let id = agent.get("id").and_then(Value::as_str).unwrap_or_default();
        let parent_reach = (hierarchy.parent)(id).and_then(|parent| hierarchy.reach(parent));
        for (p_idx, pattern) in reach.iter().enumerate() {
            let Some(pattern) = pattern.as_str() else { continue };
            let path = format!("/agents/{idx}/reach/{p_idx}");
            if crate::grant::leaves_workspace(pattern) {
                out.push(Violation::new(
                    ErrorCode::ScenarioInvalid,
                    path,
                    format!("{pattern} names places outside the workspace: reach patterns are relative to it"),
                ));
            } else if let Some(outer) = &parent_reach
                && !crate::grant::pattern_within_any(pattern, outer)
            {
                out.push(Violation::new(
                    ErrorCode::ScenarioInvalid,
                    path,
                    format!("{pattern} is wider than {id}'s parent reaches ({}): narrow it", outer.join(", ")),
                ));
            }
        }
    }
}

/// What a run would trip over, refused before it starts: steps of agents the scenario does not have, briefs to agents
/// that are not the briefer's children, grants to agents that are not the issuer's descendants, reports with nobody
/// to receive them, and lifetimes that are not ISO-8601 durations.
fn check_scenario_steps(doc: &Value, hierarchy: &Hierarchy<'_>, out: &mut Vec<Violation>) {
    let invalid = |path: String, message: String| Violation::new(ErrorCode::ScenarioInvalid, path, message);
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    // Per agent, the patterns of the grants earlier steps gave it: it may grant within them too.
    let mut granted: HashMap<String, Vec<String>> = HashMap::new();
    for (s_idx, step) in list(doc.get("steps")).iter().enumerate() {
        let base = format!("/steps/{s_idx}");
        let Some(agent) = step.get("agent").and_then(Value::as_str) else { continue };
        if !(hierarchy.known)(agent) {
            out.push(invalid(format!("{base}/agent"), format!("no agent {agent:?} in this scenario")));
            continue;
        }
        let action = step.get("action").and_then(Value::as_str).unwrap_or_default();
        match action {
            "brief" => {
                let n_before = out.len();
                for (idx, to) in list(step.get("to")).iter().enumerate() {
                    let Some(to) = to.as_str() else { continue };
                    if (hierarchy.parent)(to) != Some(agent) {
                        out.push(invalid(
                            format!("{base}/to/{idx}"),
                            format!("{agent} briefs its children only, and {to:?} is not one"),
                        ));
                    }
                }
                // Packs go to the brief's recipients: checked only when they are the briefer's children.
                if out.len() == n_before {
                    check_pack_keys(doc, step, agent, &base, out);
                }
                for (idx, grant) in list(step.get("grants")).iter().enumerate() {
                    if let Some(to) = grant.get("to").and_then(Value::as_str)
                        && !hierarchy.is_ancestor(agent, to)
                    {
                        out.push(invalid(
                            format!("{base}/grants/{idx}/to"),
                            format!("{agent} may grant only to its descendants, and {to:?} is not one"),
                        ));
                    }
                    check_ttl(grant, &format!("{base}/grants/{idx}"), out);
                    let reach = hierarchy.reach(agent);
                    let held = granted.get(agent).cloned().unwrap_or_default();
                    for (p_idx, pattern) in list(grant.get("patterns")).iter().enumerate() {
                        let Some(pattern) = pattern.as_str() else { continue };
                        if crate::grant::leaves_workspace(pattern) {
                            out.push(invalid(
                                format!("{base}/grants/{idx}/patterns/{p_idx}"),
                                format!("{pattern} names places outside the workspace: grant patterns relative to it"),
                            ));
                        } else if let Some(reach) = &reach
                            && !crate::grant::pattern_within_any(pattern, reach)
                            && !crate::grant::pattern_within_any(pattern, &held)
                        {
                            out.push(invalid(
                                format!("{base}/grants/{idx}/patterns/{p_idx}"),
                                format!(
                                    "{pattern} is wider than {agent} holds (its reach: {}; grants it was given: {}): \
                                     an agent grants only what it may read itself",
                                    reach.join(", "),
                                    if held.is_empty() { "none".to_owned() } else { held.join(", ") }
                                ),
                            ));
                        }
                    }
                    if let Some(to) = grant.get("to").and_then(Value::as_str) {
                        let patterns = list(grant.get("patterns"));
                        let entry = granted.entry(to.to_owned()).or_default();
                        entry.extend(patterns.iter().filter_map(Value::as_str).map(str::to_owned));
                    }
                }
            }
            "report"
                if step["type"] == "gate_report"
                    && step.get("status").is_none()
                    && step.get("report_ref").is_none() =>
            {
                out.push(invalid(
                    format!("{base}/status"),
                    "a gate report needs a status, or a report_ref the gate adapter reads it from".to_owned(),
                ));
            }
            "report" => match step.get("to").and_then(Value::as_str) {
                Some(to) if !(hierarchy.known)(to) => {
                    out.push(invalid(format!("{base}/to"), format!("no agent {to:?} in this scenario")));
                }
                None if (hierarchy.parent)(agent).is_none() => out.push(invalid(
                    format!("{base}/to"),
                    format!("{agent} is the lead and has no parent to report to: name the receiver in `to`"),
                )),
                _ => {}
            },
            _ => {}
        }
        for (idx, engram) in list(step.get("engrams")).iter().enumerate() {
            check_ttl(engram, &format!("{base}/engrams/{idx}"), out);
        }
    }
}

/// A brief's packs are keyed by the role of the children it goes to (its `to`, or all the briefer's children): a key
/// that names no such role would reach nobody, and the pointers under it would be dropped without a word.
fn check_pack_keys(doc: &Value, step: &Value, agent: &str, base: &str, out: &mut Vec<Violation>) {
    let Some(packs) = step.get("packs").and_then(Value::as_object) else { return };
    let agents = doc.get("agents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let field = |a: &'_ Value, key: &str| a.get(key).and_then(Value::as_str).map(str::to_owned);
    let named: Vec<String> = step
        .get("to")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    // (id, role) of each recipient.
    let recipients: Vec<(String, String)> = agents
        .iter()
        .filter(|a| match field(a, "id") {
            Some(id) if !named.is_empty() => named.contains(&id),
            Some(_) => field(a, "parent").as_deref() == Some(agent),
            None => false,
        })
        .filter_map(|a| Some((field(a, "id")?, field(a, "role").unwrap_or_default())))
        .collect();
    let mut roles: Vec<&str> = recipients.iter().map(|(_, role)| role.as_str()).collect();
    roles.sort_unstable();
    roles.dedup();
    for key in packs.keys() {
        if roles.contains(&key.as_str()) {
            continue;
        }
        let message = match recipients.iter().find(|(id, _)| id == key) {
            Some((id, role)) => format!(
                "packs are keyed by the role of the child they go to, and {id:?} is an agent id: write this pack \
                 under `{role}` (the role of {id})"
            ),
            None if roles.is_empty() => {
                format!("{agent} has no child this brief goes to, so the pack {key:?} would reach nobody: drop it")
            }
            None => format!(
                "no child this brief goes to has the role {key:?}, so its pointers would reach nobody: key the pack \
                 by one of their roles ({})",
                roles.join(", ")
            ),
        };
        out.push(Violation::new(ErrorCode::ScenarioInvalid, format!("{base}/packs/{}", escape(key)), message));
    }
}

/// Symbols and capsules: capsule ids unique, each capsule renders (at most 10 lines) and depends only on capsules
/// written before it (so the graph has no cycle), and every symbol or capsule a brief step names exists.
/// The `[memory]` table: see [`crate::scenario::memory_violations`]; `shared_reads` written once (at the top, as
/// scenarios before `[memory]` did, or in the table).
fn check_scenario_memory(doc: &Value, out: &mut Vec<Violation>) {
    let Some(memory) = doc.get("memory") else { return };
    if doc.get("shared_reads").is_some() && memory.get("shared_reads").is_some() {
        out.push(Violation::new(
            ErrorCode::ScenarioInvalid,
            "/shared_reads",
            "shared_reads is written twice, at the top and in [memory]: keep the one in [memory]",
        ));
    }
    let Ok(settings) = serde_json::from_value::<crate::scenario::MemorySettings>(memory.clone()) else { return };
    let agents = doc.get("agents").and_then(Value::as_array).into_iter().flatten();
    let roles: Vec<&str> = agents.filter_map(|a| a.get("role")?.as_str()).collect();
    out.extend(crate::scenario::memory_violations(&settings, Some(&roles), "/memory"));
}

fn check_scenario_shared(doc: &Value, out: &mut Vec<Violation>) {
    let invalid = |path: String, message: String| Violation::new(ErrorCode::ScenarioInvalid, path, message);
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let mut capsules: Vec<String> = Vec::new();
    for (idx, capsule) in list(doc.get("capsules")).iter().enumerate() {
        let base = format!("/capsules/{idx}");
        let Ok(capsule) = serde_json::from_value::<NewCapsule>(capsule.clone()) else { continue };
        if let Err(violation) = capsule.render() {
            out.push(invalid(format!("{base}{}", violation.path), violation.message));
        }
        for (d_idx, dep) in capsule.depends.iter().enumerate() {
            if !capsules.contains(dep) && *dep != capsule.id {
                out.push(invalid(
                    format!("{base}/depends/{d_idx}"),
                    format!(
                        "capsule {dep:?} is not written before {:?}: list a capsule after what it depends on",
                        capsule.id
                    ),
                ));
            }
        }
        if capsules.contains(&capsule.id) {
            out.push(invalid(format!("{base}/id"), format!("capsule id {:?} is used twice", capsule.id)));
        }
        capsules.push(capsule.id);
    }
    let symbols = doc.get("symbols").and_then(Value::as_object);
    // Only briefs carry the entries they name; a typed message's `symbols` and `capsules` are references it makes.
    let briefs = list(doc.get("steps")).into_iter().enumerate().filter(|(_, s)| s["action"] == "brief");
    for (s_idx, step) in briefs {
        for (idx, id) in list(step.get("symbols")).iter().enumerate() {
            let Some(id) = id.as_str() else { continue };
            if !symbols.is_some_and(|table| table.contains_key(id)) {
                out.push(invalid(
                    format!("/steps/{s_idx}/symbols/{idx}"),
                    format!("no symbol {id:?} in this scenario's [symbols]: add it there or drop it from the brief"),
                ));
            }
        }
        for (idx, id) in list(step.get("capsules")).iter().enumerate() {
            let Some(id) = id.as_str() else { continue };
            if !capsules.iter().any(|c| c == id) {
                out.push(invalid(
                    format!("/steps/{s_idx}/capsules/{idx}"),
                    format!(
                        "no capsule {id:?} in this scenario's [[capsules]]: write it there or drop it from the brief"
                    ),
                ));
            }
        }
    }
}

/// A `ttl` field, when present, must be an ISO-8601 duration (`LESS_TTL_INVALID` at its path).
fn check_ttl(doc: &Value, base: &str, out: &mut Vec<Violation>) {
    if let Some(ttl) = doc.get("ttl").and_then(Value::as_str)
        && let Err(mut violation) = Ttl::parse(ttl)
    {
        violation.path = format!("{base}/ttl");
        out.push(violation);
    }
}

/// A workspace is a relative path that stays inside the scenario's directory: `/etc`, `C:\`, `..` and `a/../../b`
/// are refused (a symlink out of it is refused when the scenario is loaded, see `Scenario::from_toml`).
fn check_workspace(workspace: &str) -> Result<(), String> {
    use std::path::Component;
    let path = std::path::Path::new(workspace);
    let looks_absolute =
        workspace.starts_with(['/', '\\']) || workspace.as_bytes().get(1) == Some(&b':') || path.is_absolute();
    if looks_absolute {
        return Err(format!(
            "workspace {workspace:?} is absolute: name a directory relative to the scenario file, inside its directory"
        ));
    }
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => {
                return Err(format!(
                    "workspace {workspace:?} leads out of the scenario's directory: put the workspace beside or \
                     below the scenario file"
                ));
            }
        }
    }
    Ok(())
}

/// Every pointer text a scenario names must parse, so a typo fails at load time, not in the middle of a run.
fn check_scenario_pointers(doc: &Value, out: &mut Vec<Violation>) {
    for (path, text) in scenario_pointer_texts(doc) {
        if let Err(mut violation) = Pointer::parse(&text) {
            violation.path = path;
            out.push(violation);
        }
    }
}

/// Every pointer text a scenario document names, with its JSON path: the plan's artifacts, the steps' pointers,
/// packs and engram citations, the tasks' gold citations and the expectations' pointers, in document order.
pub fn scenario_pointer_texts(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |text: &Value, path: String| {
        if let Some(text) = text.as_str() {
            out.push((path, text.to_owned()));
        }
    };
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    for (idx, text) in list(doc.pointer("/plan/artifacts")).iter().enumerate() {
        push(text, format!("/plan/artifacts/{idx}"));
    }
    for (s_idx, step) in list(doc.get("steps")).iter().enumerate() {
        for (idx, text) in list(step.get("pointers")).iter().enumerate() {
            push(text, format!("/steps/{s_idx}/pointers/{idx}"));
        }
        for (role, pack) in step.get("packs").and_then(Value::as_object).into_iter().flatten() {
            for (idx, text) in list(Some(pack)).iter().enumerate() {
                push(text, format!("/steps/{s_idx}/packs/{}/{idx}", escape(role)));
            }
        }
        for (e_idx, engram) in list(step.get("engrams")).iter().enumerate() {
            for (idx, text) in list(engram.get("pointers")).iter().enumerate() {
                push(text, format!("/steps/{s_idx}/engrams/{e_idx}/pointers/{idx}"));
            }
        }
    }
    for (t_idx, task) in list(doc.get("tasks")).iter().enumerate() {
        for (c_idx, cite) in list(task.pointer("/gold/cites")).iter().enumerate() {
            match cite.as_array() {
                Some(any) => {
                    for (idx, text) in any.iter().enumerate() {
                        push(text, format!("/tasks/{t_idx}/gold/cites/{c_idx}/{idx}"));
                    }
                }
                None => push(cite, format!("/tasks/{t_idx}/gold/cites/{c_idx}")),
            }
        }
    }
    for (x_idx, expect) in list(doc.get("expect")).iter().enumerate() {
        for (idx, text) in list(expect.get("pointers")).iter().enumerate() {
            push(text, format!("/expect/{x_idx}/pointers/{idx}"));
        }
        if let Some(text) = expect.get("cites") {
            push(text, format!("/expect/{x_idx}/cites"));
        }
    }
    out
}

fn check_not_blank(doc: &Value, base: &str, field: &str, out: &mut Vec<Violation>) {
    if let Some(text) = doc.pointer(field).and_then(Value::as_str)
        && text.trim().is_empty()
    {
        out.push(Violation::new(ErrorCode::TextEmpty, format!("{base}{field}"), "must not be blank"));
    }
}

/// A claim is read in terminals and pages: a control character in it (ESC, BEL, CR) could clear a screen or rewrite a
/// line. Newlines and tabs are text.
fn check_no_control(doc: &Value, base: &str, field: &str, out: &mut Vec<Violation>) {
    let Some(text) = doc.pointer(field).and_then(Value::as_str) else { return };
    if let Some((at, c)) = text.chars().enumerate().find(|&(_, c)| c.is_control() && c != '\n' && c != '\t') {
        out.push(Violation::new(
            ErrorCode::SchemaInvalid,
            format!("{base}{field}"),
            format!(
                "holds the control character U+{:04X} at character {at}: write plain text (newlines and tabs are fine)",
                u32::from(c)
            ),
        ));
    }
}

fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() { Some(doc) } else { doc.pointer(path) }
}

fn join(base: &str, key: &str) -> String {
    format!("{base}/{}", escape(key))
}

/// RFC 6901 escaping of one reference token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;
