//! Answers of haproxy's master CLI as the controller reads them: the input's first line
//! says which reader (`show proc`, `prompt` for a batch's prompted answers, `map` for a
//! map's contents as `show map` and the files hold them, `layout` for a config read back
//! at adoption), the rest is the answer. Nothing panics, and:
//! - `show proc`: what is read, written again in the master's layout, reads the same
//!   (parse -> render -> parse);
//! - `prompt`: the answers are pieces of the reply, in order, and written again each
//!   followed by the prompt they split the same;
//! - `map`: a map compared with itself needs no runtime change, and every entry read
//!   is one addition from an empty map.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tugboat_haproxy::apply::parse_layout;
use tugboat_haproxy::cli::{ProcInfo, parse_show_proc, split_prompted};
use tugboat_haproxy::runtime::{RuntimeChange, map_changes, parse_map};

/// `show proc` as the master writes it (2.6 to 3.4).
fn show_proc_text(info: &ProcInfo) -> String {
    let mut text = format!(
        "#<PID>          <type>          <reloads>       <uptime>        <version>\n\
         {}          master          {} [failed: {}]  0d00h03m37s     {}\n# workers\n",
        info.master_pid, info.reloads, info.failed_reloads, info.version
    );
    if let Some(worker) = info.worker_pid {
        text.push_str(&format!(
            "{worker}          worker          0       0d00h00m01s     {}\n",
            info.version
        ));
    }
    text.push_str("# programs\n\n");
    text
}

fuzz_target!(|text: &str| {
    let (reader, answer) = text.split_once('\n').unwrap_or((text, ""));
    match reader {
        "show proc" => {
            if let Some(info) = parse_show_proc(answer) {
                let again = parse_show_proc(&show_proc_text(&info));
                assert_eq!(
                    again.as_ref(),
                    Some(&info),
                    "show proc read back differently"
                );
            }
        }
        "prompt" => {
            let answers = split_prompted(answer);
            let mut rest = answer;
            for piece in &answers {
                let at = rest
                    .find(piece)
                    .unwrap_or_else(|| panic!("{piece:?} is not in the reply, in order"));
                rest = &rest[at + piece.len()..];
            }
            if answers.iter().all(|a| !a.contains("master")) {
                let written: String = answers.iter().map(|a| format!("{a}master> ")).collect();
                assert_eq!(
                    split_prompted(&written),
                    answers,
                    "the answers split differently"
                );
            }
        }
        "map" => {
            let map = Path::new("/etc/haproxy/maps/fuzz.map");
            assert!(
                map_changes(map, answer, answer).is_empty(),
                "a map differs from itself"
            );
            let added: usize = map_changes(map, "", answer)
                .iter()
                .map(|change| match change {
                    RuntimeChange::MapAdd { entries, .. } => entries.len(),
                    other => panic!("not an addition from an empty map: {other:?}"),
                })
                .sum();
            assert_eq!(added, parse_map(answer).len(), "not one addition per entry");
        }
        "layout" => {
            let _ = parse_layout(answer);
        }
        _ => {}
    }
});
