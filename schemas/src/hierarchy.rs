//! Ancestry in a hierarchy of agents or clients, computed one way: a scenario's agents, the validator's view of a
//! scenario document and the desk's clients each say who the parent of whom is, and walk up with [`ancestors`].

use std::collections::HashSet;

/// The ancestors of `id`, nearest first, by `parent` (the parent of an id, if any). Each is yielded once: a walk
/// that comes back to an id already yielded ends there, so a cyclic hierarchy (which validation refuses) never
/// loops.
pub fn ancestors<'a, F>(id: &'a str, parent: F) -> Ancestors<'a, F>
where
    F: Fn(&str) -> Option<&'a str>,
{
    Ancestors { at: Some(id), parent, seen: HashSet::new() }
}

/// Whether `ancestor` is above `id`, by `parent` ([`ancestors`]).
pub fn is_ancestor<'a>(ancestor: &str, id: &'a str, parent: impl Fn(&str) -> Option<&'a str>) -> bool {
    ancestors(id, parent).any(|a| a == ancestor)
}

/// The chain from the top of the hierarchy down to `id`, `id` last, by `parent` ([`ancestors`]; a cycle back to `id`
/// ends it).
pub fn lineage<'a>(id: &'a str, parent: impl Fn(&str) -> Option<&'a str>) -> Vec<&'a str> {
    let mut chain: Vec<&str> = ancestors(id, parent).take_while(|a| *a != id).collect();
    chain.reverse();
    chain.push(id);
    chain
}

/// The iterator of [`ancestors`].
pub struct Ancestors<'a, F> {
    at: Option<&'a str>,
    parent: F,
    seen: HashSet<&'a str>,
}

impl<'a, F> Iterator for Ancestors<'a, F>
where
    F: Fn(&str) -> Option<&'a str>,
{
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let next = (self.parent)(self.at?);
        self.at = next.filter(|p| self.seen.insert(p));
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent_in<'a>(edges: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |id| edges.iter().find(|(child, _)| *child == id).map(|(_, parent)| *parent)
    }

    #[test]
    fn ancestors_walk_up_nearest_first_and_stop_on_a_cycle() {
        let tree = [("dev", "mgr"), ("mgr", "lead")];
        assert_eq!(ancestors("dev", parent_in(&tree)).collect::<Vec<_>>(), ["mgr", "lead"]);
        assert!(ancestors("lead", parent_in(&tree)).next().is_none());
        assert!(is_ancestor("lead", "dev", parent_in(&tree)));
        assert!(!is_ancestor("dev", "lead", parent_in(&tree)));
        assert!(!is_ancestor("dev", "dev", parent_in(&tree)));
        assert_eq!(lineage("dev", parent_in(&tree)), ["lead", "mgr", "dev"]);
        assert_eq!(lineage("stranger", parent_in(&tree)), ["stranger"]);

        let cycle = [("a", "b"), ("b", "c"), ("c", "a")];
        assert_eq!(ancestors("a", parent_in(&cycle)).collect::<Vec<_>>(), ["b", "c", "a"]);
        assert!(is_ancestor("a", "a", parent_in(&cycle)), "in a cycle an agent is its own ancestor");
        assert_eq!(lineage("a", parent_in(&cycle)), ["c", "b", "a"]);
    }
}
