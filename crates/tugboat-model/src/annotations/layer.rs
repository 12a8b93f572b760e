//! The keys one object sets ([`Layer`]) and their reading through the scopes of one
//! route or backend ([`Resolver`]): Service beats Ingress beats ConfigMap beats the
//! key's default; a value that does not parse is a problem of its object, and the next
//! scope down applies.

use std::collections::BTreeMap;

use super::keys::{Key, KeySpec, Refers, Scope, find_key, targets};
use super::parse::ValueError;
use super::peers::PeerKey;
use super::prefixes::{self, Ecosystem, UnsupportedAccess};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::validate::printable;

/// The keys one object sets: key name -> (field, value).
#[derive(Debug, Clone)]
pub struct Layer {
    pub object: ObjectRef,
    pub scope: Scope,
    values: BTreeMap<&'static str, (String, String)>,
    /// The annotations this object sets that restrict access and that Tugboat does not
    /// support (full names, sorted).
    pub unsupported_access: Vec<String>,
}

impl Layer {
    /// The keys of an Ingress' or Service's annotations. Every annotation under a known
    /// prefix ([`prefixes::PREFIXES`]) is read or becomes a problem naming it: unknown
    /// keys, keys of other controllers Tugboat does not support, keys that cannot be set
    /// on this kind of object. Unsupported keys that restrict access are remembered in
    /// [`Layer::unsupported_access`]: with `access` [`UnsupportedAccess::Deny`] the
    /// routes they apply to refuse every request.
    pub fn from_annotations(
        object: ObjectRef,
        scope: Scope,
        annotations: Option<&BTreeMap<String, String>>,
        access: UnsupportedAccess,
        problems: &mut Vec<ObjectProblem>,
    ) -> Self {
        let mut read = Read::default();
        let mut unsupported_access = Vec::new();
        let mut implied = Vec::new();
        for (name, value) in annotations.into_iter().flatten() {
            let Some((ecosystem, rest)) = prefixes::split_annotation(name) else {
                continue;
            };
            let field = format!("metadata.annotations.{name}");
            let targets: Vec<(&'static KeySpec, Option<&'static PeerKey>)> =
                targets(ecosystem, rest);
            // A key Tugboat does not read is judged by its name, and a snippet by its
            // directives.
            let unread = if targets.is_empty() {
                prefixes::unread_restriction(ecosystem, rest, value)
            } else {
                None
            };
            let restricts = unread.is_some() || prefixes::restricts_access(rest);
            let mut refuse = |message: String, problems: &mut Vec<ObjectProblem>| {
                if restricts && !unsupported_access.contains(name) {
                    unsupported_access.push(name.clone());
                }
                problems.push(ObjectProblem {
                    object: object.clone(),
                    field: field.clone(),
                    reason: ProblemReason::InvalidField,
                    message,
                });
            };
            if targets.is_empty() {
                let directive = unread.flatten();
                let message = unsupported_message(
                    ecosystem,
                    rest,
                    directive.as_deref(),
                    scope,
                    restricts,
                    access,
                );
                refuse(message, problems);
                continue;
            }
            for (spec, peer) in targets {
                if !spec.scopes.contains(&scope) {
                    problems.push(ObjectProblem {
                        object: object.clone(),
                        field: field.clone(),
                        reason: ProblemReason::InvalidField,
                        message: format!(
                            "key '{}' cannot be set on {}: it belongs in the controller's ConfigMap",
                            spec.name,
                            object_kind_plural(scope)
                        ),
                    });
                    continue;
                }
                let Some(peer) = peer else {
                    let rank = if ecosystem == Ecosystem::Tugboat {
                        0
                    } else {
                        1
                    };
                    read.set(spec.name, rank, field.clone(), value.clone());
                    continue;
                };
                // Another controller's key: its value written as Tugboat's.
                let translated = match peer.translate {
                    None => Ok(Some(value.clone())),
                    Some(translate) => translate(value, &object.namespace),
                };
                let value = match translated {
                    Ok(Some(value)) => value,
                    // What Tugboat does anyway: nothing to set.
                    Ok(None) => continue,
                    // One problem for the annotation, whatever the keys it is read as.
                    Err(expected) => {
                        let message = peer_value_message(peer, value, &expected, restricts, access);
                        refuse(message, problems);
                        break;
                    }
                };
                // A restriction whose value Tugboat refuses fails closed, as the other
                // controllers do, rather than falling back to a more open scope.
                if (restricts || spec.refers == Refers::ConfigMapKey)
                    && let Err(expected) = (spec.check)(&value)
                {
                    let message = peer_value_message(peer, &value, &expected, true, access);
                    refuse(message, problems);
                    continue;
                }
                let rank = if ecosystem == Ecosystem::Legacy { 1 } else { 2 };
                read.set(spec.name, rank, field.clone(), value);
                implied.extend(
                    peer.implies
                        .iter()
                        .map(|(key, value)| (*key, *value, field.clone())),
                );
            }
        }
        for (key, value, field) in implied {
            if let Some(spec) = find_key(key) {
                read.set(spec.name, 3, field, value.to_string());
            }
        }
        Self {
            object,
            scope,
            values: read.values,
            unsupported_access,
        }
    }

