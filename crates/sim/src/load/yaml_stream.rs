//! Reading a YAML file in windows instead of whole, so a dump of any size costs a few
//! windows of memory rather than its size. Lines are read one by one; whole documents are
//! handed over once a window of them has gathered (cut only before a `---` line, where
//! [`split::documents`] would cut too, so numbering and lines are the file's); a single
//! document that outgrows a window while it lists `items:` at its root (a `kubectl get -o
//! yaml` List) is handed over a window of items at a time, each window a small document
//! of its own (`items:` and the items' lines), and its other keys at its end.
//!
//! Within a streamed List an item's alias can only refer to an anchor of the same window
//! of items; kubectl never writes aliases, and small files are never streamed.

use std::io::BufRead;

use super::split::{indentation, is_filler, is_item_start, is_marker};

/// Bytes gathered before they are handed over: large enough that a window holds thousands
/// of objects to parse in parallel, small enough that a few of them are nothing next to
/// the objects themselves.
pub(super) const WINDOW: usize = 16 << 20;

/// What the reader hands over, in the file's order.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    /// Whole documents: `text` starts on the file's line `first_line`, and its first
    /// document is the file's document `first_document` (1-based).
    Documents {
        text: String,
        first_line: usize,
        first_document: usize,
    },
    /// Items of the List that is document `document` (starting on line `document_line`):
    /// `text` is `items:` followed by the items' lines, its first line being the file's
    /// line `first_line`.
    Items {
        text: String,
        first_line: usize,
        document: usize,
        document_line: usize,
    },
    /// The end of a streamed List: its lines other than the items (its `kind`,
    /// `apiVersion`, `metadata`).
    ListEnd {
        header: String,
        document: usize,
        document_line: usize,
    },
}

/// Why reading stopped before the end.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadError {
    /// The reader failed.
    Io(String),
    /// A line that is not UTF-8.
    NotUtf8 { line: usize },
}

/// The List being streamed.
#[derive(Debug)]
struct StreamedList {
    /// The document's lines before `items:` and, once the sequence ended, after it.
    header: String,
    document: usize,
    document_line: usize,
    /// The sequence's indentation.
    seq_indent: usize,
    /// `items:` and the items gathered since the last hand-over.
    window: String,
    window_line: usize,
    /// Whether the sequence ended (a line at the root after it).
    sequence_ended: bool,
}

/// The reader's state between lines.
pub(super) struct YamlStream<R> {
    reader: R,
    window_size: usize,
    line: usize,
    /// Whole documents not handed over yet, and the current document's lines so far.
    window: String,
    window_line: usize,
    /// Documents of the file before `window`.
    documents_before: usize,
    /// Where in `window` the current document starts, and its line and number in `window`.
    document_start: usize,
    document_line: usize,
    documents_in_window: usize,
    /// As [`split::documents`] tracks it: whether the current document has content.
    has_content: bool,
    /// The current document's root `items:` line (offset in `window`) and the
    /// indentation of the sequence under it, once seen; `None` after the sequence ended.
    items_at: Option<(usize, Option<usize>)>,
    items_ended: bool,
    list: Option<StreamedList>,
    ready: std::collections::VecDeque<Chunk>,
    done: bool,
    buf: Vec<u8>,
}

impl<R: BufRead> YamlStream<R> {
    /// With a window of `window_size` bytes (tests use small ones).
    pub(super) fn with_window(reader: R, window_size: usize) -> Self {
        Self {
            reader,
            window_size,
            line: 0,
            window: String::new(),
            window_line: 1,
            documents_before: 0,
            document_start: 0,
            document_line: 1,
            documents_in_window: 0,
            has_content: false,
            items_at: None,
            items_ended: false,
            list: None,
            ready: std::collections::VecDeque::new(),
            done: false,
            buf: Vec::new(),
        }
    }

