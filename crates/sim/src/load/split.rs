//! Cutting a manifest file's text into pieces that parse on their own: the documents of a
//! multi-document YAML stream, and the items of a `kind: List` written in block style (as
//! `kubectl get -o yaml` writes it). Each piece is parsed alone, so one broken piece costs
//! only itself and no parser budget ever sees the whole file.
//!
//! The cuts are made on lines, never inside one: a document marker (`---` or `...` at the
//! start of a line) cannot occur inside YAML content, and an item of a block sequence
//! starts with `-` at the sequence's indentation. When a List's layout is anything else
//! (a flow sequence, tabs, a line less indented than its item) no cut is made and the
//! document is parsed whole.

use std::borrow::Cow;

/// A piece of a file: its text and the line (1-based) of the file it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece<'a> {
    /// The text, parsed on its own.
    pub text: Cow<'a, str>,
    /// The file's line the piece's first line is.
    pub first_line: usize,
    /// For an item of a List: the line (of the piece, 1-based) that is less indented than
    /// the item's content, which makes the item unreadable on its own.
    pub misindented: Option<usize>,
}

/// Lines with their byte offsets; a line keeps its `\n` (and `\r`).
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let at = offset;
        offset += line.len();
        (at, line)
    })
}

/// Whether the line starts with `marker` followed by whitespace or the end of the line.
pub(super) fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Whether a line holds nothing a parser turns into content: blank, a comment, or a
/// directive (`%YAML`, `%TAG`).
pub(super) fn is_filler(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#') || line.starts_with('%')
}

/// Whether a piece holds no content at all (only blank lines, comments, markers).
pub(crate) fn is_empty_document(text: &str) -> bool {
    text.lines()
        .all(|l| is_filler(l) || l.trim_end() == "---" || l.trim_end() == "...")
}

/// The documents of a YAML stream, in order, each with the line it starts on. A `---`
/// line stays with the document it opens (it may carry the document's first node); a
/// `...` line with the document it closes. Empty documents are kept (so document numbers
/// match the file); callers skip them.
pub(crate) fn documents(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    // Whether the current piece has anything besides blank lines, comments, directives.
    let mut has_content = false;
    for (n, (at, line)) in lines_with_offsets(text).enumerate() {
        let line_no = n + 1;
        if is_marker(line, "---") {
            if has_content {
                out.push(Piece {
                    text: Cow::Borrowed(&text[start..at]),
                    first_line: start_line,
                    misindented: None,
                });
                start = at;
                start_line = line_no;
            }
            // Leading comments and directives belong to the document this marker opens.
            has_content = true;
        } else if is_marker(line, "...") {
            let end = at + line.len();
            out.push(Piece {
                text: Cow::Borrowed(&text[start..end]),
                first_line: start_line,
                misindented: None,
            });
            start = end;
            start_line = line_no + 1;
            has_content = false;
        } else if !is_filler(line) {
            has_content = true;
        }
    }
    if start < text.len() && (has_content || out.is_empty()) {
        out.push(Piece {
            text: Cow::Borrowed(&text[start..]),
            first_line: start_line,
            misindented: None,
        });
    }
    out
}

/// A block-style List cut into its items: the document without its items (to read the
/// kind and check the rest), and each item as its own piece.
#[derive(Debug)]
pub(crate) struct SplitList<'a> {
    /// The document with the `items:` key and its sequence left out.
    pub header: String,
    doc: &'a str,
    seq_indent: usize,
    /// Each item's bytes in the document and the file's line it starts on.
    spans: Vec<(usize, usize, usize)>,
}

impl<'a> SplitList<'a> {
    /// How many items.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Item `i` (0-based) dedented to stand alone; made when asked for, so a List of
    /// 100,000 items is never copied whole.
    pub(crate) fn item(&self, i: usize) -> Piece<'a> {
        let (start, end, first_line) = self.spans[i];
        let lines: Vec<(usize, &str)> = lines_with_offsets(&self.doc[start..end]).collect();
        let (text, misindented) = dedent(&lines, self.seq_indent);
        Piece {
            text: Cow::Owned(text),
            first_line,
            misindented,
        }
    }
}

pub(super) fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Cuts a document whose root mapping has an `items:` key holding a block sequence into
/// the header and the items; `None` when the layout is not one this can cut safely (the
/// caller then parses the document whole). `first_line` is the document's first line in
/// the file.
pub(crate) fn list_items(doc: &str, first_line: usize) -> Option<SplitList<'_>> {
    let mut lines = lines_with_offsets(doc).enumerate().peekable();
    let mut header = String::new();
    // Up to the key.
    loop {
        let (_, (_, line)) = lines.next()?;
        if line
            .strip_prefix("items:")
            .is_some_and(|rest| is_filler(rest) || rest.trim().is_empty())
        {
            break;
        }
        header.push_str(line);
    }
    // The sequence's indentation: the first content line after the key.
    let mut seq_indent = None;
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    let mut end = doc.len();
    for (n, (at, line)) in lines.by_ref() {
        // A tab where indentation should be is an error of the item it is in.
        let tabbed = line.trim_start_matches(' ').starts_with('\t');
        if (is_filler(line) && !line.starts_with('%')) || (tabbed && !spans.is_empty()) {
            continue;
        }
        let indent = indentation(line);
        let seq = *seq_indent.get_or_insert(indent);
        if spans.is_empty() && !is_item_start(line, seq) {
            return None;
        }
        if indent > seq {
            continue;
        }
        if indent == seq && is_item_start(line, seq) {
            if let Some(last) = spans.last_mut() {
                last.1 = at;
            }
            spans.push((at, doc.len(), first_line + n));
            continue;
        }
        if indent == 0 {
            // The next key of the root mapping: the sequence ended.
            end = at;
            header.push_str(line);
            break;
        }
        return None;
    }
    if let Some(last) = spans.last_mut() {
        last.1 = end;
    }
    // Comments and blank lines at the end of the last item stay with it (harmless).
    for (_, (_, line)) in lines {
        header.push_str(line);
    }
    Some(SplitList {
        header,
        doc,
        seq_indent: seq_indent.unwrap_or(0),
        spans,
    })
}

