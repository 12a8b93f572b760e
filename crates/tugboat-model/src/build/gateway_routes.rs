//! The builder's side of the Gateway API: the rules [`crate::gateway::translate`] gives
//! become routes of the same maps the Ingresses fill (after them: an Ingress keeps a host
//! and path it claims), listener certificates join the crt-list, and the status comes
//! back to the caller.
//!
//! A rule's backend is built as an Ingress backend is (the Service's keys and the
//! ConfigMap's apply, a route of an HTTPRoute has no keys of its own; a split takes
//! those of its first Service). A rule whose backend does not resolve goes to
//! [`BackendName::unresolved`] with a feature set that answers 500, as the spec asks.
//! The rule's filters and weighted backends join its feature set
//! ([`crate::RouteFeatures::gateway`]).
//!
//! The passthrough rules of TLSRoutes join the Ingresses' `ssl-passthrough` hosts
//! ([`super::passthrough`]): the oldest claimer of an SNI name has it, whatever its kind,
//! and the others get a problem. A rule whose backend does not resolve has its names
//! passed to the passthrough twin of [`BackendName::unresolved`], which has no server:
//! their connections are closed, as the spec asks, never terminated with another
//! certificate (its route says why in `ResolvedRefs`).
//!
//! The rules of TCPRoutes become TCP services ([`crate::desired::TcpService`]): the
//! oldest route of a port has it, the others get a problem and serve nothing there. A
//! rule whose backend does not resolve keeps its port bound, its connections closed.

use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend, ServiceBackendPort};

