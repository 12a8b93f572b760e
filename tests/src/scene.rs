//! One scenario, run from either source the controller reads: a folder of manifests
//! (one file per object) or the Kubernetes API (the fake API server, through the API
//! source, as the chart's pod runs). A scenario creates, changes and deletes typed
//! objects ([`crate::objects`]) through [`Scene`] and sends its requests through the
//! scene's haproxy; [`crate::scene_tests!`] runs it on every haproxy series, from both
//! sources.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use tugboat::controller::{ControllerConfig, ControllerStatus};

use crate::cluster_pod::{TUGBOAT_CLASS, options};
use crate::objects::{to_json, to_yaml};
use crate::{ClusterPod, FakeApiServer, Haproxy, HaproxyBinary, Pod};

/// Where the controller reads the objects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A folder of manifests, followed live (`--manifests`).
    Folder,
    /// The Kubernetes API: watches and lists, Secrets and ConfigMaps fetched by reference.
    Api,
}

#[allow(
    clippy::large_enum_variant,
    reason = "one per test, never moved around"
)]
enum Running {
    Folder(Pod),
    Api {
        // Declared first: the controller stops before the API server it talks to.
        pod: ClusterPod,
        server: FakeApiServer,
    },
}

/// haproxy and a controller reading `objects` from one [`Source`].
pub struct Scene {
    running: Running,
}

/// Requests go through the scene's haproxy (`scene.get`, `scene.wait_for_service`, ...).
impl std::ops::Deref for Scene {
    type Target = Haproxy;

    fn deref(&self) -> &Haproxy {
        match &self.running {
            Running::Folder(pod) => &pod.haproxy,
            Running::Api { pod, .. } => &pod.haproxy,
        }
    }
}

impl std::ops::DerefMut for Scene {
    fn deref_mut(&mut self) -> &mut Haproxy {
        match &mut self.running {
            Running::Folder(pod) => &mut pod.haproxy,
            Running::Api { pod, .. } => &mut pod.haproxy,
        }
    }
}

/// The file a folder holds `object` in: one per kind, namespace and name.
fn file_name(object: &Value) -> String {
    let field = |value: &Value| value.as_str().unwrap_or("").to_lowercase();
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    format!(
        "{}.{namespace}.{}.yaml",
        field(&object["kind"]),
        field(&object["metadata"]["name"])
    )
}

impl Scene {
    /// Starts haproxy and a controller on `source`, holding Tugboat's IngressClass and
    /// `objects` before the controller starts.
    pub async fn start(binary: &HaproxyBinary, source: Source, objects: &[Value]) -> Self {
        Self::start_with(binary, source, objects, |_| {}).await
    }

    /// Same as [`Scene::start`], with the controller's configuration (its flags)
    /// adjusted by `adjust`.
    pub async fn start_with(
        binary: &HaproxyBinary,
        source: Source,
        objects: &[Value],
        adjust: impl FnOnce(&mut ControllerConfig),
    ) -> Self {
        let class: Value = serde_yaml_ng::from_str(TUGBOAT_CLASS).expect("the class parses");
        let running = match source {
            Source::Folder => {
                let files: Vec<(String, String)> = std::iter::once(&class)
                    .chain(objects)
                    .map(|object| (file_name(object), to_yaml(std::slice::from_ref(object))))
                    .collect();
                let refs: Vec<(&str, &str)> = files
                    .iter()
                    .map(|(name, text)| (name.as_str(), text.as_str()))
                    .collect();
                Running::Folder(Pod::start_with(binary, &refs, adjust).await)
            }
            Source::Api => {
                let server = FakeApiServer::start().await;
                server.put(class);
                for object in objects {
                    server.put(object.clone());
                }
                let pod = ClusterPod::start_with(binary, &server, options("pod-a"), adjust).await;
                Running::Api { pod, server }
            }
        };
        Self { running }
    }

    /// Which source the controller reads.
    pub fn source(&self) -> Source {
        match self.running {
            Running::Folder(_) => Source::Folder,
            Running::Api { .. } => Source::Api,
        }
    }

    /// Creates or replaces a typed object (or its JSON).
    pub fn apply(&self, object: &impl Serialize) {
        let object = to_json(object);
        match &self.running {
            Running::Folder(pod) => {
                pod.write_manifest(&file_name(&object), &to_yaml(std::slice::from_ref(&object)))
            }
            Running::Api { server, .. } => {
                server.put(object);
            }
        }
    }

    /// Deletes an object (found by its kind, namespace and name).
    pub fn delete(&self, object: &impl Serialize) {
        let object = to_json(object);
        match &self.running {
            Running::Folder(pod) => pod.remove_manifest(&file_name(&object)),
            Running::Api { server, .. } => {
                let namespace = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                let kind = object["kind"].as_str().expect("an object with its kind");
                let name = object["metadata"]["name"].as_str().expect("metadata.name");
                server.delete(kind, namespace, name);
            }
        }
    }

    /// What the controller reported after its last update.
    pub fn status(&self) -> ControllerStatus {
        match &self.running {
            Running::Folder(pod) => pod.status.borrow().clone(),
            Running::Api { pod, .. } => pod.status.borrow().clone(),
        }
    }

