//! Reading a JSON file in pieces instead of whole: each top-level object is cut, as its
//! bytes are read, into the elements of its `items` array (handed over one by one, to be
//! parsed on any thread) and the rest of it (handed over at its end, with `"items":[]`
//! in place of the array). Only the structure is followed here (brackets outside
//! strings); whether each piece is valid JSON is the parser's to say, so a broken item
//! costs only itself.
//!
//! A top-level value that is not an object (an array, a scalar, garbage) is handed over
//! with the rest of the file, to be parsed whole as before.

use std::io::BufRead;

/// What the reader hands over, in the file's order.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// A top-level object starts on `line`.
    Start { line: usize },
    /// An element of its `items` array, starting on `line`.
    Item { text: Vec<u8>, line: usize },
    /// The object without its items, complete.
    End { text: Vec<u8> },
    /// The rest of the file from `line` on, whose first value is not an object.
    Rest { text: Vec<u8>, line: usize },
}

/// Why reading stopped before the end.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CutError {
    /// The reader failed.
    Io(String),
    /// The file ended inside a value that started on `line`.
    Truncated { line: usize },
}

/// Where the reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Between top-level values.
    Top,
    /// In a top-level object, outside its items.
    Object,
    /// In the items array, between elements.
    BetweenItems,
    /// In an element that is an object or array (closes at depth 2) or a string.
    Item,
    /// In an element that is a bare scalar (a number, `true`): ends at a separator.
    ScalarItem,
}

/// The reader and where it is.
pub(super) struct JsonStream<R> {
    reader: R,
    state: CutState,
    done: bool,
}

/// Where the reader is, between calls.
struct CutState {
    line: usize,
    place: Place,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1: whether a key's `:` was read and its value not yet begun.
    after_colon: bool,
    /// At depth 1: the key being read, and the last key read.
    reading_key: bool,
    key: Vec<u8>,
    items_seen: bool,
    object_line: usize,
    item_line: usize,
    header: Vec<u8>,
    item: Vec<u8>,
}

impl<R: BufRead> JsonStream<R> {
    pub(super) fn new(reader: R) -> Self {
        Self {
            reader,
            done: false,
            state: CutState {
                line: 1,
                place: Place::Top,
                depth: 0,
                in_string: false,
                escaped: false,
                after_colon: false,
                reading_key: false,
                key: Vec::new(),
                items_seen: false,
                object_line: 1,
                item_line: 1,
                header: Vec::new(),
                item: Vec::new(),
            },
        }
    }

    /// The next piece; `Ok(None)` at the end (and after an error).
    pub(super) fn next_piece(&mut self) -> Result<Option<Piece>, CutError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Err(CutError::Io(e.to_string()));
                }
            };
            if buf.is_empty() {
                self.done = true;
                if self.state.place == Place::Top {
                    return Ok(None);
                }
                return Err(CutError::Truncated {
                    line: self.state.object_line,
                });
            }
            let buf: &[u8] = buf;
            let (used, piece) = scan(&mut self.state, buf);
            if let Some(Piece::Rest { line, .. }) = &piece {
                let mut text = buf[used..].to_vec();
                let line = *line;
                let len = buf.len();
                self.reader.consume(len);
                self.done = true;
                if let Err(e) = self.reader.read_to_end(&mut text) {
                    return Err(CutError::Io(e.to_string()));
                }
                return Ok(Some(Piece::Rest { text, line }));
            }
            self.reader.consume(used);
            if piece.is_some() {
                return Ok(piece);
            }
        }
    }
}

