//! The controller's ConfigMap with any keys and any values (`KEY=VALUE` lines, `\n` for
//! a newline in a value; see `tugboat_fuzz::Scene`), next to one Ingress: nothing
//! panics, a problem of the ConfigMap names one of its keys (`data.KEY`), and the
//! rendered files pass every check of `tugboat_fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{CONFIG_MAP, Scene, check_rendered};

fuzz_target!(|text: &str| {
    let scene = Scene::parse(text);
    let rendered = scene.render();
    check_rendered(&rendered);
    // A problem of the ConfigMap names one of its keys.
    for problem in &rendered.output.problems {
        if problem.object.kind == "ConfigMap" && &*problem.object.name == CONFIG_MAP.1 {
            let key = problem.field.strip_prefix("data.");
            assert!(
                key.is_some_and(|key| scene.config.iter().any(|(set, _)| set == key)),
                "a problem of the ConfigMap that names none of its keys: {problem:?}"
            );
        }
    }
});
