//! A manifests folder's file (any text, any number of YAML documents) through the whole
//! `tugboat render` pipeline, the Gateway API off: nothing panics, and the rendered
//! files pass every check of `tugboat_fuzz` (no control characters, known line shapes,
//! closed quotes, slots read back, problems naming object and field).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{check_rendered, render_manifests, scratch_dir};

fuzz_target!(|text: &str| {
    check_rendered(&render_manifests(text, false, scratch_dir()));
});