    /// The keys of the controller's ConfigMap (`data`); unknown keys become problems.
    pub fn from_config_map(
        object: ObjectRef,
        data: Option<&BTreeMap<String, String>>,
        problems: &mut Vec<ObjectProblem>,
    ) -> Self {
        let mut values = BTreeMap::new();
        let mut theirs = Vec::new();
        for (name, value) in data.into_iter().flatten() {
            let field = format!("data.{name}");
            match (find_key(name), super::peers::config_map_key(name)) {
                (Some(spec), _) => {
                    values.insert(spec.name, (field, value.clone()));
                }
                (None, Some(peer)) => theirs.push((peer, field, value.clone())),
                (None, None) => problems.push(ObjectProblem {
                    object: object.clone(),
                    field,
                    reason: ProblemReason::InvalidField,
                    message: format!(
                        "unknown key '{}': see docs/annotations.md for the keys Tugboat reads",
                        printable(name)
                    ),
                }),
            }
        }
        // Another controller's key, after Tugboat's own: the keys the ConfigMap sets under
        // Tugboat's names win.
        for (peer, field, value) in theirs {
            let targets = std::iter::once((peer.key, value))
                .chain(peer.implies.iter().map(|(k, v)| (*k, v.to_string())));
            for (key, value) in targets {
                let Some(spec) = find_key(key) else { continue };
                if let Some((set_by, set)) = values.get(spec.name) {
                    if *set == value {
                        continue;
                    }
                    problems.push(ObjectProblem {
                        object: object.clone(),
                        field: field.clone(),
                        reason: ProblemReason::InvalidField,
                        message: format!(
                            "{} key '{}' does not set '{}' here: {set_by} does",
                            peer.ecosystem, peer.name, spec.name
                        ),
                    });
                    continue;
                }
                values.insert(spec.name, (field.clone(), value));
            }
        }
        Self {
            object,
            scope: Scope::ConfigMap,
            values,
            unsupported_access: Vec::new(),
        }
    }

    /// An empty layer (an object without keys).
    pub fn empty(object: ObjectRef, scope: Scope) -> Self {
        Self {
            object,
            scope,
            values: BTreeMap::new(),
            unsupported_access: Vec::new(),
        }
    }