use super::endpoints::Endpoints;
use super::passthrough::Passthrough;
use super::route_features::Features;
use super::routes::{Routes, Slot, new_route};
use super::shared::{SecretUse, Shared};
use super::tls::Tls;
use crate::annotations::{Layer, Scope};
use crate::desired::{BackendName, ServicePortRef, TcpService};
use crate::features::{BackendOptions, FeatureSetId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::desired::{HostMatch, ListenerBind, PathMatch, Route, RouteOwnerKind};
use crate::features::RouteFeatures;
use crate::gateway::features::{
    Candidate, Conditions, Dispatch, GatewayFeatures, Otherwise, PathCondition, Share,
};
use crate::gateway::{
    GatewayStatus, PassthroughRule, RouteKind, RuleBackend, RuleRoute, TcpRule, settle_attachments,
    translate,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;

/// The status HTTP rules without a usable backend answer.
const UNRESOLVED_STATUS: u16 = 500;

/// Which parents of which routes (by their place in the route's status) have rules
/// served, and to whom the others lost their hosts and paths.
#[derive(Debug, Default)]
struct Served {
    served: BTreeSet<(ObjectKey, usize)>,
    lost_to: BTreeMap<(ObjectKey, usize), String>,
}

impl Served {
    fn serve(&mut self, rule: &RuleRoute) {
        self.serve_parents(&rule.route, &rule.parents);
    }

    fn serve_parents(&mut self, route: &ObjectKey, parents: &[usize]) {
        for &parent in parents {
            self.served.insert((route.clone(), parent));
        }
    }

    fn lose(&mut self, rule: &RuleRoute, owner: &str) {
        self.lose_parents(&rule.route, &rule.parents, owner);
    }

    fn lose_parents(&mut self, route: &ObjectKey, parents: &[usize], owner: &str) {
        for &parent in parents {
            self.lost_to
                .entry((route.clone(), parent))
                .or_insert_with(|| owner.to_string());
        }
    }

    /// Takes back what [`Self::serve_parents`] recorded: the parents lost their rules,
    /// for `why`.
    fn withdraw_parents(&mut self, route: &ObjectKey, parents: &[usize], why: &str) {
        for &parent in parents {
            let id = (route.clone(), parent);
            self.served.remove(&id);
            self.lost_to.insert(id, why.to_string());
        }
    }

    /// Why the parent of an attachment whose route offered something there serves
    /// nothing (`None`: it serves something, or offered nothing to lose).
    fn serves_nothing(
        &self,
        offered: &BTreeSet<(ObjectKey, usize)>,
        id: &(ObjectKey, usize),
    ) -> Option<&str> {
        if !offered.contains(id) || self.served.contains(id) {
            return None;
        }
        Some(self.lost_to.get(id).map_or("other routes", String::as_str))
    }
}

/// What the Gateway API objects give a build besides routes, backends, feature sets and
/// certificates.
pub(super) struct GatewayOutput {
    pub status: GatewayStatus,
    /// The certificate of an HTTPS listener without a hostname, the HTTPS bind's default
    /// ([`crate::gateway::Translation::default_certificate`]).
    pub default_certificate: Option<Pem>,
    /// The hosts and paths routed by HTTPRoutes.
    pub http_route_slots: BTreeSet<Slot>,
    /// The listener ports with binds of their own, with their routes.
    pub listener_binds: Vec<ListenerBind>,
    /// The TCP services of TCPRoutes, by port.
    pub tcp_services: BTreeMap<u16, TcpService>,
}

/// Adds the routes and certificates of the Gateway API objects to the parts of a build,
/// after the Ingresses'.
pub(super) fn add_gateway_api<'a>(
    shared: &mut Shared<'a>,
    endpoints: &mut Endpoints<'a>,
    tls: &mut Tls<'a>,
    features: &mut Features,
    routes: &mut Routes,
    passthrough: &mut Passthrough,
) -> GatewayOutput {
    let mut gateway = GatewayBuild {
        shared,
        endpoints,
        tls,
        features,
        routes,
        passthrough,
        http_route_slots: BTreeSet::new(),
        parked: None,
        listener_tables: BTreeMap::new(),
        tcp_services: BTreeMap::new(),
    };
    let (status, default_certificate, own_binds) = gateway.add();
    let mut tables = gateway.listener_tables;
    let listener_binds = own_binds
        .into_iter()
        .map(|(port, tls)| ListenerBind {
            port,
            tls,
            routes: tables
                .remove(&port)
                .map(|table| table.into_parts().0)
                .unwrap_or_default(),
        })
        .collect();
    GatewayOutput {
        status,
        default_certificate,
        http_route_slots: gateway.http_route_slots,
        listener_binds,
        tcp_services: gateway.tcp_services,
    }
}

/// The parts of a build the Gateway API objects add to, lent for that time.
struct GatewayBuild<'p, 'a> {
    shared: &'p mut Shared<'a>,
    endpoints: &'p mut Endpoints<'a>,
    tls: &'p mut Tls<'a>,
    features: &'p mut Features,
    routes: &'p mut Routes,
    passthrough: &'p mut Passthrough,
    /// The hosts and paths routed by HTTPRoutes.
    http_route_slots: BTreeSet<Slot>,
    /// The routes of the HTTP and HTTPS binds while those of a port with a bind of its
    /// own are built in their place ([`GatewayBuild::add_listener_table`]).
    parked: Option<Routes>,
    /// The routes of each port with a bind of its own, once built.
    listener_tables: BTreeMap<u16, Routes>,
    /// The TCP services of TCPRoutes, by port.
    tcp_services: BTreeMap<u16, TcpService>,
}

impl GatewayBuild<'_, '_> {
    /// Adds the routes and certificates of the Gateway API objects; their status, and
    /// the HTTPS bind's default certificate.
    fn add(&mut self) -> (GatewayStatus, Option<Pem>, BTreeMap<u16, bool>) {
        let Some(settings) = self.shared.settings.gateway.clone() else {
            return (GatewayStatus::default(), None, BTreeMap::new());
        };
        // The feature sets of plain routes served on one bind only are always there, so
        // that the first HTTPRoute of an HTTP-only or HTTPS-only listener is a map
        // update like the next ones, not a new frontend rule (a reload).
        for only_tls in [false, true] {
            self.features.insert(RouteFeatures {
                gateway: Some(GatewayFeatures {
                    only_tls: Some(only_tls),
                    ..GatewayFeatures::default()
                }),
                ..RouteFeatures::default()
            });
        }
        let snapshot = self.shared.snapshot;
        let translation = translate(snapshot, &settings, &mut |secret: &ObjectKey| {
            self.tls
                .checked_secret(self.shared, secret, SecretUse::Certificate)
                .map(|_| ())
                .map_err(|(_, message)| message)
        });
        self.shared.problems.extend(translation.problems);
        for certificate in &translation.certificates {
            self.tls.add_listener_certificate(self.shared, certificate);
        }
        // Read as a Secret of another use: a rotation rebuilds (the default is no
        // certificate of the crt-list that a patch can replace).
        let default_certificate = translation.default_certificate.as_ref().and_then(|c| {
            self.tls
                .checked_secret(self.shared, &c.secret, SecretUse::Other)
                .ok()
        });
        // The parents of routes that give rules: each must serve one of them.
        let offered: BTreeSet<(ObjectKey, usize)> = translation
            .rules
            .iter()
            .flat_map(|rule| rule.parents.iter().map(|&p| (rule.route.clone(), p)))
            .collect();
        let mut served = Served::default();
        // The rules of each bind's host and path, in precedence order (the first
        // claimer's slot keeps its place among the slots): the HTTP and HTTPS binds'
        // (`None`), then each port with a bind of its own, whose routes are its own.
        let mut tables: BTreeMap<Option<u16>, Vec<Vec<RuleRoute>>> = BTreeMap::new();
        let mut slot_of: HashMap<(Option<u16>, Slot), usize> = HashMap::new();
        for rule in translation.rules {
            let table = tables.entry(rule.listener_port).or_default();
            let slot = (rule.listener_port, (rule.host.clone(), rule.path.clone()));
            let index = *slot_of.entry(slot).or_insert_with(|| {
                table.push(Vec::new());
                table.len() - 1
            });
            table[index].push(rule);
        }
        for (port, slots) in tables {
            match port {
                None => self.add_table(slots, &mut served),
                Some(port) => self.add_listener_table(port, slots, &mut served),
            }
        }
        let tls_offered: BTreeSet<(ObjectKey, usize)> = translation
            .passthrough
            .iter()
            .flat_map(|rule| rule.parents.iter().map(|&p| (rule.route.clone(), p)))
            .collect();
        let mut tls_served = Served::default();
        for rule in &translation.passthrough {
            self.add_passthrough_rule(rule, &mut tls_served);
        }
        // Every HTTP route is in: a name whose routes restrict access loses its
        // passthrough now, and a TLSRoute left with no name says so.
        let features = &*self.features;
        let refused = self
            .passthrough
            .refuse_bypassed(self.shared, self.routes.iter(), |id| features.get(id));
        let why = "refused passthrough (an HTTP route of the name restricts access, see the \
                   route's problems)";
        for rule in &translation.passthrough {
            let owner = ObjectRef::of("TLSRoute", &rule.route);
            if refused
                .iter()
                .any(|r| r.host == rule.host && r.port == rule.port && r.owner == owner)
            {
                tls_served.withdraw_parents(&rule.route, &rule.parents, why);
            }
        }
        for rule in &translation.passthrough {
            let owner = ObjectRef::of("TLSRoute", &rule.route);
            if self.passthrough.owner_of(&rule.slot()) == Some(&owner) {
                tls_served.serve_parents(&rule.route, &rule.parents);
            }
        }
        let tcp_offered: BTreeSet<(ObjectKey, usize)> = translation
            .tcp
            .iter()
            .flat_map(|rule| rule.parents.iter().map(|&p| (rule.route.clone(), p)))
            .collect();
        let mut tcp_served = Served::default();
        for rule in &translation.tcp {
            self.add_tcp_rule(rule, &mut tcp_served);
        }
        let mut status = translation.status;
        settle_attachments(&mut status, &translation.attachments, |attachment| {
            let id = (attachment.route.clone(), attachment.parent);
            match attachment.kind {
                RouteKind::Http => served.serves_nothing(&offered, &id).map(|owner| {
                    format!(
                        "every host and path of this route on this parent is already routed \
                         by {owner}: it serves nothing here (listeners of one haproxy bind, \
                         such as port 80 and the HTTP bind's port, share its hosts and paths; \
                         a port of --gateway-listener-ports has a bind of its own)"
                    )
                }),
                RouteKind::Tls => tls_served.serves_nothing(&tls_offered, &id).map(|why| {
                    format!(
                        "every SNI name of this route on this parent is {why}: it serves \
                         nothing here"
                    )
                }),
                RouteKind::Tcp => tcp_served.serves_nothing(&tcp_offered, &id).map(|why| {
                    format!(
                        "the port of this route on this parent is {why}: it serves nothing \
                         here (a TCP listener's port goes to one route)"
                    )
                }),
            }
        });
        (status, default_certificate, translation.own_binds)
    }

    /// Adds the rules of one bind, slot by slot, then their fall backs.
    fn add_table(&mut self, slots: Vec<Vec<RuleRoute>>, served: &mut Served) {
        for rules in slots {
            self.add_gateway_slot(rules, served);
        }
        self.add_gateway_fallbacks();
    }

    /// Adds the rules of the port `port`, which has a bind of its own, to a table of
    /// its own: built as the HTTP and HTTPS binds' are, in their place for that time (no
    /// Ingress and no other port is among them, to claim or to fall back to).
    fn add_listener_table(&mut self, port: u16, slots: Vec<Vec<RuleRoute>>, served: &mut Served) {
        self.parked = Some(std::mem::take(&mut *self.routes));
        let bind_slots = std::mem::take(&mut self.http_route_slots);
        self.add_table(slots, served);
        self.http_route_slots = bind_slots;
        let main = self.parked.take().unwrap_or_default();
        let table = std::mem::replace(&mut *self.routes, main);
        self.listener_tables.insert(port, table);
    }

    /// Every route of every table: the one being built, the parked one and the ports'.
    fn all_routes(&self) -> impl Iterator<Item = &Route> {
        self.routes
            .iter()
            .chain(self.parked.iter().flat_map(Routes::iter))
            .chain(self.listener_tables.values().flat_map(Routes::iter))
    }

    /// Passes the TLS of a TLSRoute's SNI name to its backend, unless an older object
    /// has the name (an Ingress with `ssl-passthrough`, or an older TLSRoute: translated
    /// first); a younger Ingress that has it loses it, with a problem.
    fn add_passthrough_rule(&mut self, rule: &PassthroughRule, served: &mut Served) {
        let object = ObjectRef::of("TLSRoute", &rule.route);
        let field = "spec.hostnames";
        if let Some(owner) = self.passthrough.owner_of(&rule.slot()).cloned() {
            if self.younger_ingress(&owner, rule.created.as_deref()) {
                self.shared.problems.push(ObjectProblem {
                    object: owner.clone(),
                    field: "metadata.annotations".into(),
                    reason: ProblemReason::RouteConflict,
                    message: format!(
                        "ssl-passthrough of host {} is taken by the older TLSRoute {}",
                        rule.host, rule.route
                    ),
                });
                self.passthrough.release(&rule.slot());
            } else {
                let why = format!("already passed through for the older {owner}");
                self.shared.problems.push(ObjectProblem {
                    object,
                    field: field.into(),
                    reason: ProblemReason::RouteConflict,
                    message: format!("SNI name {} is {why}", rule.host),
                });
                served.lose_parents(&rule.route, &rule.parents, &why);
                return;
            }
        }
        let (http, backend) = match &rule.backend {
            Some((service, port)) => {
                let layer = Layer::empty(object.clone(), Scope::Ingress);
                let Some(http) = self.gateway_backend(&rule.route, field, service, *port, &layer)
                else {
                    return;
                };
                let Some(backend) = self.endpoints.built(&http).cloned() else {
                    return;
                };
                (http, backend)
            }
            // Its connections are closed (the route's ResolvedRefs says why). The HTTP
            // backend of unresolved rules only lends its shape: it stays only when an
            // HTTP rule uses it.
            None => {
                let needed = self.endpoints.built(&BackendName::unresolved()).is_some();
                let http = self.endpoints.unresolved_backend();
                let backend = self.endpoints.built(&http).cloned();
                if !needed {
                    self.endpoints.remove_unresolved_backend();
                }
                let Some(backend) = backend else {
                    return;
                };
                (http, backend)
            }
        };
        if self.passthrough.add(
            self.shared,
            &object,
            field,
            (rule.port, &rule.host),
            (&http, &backend),
        ) {
            served.serve_parents(&rule.route, &rule.parents);
        } else {
            let why = "refused passthrough (see the route's problems)";
            served.lose_parents(&rule.route, &rule.parents, why);
        }
    }

    /// Gives the port of a TCPRoute's rule to its backend, unless an older TCPRoute has
    /// the port (translated first).
    fn add_tcp_rule(&mut self, rule: &TcpRule, served: &mut Served) {
        let object = ObjectRef::of("TCPRoute", &rule.route);
        if let Some(owner) = self.tcp_services.get(&rule.port).map(|s| s.owner.clone()) {
            let why = format!("already given to the older {owner}");
            self.shared.problems.push(ObjectProblem {
                object,
                field: "spec.parentRefs".into(),
                reason: ProblemReason::RouteConflict,
                message: format!("port {} is {why}", rule.port),
            });
            served.lose_parents(&rule.route, &rule.parents, &why);
            return;
        }
        // A backend that does not resolve (the route's ResolvedRefs says why) leaves the
        // port bound with its connections closed.
        let backend = rule.backend.as_ref().and_then(|(service, port)| {
            let port = ServicePortRef::Number(*port);
            let name = BackendName::for_service_port(service, &port)
                .ok()?
                .tcp(false);
            let options = Arc::new(BackendOptions {
                tcp_service: true,
                ..BackendOptions::default()
            });
            self.endpoints
                .tcp_backend(self.shared, &name, service, &port, &options)
                .ok()?;
            Some(name)
        });
        self.tcp_services.insert(
            rule.port,
            TcpService {
                port: rule.port,
                backend,
                accept_proxy: false,
                send_proxy: false,
                owner: object,
            },
        );
        served.serve_parents(&rule.route, &rule.parents);
    }

    /// Whether `owner` is an Ingress created after `created` (RFC 3339; an object
    /// without a time is the oldest).
    fn younger_ingress(&self, owner: &ObjectRef, created: Option<&str>) -> bool {
        if owner.kind != "Ingress" {
            return false;
        }
        let key = ObjectKey::new(&owner.namespace, &owner.name);
        let ingress_created = self
            .shared
            .snapshot
            .ingresses
            .get(&key)
            .and_then(|ingress| ingress.metadata.creation_timestamp.as_ref())
            .map(|time| time.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        created.map(str::to_string) < ingress_created
    }

    /// A host and path whose rules all have conditions sends the requests that meet none
    /// to the next rule that matches them, in the order haproxy's route lookup would
    /// have found them ([`GatewayBuild::fallback_steps`]): whoever routes it (an HTTPRoute or
    /// an Ingress), its conditions first when it has some, and so on down to a route
    /// without conditions that takes every request left (404 when there is none). A rule
    /// that matches only some of the requests (another host's exact path or longer
    /// prefix, an Ingress' regular expression) is tried under a [`PathCondition`]; an
    /// Ingress' canary goes with its route.
    fn add_gateway_fallbacks(&mut self) {
        let mut updates = Vec::new();
        for slot in &self.http_route_slots {
            let Some(route) = self.routes.get(slot) else {
                continue;
            };
            // The slot's rules as a dispatch that leaves the requests it does not take to
            // the fall back: its rules with conditions, and, when they are served on one
            // bind only, its rule without conditions too, for that bind (the other bind's
            // requests go on, as the spec orders the rules of the listeners they came
            // for).
            let (mut dispatch, bind, base) = match self.dispatch_of(route.features.as_ref()) {
                Some((gateway, found)) => match (gateway.only_tls, &found.otherwise) {
                    (None, Otherwise::NotFound) => (found.clone(), None, Some(gateway.clone())),
                    (None, Otherwise::Route(_)) => continue,
                    (Some(tls), otherwise) => {
                        let mut found = found.clone();
                        for candidate in &mut found.candidates {
                            candidate.conditions.tls = candidate.conditions.tls.or(Some(tls));
                        }
                        if let Otherwise::Route(features) = otherwise {
                            found.candidates.push(Candidate {
                                conditions: Conditions {
                                    tls: Some(tls),
                                    ..Conditions::default()
                                },
                                backend: route.backend.clone(),
                                features: features.clone(),
                                canary: None,
                            });
                            found.otherwise = Otherwise::NotFound;
                        }
                        let base =
                            matches!(otherwise, Otherwise::NotFound).then(|| gateway.clone());
                        (found, Some(tls), base)
                    }
                },
                None => {
                    let Some(tls) = route
                        .features
                        .as_ref()
                        .and_then(|id| self.features.get(id))
                        .and_then(|f| f.gateway.as_ref())
                        .and_then(|g| g.only_tls)
                    else {
                        continue;
                    };
                    let own = Candidate {
                        conditions: Conditions {
                            tls: Some(tls),
                            ..Conditions::default()
                        },
                        backend: route.backend.clone(),
                        features: route.features.clone(),
                        canary: route.canary.clone(),
                    };
                    let dispatch = Dispatch {
                        candidates: vec![own],
                        otherwise: Otherwise::NotFound,
                    };
                    (dispatch, Some(tls), None)
                }
            };
            let own_rules = dispatch.candidates.len();
            let mut backend = route.backend.clone();
            let mut canary = route.canary.clone();
            for step in self.fallback_steps(slot) {
                let Some(fallback) = self.routes.get(&step.slot) else {
                    continue;
                };
                let (bind, found) = match self.dispatch_of(fallback.features.as_ref()) {
                    Some((gateway, found)) => (gateway.only_tls, Some(found)),
                    None => (
                        fallback
                            .features
                            .as_ref()
                            .and_then(|id| self.features.get(id))
                            .and_then(|f| f.gateway.as_ref())
                            .and_then(|g| g.only_tls),
                        None,
                    ),
                };
                let on_step = |mut conditions: Conditions| {
                    conditions.tls = conditions.tls.or(bind);
                    conditions.path = conditions.path.or_else(|| step.path.clone());
                    conditions
                };
                let otherwise = match found {
                    Some(found) => {
                        for candidate in &found.candidates {
                            dispatch.candidates.push(Candidate {
                                conditions: on_step(candidate.conditions.clone()),
                                ..candidate.clone()
                            });
                        }
                        match &found.otherwise {
                            Otherwise::Route(features) => Some(features.clone()),
                            Otherwise::NotFound => None,
                        }
                    }
                    None => Some(fallback.features.clone()),
                };
                if let Some(features) = otherwise {
                    if bind.is_none() && step.path.is_none() {
                        // Every request left: the route's own target (its canary too).
                        dispatch.otherwise = Otherwise::Route(features);
                        backend = fallback.backend.clone();
                        canary = fallback.canary.clone();
                        break;
                    }
                    // Served on one bind only, or for some paths: a condition, and on
                    // to the next.
                    dispatch.candidates.push(Candidate {
                        conditions: on_step(Conditions::default()),
                        backend: fallback.backend.clone(),
                        features,
                        canary: fallback.canary.clone(),
                    });
                }
            }
            if let Some(tls) = bind {
                let other_bind_goes_on = dispatch.otherwise != Otherwise::NotFound
                    || dispatch.candidates[own_rules..]
                        .iter()
                        .any(|c| c.conditions.tls != Some(tls));
                // Nothing takes the other bind's requests: the slot stays as it is
                // (a plain route stays a map entry).
                if !other_bind_goes_on && base.is_none() {
                    continue;
                }
            }
            // A dispatch of one bind now says the bind in its candidates.
            let features = RouteFeatures {
                gateway: Some(GatewayFeatures {
                    dispatch: Some(dispatch),
                    only_tls: if bind.is_some() {
                        None
                    } else {
                        base.as_ref().and_then(|g| g.only_tls)
                    },
                    ..base.unwrap_or_default()
                }),
                ..RouteFeatures::default()
            };
            updates.push((slot.clone(), backend, canary, features));
        }
        if updates.is_empty() {
            return;
        }
        let mut replaced = BTreeSet::new();
        for (slot, backend, canary, features) in updates {
            let id = self.features.insert(features);
            if let Some(route) = self.routes.get_mut(&slot) {
                replaced.extend(route.features.replace(id));
                route.backend = backend;
                route.canary = canary;
            }
        }
        // The sets replaced are left when no route nor dispatch uses them (one slot's
        // rules make a dispatch; a plain route's set is its dispatch's candidate).
        let mut used: BTreeSet<&FeatureSetId> = self
            .all_routes()
            .filter_map(|route| route.features.as_ref())
            .collect();
        for dispatch in self
            .features
            .iter()
            .filter_map(|f| f.gateway.as_ref()?.dispatch.as_ref())
        {
            used.extend(
                dispatch
                    .candidates
                    .iter()
                    .filter_map(|c| c.features.as_ref()),
            );
            if let Otherwise::Route(Some(features)) = &dispatch.otherwise {
                used.insert(features);
            }
        }
        let unused: Vec<FeatureSetId> = replaced
            .into_iter()
            .filter(|id| !used.contains(id))
            .collect();
        for id in unused {
            self.features.remove(&id);
        }
        // The backend of rules without one, when a fallback took its last route.
        let unresolved = BackendName::unresolved();
        let still_used = self.all_routes().any(|r| r.backend == unresolved)
            || self.features.iter().any(|f| {
                f.gateway
                    .as_ref()
                    .and_then(|g| g.dispatch.as_ref())
                    .is_some_and(|d| d.candidates.iter().any(|c| c.backend == unresolved))
            });
        if !still_used {
            self.endpoints.remove_unresolved_backend();
        }
    }

    /// The gateway features and dispatch of a feature set, when it has one.
    fn dispatch_of(
        &self,
        features: Option<&FeatureSetId>,
    ) -> Option<(&GatewayFeatures, &Dispatch)> {
        let gateway = self.features.get(features?)?.gateway.as_ref()?;
        Some((gateway, gateway.dispatch.as_ref()?))
    }

    /// The rules the requests of `slot` may go to when its own do not take them, in the
    /// order haproxy's lookup would have found them: the same host's Ingress regular
    /// expressions (tried after the exact map, where a prefix's own path is too), its
    /// shorter prefixes (for an exact path, the prefix of the same path counts), then,
    /// host after host ([`hosts_after`]), the rules of the less specific hosts that match
    /// some of its requests ([`GatewayBuild::host_steps`]). The list ends early at a rule
    /// whose path cannot be written as a condition (a `'` in it): the requests that
    /// would reach it get 404, never another rule's answer.
    fn fallback_steps(&self, slot: &Slot) -> Vec<FallbackStep> {
        let (host, path) = slot;
        let Some((text, exact)) = path_parts(path) else {
            return Vec::new();
        };
        let mut steps = Vec::new();
        let on_host = self.routes.of_host(host);
        for regex in regex_keys(&on_host) {
            steps.push(FallbackStep::when(regex, path_condition_of(&regex.1)));
        }
        let mut shorter: Vec<&Slot> = on_host
            .iter()
            .copied()
            .filter(|(_, other)| matches!(other, PathMatch::Prefix(p) if covers(p, text, exact)))
            .collect();
        shorter.sort_by_key(|(_, other)| {
            std::cmp::Reverse(path_parts(other).map_or(0, |(p, _)| p.len()))
        });
        steps.extend(shorter.into_iter().map(|key| FallbackStep::when(key, None)));
        for next in hosts_after(host) {
            self.host_steps(&next, text, exact, &mut steps);
        }
        if let Some(unwritable) = steps.iter().position(|step| !step.writable()) {
            steps.truncate(unwritable);
        }
        steps
    }

    /// The rules of a less specific host `host` that match requests of the path `text`
    /// (exact, or a prefix), in haproxy's order for that host: the exact map (exact
    /// paths, and a prefix's own path), its regular expressions, then the prefix map,
    /// longest first. A rule that matches only some of the requests gets the condition
    /// on the path that picks them.
    fn host_steps(&self, host: &HostMatch, text: &str, exact: bool, steps: &mut Vec<FallbackStep>) {
        let on_host = self.routes.of_host(host);
        let regexes = regex_keys(&on_host);
        let mut prefixes: Vec<(&Slot, &str)> = on_host
            .iter()
            .filter_map(|key| match &key.1 {
                PathMatch::Prefix(prefix) => Some((*key, prefix.as_str())),
                _ => None,
            })
            .collect();
        prefixes.sort_by_key(|(_, prefix)| std::cmp::Reverse(prefix.len()));
        let exact_path = |path: &str| -> Option<Option<PathCondition>> {
            if exact {
                (path == text).then_some(None)
            } else {
                (covers(text, path, true)).then(|| Some(PathCondition::Exact(path.to_string())))
            }
        };
        for key in &on_host {
            if let PathMatch::Exact(path) = &key.1
                && let Some(condition) = exact_path(path)
            {
                steps.push(FallbackStep::when(key, condition));
            }
        }
        // With regular expressions between them, a prefix's own path comes before them.
        if !regexes.is_empty() {
            for (key, prefix) in &prefixes {
                if let Some(condition) = exact_path(prefix) {
                    steps.push(FallbackStep::when(key, condition));
                }
            }
        }
        for regex in regexes {
            steps.push(FallbackStep::when(regex, path_condition_of(&regex.1)));
        }
        for (key, prefix) in prefixes {
            if covers(prefix, text, true) {
                steps.push(FallbackStep::when(key, None));
            } else if !exact && covers(text, prefix, false) {
                let condition = if regexes_between(&on_host) {
                    PathCondition::Under(prefix.to_string())
                } else {
                    PathCondition::Prefix(prefix.to_string())
                };
                steps.push(FallbackStep::when(key, Some(condition)));
            }
        }
    }

    fn route_object(route: &ObjectKey) -> ObjectRef {
        ObjectRef::of("HTTPRoute", route)
    }

    fn gateway_conflict(&mut self, rule: &RuleRoute, owner: String) {
        self.shared.problems.push(ObjectProblem {
            object: Self::route_object(&rule.route),
            field: rule.field.clone(),
            reason: ProblemReason::RouteConflict,
            message: format!(
                "host {} path {}{} is already routed by {owner}",
                rule.host,
                rule.path,
                if rule.conditions.is_empty() {
                    String::new()
                } else {
                    " with the same method, headers and query".to_string()
                }
            ),
        });
    }

    /// The rules of one host and path (in the order of precedence the translation gives:
    /// oldest route first). Without conditions the first takes the slot; with some, the
    /// route's map entry leads to a [`Dispatch`] of them in the spec's order.
    fn add_gateway_slot(&mut self, rules: Vec<RuleRoute>, served: &mut Served) {
        let Some(first) = rules.first() else {
            return;
        };
        let slot = (first.host.clone(), first.path.clone());
        if let Some(existing) = self.routes.get(&slot) {
            self.shared.reads.contested_routes.insert(slot.clone());
            let owner = format!("the Ingress {} (Ingresses come first)", existing.ingress);
            let mut told = BTreeSet::new();
            for rule in &rules {
                served.lose(rule, &owner);
                if told.insert(rule.route.clone()) {
                    self.gateway_conflict(rule, owner.clone());
                }
            }
            return;
        }
        let rules = merge_listener_ports(rules);
        // A rule served on both binds (its route attached to an HTTP and an HTTPS
        // listener) is one rule without a bind condition when it does the same on both
        // (a redirect may keep each listener's port); on one listener twice, one.
        let mut merged: Vec<RuleRoute> = Vec::new();
        for rule in rules {
            let same = merged.iter().position(|m| {
                m.route == rule.route
                    && m.field == rule.field
                    && m.conditions.without_bind() == rule.conditions.without_bind()
                    && m.features == rule.features
            });
            match same {
                Some(index) => {
                    if merged[index].conditions.tls != rule.conditions.tls {
                        merged[index].conditions.tls = None;
                    }
                    join_parents(&mut merged[index], &rule);
                }
                None => merged.push(rule),
            }
        }
        // When every rule is for the same bind, the bind is the host and path's, not a
        // condition between its rules.
        let binds: BTreeSet<Option<bool>> = merged.iter().map(|r| r.conditions.tls).collect();
        let common_bind = match binds.first() {
            Some(&bind) if binds.len() == 1 => bind,
            _ => None,
        };
        if common_bind.is_some() {
            for rule in &mut merged {
                rule.conditions.tls = None;
            }
        }
        // The first rule of each distinct conditions wins.
        let mut kept: Vec<&RuleRoute> = Vec::new();
        for rule in &merged {
            match kept.iter().find(|k| k.conditions == rule.conditions) {
                None => {
                    served.serve(rule);
                    kept.push(rule);
                }
                // The same route's: served by it all the same.
                Some(winner) if winner.route == rule.route => served.serve(rule),
                Some(winner) => {
                    let owner = format!("the older HTTPRoute {}", winner.route);
                    served.lose(rule, &owner);
                    self.gateway_conflict(rule, owner);
                }
            }
        }
        let unconditional = kept.iter().position(|rule| rule.conditions.is_empty());
        if let [rule] = kept.as_slice()
            && (rule.conditions.is_empty() || rule.conditions.only_bind())
        {
            // One rule, maybe for one bind: a plain route (a map update when it joins or
            // leaves), its bind a feature.
            let only_tls = common_bind.or(rule.conditions.tls);
            if let Some((backend, features)) = self.rule_target(rule, only_tls) {
                self.claim_gateway_slot(rule, backend, features);
            }
            return;
        }
        let otherwise_rule = unconditional.map(|index| kept.remove(index));
        // Stable: among equals, the translation's order (oldest route, then rule).
        kept.sort_by_key(|rule| std::cmp::Reverse(rule.conditions.precedence()));
        let mut candidates = Vec::new();
        for rule in &kept {
            if let Some((backend, features)) = self.rule_target(rule, None) {
                candidates.push(Candidate {
                    conditions: rule.conditions.clone(),
                    backend,
                    features,
                    canary: None,
                });
            }
        }
        let (backend, otherwise) =
            match otherwise_rule.and_then(|rule| self.rule_target(rule, None)) {
                Some((backend, features)) => (backend, Otherwise::Route(features)),
                None => (self.endpoints.unresolved_backend(), Otherwise::NotFound),
            };
        let dispatch = RouteFeatures {
            gateway: Some(GatewayFeatures {
                dispatch: Some(Dispatch {
                    candidates,
                    otherwise,
                }),
                only_tls: common_bind,
                ..GatewayFeatures::default()
            }),
            ..RouteFeatures::default()
        };
        let id = self.features.insert(dispatch);
        if let Some(owner) = otherwise_rule.or(kept.first().copied()) {
            self.claim_gateway_slot(owner, backend, Some(id));
        }
    }

    fn claim_gateway_slot(
        &mut self,
        rule: &RuleRoute,
        backend: BackendName,
        features: Option<FeatureSetId>,
    ) {
        let slot = (rule.host.clone(), rule.path.clone());
        let route = new_route(
            &rule.route,
            RouteOwnerKind::HttpRoute,
            slot.clone(),
            backend,
            features,
        );
        self.routes.add(
            self.shared,
            &Self::route_object(&rule.route),
            &rule.field,
            route,
        );
        self.http_route_slots.insert(slot);
    }

    /// Where a rule's requests go: its backend and feature set (served on one bind only
    /// when `only_tls` says so). `None` when its backend cannot be named (the problem is
    /// told).
    fn rule_target(
        &mut self,
        rule: &RuleRoute,
        only_tls: Option<bool>,
    ) -> Option<(BackendName, Option<FeatureSetId>)> {
        let object = Self::route_object(&rule.route);
        let layer = Layer::empty(object.clone(), Scope::Ingress);
        let exact_host = matches!(rule.host, HostMatch::Exact(_));
        let mut gateway = rule.features.clone();
        gateway.only_tls = only_tls;
        let (backend, base) = match &rule.backend {
            RuleBackend::Service { service, port } => {
                let backend =
                    self.gateway_backend(&rule.route, &rule.field, service, *port, &layer)?;
                (
                    backend,
                    self.features.route_features(
                        self.shared,
                        self.endpoints,
                        service,
                        &layer,
                        exact_host,
                    ),
                )
            }
            RuleBackend::Unresolved => (self.endpoints.unresolved_backend(), None),
            RuleBackend::Split(shares) => {
                let mut first = None;
                for (target, weight) in shares {
                    let backend = match target {
                        Some((service, port)) => {
                            let backend = self.gateway_backend(
                                &rule.route,
                                &rule.field,
                                service,
                                *port,
                                &layer,
                            );
                            if first.is_none()
                                && let Some(backend) = &backend
                            {
                                first = Some((backend.clone(), service.clone()));
                            }
                            backend
                        }
                        None => None,
                    };
                    gateway.split.push(Share {
                        backend,
                        weight: *weight,
                    });
                }
                match first {
                    Some((backend, service)) => (
                        backend,
                        self.features.route_features(
                            self.shared,
                            self.endpoints,
                            &service,
                            &layer,
                            exact_host,
                        ),
                    ),
                    None => (self.endpoints.unresolved_backend(), None),
                }
            }
        };
        // Without a backend, the rule answers 500, unless it redirects.
        let unresolved = backend == BackendName::unresolved() && gateway.redirect.is_none();
        let features = self.gateway_features(base, gateway, unresolved);
        Some((backend, features))
    }

    /// The backend of one Service port of a rule (at `field` of `route`), built as an
    /// Ingress backend is (the Service's namespace: a ReferenceGrant allowed it when it is
    /// not the route's).
    fn gateway_backend(
        &mut self,
        route: &ObjectKey,
        field: &str,
        service: &ObjectKey,
        port: u16,
        layer: &Layer,
    ) -> Option<BackendName> {
        let reference = IngressBackend {
            service: Some(IngressServiceBackend {
                name: service.name.to_string(),
                port: Some(ServiceBackendPort {
                    number: Some(i32::from(port)),
                    name: None,
                }),
            }),
            resource: None,
        };
        let owner = ObjectKey::new(&service.namespace, &route.name);
        self.endpoints
            .backend(self.shared, self.tls, &owner, &reference, field, layer)
    }

    /// The feature set of a rule: the Service's and the ConfigMap's (`base`), the
    /// rule's filters and split, and the 500 of a rule without a backend.
    fn gateway_features(
        &mut self,
        base: Option<FeatureSetId>,
        gateway: GatewayFeatures,
        unresolved: bool,
    ) -> Option<FeatureSetId> {
        if gateway.is_empty() && !unresolved {
            return base;
        }
        let id = self.features.with(base.as_ref(), |features| {
            if !gateway.is_empty() {
                features.gateway = Some(gateway);
            }
            if unresolved {
                features.answer_status = Some(UNRESOLVED_STATUS);
            }
        });
        Some(id)
    }
}

/// The rules of one route served by listeners of the same bind that differ only in
/// the port their redirect keeps (the listeners' own ports) become one rule whose
/// redirect keeps the port the request was sent to
/// ([`crate::gateway::features::Redirect::request_port`]): which
/// listener a request came for is not known from the bind, the port the client names in
/// `Host` says it.
fn merge_listener_ports(rules: Vec<RuleRoute>) -> Vec<RuleRoute> {
    let without_port = |rule: &RuleRoute| {
        let mut features = rule.features.clone();
        if let Some(redirect) = &mut features.redirect {
            redirect.port = None;
            redirect.request_port = false;
        }
        features
    };
    let mut merged: Vec<RuleRoute> = Vec::new();
    for rule in rules {
        let same = merged.iter_mut().find(|m| {
            m.route == rule.route
                && m.field == rule.field
                && m.conditions == rule.conditions
                && m.features != rule.features
                && without_port(m) == without_port(&rule)
        });
        match same {
            Some(kept) => {
                if let Some(redirect) = &mut kept.features.redirect {
                    redirect.port = None;
                    redirect.request_port = true;
                }
                join_parents(kept, &rule);
            }
            None => merged.push(rule),
        }
    }
    merged
}

/// `into` stands for `rule` too: it comes from the parents of both.
fn join_parents(into: &mut RuleRoute, rule: &RuleRoute) {
    into.parents.extend(&rule.parents);
    into.parents.sort_unstable();
    into.parents.dedup();
}

/// One rule a fall back may reach: its host and path, and the condition on the path
/// under which it matches the requests that fall back (`None`: all of them).
struct FallbackStep {
    slot: Slot,
    path: Option<PathCondition>,
}

impl FallbackStep {
    fn when(slot: &Slot, path: Option<PathCondition>) -> Self {
        Self {
            slot: slot.clone(),
            path,
        }
    }

    /// Whether the condition can be written between single quotes in haproxy's config.
    fn writable(&self) -> bool {
        match &self.path {
            None => true,
            Some(
                PathCondition::Exact(text)
                | PathCondition::Prefix(text)
                | PathCondition::Under(text)
                | PathCondition::IngressRegex(text),
            ) => !text.contains('\''),
        }
    }
}

/// The Ingress regular expression routes among `keys`, in the order haproxy tries them
/// (the render's: the longest expression first).
fn regex_keys<'a>(keys: &[&'a Slot]) -> Vec<&'a Slot> {
    let mut found: Vec<&Slot> = keys
        .iter()
        .copied()
        .filter(|(_, path)| matches!(path, PathMatch::Regex(_)))
        .collect();
    found.sort_by(|a, b| {
        let (a, b) = (path_parts_any(&a.1), path_parts_any(&b.1));
        (std::cmp::Reverse(a.len()), a).cmp(&(std::cmp::Reverse(b.len()), b))
    });
    found
}

