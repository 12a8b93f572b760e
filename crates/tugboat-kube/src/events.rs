//! Problems found in objects, posted as Warning Events on those objects.
//!
//! Each problem is posted once while it lasts: the same problem in the next update posts
//! nothing; a problem that goes away and comes back is posted again. kube's `Recorder`
//! writes `events.k8s.io/v1` Events, which `kubectl describe` shows.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tugboat_model::{ObjectProblem, ObjectRef};

/// The controller name Events are reported under.
pub const REPORTING_CONTROLLER: &str = "tugboat";

/// Longest Event note the API accepts (1 kB), kept well under.
const MAX_NOTE_BYTES: usize = 1000;

/// The `apiVersion` of the kinds problems are found on.
pub fn api_version_of(kind: &str) -> &'static str {
    match kind {
        "Ingress" | "IngressClass" => "networking.k8s.io/v1",
        "EndpointSlice" => "discovery.k8s.io/v1",
        _ => "v1",
    }
}

/// Posts Warning Events for new problems.
pub struct ProblemEvents {
    recorder: Recorder,
    posted: BTreeSet<ObjectProblem>,
}

impl ProblemEvents {
    /// `instance` tells replicas apart (the pod name).
    pub fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: Some(instance),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            posted: BTreeSet::new(),
        }
    }

    /// Forgets what was posted (e.g. after losing leadership), so that the next
    /// [`report`](Self::report) posts every current problem again.
    pub fn forget(&mut self) {
        self.posted.clear();
    }

    /// Posts an Event for every problem not posted yet; `uid_of` finds the object's uid
    /// (Events tie to it). Returns how many Events were posted.
    pub async fn report(
        &mut self,
        problems: &[ObjectProblem],
        uid_of: impl Fn(&ObjectRef) -> Option<String>,
    ) -> usize {
        let current: BTreeSet<ObjectProblem> = problems.iter().cloned().collect();
        self.posted.retain(|problem| current.contains(problem));
        let mut count = 0;
        for problem in current {
            if self.posted.contains(&problem) {
                continue;
            }
            let reference = ObjectReference {
                api_version: Some(api_version_of(problem.object.kind).into()),
                kind: Some(problem.object.kind.into()),
                namespace: Some(problem.object.namespace.clone()),
                name: Some(problem.object.name.clone()),
                uid: uid_of(&problem.object),
                ..Default::default()
            };
            let event = Event {
                type_: EventType::Warning,
                reason: problem.reason.as_str().into(),
                note: Some(note(&problem)),
                action: "Sync".into(),
                secondary: None,
            };
            match self.recorder.publish(&event, &reference).await {
                Ok(()) => {
                    count += 1;
                    self.posted.insert(problem);
                }
                Err(err) => {
                    tracing::warn!(object = %problem.object, "cannot post an Event: {err}");
                }
            }
        }
        count
    }
}

fn note(problem: &ObjectProblem) -> String {
    let mut note = format!("{}: {}", problem.field, problem.message);
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use tugboat_model::problem::ProblemReason;

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        let problem = ObjectProblem {
            object: ObjectRef {
                kind: "Ingress",
                namespace: "default".into(),
                name: "x".into(),
            },
            field: "spec".into(),
            reason: ProblemReason::InvalidField,
            message: "é".repeat(800),
        };
        let note = note(&problem);
        assert!(note.len() <= MAX_NOTE_BYTES);
        assert!(note.starts_with("spec: é"));
    }

    #[test]
    fn api_versions_follow_the_kind() {
        assert_eq!(api_version_of("Ingress"), "networking.k8s.io/v1");
        assert_eq!(api_version_of("Service"), "v1");
        assert_eq!(api_version_of("EndpointSlice"), "discovery.k8s.io/v1");
    }
}