    /// The keys this object sets and their values (as Tugboat's, whatever prefix they
    /// were written with).
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.values
            .iter()
            .map(|(key, (_, value))| (*key, value.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The field (`metadata.annotations.NAME`, as written) that sets `key`, if any.
    pub fn field_of(&self, key: &KeySpec) -> Option<&str> {
        self.values.get(key.name).map(|(field, _)| field.as_str())
    }
}

/// The object and the field (as written: `metadata.annotations.NAME` under whichever
/// prefix, or `data.NAME`) that set `key`: the first of `layers` (highest precedence
/// first) that sets it. What a problem about the value names.
pub fn set_by(layers: &[&Layer], key: &KeySpec) -> Option<(ObjectRef, String)> {
    layers
        .iter()
        .find_map(|layer| Some((layer.object.clone(), layer.field_of(key)?.to_string())))
}

/// The values of one object's keys, each from the highest-ranked name that sets it:
/// Tugboat's prefix (0), the legacy prefix (1), another controller's (2), a value
/// another controller's key implies (3). Within a rank the last name wins.
#[derive(Default)]
struct Read {
    values: BTreeMap<&'static str, (String, String)>,
    ranks: BTreeMap<&'static str, u8>,
}

impl Read {
    fn set(&mut self, key: &'static str, rank: u8, field: String, value: String) {
        if self.ranks.get(key).is_some_and(|r| *r < rank) {
            return;
        }
        self.ranks.insert(key, rank);
        self.values.insert(key, (field, value));
    }
}

/// The problem of another controller's key whose value Tugboat cannot honour.
fn peer_value_message(
    peer: &PeerKey,
    value: &str,
    expected: &ValueError,
    restricts: bool,
    access: UnsupportedAccess,
) -> String {
    let whose = match peer.ecosystem {
        Ecosystem::Legacy => format!("key '{}{}'", peer.ecosystem.prefix(), peer.name),
        ecosystem => format!("{ecosystem} key '{}'", peer.name),
    };
    let what = format!(
        "{whose}: '{}' is not supported by Tugboat, expected {expected}",
        printable(value)
    );
    match (restricts, access) {
        (false, _) => format!("{what}; the key is ignored here"),
        (true, UnsupportedAccess::Deny) => format!(
            "{what}; it restricts access, so its routes answer 403 to every request until \
             it is fixed (the operator's --unsupported-access-keys=ignore serves them without it)"
        ),
        (true, UnsupportedAccess::Ignore) => format!(
            "{what}; it restricts access, but the operator's --unsupported-access-keys=ignore \
             serves its routes without that restriction"
        ),
    }
}

/// The problem of an annotation under a known prefix that Tugboat does not read.
/// `directive`: the nginx directive of a snippet that makes it restrict access.
fn unsupported_message(
    ecosystem: Ecosystem,
    key: &str,
    directive: Option<&str>,
    scope: Scope,
    restricts: bool,
    access: UnsupportedAccess,
) -> String {
    let reason = super::peers::not_supported_reason(ecosystem, key);
    let key = printable(key);
    let mut what = match ecosystem {
        Ecosystem::Tugboat | Ecosystem::Legacy => {
            format!("unknown key '{key}': see docs/annotations.md for the keys Tugboat reads")
        }
        _ => format!(
            "{ecosystem} key '{key}' is not supported by Tugboat: see docs/annotations.md \
             for the keys Tugboat reads"
        ),
    };
    if let Some(directive) = directive {
        let reason = reason.unwrap_or(match ecosystem {
            Ecosystem::IngressNginx | Ecosystem::Legacy => "nginx configuration is never run",
            _ => "another controller's raw configuration is never run",
        });
        what = format!(
            "{what} ({reason}); the snippet's {} restricts access",
            printable(directive)
        );
    }
    let routes = match scope {
        Scope::Service => "the routes to this Service",
        _ => "the routes of this Ingress",
    };
    match (restricts, access) {
        (false, _) => format!("{what}; it has no effect"),
        (true, UnsupportedAccess::Deny) => format!(
            "{what}; it restricts access, so {routes} answer 403 to every request until it \
             is removed or supported (the operator's --unsupported-access-keys=ignore serves \
             them without it)"
        ),
        (true, UnsupportedAccess::Ignore) => format!(
            "{what}; it restricts access, but the operator's --unsupported-access-keys=ignore \
             serves {routes} without that restriction"
        ),
    }
}

fn object_kind_plural(scope: Scope) -> &'static str {
    match scope {
        Scope::ConfigMap => "ConfigMaps",
        Scope::Ingress => "Ingresses",
        Scope::Service => "Services",
    }
}

/// Reads keys through the layers of one route or backend, highest precedence first.
/// Reads keys from `layers` (the first wins) with `read`; the problems of the values read
/// join `problems`. The one way the builder reads keys whose problems it reports.
pub fn read_keys<'a, T>(
    layers: Vec<&'a Layer>,
    problems: &mut Vec<ObjectProblem>,
    read: impl FnOnce(&mut Resolver<'a>) -> T,
) -> T {
    let mut resolver = Resolver::new(layers);
    let value = read(&mut resolver);
    problems.append(&mut resolver.problems);
    value
}

pub struct Resolver<'a> {
    layers: Vec<&'a Layer>,
    pub problems: Vec<ObjectProblem>,
    /// A key that restricts access had a value that does not parse: its routes fail
    /// closed rather than serve what the next layer (or nothing) allows.
    pub refused_restriction: bool,
}

/// A value of a key (its name, field and value) on `object` that its routes cannot use,
/// `detail` saying why after the value: a problem of the object; a key that restricts
/// access fails closed (its routes refuse every request), any other is ignored.
fn refuse(
    problems: &mut Vec<ObjectProblem>,
    refused_restriction: &mut bool,
    object: &ObjectRef,
    (name, field, value): (&str, &str, &str),
    detail: &str,
) {
    let restricts = super::prefixes::restricts_access(name);
    *refused_restriction |= restricts;
    let outcome = if restricts {
        "it restricts access, so its routes refuse every request (403) until it is fixed"
    } else {
        "the key is ignored here"
    };
    problems.push(ObjectProblem {
        object: object.clone(),
        field: field.to_string(),
        reason: ProblemReason::InvalidField,
        message: format!("key '{name}': '{}' {detail}; {outcome}", printable(value)),
    });
}

