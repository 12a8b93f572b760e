//! Gateway API status: the conditions the model works out
//! ([`tugboat_model::gateway::GatewayStatus`]) written to the GatewayClasses, Gateways,
//! HTTPRoutes, TLSRoutes and TCPRoutes this controller serves, by the leader only, and only when
//! they change.
//!
//! The writer remembers what it wrote (without the times): an object is written when
//! what it owes differs from that, so a steady state costs no API calls and a new leader
//! writes each object once. A condition keeps its `lastTransitionTime` while its status
//! stays the same. A route's `status.parents` may hold entries of other
//! controllers: the route is read first and those are kept. Gateways get the published
//! addresses (`--publish-service`, `--publish-address`). Writes go at the pace of
//! [`StatusPace`], after a failure with a growing pause.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::IngressLoadBalancerIngress;
use kube::Client;
use kube::api::PatchParams;
use serde_json::{Value, json};
use tugboat_model::ObjectKey;
use tugboat_model::gateway::objects::GROUP;
use tugboat_model::gateway::{
    Condition, GatewayStatus, PublishedAddresses, RequestedAddress, RouteKind,
};

use crate::status::{FIELD_MANAGER, StatusPace, WriteResult, WriteTally};

/// An object the writer writes the status of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusTarget {
    GatewayClass(String),
    Gateway(ObjectKey),
    Route(RouteKind, ObjectKey),
}

impl StatusTarget {
    /// Whether it is a route (whose entries are removed when it has no parent of ours
    /// any more).
    fn is_route(&self) -> bool {
        matches!(self, StatusTarget::Route(..))
    }

    /// The object's kind in the API (`GatewayClass`, `Gateway`, `HTTPRoute`...).
    pub fn kind(&self) -> &'static str {
        match self {
            StatusTarget::GatewayClass(_) => "GatewayClass",
            StatusTarget::Gateway(_) => "Gateway",
            StatusTarget::Route(kind, _) => kind.name(),
        }
    }

    fn path(&self) -> String {
        match self {
            StatusTarget::GatewayClass(name) => {
                format!("/apis/{GROUP}/v1/gatewayclasses/{name}/status")
            }
            StatusTarget::Gateway(key) => format!(
                "/apis/{GROUP}/v1/namespaces/{}/gateways/{}/status",
                key.namespace, key.name
            ),
            StatusTarget::Route(kind, key) => format!(
                "/apis/{GROUP}/v1/namespaces/{}/{}/{}/status",
                key.namespace,
                match kind {
                    RouteKind::Http => "httproutes",
                    RouteKind::Tls => "tlsroutes",
                    RouteKind::Tcp => "tcproutes",
                },
                key.name
            ),
        }
    }
}

impl std::fmt::Display for StatusTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusTarget::GatewayClass(name) => write!(f, "GatewayClass {name}"),
            StatusTarget::Gateway(key) => write!(f, "Gateway {key}"),
            StatusTarget::Route(kind, key) => write!(f, "{} {key}", kind.name()),
        }
    }
}

/// A condition as JSON, without its time.
fn condition(condition: &Condition) -> Value {
    json!({
        "type": condition.type_,
        "status": if condition.status { "True" } else { "False" },
        "reason": condition.reason,
        "message": condition.message,
        "observedGeneration": condition.observed_generation,
    })
}

fn conditions(list: &[Condition]) -> Value {
    Value::Array(list.iter().map(condition).collect())
}

/// `status.addresses` of a Gateway from the published addresses.
fn gateway_addresses(addresses: &[IngressLoadBalancerIngress]) -> Value {
    Value::Array(
        addresses
            .iter()
            .filter_map(|entry| match (&entry.ip, &entry.hostname) {
                (Some(ip), _) => Some(json!({"type": "IPAddress", "value": ip})),
                (None, Some(host)) => Some(json!({"type": "Hostname", "value": host})),
                _ => None,
            })
            .collect(),
    )
}

