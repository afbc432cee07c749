//! A fast reader for the YAML that `kubectl get -o yaml` writes (go-yaml's block style):
//! block mappings and sequences, plain, single- and double-quoted scalars (folded over
//! several lines too), literal block scalars and the empty flow collections `{}` and `[]`.
//!
//! It is an accelerator, not a second YAML parser to trust: it reads a piece only when the
//! piece stays inside that subset and every scalar types unambiguously, and answers `None`
//! for anything else (anchors, tags, comments, flow collections with content, folded block
//! scalars, tabs, duplicate keys, numbers YAML 1.1 and 1.2 read differently, ...). The
//! caller then parses the piece with the full parser, so results and error messages are
//! always the full parser's. Real dumps stay inside the subset, and this reader is about
//! five times faster on them.

use serde_json::{Map, Number, Value};

/// Deeper than any Kubernetes object; the full parser handles (and limits) the rest.
const MAX_DEPTH: usize = 96;

/// One line: its indentation and the rest, without the line break.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

/// Parses a document whose root is a block mapping, or `None` when the piece leaves the
/// subset (see the module comment).
pub(super) fn parse(text: &str) -> Option<Value> {
    let mut lines = Vec::with_capacity(text.len() / 24);
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let content = raw.trim_start_matches(' ');
        if content.starts_with('\t') {
            return None;
        }
        lines.push(Line {
            indent: raw.len() - content.len(),
            text: content,
        });
    }
    let mut r = Reader { lines, at: 0 };
    r.skip_blank();
    // A `---` line opens the document; anything on it is left to the full parser.
    if r.at < r.lines.len() && r.lines[r.at].indent == 0 && r.lines[r.at].text.starts_with("---") {
        if r.lines[r.at].text.trim_end() != "---" {
            return None;
        }
        r.at += 1;
        r.skip_blank();
    }
    if r.at >= r.lines.len() {
        return None;
    }
    let first = r.lines[r.at];
    if first.indent != 0 || !is_mapping_entry(first.text) {
        return None;
    }
    let value = r.mapping(0, None, 0)?;
    r.skip_blank();
    if r.at < r.lines.len() {
        // `...` closes the document; nothing may follow it in a piece.
        let rest = &r.lines[r.at..];
        if rest[0].indent == 0
            && rest[0].text.trim_end() == "..."
            && rest[1..].iter().all(|l| l.text.trim().is_empty())
        {
            return Some(value);
        }
        return None;
    }
    Some(value)
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

impl<'a> Reader<'a> {
    fn skip_blank(&mut self) {
        while self.at < self.lines.len() && self.lines[self.at].text.trim_end().is_empty() {
            self.at += 1;
        }
    }

