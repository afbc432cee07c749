//! Finding the files to read under the paths given: folders walked in name order, each
//! folder once (a symlink that leads back to a folder already walked is reported, not
//! followed again), and files read only when they are regular files of at most
//! [`MAX_FILE_BYTES`](super::MAX_FILE_BYTES), as they are parsed; `-` is standard input.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
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

/// Whether `path` can be read: a folder that can be listed, or a regular file of at most
/// [`MAX_FILE_BYTES`] that opens; the error says why not.
pub(super) fn readable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return std::fs::read_dir(path).map(drop).map_err(|e| e.to_string());
    }
    kubesched_config::input::open_regular_file(path, MAX_FILE_BYTES)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The read buffer: large reads for a large file.
const BUFFER_BYTES: usize = 1 << 20;

/// Opens one file (or standard input for `-`) to be read as it is parsed: a regular file
/// of at most [`MAX_FILE_BYTES`] (standard input is cut off there with an error); the
/// error is the problem's message.
pub(super) fn open(path: &Path) -> Result<Box<dyn BufRead>, String> {
    if path == Path::new(STDIN) {
        let stdin = Limited::new(std::io::stdin().lock(), MAX_FILE_BYTES);
        return Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, stdin)));
    }
    let file = kubesched_config::input::open_regular_file(path, MAX_FILE_BYTES)
        .map_err(|e| format!("cannot read: {e}"))?;
    let file = Limited::new(file, MAX_FILE_BYTES);
    Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, file)))
}

/// A reader that fails past `max` bytes (a file that grows while it is read, or standard
/// input, cannot make a read go on without end).
struct Limited<R> {
    inner: R,
    left: u64,
    max: u64,
}

impl<R: Read> Limited<R> {
    fn new(inner: R, max: u64) -> Self {
        Self {
            inner,
            left: max,
            max,
        }
    }
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let mut one = [0u8];
            return match self.inner.read(&mut one)? {
                0 => Ok(0),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "more than {} bytes (the limit): the rest is not read",
                        self.max
                    ),
                )),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
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
        let e = open(Path::new("/dev/zero")).err().expect("a device");
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
            let e = open(&fifo).err().expect("a pipe");
            assert!(e.contains("a named pipe"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn readable_paths_are_folders_and_regular_files() {
        let dir = temp_dir("readable");
        let file = dir.join("pods.yaml");
        std::fs::write(&file, "kind: Pod\n").expect("write");
        assert_eq!(readable(&dir), Ok(()));
        assert_eq!(readable(&file), Ok(()));
        let missing = readable(&dir.join("nope.yaml")).expect_err("missing");
        assert!(missing.contains("No such file"), "{missing}");
        #[cfg(unix)]
        {
            let device = readable(Path::new("/dev/null")).expect_err("a device");
            assert!(device.contains("not a regular file"), "{device}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reader_stops_past_its_limit() {
        let mut text = String::new();
        let e = Limited::new(&b"12345"[..], 4)
            .read_to_string(&mut text)
            .expect_err("over");
        assert!(e.to_string().contains("more than 4 bytes"), "{e}");
        let mut text = String::new();
        Limited::new(&b"1234"[..], 4)
            .read_to_string(&mut text)
            .expect("at the limit");
        assert_eq!(text, "1234");
    }
}
