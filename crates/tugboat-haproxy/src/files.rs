//! Atomic file writes: a reader (haproxy, at its next reload) sees either the old file or
//! the new one, never half of one.
//!
//! Each file is written to a temporary file beside it (a hidden name that never ends in
//! `.cfg`, since haproxy loads every `*.cfg` of its config folder), flushed to disk, then
//! renamed over the old one, and the folder itself is synced.
//!
//! The applier publishes first ([`publish`]): the rename makes the complete new contents
//! visible to haproxy at once (through the page cache), whatever comes next. After a
//! reload it flushes the files to disk ([`sync`]); after a runtime update it leaves them
//! to the kernel's writeback, since an `fsync` per file costs the controller more CPU
//! than the rest of a change. Durability only matters across a machine crash: haproxy's
//! master does not survive one, so the controller adopts nothing after it and rewrites
//! every file at its start (an emptyDir on disk may keep torn files until then).
//!
//! Every function here blocks. The [`Applier`](crate::Applier) calls them through
//! [`blocking`](crate::blocking::blocking); the controller's own certificate is stored
//! before the async runtime starts.
#![allow(
    clippy::disallowed_methods,
    reason = "the file work itself: called off the async runtime (see above)"
)]

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::render::{FileText, RenderedFiles};

/// A file that could not be written, read or removed.
#[derive(Debug, Error)]
#[error("{action} {path}: {source}")]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn file_error<'p>(
    action: &'static str,
    path: &'p Path,
) -> impl FnOnce(io::Error) -> FileError + 'p {
    move |source| FileError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary name used while writing `path`.
pub fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tugboat-tmp"))
}

/// Writes `contents` to `path` atomically and durably, creating the parent folder when
/// needed. `mode` is the permission of the new file (0o600 for private keys).
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    replace(path, contents, mode, Durability::Synced)?;
    // The rename is durable once the folder entry is on disk.
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(file_error("sync folder", dir))
}

/// Writes `contents` to `path` atomically, visible at once, without waiting for the
/// disk.
pub fn write_visible(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    replace(path, contents, mode, Durability::Visible)
}

/// Overwrites the start of the file at `path` with `contents`, in place: no new file,
/// no rename. Not atomic (a reader racing it, or a crash during it, may see part of
/// the old bytes): only for a few bytes whose damage is harmless.
pub fn overwrite_start(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(file_error("open", path))?;
    file.write_all_at(contents, 0)
        .map_err(file_error("write", path))
}

/// Whether [`replace`] flushes the new contents to disk before the rename.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    Synced,
    /// Visible at once; [`sync`] flushes later.
    Visible,
}

/// Puts `contents` at `path` through a temporary file beside it and a rename, so that a
/// reader sees the old file or the new one, never half of one.
fn replace(
    path: &Path,
    contents: &[u8],
    mode: u32,
    durability: Durability,
) -> Result<(), FileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(file_error("create folder", dir))?;
    let tmp = temporary_path(path);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .map_err(file_error("create", &tmp))?;
        file.write_all(contents)
            .map_err(file_error("write", &tmp))?;
        if durability == Durability::Synced {
            file.sync_all().map_err(file_error("sync", &tmp))?;
        }
        fs::rename(&tmp, path).map_err(file_error("rename into place", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The mode of a file: private keys (`.pem`) are readable by their owner only.
pub fn mode_for(path: &Path) -> u32 {
    if path.extension().is_some_and(|e| e == "pem") {
        0o600
    } else {
        0o644
    }
}

/// Writes the given files of `files` atomically and durably; returns how many.
pub fn write_paths(files: &RenderedFiles, paths: &[PathBuf]) -> Result<usize, FileError> {
    let written = publish(files, paths)?;
    sync(paths)?;
    Ok(written)
}

/// Makes the given files of `files` visible atomically (temporary file, rename), without
/// waiting for the disk; [`sync`] flushes them. Returns how many.
pub fn publish(files: &RenderedFiles, paths: &[PathBuf]) -> Result<usize, FileError> {
    let mut written = 0;
    for path in paths {
        let Some(contents) = files.get(path) else {
            continue;
        };
        write_visible(path, contents.as_bytes(), mode_for(path))?;
        written += 1;
    }
    Ok(written)
}

/// Flushes published files and their folders to disk.
pub fn sync(paths: &[PathBuf]) -> Result<(), FileError> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in paths {
        if let Ok(file) = File::open(path) {
            file.sync_all().map_err(file_error("sync", path))?;
        }
        if let Some(dir) = path.parent() {
            dirs.insert(dir.to_path_buf());
        }
    }
    for dir in dirs {
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(file_error("sync folder", &dir))?;
    }
    Ok(())
}

/// Removes a file; one that is already gone is fine.
pub fn remove(path: &Path) -> Result<(), FileError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(file_error("remove", path)(e)),
        _ => Ok(()),
    }
}