/// The published addresses, as requested addresses are compared with them.
fn published(addresses: &[IngressLoadBalancerIngress]) -> PublishedAddresses {
    let mut published = PublishedAddresses::default();
    for entry in addresses {
        match (&entry.ip, &entry.hostname) {
            (Some(ip), _) => published.ips.extend(ip.parse::<std::net::IpAddr>().ok()),
            (None, Some(host)) => published.hostnames.push(host.to_ascii_lowercase()),
            _ => {}
        }
    }
    published
}

/// A Gateway's conditions, its `Programmed` one replaced when it requests addresses
/// that are not published ([`RequestedAddress::programmed`]).
fn gateway_conditions(
    gateway: &tugboat_model::gateway::GatewayState,
    published: &PublishedAddresses,
) -> Vec<Condition> {
    let mut list = gateway.conditions.clone();
    for condition in &mut list {
        if condition.type_ == "Programmed"
            && let Some(replaced) = RequestedAddress::programmed(
                &gateway.requested_addresses,
                published,
                condition.observed_generation,
            )
        {
            *condition = replaced;
        }
    }
    list
}

/// The status each object owes, as JSON without times: for a route, the parents of
/// this controller only.
pub fn owed(
    status: &GatewayStatus,
    controller_name: &str,
    addresses: &[IngressLoadBalancerIngress],
) -> BTreeMap<StatusTarget, Value> {
    let mut owed = BTreeMap::new();
    let published = published(addresses);
    for (name, class) in &status.classes {
        let features: Vec<Value> = class
            .supported_features
            .iter()
            .map(|name| json!({"name": name}))
            .collect();
        owed.insert(
            StatusTarget::GatewayClass(name.clone()),
            json!({"conditions": conditions(&class.conditions), "supportedFeatures": features}),
        );
    }
    for (key, gateway) in &status.gateways {
        let listeners: Vec<Value> = gateway
            .listeners
            .iter()
            .map(|listener| {
                let kinds: Vec<Value> = listener
                    .supported_kinds
                    .iter()
                    .map(|(group, kind)| json!({"group": group, "kind": kind}))
                    .collect();
                json!({
                    "name": listener.name,
                    "supportedKinds": kinds,
                    "attachedRoutes": listener.attached_routes,
                    "conditions": conditions(&listener.conditions),
                })
            })
            .collect();
        owed.insert(
            StatusTarget::Gateway(key.clone()),
            json!({
                "addresses": gateway_addresses(addresses),
                "conditions": conditions(&gateway_conditions(gateway, &published)),
                "listeners": listeners,
            }),
        );
    }
    let routes = [RouteKind::Http, RouteKind::Tls, RouteKind::Tcp]
        .into_iter()
        .flat_map(|kind| {
            status
                .routes_of(kind)
                .iter()
                .map(move |route| (kind, route))
        });
    for (kind, (key, route)) in routes {
        let parents: Vec<Value> = route
            .parents
            .iter()
            .map(|parent| {
                json!({
                    "parentRef": parent.parent_ref,
                    "controllerName": controller_name,
                    "conditions": conditions(&parent.conditions),
                })
            })
            .collect();
        owed.insert(
            StatusTarget::Route(kind, key.clone()),
            json!({ "parents": parents }),
        );
    }
    owed
}

/// Adds `lastTransitionTime` to every condition in `status` (recursively): the time
/// `previous` gave the same condition when its status is the same, else `now`.
fn with_times(status: &mut Value, previous: &Value, now: &str) {
    let mut earlier: BTreeMap<String, (String, String)> = BTreeMap::new();
    collect_times(previous, "", &mut earlier);
    stamp(status, "", &earlier, now);
}

fn condition_key(path: &str, condition: &Value) -> String {
    format!("{path}/{}", condition["type"].as_str().unwrap_or(""))
}

