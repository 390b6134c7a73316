//! Opening the files a run writes without writing through a link someone left in their place.
//!
//! A run's output directory (`runs/<scenario>/<mode>`, a memory store) is reused from run to run, so a symlink left
//! there (`ledger.jsonl -> ~/.bashrc`) would have the run append to or truncate a file elsewhere. Every file lessrt
//! writes is opened here: never following a symlink in the last component, never blocking on a FIFO, and refusing
//! what is not a regular file. Directories along the path are followed: a user may keep `runs/` on another disk.
//! The resolver opens what it reads from a workspace the same way ([`open_to_read`]), and checks what it got.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Opens `path` for writing, created if missing and emptied if present.
pub fn create(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    open_regular(path, options)
}

/// The lock files the search library opens in an index directory with plain, blocking opens that follow links.
const TANTIVY_LOCKS: [&str; 2] = [".tantivy-meta.lock", ".tantivy-writer.lock"];

/// Refuses an index directory whose lock files are anything but regular files (a FIFO would block every open, a link
/// would create a file at its target): checked before the search library opens `dir`.
pub fn check_index_locks(dir: &Path) -> io::Result<()> {
    for name in TANTIVY_LOCKS {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(io::Error::other(format!(
                    "{} is not a regular file (a link, a FIFO or a device): remove it, and the index opens again",
                    path.display()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A 32-byte secret key kept in `path`: read, or (with `create`) made from the operating system's random bytes,
/// 0600, the first of several processes making it at once winning and the others reading theirs. A key that is a
/// link, anything but a regular file, readable by others or not 32 bytes is refused, saying to delete it.
pub fn secret_key(path: &Path, create: bool) -> io::Result<[u8; 32]> {
    let named = |what: String| io::Error::other(format!("{}: {what}", path.display()));
    if create && std::fs::symlink_metadata(path).is_err() {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut file) => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).map_err(io::Error::other)?;
                file.write_all(&key)?;
                file.sync_all()?;
                return Ok(key);
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
    let meta =
        std::fs::symlink_metadata(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    #[cfg(unix)]
    let shared = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o077 != 0;
    #[cfg(not(unix))]
    let shared = false;
    if !meta.file_type().is_file() || shared {
        return Err(named(
            "not a regular file only its owner may read (a link, or readable by others); delete it to make a new key"
                .to_owned(),
        ));
    }
    // Another process may be writing it this moment: wait for its 32 bytes.
    for _ in 0..200 {
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut open_to_read(path)?, &mut bytes)?;
        if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
            return Ok(key);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(named("not a 32-byte key; delete it to make a new one".to_owned()))
}

/// Opens `path` to append to it, created if missing.
pub fn append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    open_regular(path, options)
}

/// Opens `path` for writing without emptying it, created if missing (a lock file).
pub fn open_or_create(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(false);
    open_regular(path, options)
}

/// Opens (creating) `path`, a file only its owner may read and write (0600, set again if it was wider), refusing a
/// symlink or anything but a regular file in its place like [`open_or_create`]. For a store that copies lines of
/// private files (the workspace index): made before SQLite opens it, its journal files take the same mode.
pub fn open_private(path: &Path) -> io::Result<File> {
    #[allow(unused_mut)]
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = open_regular(path, options)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Creates `path` and the directories above it that are missing, each made for its owner only (0700); a directory
/// that exists is left as it is (it may be the user's).
pub fn create_private_dirs(path: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path)
}

/// Writes `path` whole or not at all: into a new file beside it (created exclusively, so never through a link),
/// synced, then renamed over it. A reader never sees part of the file, and a process killed while writing leaves the
/// old one.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_whole_with(path, bytes, OpenOptions::new())
}

/// [`write_whole`] for a secret (a run's grant key): readable and writable by its owner only (0600) from the moment
/// it exists.
pub fn write_secret(path: &Path, bytes: &[u8]) -> io::Result<()> {
    #[allow(unused_mut)]
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    write_whole_with(path, bytes, options)
}

fn write_whole_with(path: &Path, bytes: &[u8], mut options: OpenOptions) -> io::Result<()> {
    let partial = partial_path(path);
    let _ = std::fs::remove_file(&partial);
    options.write(true).create_new(true);
    let written = open_regular(&partial, options)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// Creates the directories of `rel` under `base` (which the user named, links and all), one component at a time,
/// refusing a component that is a symlink or not a directory: what lessrt writes under `base` lands under it, not
/// wherever a link left there points. Returns `base/rel`.
pub fn create_dirs_under(base: &Path, rel: &Path) -> io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(base)?;
    let mut dir = base.to_owned();
    for part in rel.components() {
        let std::path::Component::Normal(part) = part else {
            return Err(io::Error::other(format!("{} is not a plain relative path", rel.display())));
        };
        dir.push(part);
        let meta = match std::fs::symlink_metadata(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => match std::fs::create_dir(&dir) {
                Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
                // Made here, or by another process at the same moment: checked below either way.
                _ => std::fs::symlink_metadata(&dir)?,
            },
            other => other?,
        };
        if meta.file_type().is_symlink() {
            return Err(io::Error::other(format!(
                "{} is a symlink; lessrt does not write through links: remove it",
                dir.display()
            )));
        }
        if !meta.is_dir() {
            return Err(io::Error::other(format!("{} is not a directory; remove it", dir.display())));
        }
    }
    Ok(dir)
}

/// The name `path` is written under before it is renamed into place: this process's own, so two processes writing
/// at once each rename a whole file.
pub fn partial_path(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{name}.partial-{}", std::process::id()))
}

/// Opens `path` for reading the way the files above are opened for writing: never through a symlink in the last
/// component, never blocking (a FIFO or a device swapped in must not hang the reader). The caller checks what it got
/// (the resolver: a regular file with one link, inside its root).
pub(crate) fn open_to_read(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    untrusted(&mut options);
    options.open(path)
}

/// Opens (creating) the SQLite database at `path`, refusing a symlink in its place like the files above, while the
/// directories along the path are followed.
///
/// SQLite's `SQLITE_OPEN_NOFOLLOW` refuses a link in any component of the name it is given, so it is given the
/// canonical path of the parent directory (links resolved by the OS) and the file's own name: a link can then only
/// be the last component, which is what it refuses. SQLite opens the file and its `-wal` and `-shm` files with
/// `O_NOFOLLOW`, so a link swapped in after the check below is refused too, not followed; the check is there to say
/// so clearly, and to refuse a FIFO or a device in the database's place.
pub(crate) fn open_sqlite(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let cannot = |why: String| {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN), Some(why))
    };
    let name = path.file_name().ok_or_else(|| cannot(format!("{} names no file", path.display())))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let parent = parent.canonicalize().map_err(|err| cannot(format!("{}: {err}", parent.display())))?;
    let resolved = parent.join(name);
    match std::fs::symlink_metadata(&resolved) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(cannot(format!(
                "{} is a symlink; lessrt does not write through links: remove it",
                path.display()
            )));
        }
        Ok(meta) if !meta.is_file() => return Err(cannot(not_regular(path).to_string())),
        _ => {}
    }
    rusqlite::Connection::open_with_flags(&resolved, OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW)
}

