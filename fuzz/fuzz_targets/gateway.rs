//! Gateway API objects (GatewayClass, Gateway, HTTPRoute, TLSRoute, TCPRoute,
//! ReferenceGrant, Namespace; YAML or JSON documents, with Services and Secrets) read
//! from a manifests file with the Gateway API on, through the whole pipeline: nothing
//! panics, and the rendered files pass every check of `tugboat_fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{check_rendered, render_manifests, scratch_dir};

fuzz_target!(|text: &str| {
    check_rendered(&render_manifests(text, true, scratch_dir()));
});