    /// The next non-blank line, without moving past it.
    fn peek(&mut self) -> Option<Line<'a>> {
        self.skip_blank();
        self.lines.get(self.at).copied()
    }

    /// A block mapping whose entries sit at `indent`. `first` is the text of its first
    /// entry when that entry shares a line with a sequence's `- `.
    fn mapping(&mut self, indent: usize, first: Option<&'a str>, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut map = Map::new();
        let mut pending = first;
        loop {
            let text = match pending.take() {
                Some(t) => t,
                None => match self.peek() {
                    Some(l) if l.indent == indent && !l.text.starts_with("- ") && l.text != "-" => {
                        self.at += 1;
                        l.text
                    }
                    Some(l) if l.indent > indent => return None,
                    _ => break,
                },
            };
            if text.starts_with('#') {
                return None;
            }
            let (key, rest) = split_entry(text)?;
            let value = self.value_after_key(indent, rest, depth)?;
            if map.insert(key, value).is_some() {
                // Duplicate keys: the full parser says so.
                return None;
            }
        }
        Some(Value::Object(map))
    }

    /// The value of `key:` at `indent`, `rest` being what follows the colon on its line.
    fn value_after_key(&mut self, indent: usize, rest: &'a str, depth: usize) -> Option<Value> {
        let rest = rest.trim();
        if rest.is_empty() {
            // A nested block: a mapping further in, or a sequence at this indentation or
            // further in (go-yaml writes it at the key's own); nothing at all is null.
            return match self.peek() {
                Some(l) if l.indent > indent && is_mapping_entry(l.text) => {
                    self.mapping(l.indent, None, depth + 1)
                }
                Some(l) if l.indent >= indent && (l.text.starts_with("- ") || l.text == "-") => {
                    self.sequence(l.indent, depth + 1)
                }
                Some(l) if l.indent > indent => None,
                _ => Some(Value::Null),
            };
        }
        self.inline_value(indent, rest)
    }

    /// A value written after `key: ` or `- ` on the line (the line is consumed): a block
    /// scalar, a quoted or plain scalar (possibly continued on more-indented lines), or
    /// an empty flow collection. `parent` is the indentation continuation lines exceed.
    fn inline_value(&mut self, parent: usize, rest: &'a str) -> Option<Value> {
        match rest.as_bytes()[0] {
            b'|' => self.literal_block(parent, rest),
            b'"' | b'\'' => self.quoted(parent, rest).map(Value::String),
            b'{' | b'[' => match rest.trim_end() {
                "{}" => Some(Value::Object(Map::new())),
                "[]" => Some(Value::Array(Vec::new())),
                _ => None,
            },
            b'>' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b'?' | b'#' => None,
            // A sequence indicator where a scalar belongs: invalid, the full parser says so.
            _ if rest.starts_with("- ") || rest.trim_end() == "-" => None,
            _ => {
                let text = self.plain_continued(parent, rest)?;
                plain_scalar(&text)
            }
        }
    }

    /// A block sequence whose `- ` sit at `indent`.
    fn sequence(&mut self, indent: usize, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut items = Vec::new();
        while let Some(l) = self.peek() {
            if l.indent != indent || !(l.text.starts_with("- ") || l.text == "-") {
                if l.indent > indent {
                    return None;
                }
                break;
            }
            self.at += 1;
            let rest = l.text[1..].trim_start_matches(' ');
            let content = indent + (l.text.len() - rest.len());
            let item = if rest.trim_end().is_empty() {
                // `-` alone: the item is the block below it.
                match self.peek() {
                    Some(n) if n.indent > indent && is_mapping_entry(n.text) => {
                        self.mapping(n.indent, None, depth + 1)?
                    }
                    Some(n) if n.indent > indent => return None,
                    _ => Value::Null,
                }
            } else if rest.starts_with("- ") || rest == "-" || rest.starts_with('#') {
                return None;
            } else if is_mapping_entry(rest) {
                self.mapping(content, Some(rest), depth + 1)?
            } else {
                self.inline_value(indent, rest)?
            };
            items.push(item);
        }
        Some(Value::Array(items))
    }

    /// A plain scalar from `first` on, folded with the lines after it that are indented
    /// further than `parent` (each line break becomes a space, an empty line a newline).
    fn plain_continued(&mut self, parent: usize, first: &'a str) -> Option<String> {
        let first = first.trim_end();
        if first.contains(" #") || first.contains(": ") || first.ends_with(':') {
            return None;
        }
        let mut out: Option<String> = None;
        let mut breaks = 0usize;
        while let Some(l) = self.lines.get(self.at).copied() {
            let t = l.text.trim_end();
            if t.is_empty() {
                breaks += 1;
                self.at += 1;
                continue;
            }
            if l.indent <= parent {
                break;
            }
            if t.starts_with('#') || t.contains(" #") || t.contains(": ") || t.ends_with(':') {
                return None;
            }
            let s = out.get_or_insert_with(|| first.to_string());
            fold(s, breaks);
            s.push_str(t);
            breaks = 0;
            self.at += 1;
        }
        // Blank lines after the scalar belong to nobody; leave them skipped.
        Some(out.unwrap_or_else(|| first.to_string()))
    }

    /// A single- or double-quoted scalar starting at `rest`, possibly over several lines.
    fn quoted(&mut self, parent: usize, rest: &'a str) -> Option<String> {
        let quote = rest.as_bytes()[0];
        let mut out = String::new();
        let mut chunk = &rest[1..];
        loop {
            match scan_quoted(chunk, quote, &mut out)? {
                Scanned::Closed(after) => {
                    let after = after.trim();
                    // Nothing but the end of the line may follow the closing quote.
                    if !after.is_empty() {
                        return None;
                    }
                    return Some(out);
                }
                Scanned::Open => {
                    // The line ended inside the quotes (its trailing spaces were dropped):
                    // the break folds like a plain scalar's.
                    let mut breaks = 0;
                    let next = loop {
                        let l = self.lines.get(self.at).copied()?;
                        self.at += 1;
                        if l.text.trim().is_empty() {
                            breaks += 1;
                            continue;
                        }
                        if l.indent <= parent {
                            return None;
                        }
                        break l;
                    };
                    fold(&mut out, breaks);
                    chunk = next.text.trim_start();
                }
            }
        }
    }

    /// `|`, `|-` or `|+` and the lines of the block after it.
    fn literal_block(&mut self, parent: usize, header: &'a str) -> Option<Value> {
        let chomp = match header.trim_end() {
            "|" => Chomp::Clip,
            "|-" => Chomp::Strip,
            "|+" => Chomp::Keep,
            _ => return None,
        };
        let mut block_indent = None;
        let mut out = String::new();
        let mut trailing_breaks = 0usize;
        while let Some(l) = self.lines.get(self.at).copied() {
            if l.text.is_empty() {
                // A line of spaces only is content when it is longer than the block's
                // indentation: left to the full parser.
                if l.indent > block_indent.unwrap_or(0) {
                    return None;
                }
                trailing_breaks += 1;
                self.at += 1;
                continue;
            }
            let indent = match block_indent {
                Some(i) => i,
                None => {
                    if l.indent <= parent {
                        break;
                    }
                    block_indent = Some(l.indent);
                    l.indent
                }
            };
            if l.indent < indent {
                if l.indent > parent && !l.text.trim().is_empty() {
                    return None;
                }
                break;
            }
            for _ in 0..trailing_breaks {
                out.push('\n');
            }
            trailing_breaks = 0;
            for _ in indent..l.indent {
                out.push(' ');
            }
            out.push_str(l.text);
            out.push('\n');
            self.at += 1;
        }
        // The lines read as blank may be the start of whatever follows; only the ones
        // before the end of input or the next node count towards `|+`.
        match chomp {
            Chomp::Strip => {
                let t = out.trim_end_matches('\n').len();
                out.truncate(t);
            }
            Chomp::Clip => {}
            Chomp::Keep => {
                for _ in 0..trailing_breaks {
                    out.push('\n');
                }
            }
        }
        if block_indent.is_none() {
            out.clear();
        }
        Some(Value::String(out))
    }
}

