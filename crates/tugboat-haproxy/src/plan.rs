//! The planner: from what haproxy runs now and what is desired, what has to change.
//!
//! Pure. Today every change of a file is applied with a reload; the plan is the place
//! where changes that haproxy can take at runtime will be told apart from the ones that
//! need a reload.

use std::path::PathBuf;

use crate::render::RenderedFiles;

/// What to do to get from the applied files to the desired ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The complete desired set of files.
    pub files: RenderedFiles,
    /// Files whose contents change.
    pub changed: Vec<PathBuf>,
    /// Whether haproxy must reload to take the change.
    pub reload: bool,
}

impl Plan {
    /// True when nothing is to be done.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && !self.reload
    }
}

/// Plans the change from `applied` (what haproxy is known to run) to `desired`.
/// `force_reload` is set when haproxy's state is unknown (first apply, failed command).
pub fn plan(applied: &RenderedFiles, desired: RenderedFiles, force_reload: bool) -> Plan {
    let changed: Vec<PathBuf> = desired
        .files
        .iter()
        .filter(|(path, contents)| applied.get(path) != Some(contents.as_str()))
        .map(|(path, _)| path.clone())
        .collect();
    let reload = force_reload || !changed.is_empty();
    Plan {
        files: desired,
        changed,
        reload,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> RenderedFiles {
        RenderedFiles {
            files: entries
                .iter()
                .map(|(p, c)| (PathBuf::from(p), c.to_string()))
                .collect(),
        }
    }

    #[test]
    fn unchanged_files_plan_nothing() {
        let applied = files(&[("/e/haproxy.cfg", "a"), ("/e/maps/x.map", "k v\n")]);
        let plan = plan(&applied, applied.clone(), false);
        assert!(plan.is_empty());
    }

    #[test]
    fn a_changed_file_reloads() {
        let applied = files(&[("/e/haproxy.cfg", "a"), ("/e/maps/x.map", "k v\n")]);
        let desired = files(&[("/e/haproxy.cfg", "a"), ("/e/maps/x.map", "k w\n")]);
        let plan = plan(&applied, desired, false);
        assert_eq!(plan.changed, vec![PathBuf::from("/e/maps/x.map")]);
        assert!(plan.reload);
    }

    #[test]
    fn unknown_state_reloads_even_without_changes() {
        let applied = files(&[("/e/haproxy.cfg", "a")]);
        let plan = plan(&applied, applied.clone(), true);
        assert!(plan.changed.is_empty());
        assert!(plan.reload);
    }
}