    /// The next chunk; `Ok(None)` at the end. After an error, what was read whole before
    /// it has been handed over and nothing more is.
    pub(super) fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Ok(Some(c));
            }
            if self.done {
                return Ok(None);
            }
            self.buf.clear();
            let read = self.reader.read_until(b'\n', &mut self.buf);
            match read {
                Ok(0) => {
                    self.done = true;
                    self.finish();
                }
                Ok(_) => {
                    self.line += 1;
                    let buf = std::mem::take(&mut self.buf);
                    let result = match std::str::from_utf8(&buf) {
                        Ok(line) => {
                            self.push_line(line);
                            Ok(())
                        }
                        Err(_) => Err(ReadError::NotUtf8 { line: self.line }),
                    };
                    self.buf = buf;
                    if let Err(e) = result {
                        self.fail();
                        return Err(e);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail();
                    return Err(ReadError::Io(e.to_string()));
                }
            }
        }
    }

    /// Stops reading: the documents before the current one are handed over (they were
    /// read whole), the current one is not.
    fn fail(&mut self) {
        self.done = true;
        self.list = None;
        if self.document_start > 0 {
            self.window.truncate(self.document_start);
            self.hand_over_window(self.documents_in_window);
        }
        self.window.clear();
    }

    fn push_line(&mut self, line: &str) {
        if self.list.is_some() {
            self.push_list_line(line);
            return;
        }
        let at = self.window.len();
        if is_marker(line, "---") {
            if self.has_content {
                // A new document starts here: the window may be handed over before it.
                if at >= self.window_size {
                    self.hand_over_window(self.documents_in_window + 1);
                    self.start_window();
                } else {
                    self.documents_in_window += 1;
                }
                self.document_start = self.window.len();
                self.document_line = self.line;
                self.items_at = None;
                self.items_ended = false;
            }
            self.has_content = true;
            self.window.push_str(line);
            return;
        }
        if is_marker(line, "...") {
            self.window.push_str(line);
            self.documents_in_window += 1;
            self.document_start = self.window.len();
            self.document_line = self.line + 1;
            self.has_content = false;
            self.items_at = None;
            self.items_ended = false;
            return;
        }
        if !is_filler(line) {
            self.has_content = true;
        }
        self.track_items(line, at);
        if self.list.is_some() {
            self.push_list_line(line);
        } else {
            self.window.push_str(line);
        }
    }

    /// Follows the current document's root `items:` sequence; past a window, at an item's
    /// first line, starts streaming it.
    fn track_items(&mut self, line: &str, at: usize) {
        if self.items_ended {
            return;
        }
        match self.items_at {
            None => {
                if line
                    .strip_prefix("items:")
                    .is_some_and(|rest| is_filler(rest) || rest.trim().is_empty())
                {
                    self.items_at = Some((at, None));
                }
            }
            Some((items_offset, indent)) => {
                if is_filler(line) {
                    return;
                }
                let seq = match indent {
                    Some(s) => s,
                    None => {
                        let s = indentation(line);
                        if !is_item_start(line, s) {
                            self.items_ended = true;
                            return;
                        }
                        self.items_at = Some((items_offset, Some(s)));
                        s
                    }
                };
                let here = indentation(line);
                if here == seq && is_item_start(line, seq) {
                    if at - self.document_start >= self.window_size {
                        self.start_list(items_offset, seq);
                    }
                } else if here == 0 {
                    self.items_ended = true;
                }
            }
        }
    }

    /// The current document becomes a streamed List: the documents before it are handed
    /// over, then its items so far.
    fn start_list(&mut self, items_offset: usize, seq_indent: usize) {
        let document = self.documents_before + self.documents_in_window + 1;
        let document_start = self.document_start;
        let document_line = self.document_line;
        let items_line = document_line
            + self.window[document_start..items_offset]
                .bytes()
                .filter(|&b| b == b'\n')
                .count();
        let items = self.window.split_off(items_offset);
        let header = self.window.split_off(document_start);
        if document_start > 0 {
            self.hand_over_window(self.documents_in_window);
        }
        self.documents_before = document - 1;
        self.window.clear();
        self.list = Some(StreamedList {
            header,
            document,
            document_line,
            seq_indent,
            window: items,
            window_line: items_line,
            sequence_ended: false,
        });
    }

    fn push_list_line(&mut self, line: &str) {
        let size = self.window_size;
        let current = self.line;
        let Some(list) = self.list.as_mut() else {
            return;
        };
        if is_marker(line, "---") || is_marker(line, "...") {
            // The List ends here: `...` closes it (and is its line), `---` opens the next
            // document, which a new window starts with.
            let closes = is_marker(line, "...");
            if closes {
                list.header.push_str(line);
            }
            self.end_list();
            self.documents_before += 1;
            self.start_window();
            if closes {
                self.window_line = current + 1;
                self.document_line = current + 1;
                self.has_content = false;
            } else {
                self.has_content = true;
                self.window.push_str(line);
            }
            return;
        }
        if list.sequence_ended {
            list.header.push_str(line);
            return;
        }
        let tabbed = line.trim_start_matches(' ').starts_with('\t');
        if is_filler(line) || tabbed {
            list.window.push_str(line);
            return;
        }
        let indent = indentation(line);
        if indent == list.seq_indent && is_item_start(line, list.seq_indent) {
            if list.window.len() >= size {
                let text = std::mem::replace(&mut list.window, String::from("items:\n"));
                self.ready.push_back(Chunk::Items {
                    text,
                    first_line: list.window_line,
                    document: list.document,
                    document_line: list.document_line,
                });
                list.window_line = current - 1;
            }
            list.window.push_str(line);
        } else if indent == 0 {
            list.sequence_ended = true;
            list.header.push_str(line);
        } else {
            // Deeper lines belong to the item; a shallower one is the item's to report.
            list.window.push_str(line);
        }
    }

    /// Hands over the streamed List's last items and its header.
    fn end_list(&mut self) {
        if let Some(list) = self.list.take() {
            if list.window.len() > "items:\n".len() {
                self.ready.push_back(Chunk::Items {
                    text: list.window,
                    first_line: list.window_line,
                    document: list.document,
                    document_line: list.document_line,
                });
            }
            self.ready.push_back(Chunk::ListEnd {
                header: list.header,
                document: list.document,
                document_line: list.document_line,
            });
        }
    }

    /// Hands over the window's text up to now, which holds `documents` documents.
    fn hand_over_window(&mut self, documents: usize) {
        let text = std::mem::take(&mut self.window);
        if !text.is_empty() {
            self.ready.push_back(Chunk::Documents {
                text,
                first_line: self.window_line,
                first_document: self.documents_before + 1,
            });
        }
        self.documents_before += documents;
    }

    /// A new window starting at the current line.
    fn start_window(&mut self) {
        self.window.clear();
        self.window_line = self.line;
        self.document_start = 0;
        self.document_line = self.line;
        self.documents_in_window = 0;
        self.items_at = None;
        self.items_ended = false;
    }

    fn finish(&mut self) {
        if self.list.is_some() {
            self.end_list();
            return;
        }
        let documents = self.documents_in_window + 1;
        self.hand_over_window(documents);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str, window: usize) -> Vec<Chunk> {
        let mut s = YamlStream::with_window(text.as_bytes(), window);
        let mut out = Vec::new();
        while let Some(c) = s.next_chunk().expect("read") {
            out.push(c);
        }
        out
    }

    #[test]
    fn a_small_file_is_one_window() {
        let text = "a: 1\n---\nb: 2\n";
        assert_eq!(
            chunks(text, 1 << 20),
            vec![Chunk::Documents {
                text: text.into(),
                first_line: 1,
                first_document: 1
            }]
        );
    }

    #[test]
    fn windows_are_cut_before_markers_with_the_files_numbers() {
        let text = "a: 1\n---\nb: 2\n---\nc: 3\n...\n---\nd: 4\n";
        let got = chunks(text, 4);
        assert_eq!(
            got,
            vec![
                Chunk::Documents {
                    text: "a: 1\n".into(),
                    first_line: 1,
                    first_document: 1
                },
                Chunk::Documents {
                    text: "---\nb: 2\n".into(),
                    first_line: 2,
                    first_document: 2
                },
                Chunk::Documents {
                    text: "---\nc: 3\n...\n---\nd: 4\n".into(),
                    first_line: 4,
                    first_document: 3
                },
            ]
        );
    }

    #[test]
    fn a_big_list_is_streamed_in_windows_of_items() {
        let text = "first: doc\n---\napiVersion: v1\nitems:\n- kind: Pod\n  a: 1\n- kind: Pod\n  b: |\n    - x\n- kind: Node\nkind: List\nmetadata: {}\n---\nlast: doc\n";
        let got = chunks(text, 20);
        assert_eq!(
            got,
            vec![
                Chunk::Documents {
                    text: "first: doc\n".into(),
                    first_line: 1,
                    first_document: 1
                },
                Chunk::Items {
                    text: "items:\n- kind: Pod\n  a: 1\n".into(),
                    first_line: 4,
                    document: 2,
                    document_line: 2
                },
                Chunk::Items {
                    text: "items:\n- kind: Pod\n  b: |\n    - x\n".into(),
                    first_line: 6,
                    document: 2,
                    document_line: 2
                },
                Chunk::Items {
                    text: "items:\n- kind: Node\n".into(),
                    first_line: 9,
                    document: 2,
                    document_line: 2
                },
                Chunk::ListEnd {
                    header: "---\napiVersion: v1\nkind: List\nmetadata: {}\n".into(),
                    document: 2,
                    document_line: 2
                },
                Chunk::Documents {
                    text: "---\nlast: doc\n".into(),
                    first_line: 13,
                    first_document: 3
                },
            ]
        );
    }

    #[test]
    fn a_document_end_marker_closes_a_streamed_list() {
        let text = "apiVersion: v1\nitems:\n- a: 1\n- b: 2\n...\nc: 3\n";
        let items = |text: &str, first_line| Chunk::Items {
            text: text.into(),
            first_line,
            document: 1,
            document_line: 1,
        };
        assert_eq!(
            chunks(text, 8),
            vec![
                items("items:\n- a: 1\n", 2),
                items("items:\n- b: 2\n", 3),
                Chunk::ListEnd {
                    header: "apiVersion: v1\n...\n".into(),
                    document: 1,
                    document_line: 1
                },
                Chunk::Documents {
                    text: "c: 3\n".into(),
                    first_line: 6,
                    first_document: 2
                },
            ]
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_stops_after_the_whole_documents() {
        let mut text = b"a: 1\n---\nb: \xff\n".to_vec();
        text.extend_from_slice(b"c: 2\n");
        let mut s = YamlStream::with_window(&text[..], 1 << 20);
        assert_eq!(
            s.next_chunk(),
            Err(ReadError::NotUtf8 { line: 3 }),
            "the error comes first"
        );
        assert_eq!(
            s.next_chunk(),
            Ok(Some(Chunk::Documents {
                text: "a: 1\n".into(),
                first_line: 1,
                first_document: 1
            }))
        );
        assert_eq!(s.next_chunk(), Ok(None));
    }
}
