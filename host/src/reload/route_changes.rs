//! What a config reload changed of the routes, by delivery target: what the log names
//! (`route added`, `route changed`, `route removed`) and whether the route table swaps.

use std::collections::BTreeMap;

use crate::config::RouteConfig;

/// What a reload changed of the routes, by target (`http https://…`, `nats subject`): a
/// target newly routed, no longer routed, or whose routes differ.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RouteChanges {
    pub added: Vec<(String, String)>,
    pub removed: Vec<(String, String)>,
    pub changed: Vec<(String, String)>,
}

impl RouteChanges {
    pub fn between(old: &[RouteConfig], new: &[RouteConfig]) -> Self {
        // Each target's routes, in the file's order, in their debug form (plain data).
        let by_target = |list: &[RouteConfig]| {
            let mut map = BTreeMap::<(String, String), Vec<String>>::new();
            for r in list {
                let key = (r.sink.as_str().to_owned(), r.target().to_owned());
                map.entry(key).or_default().push(format!("{r:?}"));
            }
            map
        };
        let (old, new) = (by_target(old), by_target(new));
        let mut changes = Self::default();
        for (key, routes) in &new {
            match old.get(key) {
                None => changes.added.push(key.clone()),
                Some(o) if o != routes => changes.changed.push(key.clone()),
                Some(_) => {}
            }
        }
        changes.removed = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_changes_are_named_by_target() {
        let parse = |text: &str| -> Vec<RouteConfig> {
            #[derive(serde::Deserialize)]
            struct File {
                route: Vec<RouteConfig>,
            }
            toml::from_str::<File>(text).unwrap().route
        };
        let route = |url: &str, events: &str| {
            format!(
                "[[route]]\nendpoint = \"a\"\nevents = [{events}]\nsink = \"http\"\nurl = \"{url}\"\n"
            )
        };
        let old = parse(
            &[
                route("http://kept", "\"*\""),
                route("http://gone", "\"*\""),
                route("http://edited", "\"*\""),
            ]
            .concat(),
        );
        let new = parse(
            &[
                route("http://kept", "\"*\""),
                route("http://edited", "\"x.*\""),
                route("http://new", "\"*\""),
            ]
            .concat(),
        );
        let changes = RouteChanges::between(&old, &new);
        let key = |url: &str| ("http".to_owned(), url.to_owned());
        assert_eq!(changes.added, [key("http://new")]);
        assert_eq!(changes.removed, [key("http://gone")]);
        assert_eq!(changes.changed, [key("http://edited")]);
        assert!(RouteChanges::between(&new, &new).is_empty());
    }
}
