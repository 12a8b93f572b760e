//! The controller arguments in the rendered manifests (`deploy/manifests/tugboat.yaml`,
//! the Helm chart with default values) are accepted by this binary's command line: a
//! renamed or missing flag fails here, not in a user's cluster.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

use clap::Parser;
use serde::Deserialize;
use serde_json::Value;
use tugboat::cli::{Cli, Command};

#[test]
fn rendered_manifests_use_flags_the_controller_accepts() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/manifests/tugboat.yaml"
    );
    let text = std::fs::read_to_string(path).expect("rendered manifests");
    let mut checked = 0;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let object = Value::deserialize(document).expect("YAML");
        if object["kind"] != "Deployment" {
            continue;
        }
        let spec = &object["spec"]["template"]["spec"];
        let containers = spec["containers"].as_array().expect("containers");
        let controller = containers
            .iter()
            .find(|c| c["name"] == "controller")
            .expect("a controller container");
        let args: Vec<String> = controller["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string argument").to_string())
            .collect();
        let cli = Cli::try_parse_from(std::iter::once("tugboat".to_string()).chain(args.clone()))
            .unwrap_or_else(|e| panic!("the chart's arguments {args:?} are refused: {e}"));
        assert!(matches!(cli.command, Command::Run(_)), "{args:?}");
        checked += 1;
    }
    assert_eq!(checked, 1, "one Deployment in the rendered manifests");
}