/// Scans `buf` until a piece is complete or the buffer ends: how many bytes were used and
/// the piece, if one is complete. Bytes go to the header or the current item in runs.
fn scan(s: &mut CutState, buf: &[u8]) -> (usize, Option<Piece>) {
    // Where the current run of bytes (going to the current place's buffer) started.
    let mut run = 0;
    let flush = |s: &mut CutState, from: usize, to: usize| match s.place {
        Place::Object => s.header.extend_from_slice(&buf[from..to]),
        Place::Item | Place::ScalarItem => s.item.extend_from_slice(&buf[from..to]),
        Place::Top | Place::BetweenItems => {}
    };
    let mut i = 0;
    while i < buf.len() {
        // Most bytes are the text of strings and an item's indentation, and none of them
        // changes the state: runs of them are skipped in one step (newlines counted).
        let skip = if s.in_string {
            if s.escaped || s.reading_key {
                0
            } else {
                memchr::memchr2(b'"', b'\\', &buf[i..]).unwrap_or(buf.len() - i)
            }
        } else if s.place == Place::Item {
            buf[i..]
                .iter()
                .position(|c| matches!(c, b'"' | b'{' | b'}' | b'[' | b']'))
                .unwrap_or(buf.len() - i)
        } else {
            0
        };
        if skip > 0 {
            s.line += memchr::memchr_iter(b'\n', &buf[i..i + skip]).count();
            i += skip;
            continue;
        }
        let b = buf[i];
        if b == b'\n' {
            s.line += 1;
        }
        if s.in_string {
            if s.escaped {
                s.escaped = false;
            } else if b == b'\\' {
                s.escaped = true;
            } else if b == b'"' {
                s.in_string = false;
                if s.reading_key {
                    s.reading_key = false;
                } else if s.place == Place::Item && s.depth == 2 {
                    // A string element ends with its quote.
                    flush(s, run, i + 1);
                    return (i + 1, Some(s.take_item()));
                }
            } else if s.reading_key {
                s.key.push(b);
            }
            i += 1;
            continue;
        }
        match s.place {
            Place::Top => match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'{' => {
                    s.place = Place::Object;
                    s.depth = 1;
                    s.after_colon = false;
                    s.items_seen = false;
                    s.header.clear();
                    s.header.push(b'{');
                    s.object_line = s.line;
                    return (i + 1, Some(Piece::Start { line: s.line }));
                }
                _ => {
                    let line = s.line;
                    return (
                        i,
                        Some(Piece::Rest {
                            text: Vec::new(),
                            line,
                        }),
                    );
                }
            },
            Place::Object => match b {
                b'"' => {
                    s.in_string = true;
                    if s.depth == 1 && !s.after_colon {
                        s.reading_key = true;
                        s.key.clear();
                    }
                    s.after_colon = false;
                }
                b':' if s.depth == 1 => s.after_colon = true,
                b',' if s.depth == 1 => s.after_colon = false,
                b'[' if s.depth == 1 && s.after_colon && !s.items_seen && s.key == b"items" => {
                    s.items_seen = true;
                    s.after_colon = false;
                    s.depth = 2;
                    flush(s, run, i + 1);
                    s.place = Place::BetweenItems;
                    run = i + 1;
                }
                b'{' | b'[' => {
                    s.depth += 1;
                    s.after_colon = false;
                }
                b'}' | b']' => {
                    s.depth -= 1;
                    if s.depth == 0 {
                        flush(s, run, i + 1);
                        s.place = Place::Top;
                        let text = std::mem::take(&mut s.header);
                        return (i + 1, Some(Piece::End { text }));
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => {}
                _ => s.after_colon = false,
            },
            Place::BetweenItems => match b {
                b' ' | b'\t' | b'\r' | b'\n' | b',' => {}
                b']' | b'}' => {
                    // The array's end, scanned again as the object's.
                    s.place = Place::Object;
                    run = i;
                    continue;
                }
                _ => {
                    s.item.clear();
                    s.item_line = s.line;
                    run = i;
                    match b {
                        b'{' | b'[' => {
                            s.depth = 3;
                            s.place = Place::Item;
                        }
                        b'"' => {
                            s.in_string = true;
                            s.place = Place::Item;
                        }
                        _ => s.place = Place::ScalarItem,
                    }
                }
            },
            Place::Item => match b {
                b'"' => s.in_string = true,
                b'{' | b'[' => s.depth += 1,
                b'}' | b']' => {
                    s.depth -= 1;
                    if s.depth == 2 {
                        flush(s, run, i + 1);
                        return (i + 1, Some(s.take_item()));
                    }
                }
                _ => {}
            },
            Place::ScalarItem => match b {
                b' ' | b'\t' | b'\r' | b'\n' | b',' | b']' | b'}' => {
                    if b == b'\n' {
                        // Counted again when the separator is scanned from BetweenItems.
                        s.line -= 1;
                    }
                    flush(s, run, i);
                    return (i, Some(s.take_item()));
                }
                _ => {}
            },
        }
        i += 1;
    }
    flush(s, run, buf.len());
    (buf.len(), None)
}

impl CutState {
    fn take_item(&mut self) -> Piece {
        self.place = Place::BetweenItems;
        self.depth = 2;
        Piece::Item {
            text: std::mem::take(&mut self.item),
            line: self.item_line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str, capacity: usize) -> (Vec<Piece>, Option<CutError>) {
        let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
        let mut s = JsonStream::new(reader);
        let mut out = Vec::new();
        loop {
            match s.next_piece() {
                Ok(Some(p)) => out.push(p),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    fn item(text: &str, line: usize) -> Piece {
        Piece::Item {
            text: text.into(),
            line,
        }
    }

    /// Strings and an item's indentation are skipped in runs: the lines counted across them
    /// (and across buffer ends inside them) stay exact, and escapes still end no string.
    #[test]
    fn lines_are_counted_across_skipped_runs() {
        let long = "x".repeat(300);
        let text = format!(
            "{{\n  \"items\": [\n    {{\n      \"a\": \"{long}\\\\\",\n\n      \"b\": [\n        \"\\\"}}\"\n      ]\n    }},\n    {{\"c\": 1}}\n  ]\n}}\n"
        );
        for capacity in [1, 5, 64, 333, 4096] {
            let (got, error) = pieces(&text, capacity);
            assert_eq!(error, None, "capacity {capacity}");
            let items: Vec<(usize, usize)> = got
                .iter()
                .filter_map(|p| match p {
                    Piece::Item { text, line } => Some((*line, text.len())),
                    _ => None,
                })
                .collect();
            assert_eq!(items.len(), 2, "capacity {capacity}: {got:?}");
            assert_eq!(items[0].0, 3, "capacity {capacity}");
            assert_eq!(items[1].0, 10, "capacity {capacity}");
            let first = match &got[1] {
                Piece::Item { text, .. } => String::from_utf8(text.clone()).expect("utf-8"),
                other => panic!("{other:?}"),
            };
            let value: serde_json::Value = serde_json::from_str(&first).expect("the item is whole");
            assert_eq!(value["a"].as_str().map(str::len), Some(301));
            assert_eq!(value["b"][0], "\"}");
        }
    }

    #[test]
    fn items_are_cut_out_whatever_the_buffer() {
        let text = "{\"apiVersion\": \"v1\",\n \"items\": [\n  {\"kind\": \"Pod\", \"x\": \"]}\\\"{\"},\n  [1],\n  \"s\", 7\n ],\n \"kind\": \"List\"}\n{\"kind\": \"Node\"}";
        for capacity in [1, 2, 3, 7, 64, 4096] {
            let (got, error) = pieces(text, capacity);
            assert_eq!(error, None, "capacity {capacity}");
            assert_eq!(
                got,
                vec![
                    Piece::Start { line: 1 },
                    item("{\"kind\": \"Pod\", \"x\": \"]}\\\"{\"}", 3),
                    item("[1]", 4),
                    item("\"s\"", 5),
                    item("7", 5),
                    Piece::End {
                        text: b"{\"apiVersion\": \"v1\",\n \"items\": [],\n \"kind\": \"List\"}"
                            .to_vec()
                    },
                    Piece::Start { line: 8 },
                    Piece::End {
                        text: b"{\"kind\": \"Node\"}".to_vec()
                    },
                ],
                "capacity {capacity}"
            );
        }
    }

    #[test]
    fn an_items_key_deeper_down_is_content() {
        let text = r#"{"spec": {"items": [1, 2]}, "kind": "X"}"#;
        let (got, _) = pieces(text, 5);
        assert_eq!(
            got,
            vec![
                Piece::Start { line: 1 },
                Piece::End {
                    text: text.as_bytes().to_vec()
                }
            ]
        );
    }

    #[test]
    fn anything_but_an_object_is_the_rest() {
        let (got, error) = pieces("{\"a\": 1}\n[1, 2]\n", 4);
        assert_eq!(error, None);
        assert_eq!(
            got[2],
            Piece::Rest {
                text: b"[1, 2]\n".to_vec(),
                line: 2
            }
        );
    }

    #[test]
    fn a_cut_short_file_says_where_its_value_began() {
        let (got, error) = pieces("\n{\"items\": [{\"kind\": \"Pod\"}, {\"ki", 8);
        assert_eq!(got.len(), 2);
        assert_eq!(error, Some(CutError::Truncated { line: 2 }));
    }
}
