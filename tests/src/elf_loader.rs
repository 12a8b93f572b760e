//! Where the dynamic loader of an ELF executable looks besides the system's library
//! folders: its program interpreter (`PT_INTERP`) and its run paths (`DT_RPATH`,
//! `DT_RUNPATH`). A binary that carries its own libraries names them there: haproxy
//! 3.0 from Debian trixie's binary package, patched by `scripts/haproxy-versions.sh` to
//! use trixie's glibc from the folder beside it. The pod runner binds those folders into
//! a container at the same path, as it binds this machine's `/usr/lib`.
//!
//! Only 64-bit little-endian ELF files are read (the machines the tests run on).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// What the loader of one executable reads outside the system's folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoaderPaths {
    /// `PT_INTERP`: the dynamic loader the kernel starts.
    pub interpreter: Option<PathBuf>,
    /// The entries of `DT_RPATH` and `DT_RUNPATH`, in order.
    pub run_paths: Vec<PathBuf>,
}

impl LoaderPaths {
    /// The folders these paths name: the interpreter's folder and every absolute run
    /// path (one with `$ORIGIN` or another token depends on where the binary is seen
    /// from, and is left out).
    pub fn folders(&self) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = Vec::new();
        let interpreter_folder = self.interpreter.as_deref().and_then(Path::parent);
        for folder in interpreter_folder.into_iter().chain(
            self.run_paths
                .iter()
                .map(PathBuf::as_path)
                .filter(|p| p.is_absolute() && !p.to_string_lossy().contains('$')),
        ) {
            if !folders.iter().any(|f| f == folder) {
                folders.push(folder.to_path_buf());
            }
        }
        folders
    }
}

/// The loader paths of the file at `path`; `None` when it is not an ELF file (a
/// configuration file of an image, a script).
pub fn loader_paths(path: &Path) -> anyhow::Result<Option<LoaderPaths>> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    parse(&bytes).with_context(|| format!("ELF file {}", path.display()))
}

/// [`loader_paths`] of an ELF file's bytes.
pub fn parse(bytes: &[u8]) -> anyhow::Result<Option<LoaderPaths>> {
    if !bytes.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    ensure!(
        bytes.get(4) == Some(&2) && bytes.get(5) == Some(&1),
        "not a 64-bit little-endian ELF file"
    );
    let header_offset = u64_at(bytes, 0x20)?;
    let header_size = u64::from(u16_at(bytes, 0x36)?);
    let header_count = u64::from(u16_at(bytes, 0x38)?);
    let mut segments = Vec::new();
    for i in 0..header_count {
        let at = header_offset + i * header_size;
        segments.push(Segment {
            kind: u32_at(bytes, at)?,
            offset: u64_at(bytes, at + 8)?,
            address: u64_at(bytes, at + 16)?,
            file_size: u64_at(bytes, at + 32)?,
        });
    }
    let mut paths = LoaderPaths::default();
    if let Some(interp) = segments.iter().find(|s| s.kind == PT_INTERP) {
        paths.interpreter = Some(PathBuf::from(c_string_at(bytes, interp.offset)?));
    }
    let Some(dynamic) = segments.iter().find(|s| s.kind == PT_DYNAMIC) else {
        return Ok(Some(paths)); // a static executable
    };
    let mut string_table = None;
    let mut run_path_offsets = Vec::new();
    for entry in 0..dynamic.file_size / 16 {
        let at = dynamic.offset + entry * 16;
        let (tag, value) = (u64_at(bytes, at)?, u64_at(bytes, at + 8)?);
        match tag {
            DT_NULL => break,
            DT_STRTAB => string_table = Some(value),
            DT_RPATH | DT_RUNPATH => run_path_offsets.push(value),
            _ => {}
        }
    }
    if run_path_offsets.is_empty() {
        return Ok(Some(paths));
    }
    let table_address = string_table.context("DT_RPATH without DT_STRTAB")?;
    // DT_STRTAB is an address in memory: the loaded segment that holds it gives the
    // file offset.
    let table = segments
        .iter()
        .find(|s| {
            s.kind == PT_LOAD
                && s.address <= table_address
                && table_address < s.address + s.file_size
        })
        .map(|s| s.offset + (table_address - s.address))
        .context("DT_STRTAB is in no loaded segment")?;
    for offset in run_path_offsets {
        let value = c_string_at(bytes, table + offset)?;
        paths.run_paths.extend(
            value
                .split(':')
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        );
    }
    Ok(Some(paths))
}

/// A program header: what the parser needs of it.
struct Segment {
    kind: u32,
    offset: u64,
    address: u64,
    file_size: u64,
}

fn field<const N: usize>(bytes: &[u8], at: u64) -> anyhow::Result<[u8; N]> {
    let start = usize::try_from(at)?;
    let Some(slice) = start.checked_add(N).and_then(|end| bytes.get(start..end)) else {
        bail!("truncated at offset {at}");
    };
    Ok(slice.try_into()?)
}

