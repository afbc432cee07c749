//! Reading an input file with the protections every command needs: only regular files
//! (a device such as `/dev/zero` or a pipe would be read until memory runs out), at most
//! a given size, UTF-8 text.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// What a file that is not a regular one is, in words.
fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_fifo() {
            return "a named pipe";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// Opens a regular file of at most `max_bytes`. Anything else is an error that says what
/// the path is (a character device, a named pipe, a folder) or how big the file is.
pub fn open_regular_file(path: &Path, max_bytes: u64) -> io::Result<File> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file: refused",
                kind_of(&meta.file_type())
            ),
        ));
    }
    if meta.len() > max_bytes {
        return Err(too_large(meta.len(), max_bytes));
    }
    File::open(path)
}

/// Reads a regular file of at most `max_bytes` as UTF-8 text (see [`open_regular_file`]).
pub fn read_text_file(path: &Path, max_bytes: u64) -> io::Result<String> {
    read_text(open_regular_file(path, max_bytes)?, max_bytes)
}

/// Reads at most `max_bytes` of UTF-8 text from `reader` (a file that grows while it is
/// read, or standard input, cannot make this read more).
pub fn read_text(reader: impl Read, max_bytes: u64) -> io::Result<String> {
    let mut buf = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more than {max_bytes} bytes (the limit): refused"),
        ));
    }
    String::from_utf8(buf)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

fn too_large(size: u64, max_bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{size} bytes, more than the limit of {max_bytes} bytes: refused"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_big_files_are_refused() {
        #[cfg(unix)]
        {
            let e = read_text_file(Path::new("/dev/zero"), 1 << 20).expect_err("a device");
            assert!(e.to_string().contains("a character device"), "{e}");
        }
        let dir = std::env::temp_dir();
        let e = read_text_file(&dir, 1 << 20).expect_err("a folder");
        assert!(e.to_string().contains("a folder"), "{e}");
        let file = dir.join(format!("kubesched-input-{}.yaml", std::process::id()));
        std::fs::write(&file, "a: 1\n").expect("write");
        assert_eq!(read_text_file(&file, 5).expect("fits"), "a: 1\n");
        let e = read_text_file(&file, 4).expect_err("too big");
        assert!(e.to_string().contains("5 bytes"), "{e}");
        let _ = std::fs::remove_file(&file);
        let e = read_text(&b"abcdef"[..], 3).expect_err("too much");
        assert!(e.to_string().contains("more than 3 bytes"), "{e}");
    }

    /// `kubesched config validate /dev/zero` read until memory ran out.
    #[cfg(unix)]
    #[test]
    fn a_configuration_that_is_a_device_is_refused_unread() {
        let e = crate::load_file(Path::new("/dev/zero")).expect_err("a device");
        assert_eq!(
            e.to_string(),
            "/dev/zero: a character device, not a regular file: refused"
        );
    }
}
