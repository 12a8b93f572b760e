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

use tugboat_model::{BackendName, Desired, Endpoint};

/// The slots of every backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub backends: BTreeMap<BackendName, Vec<Option<Endpoint>>>,
}

/// A slot whose content changes, by index (slot `i` is the server `s{i+1}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotChange {
    pub slot: usize,
    /// The new content; `None` parks the slot.
    pub endpoint: Option<Endpoint>,
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

impl Layout {
    /// The layout right after a reload: endpoints in order, then free slots.
    pub fn fresh(desired: &Desired) -> Self {
        let backends = desired
            .backends
            .iter()
            .map(|(name, backend)| {
                let mut slots: Vec<Option<Endpoint>> =
                    backend.endpoints.iter().copied().map(Some).collect();
                slots.resize(capacity_for(backend.endpoints.len()), None);
                (name.clone(), slots)
            })
            .collect();
        Self { backends }
    }

    /// The layout for `desired` reached from this one with as few slot changes as
    /// possible, and the changes per backend. Backends that are new or gone are not this
    /// function's business (they need a reload): only backends present in both appear.
    pub fn evolve(&self, desired: &Desired) -> (Self, BTreeMap<BackendName, Vec<SlotChange>>) {
        let mut layout = Layout::default();
        let mut changes = BTreeMap::new();
        for (name, backend) in &desired.backends {
            let Some(current) = self.backends.get(name) else {
                continue;
            };
            let wanted: BTreeSet<Endpoint> = backend.endpoints.iter().copied().collect();
            let mut slots = current.clone();
            let mut backend_changes = Vec::new();
            // Endpoints that went away free their slots.
            for (slot, content) in slots.iter_mut().enumerate() {
                if let Some(endpoint) = content
                    && !wanted.contains(endpoint)
                {
                    *content = None;
                    backend_changes.push(SlotChange {
                        slot,
                        endpoint: None,
                        added: false,
                    });
                }
            }
            // New endpoints take free slots (the lowest first), or new ones.
            let present: BTreeSet<Endpoint> = slots.iter().flatten().copied().collect();
            for endpoint in backend.endpoints.iter().filter(|e| !present.contains(e)) {
                let change = match slots.iter().position(Option::is_none) {
                    Some(slot) => {
                        slots[slot] = Some(*endpoint);
                        SlotChange {
                            slot,
                            endpoint: Some(*endpoint),
                            added: false,
                        }
                    }
                    None => {
                        slots.push(Some(*endpoint));
                        SlotChange {
                            slot: slots.len() - 1,
                            endpoint: Some(*endpoint),
                            added: true,
                        }
                    }
                };
                // A slot freed and refilled in the same step is one change.
                backend_changes.retain(|c: &SlotChange| c.slot != change.slot);
                backend_changes.push(change);
            }
            if !backend_changes.is_empty() {
                backend_changes.sort_by_key(|c| c.slot);
                changes.insert(name.clone(), backend_changes);
            }
            layout.backends.insert(name.clone(), slots);
        }
        (layout, changes)
    }
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
        let slots = &next.backends[&name];
        assert_eq!(slots[0], Some(endpoint(1)));
        assert_eq!(slots[2], Some(endpoint(3)));
        // 2 went away and 4 came: slot 1 is reused, in one change.
        assert_eq!(slots[1], Some(endpoint(4)));
        assert_eq!(
            changes[&name],
            vec![SlotChange {
                slot: 1,
                endpoint: Some(endpoint(4)),
                added: false
            }]
        );
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
        assert!(changes[&name].iter().all(|c| c.endpoint.is_none()));
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