/// Whether regular expressions come between a host's exact and prefix maps.
fn regexes_between(keys: &[&Slot]) -> bool {
    keys.iter()
        .any(|(_, path)| matches!(path, PathMatch::Regex(_)))
}

/// The condition under which a regular expression route takes a request.
fn path_condition_of(path: &PathMatch) -> Option<PathCondition> {
    Some(PathCondition::IngressRegex(
        path_parts_any(path).to_string(),
    ))
}

/// The text of a path of any type.
fn path_parts_any(path: &PathMatch) -> &str {
    match path {
        PathMatch::Exact(text) | PathMatch::Prefix(text) | PathMatch::Regex(text) => text,
    }
}

/// A plain path's text and whether it is exact (`None` for a regular expression).
fn path_parts(path: &PathMatch) -> Option<(&str, bool)> {
    match path {
        PathMatch::Exact(text) => Some((text, true)),
        PathMatch::Prefix(text) => Some((text, false)),
        PathMatch::Regex(_) => None,
    }
}

/// Whether the prefix `prefix` matches `path` (whole path elements): with `inclusive`,
/// also when both are the same.
fn covers(prefix: &str, path: &str, inclusive: bool) -> bool {
    if prefix == path {
        return inclusive;
    }
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// How many wildcard suffixes haproxy looks up below a host (the render's
/// `SUBDOMAIN_DEPTH`).
const SUBDOMAIN_LEVELS: usize = 8;

/// The hosts haproxy looks up after `host` for a request of it, in order: for a host,
/// its one-label wildcard, then its wildcard suffixes (longest first), then any host.
fn hosts_after(host: &HostMatch) -> Vec<HostMatch> {
    let suffixes = |from: &str, levels: usize| {
        let mut out = Vec::new();
        let mut rest = from.to_string();
        while out.len() < levels && rest.starts_with('.') {
            out.push(HostMatch::Subdomains(rest.clone()));
            rest = match rest[1..].find('.') {
                Some(dot) => rest[1 + dot..].to_string(),
                None => String::new(),
            };
        }
        out
    };
    let mut out = match host {
        HostMatch::Exact(name) => match name.find('.') {
            Some(dot) => {
                let wild = &name[dot..];
                let mut out = vec![HostMatch::Wildcard(wild.to_string())];
                out.extend(suffixes(wild, SUBDOMAIN_LEVELS));
                out
            }
            None => Vec::new(),
        },
        HostMatch::Wildcard(suffix) => suffixes(suffix, SUBDOMAIN_LEVELS),
        HostMatch::Subdomains(suffix) => suffixes(suffix, SUBDOMAIN_LEVELS)
            .into_iter()
            .skip(1)
            .collect(),
        HostMatch::Any => return Vec::new(),
    };
    out.push(HostMatch::Any);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_looked_up_from_the_most_specific() {
        assert_eq!(
            hosts_after(&HostMatch::Exact("a.b.example.com".into())),
            [
                HostMatch::Wildcard(".b.example.com".into()),
                HostMatch::Subdomains(".b.example.com".into()),
                HostMatch::Subdomains(".example.com".into()),
                HostMatch::Subdomains(".com".into()),
                HostMatch::Any,
            ]
        );
        assert_eq!(
            hosts_after(&HostMatch::Subdomains(".b.example.com".into())),
            [
                HostMatch::Subdomains(".example.com".into()),
                HostMatch::Subdomains(".com".into()),
                HostMatch::Any,
            ]
        );
        assert!(hosts_after(&HostMatch::Any).is_empty());
    }

    #[test]
    fn a_prefix_covers_whole_path_elements() {
        assert!(covers("/", "/foo", false));
        assert!(covers("/foo", "/foo/bar", false));
        assert!(!covers("/foo", "/foobar", true));
        assert!(!covers("/foo", "/foo", false));
        assert!(covers("/foo", "/foo", true));
    }

    #[test]
    fn listeners_of_one_bind_with_different_ports_make_one_rule_keeping_the_requests_port() {
        use crate::gateway::features::Redirect;
        let on = |port: Option<u16>, tls: bool, field: &str| RuleRoute {
            route: ObjectKey::new("shop", "moving"),
            field: field.into(),
            host: HostMatch::Exact("a.example.com".into()),
            path: PathMatch::Prefix("/".into()),
            conditions: Conditions {
                tls: Some(tls),
                ..Conditions::default()
            },
            backend: RuleBackend::Unresolved,
            features: GatewayFeatures {
                redirect: Some(Redirect {
                    scheme: None,
                    hostname: Some("b.example.com".into()),
                    port,
                    request_port: false,
                    path: None,
                    code: 302,
                }),
                ..GatewayFeatures::default()
            },
            parents: vec![usize::from(port.is_some())],
            listener_port: None,
        };
        let merged = merge_listener_ports(vec![
            on(None, false, "spec.rules[0]"),
            on(Some(8080), false, "spec.rules[0]"),
            on(None, true, "spec.rules[0]"),
            on(Some(8081), false, "spec.rules[0]"),
            on(Some(8080), false, "spec.rules[1]"),
        ]);
        let redirects: Vec<(Option<bool>, &str, Option<u16>, bool)> = merged
            .iter()
            .map(|rule| {
                let redirect = rule.features.redirect.as_ref().expect("a redirect");
                (
                    rule.conditions.tls,
                    rule.field.as_str(),
                    redirect.port,
                    redirect.request_port,
                )
            })
            .collect();
        assert_eq!(
            redirects,
            [
                (Some(false), "spec.rules[0]", None, true),
                (Some(true), "spec.rules[0]", None, false),
                (Some(false), "spec.rules[1]", Some(8080), false),
            ],
            "three ports of the HTTP bind are one rule; the HTTPS bind and another rule \
             keep theirs"
        );
        assert_eq!(merged[0].parents, [0, 1], "the rule of both parents");
    }
}