fn collect_times(value: &Value, path: &str, into: &mut BTreeMap<String, (String, String)>) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map {
                let path = match name.as_str() {
                    "conditions" => {
                        for c in inner.as_array().into_iter().flatten() {
                            if let (Some(status), Some(time)) =
                                (c["status"].as_str(), c["lastTransitionTime"].as_str())
                            {
                                into.insert(
                                    condition_key(path, c),
                                    (status.to_string(), time.to_string()),
                                );
                            }
                        }
                        continue;
                    }
                    _ => format!("{path}/{name}"),
                };
                collect_times(inner, &path, into);
            }
        }
        Value::Array(items) => {
            for item in items {
                // Listeners and parents are told apart by name or parent reference.
                let id = item
                    .get("name")
                    .or_else(|| item.get("parentRef"))
                    .map(Value::to_string)
                    .unwrap_or_default();
                collect_times(item, &format!("{path}[{id}]"), into);
            }
        }
        _ => {}
    }
}

fn stamp(value: &mut Value, path: &str, earlier: &BTreeMap<String, (String, String)>, now: &str) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map.iter_mut() {
                if name == "conditions" {
                    for c in inner.as_array_mut().into_iter().flatten() {
                        let key = condition_key(path, c);
                        let status = c["status"].as_str().unwrap_or("").to_string();
                        let time = match earlier.get(&key) {
                            Some((was, time)) if *was == status => time.clone(),
                            _ => now.to_string(),
                        };
                        c["lastTransitionTime"] = Value::String(time);
                    }
                    continue;
                }
                stamp(inner, &format!("{path}/{name}"), earlier, now);
            }
        }
        Value::Array(items) => {
            for item in items {
                let id = item
                    .get("name")
                    .or_else(|| item.get("parentRef"))
                    .map(Value::to_string)
                    .unwrap_or_default();
                stamp(item, &format!("{path}[{id}]"), earlier, now);
            }
        }
        _ => {}
    }
}

/// Why a status write failed.
#[derive(Debug, thiserror::Error)]
pub enum GatewayStatusError {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("cannot build the request: {0}")]
    Request(String),
}

/// Writes Gateway API status (see the module).
pub struct GatewayStatusWriter {
    client: Client,
    controller_name: String,
    pace: StatusPace,
    /// What was written last, with its times, by object.
    written: BTreeMap<StatusTarget, (Value, Value)>,
    backoff: tugboat_model::backoff::Backoff,
    /// Routes whose parents were ours at the last write (a route that loses them all
    /// gets its entries removed).
    routes_with_parents: BTreeSet<StatusTarget>,
    /// Writes concluded since [`take_concluded`](Self::take_concluded).
    concluded: WriteTally,
}

impl GatewayStatusWriter {
    pub fn new(client: Client, controller_name: String, pace: StatusPace) -> Self {
        Self {
            client,
            controller_name,
            pace,
            written: BTreeMap::new(),
            backoff: tugboat_model::backoff::Backoff::new(pace.backoff_first, pace.backoff_max),
            routes_with_parents: BTreeSet::new(),
            concluded: WriteTally::default(),
        }
    }

    /// Forgets what was written (no longer the leader: the next leader writes again).
    pub fn forget(&mut self) {
        self.written.clear();
        self.routes_with_parents.clear();
    }

