//! `tugboat-pod-exec PLAN.json`: starts one container of the chart pod test (see
//! `tugboat_testkit::container_plan`): assembles its root file system and volumes,
//! enters it, takes the container's uid, gid, groups and capabilities, and becomes its
//! command. Run as root, as the first process of new mount and PID namespaces.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(plan) = std::env::args_os().nth(1) else {
        eprintln!("usage: tugboat-pod-exec PLAN.json");
        return ExitCode::from(2);
    };
    let err = tugboat_testkit::container_plan::execute(std::path::Path::new(&plan));
    eprintln!("tugboat-pod-exec: {err:#}");
    // What container runtimes answer when the command cannot start.
    ExitCode::from(128)
}
