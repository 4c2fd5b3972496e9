//! Files replaced atomically: a reader, or a switch restarted after a crash or `kill -9`, finds
//! either the old content or the new one, never a torn mix.
//!
//! The new content goes to a temporary file in the same directory (so that rename(2) stays
//! within one filesystem), which is flushed to disk (fsync), renamed over the target (atomic
//! on POSIX filesystems), and the directory is flushed too, so that the rename itself survives
//! a power loss. A process killed midway leaves only a temporary file
//! ([`is_temporary`]), which [`remove_stale_temporaries`] clears.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What temporary file names end with.
const TEMPORARY_SUFFIX: &str = ".partial";

/// Replaces the content of `path` with `bytes` atomically (see the module documentation).
///
/// # Errors
/// When the temporary file cannot be written or flushed, or the rename fails; the target is
/// then unchanged and the temporary file removed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(
        ".{}.{}{TEMPORARY_SUFFIX}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = dir.join(temporary_name);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        // The rename is an entry of the directory: flush it too.
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// Whether `name` is a temporary file of [`write_atomically`].
#[must_use]
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(TEMPORARY_SUFFIX)
}

/// Removes the temporary files a killed writer left in `dir`; returns how many.
pub fn remove_stale_temporaries(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_temporary))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_content_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        write_atomically(&path, b"old").unwrap();
        write_atomically(&path, b"new content").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new content");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.toml"]);
    }

    #[test]
    fn a_failed_write_leaves_the_target_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        write_atomically(&path, b"old").unwrap();
        // A directory in the way of the rename.
        let blocked = dir.path().join("sub");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("x"), b"").unwrap();
        assert!(write_atomically(&blocked, b"new").is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(
            remove_stale_temporaries(dir.path()),
            0,
            "cleaned up already"
        );
    }

    #[test]
    fn stale_temporaries_are_recognised_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".a.toml.123.0.partial"), b"torn").unwrap();
        std::fs::write(dir.path().join("a.toml"), b"kept").unwrap();
        assert!(is_temporary(".a.toml.123.0.partial"));
        assert!(!is_temporary("a.toml"));
        assert_eq!(remove_stale_temporaries(dir.path()), 1);
        assert_eq!(std::fs::read(dir.path().join("a.toml")).unwrap(), b"kept");
    }
}