#[derive(Clone, Copy)]
enum Chomp {
    Clip,
    Strip,
    Keep,
}

enum Scanned<'a> {
    Closed(&'a str),
    Open,
}

/// Reads quoted text up to the closing quote (pushing it to `out`), or to the end of the
/// line. `None` for escapes the subset leaves to the full parser.
fn scan_quoted<'a>(chunk: &'a str, quote: u8, out: &mut String) -> Option<Scanned<'a>> {
    let bytes = chunk.as_bytes();
    let mut i = 0;
    let mut from = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if quote == b'\'' && b == b'\'' {
            out.push_str(&chunk[from..i]);
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                from = i;
                continue;
            }
            return Some(Scanned::Closed(&chunk[i + 1..]));
        }
        if quote == b'"' && b == b'"' {
            out.push_str(&chunk[from..i]);
            return Some(Scanned::Closed(&chunk[i + 1..]));
        }
        if quote == b'"' && b == b'\\' {
            out.push_str(&chunk[from..i]);
            let (c, len) = escape(&chunk[i + 1..])?;
            out.push(c);
            i += 1 + len;
            from = i;
            continue;
        }
        i += 1;
    }
    out.push_str(chunk[from..].trim_end_matches([' ', '\t']));
    Some(Scanned::Open)
}

