//! The differential target: an Ingress, its Service and the controller's ConfigMap built
//! from the input (`tugboat_fuzz::Scene` lines: host, path, annotations, ConfigMap keys),
//! through the whole pipeline. The rendered files pass every check of `tugboat_fuzz`,
//! and each distinct rendered config is written out and loaded by haproxy itself
//! (`haproxy -c`, on 2.6 and 3.4 as installed): whatever the model accepted, haproxy
//! takes.
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{Scene, Seen, check_loads, check_rendered};

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

fuzz_target!(|text: &str| {
    let rendered = Scene::parse(text).render();
    check_rendered(&rendered);
    let all: String = rendered
        .files
        .files
        .iter()
        .map(|(path, text)| format!("{}\n{}", path.display(), text.as_str()))
        .collect();
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if seen.get_or_insert_with(Seen::default).first_time(&all) {
        check_loads(&rendered);
    }
});