/// Reads the text of one file.
pub fn read_text(path: &Path) -> Result<String, FileError> {
    fs::read_to_string(path).map_err(file_error("read", path))
}

/// Reads the current contents of the given paths; missing files are left out.
pub fn read_current<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> RenderedFiles {
    let mut current = RenderedFiles::default();
    for path in paths {
        if let Ok(contents) = fs::read_to_string(path) {
            current
                .files
                .insert(path.clone(), FileText::Rendered(contents));
        }
    }
    current
}

/// Puts `previous` back in place of `new`: files that existed are rewritten, files that
/// did not are removed, and files only `previous` has are written again (a config file
/// removed before a reload).
pub fn restore(previous: &RenderedFiles, new: &RenderedFiles) -> Result<(), FileError> {
    for path in new.files.keys() {
        match previous.get(path) {
            Some(contents) if new.get(path) != Some(contents) => {
                write_atomic(path, contents.as_bytes(), mode_for(path))?
            }
            Some(_) => {}
            None => remove(path)?,
        }
    }
    for (path, contents) in &previous.files {
        if !new.files.contains_key(path) {
            write_atomic(path, contents.as_bytes(), mode_for(path))?;
        }
    }
    Ok(())
}

/// The config files (`*.cfg`) in `config_dir`: haproxy loads them all at its next
/// reload. Temporary files are hidden and never end in `.cfg`.
pub fn config_files_in(config_dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let entries = fs::read_dir(config_dir).map_err(file_error("list", config_dir))?;
    let mut configs = Vec::new();
    for entry in entries {
        let path = entry.map_err(file_error("list", config_dir))?.path();
        let is_config = path.is_file()
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".cfg") && !n.starts_with('.'));
        if is_config {
            configs.push(path);
        }
    }
    configs.sort();
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary_file() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("haproxy.cfg");
        write_atomic(&path, b"one", 0o644)?;
        write_atomic(&path, b"two", 0o600)?;
        assert_eq!(fs::read_to_string(&path)?, "two");
        let names: Vec<_> = fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        assert_eq!(names, vec![std::ffi::OsString::from("haproxy.cfg")]);
        assert!(!temporary_path(&path).to_string_lossy().ends_with(".cfg"));
        Ok(())
    }

    #[test]
    fn overwriting_the_start_keeps_the_rest_and_needs_the_file()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("marker");
        write_visible(&path, b"header one\nlisting\n", 0o644)?;
        overwrite_start(&path, b"header two")?;
        assert_eq!(fs::read_to_string(&path)?, "header two\nlisting\n");
        assert!(overwrite_start(&dir.path().join("missing"), b"x").is_err());
        Ok(())
    }

    #[test]
    fn restore_rewrites_old_files_and_removes_new_ones() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let cfg = dir.path().join("haproxy.cfg");
        let map = dir.path().join("maps/new.map");
        let mut old = RenderedFiles::default();
        old.files.insert(cfg.clone(), "old".into());
        let mut new = RenderedFiles::default();
        new.files.insert(cfg.clone(), "new".into());
        new.files.insert(map.clone(), "k v\n".into());
        write_paths(&old, std::slice::from_ref(&cfg))?;
        write_paths(&new, &[cfg.clone(), map.clone()])?;
        assert_eq!(fs::read_to_string(&map)?, "k v\n");
        restore(&old, &new)?;
        assert_eq!(fs::read_to_string(&cfg)?, "old");
        assert!(!map.exists());
        Ok(())
    }
}