fn u16_at(bytes: &[u8], at: u64) -> anyhow::Result<u16> {
    Ok(u16::from_le_bytes(field(bytes, at)?))
}

fn u32_at(bytes: &[u8], at: u64) -> anyhow::Result<u32> {
    Ok(u32::from_le_bytes(field(bytes, at)?))
}

fn u64_at(bytes: &[u8], at: u64) -> anyhow::Result<u64> {
    Ok(u64::from_le_bytes(field(bytes, at)?))
}

/// The NUL-terminated string at `at`.
fn c_string_at(bytes: &[u8], at: u64) -> anyhow::Result<String> {
    let rest = bytes
        .get(usize::try_from(at)?..)
        .with_context(|| format!("string offset {at} past the end"))?;
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .with_context(|| format!("unterminated string at offset {at}"))?;
    Ok(String::from_utf8(rest[..end].to_vec())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 executable image: one PT_LOAD covering the file at address
    /// 0x400000, PT_INTERP, PT_DYNAMIC with DT_STRTAB and the given run-path tags.
    fn executable(interpreter: &str, run_paths: &[(u64, &str)]) -> Vec<u8> {
        const BASE: u64 = 0x40_0000;
        let mut strings = vec![0u8];
        let mut tags = Vec::new();
        for (tag, value) in run_paths {
            tags.push((*tag, strings.len() as u64));
            strings.extend_from_slice(value.as_bytes());
            strings.push(0);
        }
        let headers_at = 64u64;
        let interp_at = headers_at + 3 * 56;
        let interp_len = interpreter.len() as u64 + 1;
        let strings_at = interp_at + interp_len;
        let dynamic_at = strings_at + strings.len() as u64;
        tags.insert(0, (DT_STRTAB, BASE + strings_at));
        tags.push((DT_NULL, 0));
        let file_len = dynamic_at + 16 * tags.len() as u64;

        let mut bytes = vec![0u8; 64];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2;
        bytes[5] = 1;
        bytes[0x20..0x28].copy_from_slice(&headers_at.to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        for (kind, offset, address, size) in [
            (PT_LOAD, 0, BASE, file_len),
            (PT_INTERP, interp_at, BASE + interp_at, interp_len),
            (
                PT_DYNAMIC,
                dynamic_at,
                BASE + dynamic_at,
                file_len - dynamic_at,
            ),
        ] {
            let mut header = [0u8; 56];
            header[..4].copy_from_slice(&kind.to_le_bytes());
            header[8..16].copy_from_slice(&offset.to_le_bytes());
            header[16..24].copy_from_slice(&address.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            header[40..48].copy_from_slice(&size.to_le_bytes());
            bytes.extend_from_slice(&header);
        }
        bytes.extend_from_slice(interpreter.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&strings);
        for (tag, value) in tags {
            bytes.extend_from_slice(&tag.to_le_bytes());
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        assert_eq!(bytes.len() as u64, file_len);
        bytes
    }

    #[test]
    fn reads_interpreter_and_run_paths() {
        let bytes = executable(
            "/opt/h/lib/ld-linux-x86-64.so.2",
            &[
                (DT_RPATH, "/opt/h/lib:$ORIGIN/../lib"),
                (DT_RUNPATH, "/opt/x"),
            ],
        );
        let paths = parse(&bytes).expect("parses").expect("an ELF file");
        assert_eq!(
            paths,
            LoaderPaths {
                interpreter: Some("/opt/h/lib/ld-linux-x86-64.so.2".into()),
                run_paths: vec![
                    "/opt/h/lib".into(),
                    "$ORIGIN/../lib".into(),
                    "/opt/x".into()
                ],
            }
        );
        assert_eq!(
            paths.folders(),
            vec![PathBuf::from("/opt/h/lib"), PathBuf::from("/opt/x")]
        );
    }

    #[test]
    fn an_executable_without_run_paths_names_its_interpreter_only() {
        let bytes = executable("/lib64/ld-linux-x86-64.so.2", &[]);
        let paths = parse(&bytes).expect("parses").expect("an ELF file");
        assert_eq!(paths.run_paths, Vec::<PathBuf>::new());
        assert_eq!(paths.folders(), vec![PathBuf::from("/lib64")]);
    }

    #[test]
    fn other_files_are_not_elf() {
        assert_eq!(parse(b"global\n    maxconn 100\n").expect("parses"), None);
    }

    #[test]
    fn a_truncated_file_is_an_error() {
        let bytes = executable("/lib64/ld-linux-x86-64.so.2", &[(DT_RPATH, "/opt")]);
        assert!(parse(&bytes[..100]).is_err());
    }

    #[test]
    fn reads_this_test_binary() {
        let this = std::env::current_exe().expect("the test binary's path");
        let paths = loader_paths(&this).expect("readable").expect("an ELF file");
        let interpreter = paths.interpreter.expect("a dynamically linked test binary");
        assert!(interpreter.is_absolute(), "{}", interpreter.display());
        assert!(interpreter.exists(), "{}", interpreter.display());
    }
}
