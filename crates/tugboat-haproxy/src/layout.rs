//! Server slots: where each endpoint of a backend sits among the backend's `server` lines.
//!
//! haproxy can change a server's address and state at runtime, and add servers, but a
//! server's name is its identity. A [`Layout`] gives every backend a list of named slots
//! (`s1`, `s2`, ...), each holding an endpoint or free (parked in maintenance). When the
//! endpoints change, [`Layout::evolve`] keeps every surviving endpoint in its slot, puts
//! new endpoints in free slots (adding slots when none is left) and frees the slots of
//! endpoints that went away, and says which slots changed: those are the runtime commands.
//! A reload starts from a [`Layout::fresh`] one, with spare slots for growth.

use std::collections::{BTreeMap, BTreeSet};

use tugboat_model::{Backend, BackendName, Desired, Endpoint};

/// What a slot holds: an endpoint, and whether it drains (no new requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pub endpoint: Endpoint,
    pub draining: bool,
}

/// The slots of every backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub backends: BTreeMap<BackendName, Vec<Option<Server>>>,
}

/// A slot whose content changes, by index (slot `i` is the server `s{i+1}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotChange {
    pub slot: usize,
    /// What the slot held; `None` for a free slot or a new one.
    pub before: Option<Server>,
    /// The new content; `None` parks the slot.
    pub after: Option<Server>,
    /// True when the slot did not exist before (`add server`).
    pub added: bool,
}

/// Slots a backend gets at a reload for `endpoints` endpoints: room for a quarter more,
/// at least four free, rounded up to a multiple of four.
pub fn capacity_for(endpoints: usize) -> usize {
    let wanted = (endpoints + 4).max(endpoints + endpoints.div_ceil(4));
    wanted.div_ceil(4) * 4
}

/// The name of the server in slot `index`.
pub fn server_name(index: usize) -> String {
    format!("s{}", index + 1)
}

/// The slots of one backend right after a reload: ready endpoints in order, then free
/// slots. Draining endpoints are left out (a fresh worker owes them nothing), and an
/// ExternalName backend has no slots.
pub fn fresh_slots(backend: &Backend) -> Vec<Option<Server>> {
    if backend.external.is_some() {
        return Vec::new();
    }
    let mut slots: Vec<Option<Server>> = backend
        .endpoints
        .iter()
        .map(|endpoint| {
            Some(Server {
                endpoint: *endpoint,
                draining: false,
            })
        })
        .collect();
    slots.resize(capacity_for(backend.endpoints.len()), None);
    slots
}

impl Layout {
    /// The layout right after a reload.
    pub fn fresh(desired: &Desired) -> Self {
        let backends = desired
            .backends
            .iter()
            .map(|(name, backend)| (name.clone(), fresh_slots(backend)))
            .collect();
        Self { backends }
    }

    /// The layout for `desired` reached from this one with as few slot changes as
    /// possible, and the changes per backend. Surviving endpoints keep their slots (a
    /// terminating one stays, draining); new ones take free slots or new ones; the others
    /// are parked. Backends that are new or gone are not this function's business (they
    /// need a reload): only backends present in both appear.
    pub fn evolve(&self, desired: &Desired) -> (Self, BTreeMap<BackendName, Vec<SlotChange>>) {
        let mut layout = Layout::default();
        let mut changes = BTreeMap::new();
        for (name, backend) in &desired.backends {
            let Some(current) = self.backends.get(name) else {
                continue;
            };
            let (slots, backend_changes) = evolve_slots(current, backend);
            if !backend_changes.is_empty() {
                changes.insert(name.clone(), backend_changes);
            }
            layout.backends.insert(name.clone(), slots);
        }
        (layout, changes)
    }
}

