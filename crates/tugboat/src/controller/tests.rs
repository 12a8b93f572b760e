//! The controller's update step against a fake master socket, without haproxy: what it
//! does next after an update that applies, one haproxy refuses, one with a snippet
//! haproxy refuses, one haproxy does not answer, and one that needs Lua haproxy lacks;
//! and the next step and the counts that each way an apply can end gives.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

use std::path::Path;
use std::sync::Mutex;

use k8s_openapi::api::networking::v1::Ingress;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tugboat_kube::manifests::{FolderContents, parse_file};
use tugboat_test_objects::{
    Object, mk_endpoint, mk_endpoint_slice_named, mk_ingress, mk_service, to_yaml,
    with_annotations, with_class,
};

use super::*;

/// What the fake master has seen and how it answers.
#[derive(Default)]
struct MasterState {
    reloads: u64,
    failed_reloads: u64,
    /// A reload is refused when the config files hold this text.
    refuse_when_config_has: Option<&'static str>,
    /// The first line of every request, in order.
    requests: Vec<String>,
    /// haproxy was built without Lua (`show env` says so when the config needs it).
    without_lua: bool,
}

/// A master CLI socket that answers `show proc`, `reload` (reading the config files,
/// as haproxy would) and `prompt` batches of runtime commands.
struct FakeMaster {
    dir: tempfile::TempDir,
    state: Arc<Mutex<MasterState>>,
    task: JoinHandle<()>,
}

impl Drop for FakeMaster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeMaster {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let listener = UnixListener::bind(dir.path().join("master.sock")).expect("socket");
        let state = Arc::new(Mutex::new(MasterState::default()));
        let config_dir = dir.path().join("etc");
        let task = tokio::spawn(serve(listener, state.clone(), config_dir));
        Self { dir, state, task }
    }

    fn config(&self) -> ControllerConfig {
        let mut render = RenderSettings::example();
        render.config_dir = self.dir.path().join("etc");
        render.lib_dir = self.dir.path().join("lib");
        let mut config = ControllerConfig::new(self.dir.path().join("master.sock"), render);
        config.reload_window = Duration::ZERO;
        config.model.allow_snippets = true;
        config
    }

    fn applier(&self, config: &ControllerConfig) -> Applier {
        let cli = MasterCli::new(&config.master_socket)
            .with_timeouts(Duration::from_millis(300), Duration::from_secs(2));
        Applier::new(cli, config.render.clone())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MasterState> {
        self.state.lock().expect("fake master state")
    }

    fn requests_like(&self, start: &str) -> usize {
        self.state()
            .requests
            .iter()
            .filter(|r| r.starts_with(start))
            .count()
    }
}

async fn serve(listener: UnixListener, state: Arc<Mutex<MasterState>>, config_dir: PathBuf) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let mut request = String::new();
        if stream.read_to_string(&mut request).await.is_err() {
            continue;
        }
        let reply = answer(&request, &state, &config_dir);
        let _ = stream.write_all(reply.as_bytes()).await;
    }
}

fn answer(request: &str, state: &Mutex<MasterState>, config_dir: &Path) -> String {
    let mut state = state.lock().expect("fake master state");
    state
        .requests
        .push(request.lines().next().unwrap_or("").to_string());
    match request.trim_end() {
        "show proc" => format!(
            "#<PID>          <type>          <reloads>       <uptime>        <version>\n\
             1               master          {} [failed: {}]  0d00h00m01s     3.4.0-fake\n\
             # workers\n\
             2               worker          0               0d00h00m01s     3.4.0-fake\n",
            state.reloads, state.failed_reloads
        ),
        "reload" => {
            state.reloads += 1;
            let config = tugboat_files(config_dir);
            match state.refuse_when_config_has {
                Some(text) if config.contains(text) => {
                    state.failed_reloads += 1;
                    format!(
                        "Success=0\n--\n[ALERT]    (1) : config : parsing [haproxy.cfg:1] : \
                         unknown keyword '{text}'\n"
                    )
                }
                _ => {
                    state.failed_reloads = 0;
                    "Success=1\n--\n[NOTICE]   (1) : Loading success.\n".to_string()
                }
            }
        }
        "@1 show env TUGBOAT_HAPROXY_WITHOUT_LUA" => {
            let needs_lua =
                tugboat_files(config_dir).contains("setenv TUGBOAT_HAPROXY_WITHOUT_LUA");
            if state.without_lua && needs_lua {
                "TUGBOAT_HAPROXY_WITHOUT_LUA=1\n\n".to_string()
            } else {
                "Variable not found\n\n".to_string()
            }
        }
        batch if batch.starts_with("prompt\n") => {
            let mut reply = String::from("master> ");
            let mut lines = batch.lines().skip(1);
            while let Some(command) = lines.next() {
                if command.ends_with("<<") {
                    // The payload runs to an empty line.
                    for line in lines.by_ref() {
                        if line.is_empty() {
                            break;
                        }
                    }
                }
                if command.contains(" addr ") {
                    reply.push_str(
                        "IP changed from '127.0.0.1' to '127.0.0.9' by 'stats socket command'\n",
                    );
                }
                reply.push_str("\nmaster> ");
            }
            reply
        }
        _ => "Unknown command.\n".to_string(),
    }
}

