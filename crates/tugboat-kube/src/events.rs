//! Problems found in objects, posted as Warning Events on those objects.
//!
//! Each problem is posted once while it lasts: the same problem in the next update posts
//! nothing; a problem that goes away and comes back is posted again. kube's `Recorder`
//! writes `events.k8s.io/v1` Events, which `kubectl describe` shows: one `Recorder` per
//! problem, because a `Recorder` folds the Events of one object with the same reason
//! into one series that keeps the first note, which would hide every problem of that
//! reason on the object but the first (two invalid certificates of one Ingress).

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
        "GatewayClass" | "Gateway" | "HTTPRoute" | "TLSRoute" | "TCPRoute" => {
            "gateway.networking.k8s.io/v1"
        }
        "ReferenceGrant" => "gateway.networking.k8s.io/v1beta1",
        _ => "v1",
    }
}

/// Posts Warning Events for new problems.
pub struct ProblemEvents {
    client: Client,
    reporter: Reporter,
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
            client,
            reporter,
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
                namespace: Some(problem.object.namespace.to_string()),
                name: Some(problem.object.name.to_string()),
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
            let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
            match recorder.publish(&event, &reference).await {
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
    use std::sync::{Arc, Mutex};

    use super::*;
    use tugboat_model::problem::ProblemReason;

    fn problem(field: &str, message: &str) -> ObjectProblem {
        ObjectProblem {
            object: ObjectRef {
                kind: "Ingress",
                namespace: "default".into(),
                name: "tls".into(),
            },
            field: field.into(),
            reason: ProblemReason::InvalidCertificate,
            message: message.into(),
        }
    }

    #[tokio::test]
    async fn problems_of_one_reason_on_one_object_are_each_an_event() {
        // An API that records what it is sent and answers it back.
        let received: Arc<Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
        let log = received.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let method = request.method().to_string();
                let body = http_body_util::BodyExt::collect(request.into_body())
                    .await
                    .map(|collected| collected.to_bytes())
                    .unwrap_or_default();
                let object: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                log.lock().expect("log").push((method, object));
                http::Response::builder()
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_vec()))
            }
        });
        let mut events = ProblemEvents::new(Client::new(service, "default"), "pod-a".into());
        let problems = [
            problem("spec.tls[1].secretName", "the certificate expired"),
            problem("spec.tls[2].secretName", "the key does not belong"),
        ];
        assert_eq!(events.report(&problems, |_| None).await, 2);
        let received = received.lock().expect("log").clone();
        let created: Vec<&str> = received
            .iter()
            .filter(|(method, _)| method == "POST")
            .filter_map(|(_, event)| event["note"].as_str())
            .collect();
        assert_eq!(
            created,
            [
                "spec.tls[1].secretName: the certificate expired",
                "spec.tls[2].secretName: the key does not belong",
            ],
            "{received:?}"
        );
        // The same problems again: nothing new.
        assert_eq!(events.report(&problems, |_| None).await, 0);
    }

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