/// The slots of one backend for its new endpoints, from its `current` slots (see
/// [`Layout::evolve`]), and the slots that change.
pub fn evolve_slots(
    current: &[Option<Server>],
    backend: &Backend,
) -> (Vec<Option<Server>>, Vec<SlotChange>) {
    let ready: BTreeSet<Endpoint> = backend.endpoints.iter().copied().collect();
    let draining: BTreeSet<Endpoint> = backend.draining.iter().copied().collect();
    let mut slots = current.to_vec();
    for slot in slots.iter_mut() {
        *slot = slot.and_then(|server| {
            let endpoint = server.endpoint;
            if ready.contains(&endpoint) {
                Some(Server {
                    endpoint,
                    draining: false,
                })
            } else if draining.contains(&endpoint) {
                Some(Server {
                    endpoint,
                    draining: true,
                })
            } else {
                None
            }
        });
    }
    let present: BTreeSet<Endpoint> = slots.iter().flatten().map(|s| s.endpoint).collect();
    for endpoint in backend.endpoints.iter().filter(|e| !present.contains(e)) {
        let server = Some(Server {
            endpoint: *endpoint,
            draining: false,
        });
        // A free slot whose previous content is gone is taken first; one freed
        // just now only when no other is left.
        let free = slots
            .iter()
            .enumerate()
            .position(|(i, s)| s.is_none() && current[i].is_none())
            .or_else(|| slots.iter().position(Option::is_none));
        match free {
            Some(slot) => slots[slot] = server,
            None => slots.push(server),
        }
    }
    let backend_changes: Vec<SlotChange> = slots
        .iter()
        .enumerate()
        .filter_map(|(slot, after)| {
            let before = current.get(slot).copied().flatten();
            let added = slot >= current.len();
            (added || before != *after).then_some(SlotChange {
                slot,
                before,
                after: *after,
                added,
            })
        })
        .collect();
    (slots, backend_changes)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{Backend, ObjectKey};

    use super::*;

    fn endpoint(last: u8) -> Endpoint {
        Endpoint {
            address: Ipv4Addr::new(10, 0, 0, last).into(),
            port: 8080,
        }
    }

    fn desired(endpoints: &[u8]) -> (BackendName, Desired) {
        let service = ObjectKey::new("ns", "web");
        let port = ServicePortRef::Number(80);
        let name = BackendName::for_service_port(&service, &port).expect("name");
        let backend = Backend {
            service,
            port,
            endpoints: endpoints.iter().map(|e| endpoint(*e)).collect(),
            draining: Vec::new(),
            external: None,
            options: Default::default(),
        };
        let desired = Desired {
            backends: [(name.clone(), backend)].into(),
            ..Desired::default()
        };
        (name, desired)
    }

    #[test]
    fn capacity_leaves_room_to_grow() {
        assert_eq!(capacity_for(0), 4);
        assert_eq!(capacity_for(1), 8);
        assert_eq!(capacity_for(4), 8);
        assert_eq!(capacity_for(20), 28);
        assert_eq!(capacity_for(100), 128);
    }

    #[test]
    fn surviving_endpoints_keep_their_slots() {
        let (name, before) = desired(&[1, 2, 3]);
        let layout = Layout::fresh(&before);
        let (_, after) = desired(&[1, 3, 4]);
        let (next, changes) = layout.evolve(&after);
        let slots: Vec<Option<Endpoint>> = next.backends[&name]
            .iter()
            .map(|s| s.map(|s| s.endpoint))
            .collect();
        assert_eq!(slots[0], Some(endpoint(1)));
        assert_eq!(slots[2], Some(endpoint(3)));
        // 2 went away (slot 1 parked) and 4 came (into the first never-used free slot).
        assert_eq!(slots[1], None);
        assert_eq!(slots[3], Some(endpoint(4)));
        let changed: Vec<usize> = changes[&name].iter().map(|c| c.slot).collect();
        assert_eq!(changed, vec![1, 3]);
    }

    #[test]
    fn grows_with_added_slots_when_full_and_parks_on_scale_down() {
        let (name, before) = desired(&[1]);
        let layout = Layout::fresh(&before);
        assert_eq!(layout.backends[&name].len(), 8);
        let many: Vec<u8> = (1..=10).collect();
        let (_, after) = desired(&many);
        let (grown, changes) = layout.evolve(&after);
        assert_eq!(grown.backends[&name].len(), 10);
        let added: Vec<usize> = changes[&name]
            .iter()
            .filter(|c| c.added)
            .map(|c| c.slot)
            .collect();
        assert_eq!(added, vec![8, 9]);
        let (_, back) = desired(&[7]);
        let (shrunk, changes) = grown.evolve(&back);
        assert_eq!(
            shrunk.backends[&name].len(),
            10,
            "slots are parked, not removed"
        );
        assert_eq!(shrunk.backends[&name].iter().flatten().count(), 1);
        assert_eq!(changes[&name].len(), 9);
        assert!(changes[&name].iter().all(|c| c.after.is_none()));
    }

    #[test]
    fn terminating_endpoints_drain_in_their_slot() {
        let (name, before) = desired(&[1, 2]);
        let layout = Layout::fresh(&before);
        let (_, mut after) = desired(&[1]);
        if let Some(backend) = after.backends.get_mut(&name) {
            backend.draining = vec![endpoint(2), endpoint(9)];
        }
        let (next, changes) = layout.evolve(&after);
        let slot = next.backends[&name][1].expect("still there");
        assert_eq!(slot.endpoint, endpoint(2));
        assert!(slot.draining);
        // A draining endpoint that was never served is not added.
        assert_eq!(next.backends[&name].iter().flatten().count(), 2);
        assert_eq!(changes[&name].len(), 1);
    }

    #[test]
    fn unchanged_endpoints_change_nothing() {
        let (_, before) = desired(&[1, 2]);
        let layout = Layout::fresh(&before);
        let (next, changes) = layout.evolve(&before);
        assert_eq!(next, layout);
        assert!(changes.is_empty());
    }
}
