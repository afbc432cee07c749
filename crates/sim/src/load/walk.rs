//! Finding the files to read under the paths given: folders walked in name order, each
//! folder once (a symlink that leads back to a folder already walked is reported, not
//! followed again), and files read only when they are regular files of at most
//! [`MAX_FILE_BYTES`](super::MAX_FILE_BYTES); `-` is standard input.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{InputProblem, MAX_FILE_BYTES};

/// The path that means standard input.
pub(super) const STDIN: &str = "-";

/// The folders walked so far, by canonical path.
#[derive(Debug, Default)]
pub(super) struct Walk {
    visited: HashSet<PathBuf>,
}

impl Walk {
    /// Adds `path` (a file, a folder, or `-`) to `out`; what cannot be walked goes to
    /// `problems`.
    pub(super) fn collect(
        &mut self,
        path: &Path,
        out: &mut Vec<PathBuf>,
        problems: &mut Vec<InputProblem>,
    ) {
        if path == Path::new(STDIN) {
            out.push(path.to_path_buf());
            return;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => self.folder(path, out, problems),
            // Anything else is checked when it is read (a device given by name is refused
            // there with what it is).
            Ok(_) => out.push(path.to_path_buf()),
            Err(e) => problems.push(InputProblem::file(
                &path.display().to_string(),
                format!("cannot read: {e}"),
            )),
        }
    }

    fn folder(&mut self, path: &Path, out: &mut Vec<PathBuf>, problems: &mut Vec<InputProblem>) {
        let name = path.display().to_string();
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(e) => {
                problems.push(InputProblem::file(&name, format!("cannot read: {e}")));
                return;
            }
        };
        if self.visited.contains(&canonical) {
            problems.push(InputProblem::file(
                &name,
                format!(
                    "leads to {}, a folder already read (a symlink loop, or a second link to it): skipped",
                    canonical.display()
                ),
            ));
            return;
        }
        self.visited.insert(canonical);
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
            Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) => {
                problems.push(InputProblem::file(&name, format!("cannot read: {e}")));
                return;
            }
        };
        entries.sort();
        for e in entries {
            let is_manifest = matches!(
                e.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            );
            match std::fs::metadata(&e) {
                Ok(meta) if meta.is_dir() => self.folder(&e, out, problems),
                Ok(_) if is_manifest => out.push(e),
                Ok(_) => {}
                // A dangling symlink named like a manifest is worth a word; others are not.
                Err(err) if is_manifest => problems.push(InputProblem::file(
                    &e.display().to_string(),
                    format!("cannot read: {err}"),
                )),
                Err(_) => {}
            }
        }
    }
}

/// Reads one file (or standard input for `-`): a regular file of at most
/// [`MAX_FILE_BYTES`], UTF-8; the error is the problem's message.
pub(super) fn read(path: &Path) -> Result<String, String> {
    let result = if path == Path::new(STDIN) {
        kubesched_config::input::read_text(std::io::stdin().lock(), MAX_FILE_BYTES)
    } else {
        kubesched_config::input::read_text_file(path, MAX_FILE_BYTES)
    };
    result.map_err(|e| format!("cannot read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kubesched-walk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_is_walked_once() {
        let dir = temp_dir("loop");
        std::fs::create_dir(dir.join("a")).expect("mkdir");
        std::fs::write(dir.join("a/pod.yaml"), "kind: Pod\n").expect("write");
        std::os::unix::fs::symlink(&dir, dir.join("a/back")).expect("symlink");
        std::os::unix::fs::symlink(dir.join("a"), dir.join("a/self")).expect("symlink");
        let mut files = Vec::new();
        let mut problems = Vec::new();
        Walk::default().collect(&dir, &mut files, &mut problems);
        assert_eq!(files, vec![dir.join("a/pod.yaml")]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems.iter().all(|p| p.message.contains("symlink loop")),
            "{problems:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_pipes_are_refused() {
        let e = read(Path::new("/dev/zero")).expect_err("a device");
        assert!(e.contains("a character device"), "{e}");
        let dir = temp_dir("fifo");
        let fifo = dir.join("pipe.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Named in a folder or by itself, a pipe is refused without being opened.
            let mut files = Vec::new();
            let mut problems = Vec::new();
            Walk::default().collect(&dir, &mut files, &mut problems);
            assert_eq!(files, vec![fifo.clone()]);
            let e = read(&fifo).expect_err("a pipe");
            assert!(e.contains("a named pipe"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