    /// Writes what differs from what was written, at the pace; returns the number of
    /// writes. A failure stops the round after a pause (the next round tries again).
    pub async fn write_changes(
        &mut self,
        status: &GatewayStatus,
        addresses: &[IngressLoadBalancerIngress],
    ) -> usize {
        let owed = owed(status, &self.controller_name, addresses);
        // Objects no longer ours (deleted, or of another class now) are forgotten; a
        // route's entries are removed below.
        self.written
            .retain(|target, _| target.is_route() || owed.contains_key(target));
        let mut due: Vec<(StatusTarget, Value)> = owed
            .into_iter()
            .filter(|(target, value)| self.written.get(target).is_none_or(|(w, _)| w != value))
            .collect();
        // Routes that were ours and have no parent of ours any more.
        for target in &self.routes_with_parents {
            if let StatusTarget::Route(kind, key) = target
                && !status.routes_of(*kind).contains_key(key)
            {
                due.push((target.clone(), json!({"parents": []})));
            }
        }
        let mut writes = 0;
        for (target, value) in due {
            let previous = self
                .written
                .get(&target)
                .map(|(_, stamped)| stamped.clone())
                .unwrap_or(Value::Null);
            let outcome = self.write(&target, &value, &previous).await;
            self.concluded.add(target.kind(), write_result(&outcome));
            match outcome {
                Ok(Some(stamped)) => {
                    writes += 1;
                    self.backoff.reset();
                    if target.is_route() {
                        if value["parents"].as_array().is_some_and(|p| !p.is_empty()) {
                            self.routes_with_parents.insert(target.clone());
                        } else {
                            self.routes_with_parents.remove(&target);
                        }
                    }
                    self.written.insert(target, (value, stamped));
                }
                Ok(None) => {
                    // Gone: nothing to write.
                    self.routes_with_parents.remove(&target);
                    self.written.remove(&target);
                }
                Err(err) => {
                    let pause = self.backoff.next_delay();
                    tracing::warn!(
                        "cannot write the status of {target}: {err}; retrying in {pause:?}"
                    );
                    tokio::time::sleep(pause).await;
                    return writes;
                }
            }
            tokio::time::sleep(std::time::Duration::from_secs(1) / self.pace.per_second.max(1))
                .await;
        }
        writes
    }

    /// The writes concluded since the last call (a round cut short counts what it did).
    pub fn take_concluded(&mut self) -> WriteTally {
        std::mem::take(&mut self.concluded)
    }

