//! What the writers of the route features' rules share: the text they write into, the
//! names the rules use and the helpers that guard a rule by the feature sets that have a
//! setting.
//!
//! A leaf: the writers (see [`crate::features`]) import it, it imports none of them.

use std::collections::BTreeMap;

use tugboat_model::features::{FeatureSetId, RouteFeatures};

/// The backend that answers requests no route matches, when no Ingress sets one.
pub const NOT_FOUND_BACKEND: &str = "tugboat_not_found";

/// The separator between a route's backend and its feature set in the maps' values.
pub const FEATURE_SEPARATOR: char = '.';

/// The rules of the features, by where they go in the frontend.
#[derive(Debug, Default)]
pub struct FeatureRules {
    /// `http-request` rules after the route lookup, before the HTTPS redirect for TLS
    /// hosts.
    pub request: String,
    /// The condition that leaves the default HTTPS redirect to the feature sets that
    /// decide it themselves (empty when none).
    pub default_redirect_exception: String,
    /// `http-request` rules after the HTTPS redirect.
    pub late_request: String,
    /// `http-response` rules.
    pub response: String,
    /// Sections: userlists and stick tables.
    pub sections: String,
}

/// `{ var(txn.fs) -m str f1 f2 }`: true for the requests of these sets.
pub(crate) fn sets_acl(ids: &[&FeatureSetId]) -> String {
    let ids: Vec<&str> = ids.iter().map(|id| id.as_str()).collect();
    format!("{{ var(txn.fs) -m str {} }}", ids.join(" "))
}

/// The ACL of every set of `groups`, in order.
pub(crate) fn groups_acl<T>(groups: &BTreeMap<T, Vec<&FeatureSetId>>) -> String {
    let mut all: Vec<&FeatureSetId> = groups.values().flatten().copied().collect();
    all.sort();
    sets_acl(&all)
}

/// The sets grouped by the value `pick` gives them (sets where it gives `None` are left
/// out).
pub(crate) fn group<'a, T: Ord + 'a>(
    sets: &'a BTreeMap<FeatureSetId, RouteFeatures>,
    pick: impl Fn(&'a RouteFeatures) -> Option<T>,
) -> BTreeMap<T, Vec<&'a FeatureSetId>> {
    let mut groups: BTreeMap<T, Vec<&FeatureSetId>> = BTreeMap::new();
    for (id, features) in sets {
        if let Some(value) = pick(features) {
            groups.entry(value).or_default().push(id);
        }
    }
    groups
}

/// The sets of `ids` grouped by the value `pick` gives them.
pub(crate) fn group_of<'a, T: Ord + 'a>(
    sets: &'a BTreeMap<FeatureSetId, RouteFeatures>,
    ids: &[&'a FeatureSetId],
    pick: impl Fn(&'a RouteFeatures) -> Option<T>,
) -> BTreeMap<T, Vec<&'a FeatureSetId>> {
    let mut groups: BTreeMap<T, Vec<&FeatureSetId>> = BTreeMap::new();
    for id in ids {
        if let Some(value) = sets.get(*id).and_then(&pick) {
            groups.entry(value).or_default().push(id);
        }
    }
    groups
}