/// No symlink in the last component, no blocking open, not inherited by children.
fn untrusted(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
}

fn open_regular(path: &Path, mut options: OpenOptions) -> io::Result<File> {
    untrusted(&mut options);
    let file = options.open(path).map_err(|err| {
        // ELOOP is what O_NOFOLLOW answers for a symlink: say so instead of "too many levels of symbolic links".
        #[cfg(unix)]
        match err.raw_os_error() {
            Some(libc::ELOOP) => {
                return io::Error::other(format!(
                    "{} is a symlink; lessrt does not write through links: remove it",
                    path.display()
                ));
            }
            // What a FIFO with no reader answers a non-blocking open for writing.
            Some(libc::ENXIO) => return not_regular(path),
            _ => {}
        }
        err
    })?;
    if !file.metadata()?.is_file() {
        return Err(not_regular(path));
    }
    Ok(file)
}

fn not_regular(path: &Path) -> io::Error {
    io::Error::other(format!("{} is not a regular file; remove it", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_and_fifos_left_in_place_are_never_written_through() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("elsewhere.txt");
        std::fs::write(&target, "keep\n").expect("write");
        let link = dir.path().join("ledger.jsonl");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        for opened in [create(&link).map(drop), append(&link).map(drop), open_or_create(&link).map(drop)] {
            let err = opened.expect_err("a symlink is refused");
            assert!(err.to_string().contains("is a symlink"), "{err}");
        }
        // Written whole, the link itself is replaced; the file it pointed at is untouched.
        write_whole(&link, b"new\n").expect("write whole");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep\n");
        assert_eq!(std::fs::read_to_string(&link).expect("replaced"), "new\n");
        assert!(!std::fs::symlink_metadata(&link).expect("meta").file_type().is_symlink());
        // A link planted under the partial name is not written through either.
        let report = dir.path().join("report.json");
        std::os::unix::fs::symlink(&target, partial_path(&report)).expect("symlink");
        write_whole(&report, b"{}").expect("write whole");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep\n");

        let fifo = dir.path().join("audit.log");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        let err = append(&fifo).expect_err("a FIFO is refused without blocking");
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    /// Directories along a store's path are followed (`runs -> /mnt/big/runs`, a linked `~/.cache`); only a link
    /// as the database file itself is refused, and nothing is written at its target.
    #[cfg(unix)]
    #[test]
    fn a_store_through_a_linked_directory_opens_and_a_linked_database_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("a/b")).expect("mkdir");
        let runs = dir.path().join("runs");
        std::os::unix::fs::symlink(&real, &runs).expect("symlink");
        for path in [runs.join("store.sqlite3"), runs.join("a/b/memory.sqlite3")] {
            let db = open_sqlite(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            db.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").expect("write");
        }
        assert!(real.join("store.sqlite3").is_file() && real.join("a/b/memory.sqlite3").is_file());

        let target = dir.path().join("elsewhere.sqlite3");
        let link = real.join("desk.sqlite3");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        for path in [link.clone(), runs.join("desk.sqlite3")] {
            let err = open_sqlite(&path).map(drop).expect_err("a link as the database is refused");
            assert!(err.to_string().contains("is a symlink"), "{err}");
        }
        assert!(!target.exists(), "nothing is created at the link's target");
    }

    #[test]
    fn files_are_created_appended_and_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.log");
        append(&path).and_then(|mut f| f.write_all(b"a\n")).expect("append");
        append(&path).and_then(|mut f| f.write_all(b"b\n")).expect("append");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "a\nb\n");
        create(&path).and_then(|mut f| f.write_all(b"c\n")).expect("create");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "c\n");
        write_whole(&path, b"d\n").expect("whole");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "d\n");
        assert!(!partial_path(&path).exists());
    }
}