    /// Waits until the controller has applied its first configuration.
    pub async fn wait_until_ready(&self) {
        crate::eventually(
            "the first apply",
            std::time::Duration::from_secs(15),
            || async { self.status().ready.then_some(()) },
        )
        .await;
    }

    /// Serves a new Service `name` (echo backends on 127.0.`net`.x) behind a new Ingress
    /// for `host`: a new backend with a server timeout of its own, which haproxy takes
    /// only by a reload on every series (3.4 adds plainer ones at runtime). Returns once
    /// the reload happened and the host answers from the new Service.
    pub async fn reload_with_a_new_service(
        &self,
        name: &str,
        host: &str,
        net: u8,
    ) -> Vec<crate::EchoServer> {
        let before = self.reloads().await;
        let servers = crate::manifests::start_backends(name, net, 1).await;
        for object in crate::objects::mk_service_of(name, &servers) {
            self.apply(&object);
        }
        self.apply(&tugboat_test_objects::with_keys(
            tugboat_test_objects::mk_ingress(name, host, name),
            &[("timeout-server", "40s")],
        ));
        crate::eventually("a reload", std::time::Duration::from_secs(15), || async {
            (self.reloads().await > before).then_some(())
        })
        .await;
        self.wait_for_service(host, "/", name).await;
        servers
    }

    /// haproxy's reload counter.
    pub async fn reloads(&self) -> u64 {
        self.show_proc().await.reloads
    }

    /// The fake API server, when the source is the API.
    pub fn api(&self) -> Option<&FakeApiServer> {
        match &self.running {
            Running::Folder(_) => None,
            Running::Api { server, .. } => Some(server),
        }
    }

    /// The manifests folder, when the source is a folder.
    pub fn manifests_dir(&self) -> Option<PathBuf> {
        match &self.running {
            Running::Folder(pod) => Some(pod.manifests_dir().to_path_buf()),
            Running::Api { .. } => None,
        }
    }

    /// Stops the controller and starts a new one on the same source and configuration,
    /// as a rolling update of the controller container does; haproxy keeps running.
    pub async fn restart_controller(&mut self) {
        match &mut self.running {
            Running::Folder(pod) => pod.restart_controller().await,
            Running::Api { pod, .. } => pod.restart_controller().await,
        }
    }

    /// Restarts the controller ([`Scene::restart_controller`]), waits until it is ready,
    /// then longer than the reload window, so that a reload the new controller wanted
    /// would be done by the time this returns.
    pub async fn restart_controller_and_settle(&mut self) {
        self.restart_controller().await;
        crate::eventually(
            "the restarted controller is ready",
            std::time::Duration::from_secs(10),
            || async { self.status().ready.then_some(()) },
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    }

    /// In API mode, waits for the Warning Event the controller posts about the object
    /// `name` for its field `field` (the Event's note starts with it) and returns the
    /// Event. A folder gets no Events: `None`.
    pub async fn wait_for_warning(&self, name: &str, field: &str) -> Option<Value> {
        let server = self.api()?;
        let start = format!("{field}: ");
        let event = crate::eventually(
            &format!("a Warning Event about {name} {field}"),
            std::time::Duration::from_secs(10),
            || async {
                server.list("Event").into_iter().find(|event| {
                    let about = event["regarding"]["name"] == name
                        || event["involvedObject"]["name"] == name;
                    let note = event["note"]
                        .as_str()
                        .or(event["message"].as_str())
                        .unwrap_or_default();
                    about && event["type"] == "Warning" && note.starts_with(&start)
                })
            },
        )
        .await;
        Some(event)
    }

    /// Whether the controller is still running.
    pub fn controller_running(&self) -> bool {
        match &self.running {
            Running::Folder(pod) => pod.controller_running(),
            Running::Api { pod, .. } => pod.controller_running(),
        }
    }
}

/// Declares, for each scenario `async fn name(HaproxyBinary, Source)`, one test per
/// haproxy series of [`crate::HAPROXY_SERIES`] and per [`Source`]:
/// `folder::haproxy_3_4::name` and `api::haproxy_3_4::name`. A missing series fails
/// the test unless `TUGBOAT_SKIP_MISSING_HAPROXY` skips it, as in
/// [`crate::haproxy_tests!`].
#[macro_export]
macro_rules! scene_tests {
    ($($name:ident),* $(,)?) => {
        mod folder {
            $crate::scene_tests!(@source Folder $($name),*);
        }
        mod api {
            $crate::scene_tests!(@source Api $($name),*);
        }
    };
    (@source $source:ident $($name:ident),*) => {
        $crate::scene_tests!(@series haproxy_2_6 "2.6" $source $($name),*);
        $crate::scene_tests!(@series haproxy_3_0 "3.0" $source $($name),*);
        $crate::scene_tests!(@series haproxy_3_2 "3.2" $source $($name),*);
        $crate::scene_tests!(@series haproxy_3_4 "3.4" $source $($name),*);
    };
    (@series $module:ident $series:literal $source:ident $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(binary) = $crate::HaproxyBinary::find($series) {
                        super::super::$name(binary, $crate::scene::Source::$source).await;
                    }
                }
            )*
        }
    };
}