    /// One write; `Ok(None)` when the object is gone. Returns what was written.
    async fn write(
        &self,
        target: &StatusTarget,
        value: &Value,
        previous: &Value,
    ) -> Result<Option<Value>, GatewayStatusError> {
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let mut stamped = value.clone();
        with_times(&mut stamped, previous, &now);
        if target.is_route() {
            // Keep the parents other controllers wrote.
            let Some(current) = self.get(target).await? else {
                return Ok(None);
            };
            let others: Vec<Value> = current["status"]["parents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["controllerName"].as_str() != Some(self.controller_name.as_str()))
                .cloned()
                .collect();
            if let Some(parents) = stamped["parents"].as_array_mut() {
                parents.extend(others);
            }
        }
        let body = json!({ "status": stamped });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let request = http::Request::patch(format!("{}?{}", target.path(), params_query(&params)))
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .body(
                serde_json::to_vec(&body)
                    .map_err(|e| GatewayStatusError::Request(e.to_string()))?,
            )
            .map_err(|e| GatewayStatusError::Request(e.to_string()))?;
        match self.client.request_text(request).await {
            Ok(_) => Ok(Some(stamped)),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    async fn get(&self, target: &StatusTarget) -> Result<Option<Value>, GatewayStatusError> {
        let path = target.path();
        let path = path.trim_end_matches("/status");
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| GatewayStatusError::Request(e.to_string()))?;
        match self.client.request::<Value>(request).await {
            Ok(value) => Ok(Some(value)),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
            Err(err) => Err(err.into()),
        }
    }
}

/// How a write ended, as the metrics count it.
fn write_result(outcome: &Result<Option<Value>, GatewayStatusError>) -> WriteResult {
    match outcome {
        Ok(Some(_)) => WriteResult::Written,
        Ok(None) => WriteResult::Gone,
        Err(GatewayStatusError::Api(kube::Error::Api(status))) if status.code == 429 => {
            WriteResult::Throttled
        }
        Err(_) => WriteResult::Failed,
    }
}

fn params_query(params: &PatchParams) -> String {
    match &params.field_manager {
        Some(manager) => format!("fieldManager={manager}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tugboat_model::gateway::{ClassState, GatewayState, ListenerState};

    fn status() -> GatewayStatus {
        let mut status = GatewayStatus::default();
        status.classes.insert(
            "tugboat".into(),
            ClassState {
                conditions: vec![Condition::new("Accepted", true, "Accepted", "", 1)],
                supported_features: vec!["Gateway", "HTTPRoute"],
            },
        );
        status.gateways.insert(
            ObjectKey::new("shop", "gw"),
            GatewayState {
                conditions: vec![Condition::new("Accepted", true, "Accepted", "", 2)],
                listeners: vec![ListenerState {
                    name: "http".into(),
                    supported_kinds: vec![(GROUP.into(), "HTTPRoute".into())],
                    attached_routes: 3,
                    conditions: vec![Condition::new("Programmed", true, "Programmed", "", 2)],
                }],
                requested_addresses: Vec::new(),
            },
        );
        status
    }

    /// `(status, reason)` of the owed Programmed condition of `shop/gw` when it requests
    /// `requested` and the controller publishes `addresses`.
    fn programmed(
        requested: Vec<RequestedAddress>,
        addresses: &[IngressLoadBalancerIngress],
    ) -> (String, String, String) {
        let mut status = status();
        let gateway = status
            .gateways
            .get_mut(&ObjectKey::new("shop", "gw"))
            .expect("the Gateway");
        gateway.requested_addresses = requested;
        gateway
            .conditions
            .push(Condition::new("Programmed", true, "Programmed", "", 2));
        let owed = owed(&status, "tugboat.dev/gateway", addresses);
        let gateway = &owed[&StatusTarget::Gateway(ObjectKey::new("shop", "gw"))];
        let found = gateway["conditions"]
            .as_array()
            .and_then(|list| list.iter().find(|c| c["type"] == "Programmed"))
            .expect("a Programmed condition");
        assert_eq!(found["observedGeneration"], 2);
        (
            found["status"].as_str().unwrap_or_default().to_string(),
            found["reason"].as_str().unwrap_or_default().to_string(),
            found["message"].as_str().unwrap_or_default().to_string(),
        )
    }

    #[test]
    fn requested_addresses_must_be_published_ones() {
        let published = vec![
            IngressLoadBalancerIngress {
                ip: Some("192.0.2.1".into()),
                ..Default::default()
            },
            IngressLoadBalancerIngress {
                ip: Some("2001:db8::1".into()),
                ..Default::default()
            },
            IngressLoadBalancerIngress {
                hostname: Some("LB.example.com".into()),
                ..Default::default()
            },
        ];
        let (status, reason, _) = programmed(Vec::new(), &published);
        assert_eq!((status.as_str(), reason.as_str()), ("True", "Programmed"));
        let (status, reason, _) = programmed(
            vec![
                RequestedAddress::Ip("192.0.2.1".into()),
                RequestedAddress::Ip("2001:db8:0::1".into()),
                RequestedAddress::Hostname("lb.example.com".into()),
            ],
            &published,
        );
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", "Programmed"),
            "published addresses, however written"
        );
        let (status, reason, message) = programmed(
            vec![
                RequestedAddress::Ip("192.0.2.1".into()),
                RequestedAddress::Ip("192.0.2.9".into()),
                RequestedAddress::Hostname("other.example.com".into()),
            ],
            &published,
        );
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "AddressNotUsable")
        );
        assert!(
            message.contains("IPAddress 192.0.2.9, Hostname other.example.com cannot be used"),
            "{message}"
        );
        assert!(
            message.contains("IPAddress 192.0.2.1"),
            "what can be asked: {message}"
        );
        let (status, reason, _) =
            programmed(vec![RequestedAddress::Ip("not-an-ip".into())], &published);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "AddressNotUsable")
        );
        let (status, reason, message) =
            programmed(vec![RequestedAddress::Ip("192.0.2.1".into())], &[]);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "AddressNotAssigned"),
            "nothing published yet"
        );
        assert!(message.contains("--publish-service"), "{message}");
    }

    #[test]
    fn owed_status_has_the_fields_of_the_spec() {
        let addresses = vec![IngressLoadBalancerIngress {
            ip: Some("192.0.2.1".into()),
            ..Default::default()
        }];
        let owed = owed(&status(), "tugboat.dev/gateway", &addresses);
        let class = &owed[&StatusTarget::GatewayClass("tugboat".into())];
        assert_eq!(class["conditions"][0]["status"], "True");
        assert_eq!(class["supportedFeatures"][1]["name"], "HTTPRoute");
        let gateway = &owed[&StatusTarget::Gateway(ObjectKey::new("shop", "gw"))];
        assert_eq!(gateway["addresses"][0]["type"], "IPAddress");
        assert_eq!(gateway["listeners"][0]["attachedRoutes"], 3);
        assert_eq!(gateway["conditions"][0]["observedGeneration"], 2);
    }

    #[test]
    fn an_http_route_and_a_tls_route_of_one_name_owe_their_own_status() {
        let mut status = status();
        let key = ObjectKey::new("shop", "web");
        let parent = |reason: &'static str| tugboat_model::gateway::RouteState {
            parents: vec![tugboat_model::gateway::RouteParentState {
                parent_ref: tugboat_model::gateway::objects::ParentReference {
                    name: "gw".into(),
                    ..Default::default()
                },
                conditions: vec![Condition::new("Accepted", true, reason, "", 5)],
            }],
        };
        status.routes.insert(key.clone(), parent("Accepted"));
        status
            .tls_routes
            .insert(key.clone(), parent("NotAllowedByListeners"));
        let owed = owed(&status, "tugboat.dev/gateway", &[]);
        let http = StatusTarget::Route(RouteKind::Http, key.clone());
        let tls = StatusTarget::Route(RouteKind::Tls, key);
        assert_eq!(
            owed[&http]["parents"][0]["conditions"][0]["reason"],
            "Accepted"
        );
        assert_eq!(
            owed[&tls]["parents"][0]["conditions"][0]["reason"],
            "NotAllowedByListeners"
        );
        assert_eq!(
            tls.path(),
            "/apis/gateway.networking.k8s.io/v1/namespaces/shop/tlsroutes/web/status"
        );
        assert_eq!(tls.to_string(), "TLSRoute shop/web");
        assert!(http.path().contains("/httproutes/web/status"));
    }

    #[test]
    fn a_condition_keeps_its_time_while_its_status_stays() {
        let owed = owed(&status(), "tugboat.dev/gateway", &[]);
        let value = &owed[&StatusTarget::Gateway(ObjectKey::new("shop", "gw"))];
        let mut first = value.clone();
        with_times(&mut first, &Value::Null, "2024-01-01T00:00:00Z");
        assert_eq!(
            first["listeners"][0]["conditions"][0]["lastTransitionTime"],
            "2024-01-01T00:00:00Z"
        );
        let mut same = value.clone();
        with_times(&mut same, &first, "2024-02-02T00:00:00Z");
        assert_eq!(
            same["listeners"][0]["conditions"][0]["lastTransitionTime"],
            "2024-01-01T00:00:00Z"
        );
        let mut flipped = value.clone();
        flipped["conditions"][0]["status"] = json!("False");
        with_times(&mut flipped, &first, "2024-02-02T00:00:00Z");
        assert_eq!(
            flipped["conditions"][0]["lastTransitionTime"],
            "2024-02-02T00:00:00Z"
        );
        assert_eq!(
            flipped["listeners"][0]["conditions"][0]["lastTransitionTime"],
            "2024-01-01T00:00:00Z"
        );
    }
}