/// Every config file of the folder, one after the other.
fn tugboat_files(config_dir: &Path) -> String {
    tugboat_haproxy::files::config_files_in(config_dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect()
}

/// A snapshot of `objects`, read as the manifests folder reads a file of them.
fn snapshot(objects: &[Object]) -> Arc<Snapshot> {
    let mut contents = FolderContents::default();
    parse_file(Path::new("test.yaml"), &to_yaml(objects), &mut contents);
    assert!(contents.problems.is_empty(), "{:?}", contents.problems);
    Arc::new(contents.snapshot)
}

/// An Ingress `name` (without a class) routing `name.example.com` to Service `service`.
fn route(name: &str, service: &str) -> Ingress {
    with_class(
        mk_ingress(name, &format!("{name}.example.com"), service),
        None,
    )
}

/// `ingress`, the Service `service` (with `annotations`) it routes to, and the Service's
/// EndpointSlice with one endpoint at `endpoint`.
fn served(
    ingress: Ingress,
    service: &str,
    annotations: &[(&str, &str)],
    endpoint: &str,
) -> Vec<Object> {
    let slice = mk_endpoint_slice_named(
        &format!("{service}-1"),
        service,
        "http",
        Some(8080),
        vec![mk_endpoint(endpoint, Some(true))],
    );
    vec![
        ingress.into(),
        with_annotations(mk_service(service, "http", 80), annotations).into(),
        slice.into(),
    ]
}

/// [`route`] `name` to `service`, [`served`] with the Service's `annotations` at
/// `endpoint`.
fn routed(name: &str, service: &str, annotations: &[(&str, &str)], endpoint: &str) -> Vec<Object> {
    served(route(name, service), service, annotations, endpoint)
}

/// One controller: its config, applier, loop state and status.
struct Step {
    config: ControllerConfig,
    applier: Applier,
    state: LoopState,
    status: watch::Sender<ControllerStatus>,
}

impl Step {
    fn new(master: &FakeMaster) -> Self {
        let config = master.config();
        let applier = master.applier(&config);
        Self {
            config,
            applier,
            state: LoopState::default(),
            status: watch::channel(ControllerStatus::default()).0,
        }
    }

    async fn update(&mut self, snapshot: &Arc<Snapshot>) -> Next {
        update(
            &self.config,
            &mut self.applier,
            &mut self.state,
            snapshot,
            &self.status,
        )
        .await
    }
}

#[tokio::test]
async fn an_applied_state_waits_for_the_next_change_and_endpoints_go_at_runtime() {
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let first = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    assert_eq!(step.update(&first).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert!(step.status.borrow().ready);
    assert!(tugboat_files(&step.config.render.config_dir).contains("backend default_web_80"));

    // The same snapshot: nothing to do.
    assert_eq!(step.update(&first).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert_eq!(master.requests_like("prompt"), 0);

    // An endpoint moves: runtime commands, no reload.
    let moved = snapshot(&routed("shop", "web", &[], "127.0.0.9"));
    assert_eq!(step.update(&moved).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert_eq!(master.requests_like("prompt"), 1);
    assert!(tugboat_files(&step.config.render.config_dir).contains("127.0.0.9:8080"));
}

#[tokio::test]
async fn a_refused_state_is_not_tried_again_until_something_changes() {
    let master = FakeMaster::start();
    master.state().refuse_when_config_has = Some("default_web_80");
    let mut step = Step::new(&master);
    let refused = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    assert_eq!(step.update(&refused).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert!(!step.status.borrow().ready);
    // The files haproxy refused are gone again.
    assert!(!tugboat_files(&step.config.render.config_dir).contains("default_web_80"));

    // Asked again with the same objects (a timer, a re-list): not sent again.
    assert_eq!(step.update(&refused).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);

    // Another state is tried.
    let other = snapshot(&routed("shop", "api", &[], "127.0.0.1"));
    assert_eq!(step.update(&other).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 2);
    assert!(step.status.borrow().ready);
}

#[tokio::test]
async fn a_refused_new_snippet_is_left_out_and_the_rest_applies_at_once() {
    let master = FakeMaster::start();
    master.state().refuse_when_config_has = Some("no-such-directive");
    let mut step = Step::new(&master);
    let snippet = [("tugboat.dev/backend-config-snippet", "no-such-directive 1")];
    let objects = [
        routed("shop", "web", &[], "127.0.0.1"),
        routed("blog", "bad", &snippet, "127.0.0.2"),
    ];
    let with_snippet = snapshot(&objects.concat());
    // Refused: the new snippet is the likely cause, so the update runs again at once...
    assert_eq!(step.update(&with_snippet).await, Next::Now);
    assert_eq!(master.requests_like("reload"), 1);
    // ...without it, and haproxy takes the rest.
    assert_eq!(step.update(&with_snippet).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 2);
    let files = tugboat_files(&step.config.render.config_dir);
    assert!(files.contains("backend default_bad_80"), "{files}");
    assert!(!files.contains("no-such-directive"), "{files}");
    let status = step.status.borrow();
    assert!(status.ready);
    assert!(
        status
            .problems
            .iter()
            .any(|p| &*p.object.name == "bad" && p.message.contains("no-such-directive")),
        "{:?}",
        status.problems
    );
}

#[tokio::test]
async fn an_unanswered_master_is_tried_again_after_a_backoff() {
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    // No one listens on the socket any more.
    master.task.abort();
    std::fs::remove_file(&step.config.master_socket).expect("remove the socket");
    let first = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    assert_eq!(step.update(&first).await, Next::AfterBackoff);
    assert!(!step.status.borrow().ready);
}

#[tokio::test]
async fn a_reload_waits_for_its_window_while_runtime_changes_go_at_once() {
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let window = Duration::from_millis(300);
    step.config.reload_window = window;
    let first = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    // Nothing is known of haproxy: the first state reloads at once.
    assert_eq!(step.update(&first).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);

    // A new backend (a reload) and an endpoint of `web` that moves (runtime).
    let both = snapshot(
        &[
            routed("shop", "web", &[], "127.0.0.9"),
            routed("blog", "api", &[], "127.0.0.2"),
        ]
        .concat(),
    );
    assert_eq!(step.update(&both).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert_eq!(master.requests_like("prompt"), 1);
    let due = step.state.reload_due(window).expect("a reload is due");
    let files = tugboat_files(&step.config.render.config_dir);
    assert!(files.contains("127.0.0.9:8080"), "{files}");
    assert!(!files.contains("default_api_80"), "{files}");

    // The loop wakes up when the window ends: the reload goes.
    tokio::time::sleep_until(due).await;
    assert_eq!(step.update(&both).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 2);
    assert_eq!(step.state.reload_due(window), None);
    assert!(tugboat_files(&step.config.render.config_dir).contains("default_api_80"));
}

/// `routed` to `web`, with `custom-http-errors` on the Ingress.
fn with_custom_errors(name: &str) -> Vec<Object> {
    let errors = ("nginx.ingress.kubernetes.io/custom-http-errors", "404,503");
    served(
        with_annotations(route(name, "web"), &[errors]),
        "web",
        &[],
        "127.0.0.1",
    )
}

#[tokio::test]
async fn custom_http_errors_on_a_haproxy_without_lua_is_a_problem_naming_the_key() {
    let master = FakeMaster::start();
    master.state().without_lua = true;
    let mut step = Step::new(&master);
    let errors = snapshot(&with_custom_errors("shop"));
    // haproxy says it has no Lua after the reload: the update runs again to report it.
    assert_eq!(step.update(&errors).await, Next::Now);
    assert_eq!(step.update(&errors).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    let problems = step.status.borrow().problems.clone();
    assert!(
        problems.iter().any(|p| &*p.object.name == "shop"
            && p.field == "metadata.annotations.nginx.ingress.kubernetes.io/custom-http-errors"
            && p.message.contains("Lua")),
        "{problems:?}"
    );
    // The key removed: the problem goes.
    let plain = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    step.update(&plain).await;
    step.update(&plain).await;
    assert!(
        step.status.borrow().problems.is_empty(),
        "{:?}",
        step.status.borrow().problems
    );
}

#[tokio::test]
async fn custom_http_errors_on_a_haproxy_with_lua_is_no_problem() {
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let errors = snapshot(&with_custom_errors("shop"));
    assert_eq!(step.update(&errors).await, Next::OnChange);
    assert_eq!(master.requests_like("@1 show env"), 1);
    assert!(step.status.borrow().problems.is_empty());
    // Without the key, haproxy is not asked.
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let plain = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    assert_eq!(step.update(&plain).await, Next::OnChange);
    assert_eq!(master.requests_like("reload"), 1);
    assert_eq!(master.requests_like("@1 show env"), 0);
}

/// An outcome of `built` with `result`, after no time at all.
fn outcome(built: Built<'_>, result: UpdateResult) -> UpdateOutcome<'_> {
    UpdateOutcome {
        built,
        objects: 0,
        timings: Timings {
            build: Duration::ZERO,
            render: Duration::ZERO,
            total: Duration::ZERO,
            since_change: None,
        },
        result,
    }
}

#[tokio::test]
async fn the_next_step_and_the_counts_follow_from_how_an_apply_ended() {
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let metrics = Arc::new(Metrics::new());
    step.config.metrics = Some(metrics.clone());
    // Why the full plan reloads: the reason of the reloads refused or not got through.
    step.state.planned_reload = Some(tugboat_haproxy::ReloadReason::NewBackend);
    let patch = Patch::default();
    let applied = |delivery| UpdateResult::Applied {
        report: ApplyReport {
            delivery,
            files_written: 1,
            runtime_commands: 1,
            write: Duration::ZERO,
            runtime: Duration::ZERO,
            reload: Duration::ZERO,
        },
        reload_pending: false,
        lua_changed: false,
    };
    let seen_before = |built, result, since_change| UpdateOutcome {
        timings: Timings {
            since_change: Some(since_change),
            ..outcome(built, UpdateResult::ReloadHeld).timings
        },
        ..outcome(built, result)
    };
    let cases = [
        (
            "a patch at runtime, served 30ms after its change was seen",
            seen_before(
                Built::Patch(&patch),
                applied(Delivery::Runtime),
                Duration::from_millis(30),
            ),
            Next::OnChange,
        ),
        (
            "a reload for a new state: its reason counted",
            seen_before(
                Built::Full,
                applied(Delivery::Reload(
                    tugboat_haproxy::ReloadReason::UnknownState,
                )),
                Duration::from_millis(700),
            ),
            Next::OnChange,
        ),
        (
            "a runtime command of a patch not taken: the whole state at once",
            outcome(
                Built::Patch(&patch),
                UpdateResult::Failed {
                    error: ApplyError::RuntimeNotTaken("del server".into()),
                    reload: false,
                },
            ),
            Next::Now,
        ),
        (
            "a reload that did not get through: again after the backoff",
            outcome(
                Built::Full,
                UpdateResult::Failed {
                    error: ApplyError::Cli(tugboat_haproxy::CliError::UnexpectedReply {
                        command: "reload".into(),
                        reply: "?".into(),
                    }),
                    reload: true,
                },
            ),
            Next::AfterBackoff,
        ),
        (
            "refused: not again until the state changes",
            outcome(
                Built::Full,
                UpdateResult::Refused {
                    message: "[ALERT] bad".into(),
                    files: 42,
                    new_snippets: Vec::new(),
                },
            ),
            Next::OnChange,
        ),
        (
            "refused with new snippets: at once, without them",
            outcome(
                Built::Full,
                UpdateResult::Refused {
                    message: "[ALERT] (1) : config : bad snippet".into(),
                    files: 43,
                    new_snippets: vec![("global".into(), vec!["bad".into()])],
                },
            ),
            Next::Now,
        ),
        (
            "a reload held by its window: at the next change or when it opens",
            outcome(Built::Full, UpdateResult::ReloadHeld),
            Next::OnChange,
        ),
    ];
    for (case, outcome, next) in cases {
        let got = conclude(
            &step.config,
            &step.applier,
            &mut step.state,
            &step.status,
            outcome,
        );
        assert_eq!(got, next, "{case}");
    }
    assert_eq!(step.state.refused, Some(42));
    assert_eq!(
        step.state
            .refused_snippets
            .get(&("global".into(), vec!["bad".into()])),
        Some(&"config : bad snippet".to_string())
    );
    assert!(!step.status.borrow().ready);
    let text = metrics.encode();
    for counted in [
        "tugboat_applies_total{delivery=\"runtime\",result=\"applied\"} 1",
        "tugboat_applies_total{delivery=\"reload\",result=\"applied\"} 1",
        "tugboat_applies_total{delivery=\"runtime\",result=\"failed\"} 1",
        "tugboat_applies_total{delivery=\"reload\",result=\"failed\"} 1",
        "tugboat_applies_total{delivery=\"reload\",result=\"refused\"} 2",
        "tugboat_reloads_total{reason=\"unknown-state\"} 1",
        "tugboat_reloads_total{reason=\"new-backend\"} 3",
        "tugboat_apply_duration_seconds_count{delivery=\"runtime\"} 2",
        "tugboat_apply_duration_seconds_count{delivery=\"reload\"} 4",
        "tugboat_apply_lag_seconds_sum{delivery=\"runtime\"} 0.03",
        "tugboat_apply_lag_seconds_sum{delivery=\"reload\"} 0.7",
        "tugboat_apply_lag_seconds_count{delivery=\"reload\"} 1",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(counted)),
            "{counted} in {text}"
        );
    }
}

#[tokio::test]
async fn the_status_keeps_the_last_apply_and_reload_and_counts_them_without_waking_anyone() {
    use crate::status::ApplyResult;
    let master = FakeMaster::start();
    let mut step = Step::new(&master);
    let mut receiver = step.status.subscribe();
    let first = snapshot(&routed("shop", "web", &[], "127.0.0.1"));
    assert_eq!(step.update(&first).await, Next::OnChange);
    receiver.borrow_and_update();
    let moved = snapshot(&routed("shop", "web", &[], "127.0.0.2"));
    assert_eq!(step.update(&moved).await, Next::OnChange);
    {
        let status = step.status.borrow();
        let activity = &status.activity;
        let apply = activity.last_apply.as_ref().expect("an apply");
        assert_eq!(
            (apply.built.as_str(), apply.delivery.as_str(), apply.result),
            ("patch", "runtime", ApplyResult::Applied)
        );
        let reload = activity.last_reload.as_ref().expect("the first reload");
        assert_eq!(
            (reload.reason.as_str(), reload.result),
            ("unknown-state", ApplyResult::Applied)
        );
        assert_eq!((activity.applies.reload, activity.applies.runtime), (1, 1));
    }
    // Only the apply record changed: the leader's duties are not woken for it.
    assert!(!receiver.has_changed().expect("open"));

    step.state.planned_reload = Some(tugboat_haproxy::ReloadReason::GlobalSettings);
    let refused = outcome(
        Built::Full,
        UpdateResult::Refused {
            message: "[NOTICE] loading\n[ALERT] (1) : config : unknown keyword 'bogus'".into(),
            files: 7,
            new_snippets: Vec::new(),
        },
    );
    conclude(
        &step.config,
        &step.applier,
        &mut step.state,
        &step.status,
        refused,
    );
    let patch = Patch::default();
    let failed = outcome(
        Built::Patch(&patch),
        UpdateResult::Failed {
            error: ApplyError::RuntimeNotTaken("set ssl cert a.pem <<\nKEY".into()),
            reload: false,
        },
    );
    conclude(
        &step.config,
        &step.applier,
        &mut step.state,
        &step.status,
        failed,
    );
    let status = step.status.borrow();
    let activity = &status.activity;
    let reload = activity.last_reload.as_ref().expect("the refused reload");
    assert_eq!(
        (
            reload.reason.as_str(),
            reload.result,
            reload.message.as_deref()
        ),
        (
            "global-settings",
            ApplyResult::Refused,
            Some("config : unknown keyword 'bogus'")
        )
    );
    let apply = activity.last_apply.as_ref().expect("the failed apply");
    assert_eq!(
        (
            apply.delivery.as_str(),
            apply.result,
            apply.message.as_deref()
        ),
        (
            "runtime",
            ApplyResult::Failed,
            Some("haproxy did not take a runtime update: set ssl cert a.pem")
        )
    );
    assert_eq!((activity.applies.refused, activity.applies.failed), (1, 1));
}

#[test]
fn a_held_reload_does_not_wake_the_loop_while_a_failed_update_backs_off() {
    let window = Duration::from_millis(500);
    let state = LoopState {
        reload_pending_since: Some(Instant::now() - Duration::from_secs(5)),
        ..LoopState::default()
    };
    let due = state.reload_due(window);
    assert!(
        due.is_some_and(|at| at <= Instant::now()),
        "the window is over"
    );
    // Backing off after a failure: only the retry timer wakes the loop.
    assert_eq!(
        reload_wake(&state, window, Some(Duration::from_millis(500))),
        None
    );
    // No failure (or a retry now): the held reload wakes it at the window's end.
    assert_eq!(reload_wake(&state, window, None), due);
    assert_eq!(reload_wake(&state, window, Some(Duration::ZERO)), due);
}
