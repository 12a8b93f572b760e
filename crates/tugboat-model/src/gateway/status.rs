//! The status the controller owes each Gateway API object it serves, as data: the
//! conditions of GatewayClasses, Gateways (and each listener) and HTTPRoutes (per
//! parent). The leader turns it into status patches (`tugboat_kube::gateway_status`);
//! the time of a transition is the writer's business, not the model's.

use std::collections::BTreeMap;

use crate::gateway::objects::ParentReference;
use crate::snapshot::ObjectKey;

/// One condition: type, status, reason and message, for one generation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: i64,
}

impl Condition {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
        observed_generation: i64,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
            observed_generation,
        }
    }
}

/// A GatewayClass of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassState {
    pub conditions: Vec<Condition>,
    /// The features this controller supports, sorted (`status.supportedFeatures`).
    pub supported_features: Vec<&'static str>,
}

/// A listener of a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerState {
    pub name: String,
    /// `(group, kind)` of the routes it accepts.
    pub supported_kinds: Vec<(String, String)>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

/// A Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayState {
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerState>,
}

/// One parent of a route: the reference as the route wrote it, and its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteParentState {
    pub parent_ref: ParentReference,
    pub conditions: Vec<Condition>,
}

/// An HTTPRoute with at least one parent of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteState {
    pub parents: Vec<RouteParentState>,
}

/// The status of every Gateway API object this controller serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayStatus {
    /// By name (cluster-scoped).
    pub classes: BTreeMap<String, ClassState>,
    pub gateways: BTreeMap<ObjectKey, GatewayState>,
    pub routes: BTreeMap<ObjectKey, RouteState>,
}

impl GatewayStatus {
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.gateways.is_empty() && self.routes.is_empty()
    }
}
