//! What the writers of the route features' rules share: the phases of the frontend in
//! the order haproxy meets them, the text each phase collects, the names the rules use
//! and the helpers that guard a rule by the feature sets that have a setting.
//!
//! A leaf: the writers (see [`crate::features`]) import it, it imports none of them.

use std::collections::BTreeMap;

use tugboat_model::Desired;
use tugboat_model::features::{FeatureSetId, RouteFeatures};

use crate::settings::RenderSettings;

/// The separator between a route's backend and its feature set in the maps' values.
pub const FEATURE_SEPARATOR: char = '.';

/// The backend that answers requests no route matches, when no Ingress sets one.
pub const NOT_FOUND_BACKEND: &str = "tugboat_not_found";

/// The phases of the features' rules, in the order they are written: haproxy evaluates
/// the `http-request` rules of a frontend in the order of the file, so this order
/// matters. The declaration order is the order (`Ord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Gateway API: the routes of one bind only, then the rules of a host and path that
    /// match on the method, headers or query, which pick the feature set of the request
    /// before any set's rule looks at it.
    Dispatch,
    /// Routes whose objects restrict access in a way Tugboat cannot honour: nobody.
    Deny,
    /// Bodies larger than the routes accept, before anything else looks at the request,
    /// as ingress-nginx does.
    BodySize,
    /// Routes that answer by themselves (Gateway API rules without a usable backend).
    Answer,
    /// The client address for access lists and rate limits.
    ClientAddress,
    /// Access lists: inline, then from pattern files.
    Lists,
    /// Canaries: the decision to send the request to the canary's backend.
    Canary,
    /// Gateway API: the weighted backends and the server timeout of a rule (HTTPRoutes'
    /// sets only: the Ingresses' redirects below never meet them).
    GatewayBackend,
    /// The request counters, once the backend is chosen (`request_stats`): requests
    /// answered by a rule above are not counted per route.
    Metrics,
    /// Redirects to a URL or host, app-root and the HTTPS redirects of the sets that
    /// decide them, before the default HTTPS redirect, as ingress-nginx answers them.
    Redirects,
    /// Gateway API: redirects.
    GatewayRedirect,
    /// The default HTTPS redirect of TLS hosts, except for the sets that decide it
    /// themselves.
    HttpsException,
    /// Rate limits, before authentication so that guessing passwords is limited too.
    Limits,
    /// CORS preflight answers, before authentication: browsers send no credentials.
    Cors,
    /// Basic and external authentication.
    Auth,
    /// Changes of the request's path and headers on its way to the backend.
    Rewrite,
    /// Last of the `http-request` rules: the error backend's fallback looks at the
    /// backend every rule above has chosen.
    Fallback,
    /// `http-response` rules.
    Response,
    /// `use_backend` rules before the general one.
    Switching,
    /// Sections after the frontends: userlists, stick tables, internal frontends.
    Sections,
}

/// Where the text of a phase goes in `haproxy.cfg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The frontend's `http-request` and `http-response` rules, after the route lookup.
    Rules,
    /// The frontend's `use_backend` rules, before the general one.
    Switching,
    /// The sections after the frontends.
    Sections,
}

impl Phase {
    /// Where the phase's text goes.
    pub fn place(self) -> Place {
        match self {
            Phase::Switching => Place::Switching,
            Phase::Sections => Place::Sections,
            _ => Place::Rules,
        }
    }
}

/// A writer of one feature's rules into the text of its phase.
pub type Write = fn(&Desired, &RenderSettings, &mut String);

/// A writer and the phase it writes into.
pub type Writer = (Phase, Write);

/// The rules of the features: the text of every phase.
#[derive(Debug, Default)]
pub struct FeatureRules {
    texts: BTreeMap<Phase, String>,
}

impl FeatureRules {
    /// Runs the writers: each appends to the text of its phase, so writers of one phase
    /// write in the order they are listed.
    pub fn write(writers: &[Writer], desired: &Desired, settings: &RenderSettings) -> Self {
        let mut texts: BTreeMap<Phase, String> = BTreeMap::new();
        for (phase, write) in writers {
            write(desired, settings, texts.entry(*phase).or_default());
        }
        FeatureRules { texts }
    }

    /// The text of the phases that go in `place`, in the order of the phases.
    pub fn text(&self, place: Place) -> String {
        self.texts
            .iter()
            .filter(|(phase, _)| phase.place() == place)
            .map(|(_, text)| text.as_str())
            .collect()
    }
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

/// The defaults' timeouts, by name: the keys' defaults, then what the ConfigMap sets.
pub(crate) fn timeouts(desired: &Desired) -> BTreeMap<&str, String> {
    let mut timeouts: BTreeMap<&str, String> = tugboat_model::annotations::default_timeouts();
    for (name, value) in &desired.global.timeouts {
        timeouts.insert(name, value.clone());
    }
    timeouts
}
