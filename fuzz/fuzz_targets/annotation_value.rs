//! The value of every declared key: the input's first line names the key (a Tugboat key,
//! an alias, or a full annotation name under any known prefix; anything else picks a
//! declared key by its hash), the rest is the value (newlines included). The value goes
//! through the key's own parser, and is set on the Ingress, on its Service and in the
//! ConfigMap (where the key's scopes allow it) for the whole pipeline: nothing panics,
//! a problem of an annotation names the one set (or a companion), and the rendered files
//! pass every check of `tugboat_fuzz`. A key read only when another is on gets that one
//! too ([`companions`]), so that its value reaches the rendered files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{Scene, check_rendered};
use tugboat_model::annotations::keys::targets;
use tugboat_model::annotations::prefixes::split_annotation;
use tugboat_model::annotations::{KEYS, Scope, find_key};

fuzz_target!(|text: &str| {
    let (name, value) = text.split_once('\n').unwrap_or((text, ""));
    let annotation = if split_annotation(name).is_some() {
        name.to_string()
    } else {
        let spec = find_key(name).unwrap_or_else(|| {
            let index = tugboat_model::stable_hash(name.as_bytes()) as usize % KEYS.len();
            &KEYS[index]
        });
        format!("tugboat.dev/{}", spec.name)
    };
    let Some((ecosystem, key)) = split_annotation(&annotation) else {
        return;
    };
    let read_as = targets(ecosystem, key);
    for (spec, peer) in &read_as {
        let _ = (spec.check)(value);
        let _ = spec.named(value);
        if let Some(translate) = peer.and_then(|p| p.translate) {
            let _ = translate(key, value);
        }
    }
    let mut scene = Scene::default();
    let in_scope = |scope| read_as.iter().any(|(spec, _)| spec.scopes.contains(&scope));
    let companions: Vec<(String, &str)> = read_as
        .iter()
        .flat_map(|(spec, _)| companions(spec.name))
        .filter(|(name, _)| *name != key)
        .map(|(name, value)| (format!("tugboat.dev/{name}"), *value))
        .collect();
    for (name, value) in &companions {
        scene.ingress.push((name.clone(), value.to_string()));
    }
    scene.ingress.push((annotation.clone(), value.to_string()));
    if in_scope(Scope::Service) {
        scene.service.push((annotation.clone(), value.to_string()));
    }
    if let [(spec, None)] = read_as.as_slice()
        && spec.scopes.contains(&Scope::ConfigMap)
    {
        scene.config.push((key.to_string(), value.to_string()));
    }
    let rendered = scene.render();
    check_rendered(&rendered);
    // A problem of an annotation names the annotation set.
    for problem in &rendered.output.problems {
        if let Some(name) = problem.field.strip_prefix("metadata.annotations.") {
            assert!(
                name == annotation || companions.iter().any(|(companion, _)| companion == name),
                "a problem of another annotation: {problem:?}"
            );
        }
    }
});

/// The keys (with a value that turns them on) without which `key` is not read.
fn companions(key: &str) -> &'static [(&'static str, &'static str)] {
    match key {
        "server-ssl-name" | "server-ca" | "server-crt" | "server-verify" => {
            &[("server-ssl", "true")]
        }
        "session-cookie-name"
        | "session-cookie-path"
        | "session-cookie-max-age"
        | "session-cookie-expires" => &[("affinity", "cookie")],
        _ if key.starts_with("cors-") => &[("cors-enable", "true")],
        _ => &[],
    }
}