impl<'a> Resolver<'a> {
    /// `layers` from the highest precedence (Service) to the lowest (ConfigMap).
    pub fn new(layers: Vec<&'a Layer>) -> Self {
        Self {
            layers,
            problems: Vec::new(),
            refused_restriction: false,
        }
    }

    /// The value of `key` from the highest layer where it is set and valid. A value that
    /// does not parse is a problem of its object, and the next layer down applies.
    pub fn get<T>(&mut self, key: &Key<T>) -> Option<T> {
        self.get_in(key, &[Scope::Service, Scope::Ingress, Scope::ConfigMap])
    }

    /// As [`Resolver::get`], else the key's default value.
    pub fn get_or_default<T>(&mut self, key: &Key<T>) -> T {
        let found = self.get(key);
        key.or_default(found)
    }

    /// As [`Resolver::get`], looking only at layers of the given scopes.
    pub fn get_in<T>(&mut self, key: &Key<T>, scopes: &[Scope]) -> Option<T> {
        let name = key.name();
        for layer in &self.layers {
            if !scopes.contains(&layer.scope) {
                continue;
            }
            let Some((field, value)) = layer.values.get(name) else {
                continue;
            };
            match (key.parse)(value) {
                Ok(parsed) => return Some(parsed),
                Err(expected) => refuse(
                    &mut self.problems,
                    &mut self.refused_restriction,
                    &layer.object,
                    (name, field, value),
                    &format!("is not valid, expected {expected}"),
                ),
            }
        }
        None
    }

    /// As [`Resolver::get`], with the object the value comes from.
    pub fn get_sourced<T>(&mut self, key: &Key<T>, scopes: &[Scope]) -> Option<(T, ObjectRef)> {
        let name = key.name();
        let source = self
            .layers
            .iter()
            .find(|l| scopes.contains(&l.scope) && l.values.contains_key(name))
            .map(|l| l.object.clone())?;
        let before = self.problems.len();
        let value = self.get_in(key, scopes)?;
        // A lower layer answered when the first one was refused.
        let source = if self.problems.len() > before {
            self.layers
                .iter()
                .filter(|l| scopes.contains(&l.scope) && l.values.contains_key(name))
                .nth(self.problems.len() - before)
                .map_or(source, |l| l.object.clone())
        } else {
            source
        };
        Some((value, source))
    }

    /// A problem on every object of these scopes that sets `key`: it cannot apply here.
    pub fn refuse(&mut self, key: &KeySpec, scopes: &[Scope], reason: ProblemReason, why: &str) {
        let key = key.name;
        for layer in &self.layers {
            if !scopes.contains(&layer.scope) {
                continue;
            }
            if let Some((field, _)) = layer.values.get(key) {
                self.problems.push(ObjectProblem {
                    object: layer.object.clone(),
                    field: field.clone(),
                    reason,
                    message: format!("key '{key}' is ignored: {why}"),
                });
            }
        }
    }

    /// A value of `key` from `source` that parsed but cannot apply to these routes, as
    /// a problem on `source` saying `why`: a key that restricts access fails closed (its
    /// routes refuse every request), as a value that does not parse does.
    pub fn refuse_value(&mut self, key: &KeySpec, source: &ObjectRef, why: &str) {
        let name = key.name;
        let Some((layer, (field, value))) = self
            .layers
            .iter()
            .filter(|l| l.object == *source)
            .find_map(|l| Some((*l, l.values.get(name)?)))
        else {
            return;
        };
        refuse(
            &mut self.problems,
            &mut self.refused_restriction,
            &layer.object,
            (name, field, value),
            &format!("cannot apply: {why}"),
        );
    }

    /// The values of `key` the layers of these scopes set (valid or not), highest
    /// precedence first, each with its object and field.
    pub fn raw_values(&self, key: &KeySpec, scopes: &[Scope]) -> Vec<(&ObjectRef, &str, &str)> {
        self.layers
            .iter()
            .filter(|l| scopes.contains(&l.scope))
            .filter_map(|l| {
                let (field, value) = l.values.get(key.name)?;
                Some((&l.object, field.as_str(), value.as_str()))
            })
            .collect()
    }

    /// Whether some layer of these scopes sets `key` (valid or not).
    pub fn is_set_in(&self, key: &KeySpec, scopes: &[Scope]) -> bool {
        let key = key.name;
        self.layers
            .iter()
            .any(|l| scopes.contains(&l.scope) && l.values.contains_key(key))
    }
}