/// How many items a window of a List (`items:` and item lines) starts, by its lines.
pub(crate) fn count_items(text: &str) -> usize {
    let mut lines = text.lines().skip(1).filter(|l| !is_filler(l));
    let Some(first) = lines.next() else {
        return 0;
    };
    let seq = indentation(first);
    1 + lines
        .filter(|l| indentation(l) == seq && is_item_start(l, seq))
        .count()
}

pub(super) fn is_item_start(line: &str, indent: usize) -> bool {
    line.get(indent..).is_some_and(|rest| {
        rest.strip_prefix('-')
            .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\r', '\n']))
    })
}

/// One item's lines made a document of their own: the dash becomes a space, then every
/// line loses the item's content indentation. A line less indented than that (or
/// indented with a tab) is kept as it is and its number (1-based) returned: the item
/// cannot stand alone.
fn dedent(lines: &[(usize, &str)], seq_indent: usize) -> (String, Option<usize>) {
    let Some((_, first)) = lines.first() else {
        return (String::new(), None);
    };
    let after_dash = &first[seq_indent + 1..];
    let content = after_dash.trim_start_matches(' ');
    let item_indent = if content.trim().is_empty() || content.starts_with('#') {
        // `-` alone on its line: the content starts on the next line.
        lines[1..]
            .iter()
            .map(|(_, l)| *l)
            .find(|l| !is_filler(l))
            .map_or(seq_indent + 2, indentation)
    } else {
        first.len() - content.len()
    };
    let mut out = String::with_capacity(lines.iter().map(|(_, l)| l.len()).sum());
    if !(content.trim().is_empty() || content.starts_with('#')) {
        out.push_str(content);
    } else {
        out.push('\n');
    }
    let mut misindented = None;
    for (n, (_, l)) in lines.iter().enumerate().skip(1) {
        if l.trim().is_empty() {
            out.push_str(if l.ends_with('\n') { "\n" } else { "" });
            continue;
        }
        let indent = indentation(l);
        if indent < item_indent || l[indent..].starts_with('\t') {
            if l.trim_start().starts_with('#') {
                out.push_str(l.trim_start());
                continue;
            }
            misindented = misindented.or(Some(n + 1));
            out.push_str(l);
            continue;
        }
        out.push_str(&l[item_indent..]);
    }
    (out, misindented)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Vec<(String, usize)> {
        documents(text)
            .into_iter()
            .map(|p| (p.text.into_owned(), p.first_line))
            .collect()
    }

    #[test]
    fn documents_are_cut_at_markers_only() {
        assert_eq!(
            docs("a: 1\n---\nb: 2\n--- {c: 3}\n"),
            vec![
                ("a: 1\n".to_string(), 1),
                ("---\nb: 2\n".to_string(), 2),
                ("--- {c: 3}\n".to_string(), 4)
            ]
        );
        // Leading comments, directives and a first marker make one document.
        assert_eq!(
            docs("# dump\n%YAML 1.2\n---\na: 1\n"),
            vec![("# dump\n%YAML 1.2\n---\na: 1\n".to_string(), 1)]
        );
        // `----` and `---x` are content, not markers; indented markers are content too.
        assert_eq!(docs("a: |\n  ---\nb: ----\n").len(), 1);
        // `...` ends a document.
        assert_eq!(
            docs("a: 1\n...\nb: 2\n"),
            vec![("a: 1\n...\n".to_string(), 1), ("b: 2\n".to_string(), 3)]
        );
        assert!(is_empty_document("---\n# nothing\n\n"));
        assert!(!is_empty_document("---\na: 1\n"));
    }

    #[test]
    fn block_lists_are_cut_into_items() {
        let text = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  spec:\n    x: |\n      - not an item\n\n- kind: Node\nkind: List\nmetadata: {}\n";
        let split = list_items(text, 10).expect("cut");
        assert_eq!(split.header, "apiVersion: v1\nkind: List\nmetadata: {}\n");
        let items: Vec<(String, usize)> = (0..split.len())
            .map(|i| split.item(i))
            .map(|p| (p.text.into_owned(), p.first_line))
            .collect();
        assert_eq!(
            items,
            vec![
                (
                    "apiVersion: v1\nkind: Pod\nspec:\n  x: |\n    - not an item\n\n".to_string(),
                    12
                ),
                ("kind: Node\n".to_string(), 18),
            ]
        );
        // An indented sequence, and an item whose content starts on the next line.
        let split = list_items("items:\n  -\n    kind: Pod\n  - kind: Node\n", 1).expect("cut");
        assert_eq!(split.len(), 2);
        assert_eq!(split.item(0).text, "\nkind: Pod\n");
        // Flow sequences and odd layouts are left whole.
        assert!(list_items("items: [{kind: Pod}]\nkind: List\n", 1).is_none());
        let split = list_items("items:\n- a: 1\n b: 2\n", 1).expect("cut");
        assert_eq!(split.item(0).misindented, Some(2));
    }
}