/// A double-quoted escape after its backslash: the character and the bytes it took.
fn escape(s: &str) -> Option<(char, usize)> {
    let c = s.chars().next()?;
    let simple = match c {
        '0' => Some('\0'),
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        't' | '\t' => Some('\t'),
        'n' => Some('\n'),
        'v' => Some('\u{b}'),
        'f' => Some('\u{c}'),
        'r' => Some('\r'),
        'e' => Some('\u{1b}'),
        ' ' => Some(' '),
        '"' => Some('"'),
        '/' => Some('/'),
        '\\' => Some('\\'),
        'N' => Some('\u{85}'),
        '_' => Some('\u{a0}'),
        'L' => Some('\u{2028}'),
        'P' => Some('\u{2029}'),
        _ => None,
    };
    if let Some(ch) = simple {
        return Some((ch, c.len_utf8()));
    }
    let digits = match c {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        // Escaped line breaks and anything else: the full parser.
        _ => return None,
    };
    let hex = s.get(1..1 + digits)?;
    let code = u32::from_str_radix(hex, 16).ok()?;
    Some((char::from_u32(code)?, 1 + digits))
}

/// Folds `breaks` empty lines and one line break into `s`, as flow scalars fold.
fn fold(s: &mut String, breaks: usize) {
    if breaks == 0 {
        s.push(' ');
    } else {
        for _ in 0..breaks {
            s.push('\n');
        }
    }
}

/// Whether a line is `key:` or `key: value` (a plain or quoted key).
fn is_mapping_entry(text: &str) -> bool {
    split_entry(text).is_some()
}

/// `key: rest` into the key and the rest.
fn split_entry(text: &str) -> Option<(String, &str)> {
    let first = *text.as_bytes().first()?;
    if first == b'"' || first == b'\'' {
        let mut key = String::new();
        match scan_quoted(&text[1..], first, &mut key)? {
            Scanned::Closed(after) => {
                let rest = after.strip_prefix(':')?;
                (rest.is_empty() || rest.starts_with(' ')).then_some((key, rest))
            }
            Scanned::Open => None,
        }
    } else {
        if matches!(
            first,
            b'-' | b'?'
                | b':'
                | b','
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'#'
                | b'&'
                | b'*'
                | b'!'
                | b'|'
                | b'>'
                | b'%'
                | b'@'
                | b'`'
        ) {
            return None;
        }
        let at = match text.find(": ") {
            Some(i) => i,
            None => text.strip_suffix(':').map(str::len)?,
        };
        let key = &text[..at];
        if key.contains(" #") || key.ends_with(' ') {
            return None;
        }
        Some((key.to_string(), &text[at + 1..]))
    }
}

/// A plain scalar's value, or `None` when YAML versions or schemas could read it
/// differently (the full parser decides those).
fn plain_scalar(s: &str) -> Option<Value> {
    match s {
        "" | "null" | "~" | "Null" | "NULL" => return Some(Value::Null),
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        _ => {}
    }
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.trim_start_matches(['-', '+']),
        "y" | "n"
            | "yes"
            | "no"
            | "on"
            | "off"
            | "true"
            | "false"
            | "null"
            | "inf"
            | "infinity"
            | "nan"
    ) {
        return None;
    }
    let bytes = s.as_bytes();
    let numeric_start =
        bytes[0].is_ascii_digit() || (matches!(bytes[0], b'-' | b'+' | b'.') && bytes.len() > 1);
    if !numeric_start {
        return Some(Value::String(s.to_string()));
    }
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    let digits_only = !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit());
    if digits_only {
        // Leading zeros are octal to YAML 1.1.
        if unsigned.len() > 1 && unsigned.starts_with('0') {
            return None;
        }
        return if let Ok(i) = s.parse::<i64>() {
            Some(Value::Number(i.into()))
        } else {
            s.parse::<u64>().ok().map(|u| Value::Number(u.into()))
        };
    }
    if let Some((int, frac)) = unsigned.split_once('.')
        && !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
        && !(int.len() > 1 && int.starts_with('0'))
    {
        return s
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number);
    }
    // Anything else that starts like a number (1e3, 0x1f, 1_000, 1:30, +1, .5, .inf) is
    // read differently by different YAML versions; a string that merely starts with a
    // digit (100m, 10.0.0.1, 2Gi, 1.2.3) is a string to all of them.
    let ambiguous = bytes[0] == b'+'
        || unsigned.starts_with('.')
        || unsigned.ends_with('.')
        || s.contains(':')
        || s.contains('_')
        || lower.starts_with("0x")
        || lower.starts_with("0o")
        || lower.starts_with("0b")
        || looks_like_exponent(unsigned);
    if ambiguous {
        return None;
    }
    Some(Value::String(s.to_string()))
}

/// `1e3`, `1.5E-2`: a float to some schemas.
fn looks_like_exponent(s: &str) -> bool {
    let Some(at) = s.find(['e', 'E']) else {
        return false;
    };
    let (mantissa, exp) = (&s[..at], &s[at + 1..]);
    let exp = exp.strip_prefix(['-', '+']).unwrap_or(exp);
    !mantissa.is_empty()
        && mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && !exp.is_empty()
        && exp.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(text: &str) -> Value {
        serde_saphyr::from_str::<Value>(text).unwrap()
    }

    /// The fast reader, where it answers, agrees with the full parser.
    fn agrees(text: &str) {
        let fast = parse(text).unwrap_or_else(|| panic!("left to the full parser:\n{text}"));
        assert_eq!(fast, full(text), "{text}");
    }

    #[test]
    fn kubectl_style_documents_read_as_the_full_parser_reads_them() {
        agrees(
            "apiVersion: v1
kind: Pod
metadata:
  annotations:
    note: |
      line one
        indented
      ---
    empty: \"\"
    strip: |-
      no newline
  creationTimestamp: \"2024-01-01T00:00:00Z\"
  labels:
    app: web
    k:{\"type\":\"Ready\"}: x
  name: web-1
spec:
  containers:
  - image: nginx:1.25
    name: web
    ports:
    - containerPort: 80
      protocol: TCP
    resources: {}
  - name: log
    args:
    - -v
    - --flag=a b
  priority: -5
  ratio: 1.5
  tolerations: []
status:
  conditions:
  - lastProbeTime: null
    message: '0/3 nodes are available: 3 node(s) had untolerated taint {a: b}. preemption:
      0/3 nodes are available: it''s
      fine.'
    status: \"False\"
  - message: \"a \\\"quoted\\\" \\u00e9 word
      folded\"
    type: PodScheduled
  phase: Pending
  plain: a long plain
    scalar folded
",
        );
    }

    #[test]
    fn sequences_under_an_item_and_items_of_mappings() {
        agrees(
            "items:
- name: a
  list:
  - 1
  - two
- -3
-
  name: below
rest: ~
",
        );
    }

    #[test]
    fn constructs_outside_the_subset_are_left_to_the_full_parser() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: 1 # comment\n",
            "# comment\na: 1\n",
            "a: {b: 1}\n",
            "a: [1, 2]\n",
            "a: >\n  folded\n",
            "a: 1\na: 2\n",
            "a: yes\n",
            "a: 0755\n",
            "a: 1e3\n",
            "a: 0x1f\n",
            "a: 1:30\n",
            "a: .inf\n",
            "a:\n\tb: 1\n",
            "- a\n- b\n",
            "a: \"line \\\n  break\"\n",
            "--- a: 1\n",
            "a: b: c\n",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_generated_dump_reads_as_the_full_parser_reads_it() {
        use crate::bench::dump::{DumpShape, DumpSpec, write_dump};
        let spec = DumpSpec {
            nodes: 3,
            pods: 40,
            bound_percent: 90,
        };
        let mut out = Vec::new();
        write_dump(&spec, DumpShape::Documents, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let docs: Vec<&str> = text.split("---\n").collect();
        assert_eq!(docs.len(), 43);
        for doc in docs {
            agrees(doc);
        }
    }

    #[test]
    fn scalars_type_as_yaml_does() {
        for (text, want) in [
            ("a: 1\n", Value::from(1)),
            ("a: -1\n", Value::from(-1)),
            ("a: 18446744073709551615\n", Value::from(u64::MAX)),
            ("a: 2.5\n", Value::from(2.5)),
            ("a: 100m\n", Value::from("100m")),
            ("a: 10.0.0.1\n", Value::from("10.0.0.1")),
            ("a: \"8080\"\n", Value::from("8080")),
            ("a: ''\n", Value::from("")),
            ("a:\n", Value::Null),
            ("a: true\n", Value::Bool(true)),
        ] {
            let got = parse(text).unwrap();
            assert_eq!(got["a"], want, "{text:?}");
            assert_eq!(got, full(text), "{text:?}");
        }
    }
}
