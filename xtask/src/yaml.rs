//! A small ordered YAML tree and its emitter.
//!
//! Manifests are built as [`Yaml`] values whose maps keep insertion order, so the rendered
//! files read like hand-written ones (apiVersion, kind, metadata, spec) and are byte-stable.
//! The emitter writes block style the way `kubectl` does (sequence items at their key's
//! indentation), multi-line strings as literal blocks, and quotes every string a YAML 1.1
//! or 1.2 reader could take for something else (numbers, booleans, null, indicators).
//! A user's configuration file is read into the same tree (through serde-saphyr), keeping
//! its key order.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A YAML value whose maps keep their keys in insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Yaml>),
    /// A map with string keys, in order.
    Map(Vec<(String, Yaml)>),
}

impl From<&str> for Yaml {
    fn from(s: &str) -> Self {
        Yaml::Str(s.to_string())
    }
}

impl From<String> for Yaml {
    fn from(s: String) -> Self {
        Yaml::Str(s)
    }
}

impl From<&String> for Yaml {
    fn from(s: &String) -> Self {
        Yaml::Str(s.clone())
    }
}

impl From<i64> for Yaml {
    fn from(n: i64) -> Self {
        Yaml::Int(n)
    }
}

impl From<u32> for Yaml {
    fn from(n: u32) -> Self {
        Yaml::Int(i64::from(n))
    }
}

impl From<bool> for Yaml {
    fn from(b: bool) -> Self {
        Yaml::Bool(b)
    }
}

impl Yaml {
    /// A map from `(key, value)` pairs, in the order given.
    pub fn map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Yaml)>) -> Yaml {
        Yaml::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A sequence of the given items.
    pub fn seq<T: Into<Yaml>>(items: impl IntoIterator<Item = T>) -> Yaml {
        Yaml::Seq(items.into_iter().map(Into::into).collect())
    }

    /// The value under `key`, when this is a map holding it.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value under `key`, mutably, when this is a map holding it.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Follows a path of map keys.
    pub fn at(&self, path: &[&str]) -> Option<&Yaml> {
        path.iter().try_fold(self, |v, k| v.get(k))
    }

    /// Sets `key` to `value` when this map lacks it (or holds null there); a present value
    /// wins. Returns the value now under `key`, or None when this is not a map.
    pub fn set_default(&mut self, key: &str, value: Yaml) -> Option<&mut Yaml> {
        let Yaml::Map(entries) = self else {
            return None;
        };
        let index = match entries.iter().position(|(k, _)| k == key) {
            Some(i) => {
                if entries[i].1 == Yaml::Null {
                    entries[i].1 = value;
                }
                i
            }
            None => {
                entries.push((key.to_string(), value));
                entries.len() - 1
            }
        };
        Some(&mut entries[index].1)
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items, when this is a sequence.
    pub fn as_seq(&self) -> Option<&[Yaml]> {
        match self {
            Yaml::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// The boolean, when this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Yaml::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Yaml::Null => "null",
            Yaml::Bool(_) => "a boolean",
            Yaml::Int(_) | Yaml::Float(_) => "a number",
            Yaml::Str(_) => "a string",
            Yaml::Seq(_) => "a list",
            Yaml::Map(_) => "a map",
        }
    }

    /// This value as one YAML document (no `---` marker), ending in a newline.
    pub fn to_document(&self) -> String {
        let mut out = String::new();
        match self {
            Yaml::Map(m) if !m.is_empty() => emit_map(&mut out, m, 0),
            Yaml::Seq(s) if !s.is_empty() => emit_seq(&mut out, s, 0),
            Yaml::Str(s) if is_block(s) => {
                out.push('|');
                emit_block_body(&mut out, s, 0);
            }
            other => {
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
        out
    }
}

/// Several documents separated by `---` lines.
pub fn documents(docs: &[Yaml]) -> String {
    docs.iter()
        .map(Yaml::to_document)
        .collect::<Vec<_>>()
        .join("---\n")
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn emit_map(out: &mut String, entries: &[(String, Yaml)], indent: usize) {
    for (key, value) in entries {
        pad(out, indent);
        out.push_str(&scalar(key));
        out.push(':');
        match value {
            Yaml::Map(m) if !m.is_empty() => {
                out.push('\n');
                emit_map(out, m, indent + 2);
            }
            // kubectl's style: a list's dashes line up with its key.
            Yaml::Seq(s) if !s.is_empty() => {
                out.push('\n');
                emit_seq(out, s, indent);
            }
            Yaml::Str(s) if is_block(s) => {
                out.push_str(" |");
                emit_block_body(out, s, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn emit_seq(out: &mut String, items: &[Yaml], indent: usize) {
    for item in items {
        pad(out, indent);
        out.push('-');
        match item {
            Yaml::Map(m) if !m.is_empty() => {
                // The map's first key goes on the dash line: render the map two columns in
                // and put "- " in place of the first line's indentation.
                let mut sub = String::new();
                emit_map(&mut sub, m, indent + 2);
                out.push(' ');
                out.push_str(&sub[indent + 2..]);
            }
            Yaml::Seq(s) if !s.is_empty() => {
                out.push('\n');
                emit_seq(out, s, indent + 2);
            }
            Yaml::Str(s) if is_block(s) => {
                out.push_str(" |");
                emit_block_body(out, s, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

/// Whether a string is written as a literal block: it has several lines, and nothing a
/// literal block cannot hold as-is (leading spaces or blank lines at the start would need
/// an indentation indicator; several trailing newlines a keep indicator).
fn is_block(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && !s.ends_with("\n\n")
        && s.chars()
            .all(|c| c == '\n' || c == '\t' || !needs_escape(c))
}

/// Writes the chomping indicator and the lines of a literal block.
fn emit_block_body(out: &mut String, s: &str, indent: usize) {
    let body = match s.strip_suffix('\n') {
        Some(body) => {
            out.push('\n');
            body
        }
        None => {
            out.push_str("-\n");
            s
        }
    };
    for line in body.split('\n') {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// A value on the same line as its key or dash.
fn inline(value: &Yaml) -> String {
    match value {
        Yaml::Null => "null".to_string(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Int(n) => n.to_string(),
        Yaml::Float(f) if f.is_nan() => ".nan".to_string(),
        Yaml::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.to_string(),
        // Debug keeps a decimal point (`1.0`), so the value reads back as a float.
        Yaml::Float(f) => format!("{f:?}"),
        Yaml::Str(s) => scalar(s),
        Yaml::Seq(_) => "[]".to_string(),
        Yaml::Map(_) => "{}".to_string(),
    }
}

/// A string as a plain scalar when that reads back as the same string, double-quoted
/// otherwise.
pub fn scalar(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// Characters allowed in an unquoted string. Deliberately narrow: anything else is quoted.
fn plain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || " -_./:@+=,()<>%$~*&!?'\"".contains(c)
}

fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if "?:,[]{}#&*!|>'\"%@` ".contains(first) {
        return false;
    }
    // A dash starts a plain scalar only when it cannot be a list item or document marker.
    if first == '-' && (s.len() == 1 || s.starts_with("- ") || s.starts_with("---")) {
        return false;
    }
    if s.ends_with([' ', ':']) || s.contains(": ") || s.contains(" #") {
        return false;
    }
    if !s.chars().all(plain_char) {
        return false;
    }
    !is_reserved_word(s) && !looks_numeric(s)
}

/// Words YAML 1.1 or 1.2 readers turn into booleans, null or special floats.
fn is_reserved_word(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~", "<<", "=", ".inf",
        "-.inf", "+.inf", ".nan",
    ];
    let lower = s.to_ascii_lowercase();
    WORDS.contains(&lower.as_str())
}

/// Strings a reader may take for a number: an optional sign, then a digit or a dot, and
/// only characters that occur in YAML 1.1/1.2 numbers (digits, `_`, `:` sexagesimals, `.`,
/// exponents, `0x`/`0o`/`0b` prefixes and hex digits). `100m` and `12Gi` stay plain.
fn looks_numeric(s: &str) -> bool {
    let rest = s.strip_prefix(['+', '-']).unwrap_or(s);
    let Some(first) = rest.chars().next() else {
        return false;
    };
    (first.is_ascii_digit() || first == '.')
        && rest
            .chars()
            .all(|c| c.is_ascii_hexdigit() || "_:.+-xXoO".contains(c))
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// A double-quoted scalar; its escapes are a subset of both JSON's and YAML's.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(YamlVisitor)
    }
}

struct YamlVisitor;

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = Yaml;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Yaml, E> {
        Ok(Yaml::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Yaml, E> {
        Ok(Yaml::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Yaml, E> {
        Ok(i64::try_from(v).map_or(Yaml::Float(v as f64), Yaml::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Yaml, E> {
        Ok(Yaml::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Yaml, E> {
        Ok(Yaml::Str(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Yaml, E> {
        Ok(Yaml::Str(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Yaml, D::Error> {
        Yaml::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Yaml>()? {
            items.push(item);
        }
        Ok(Yaml::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        while let Some(key) = map.next_key::<Yaml>()? {
            let key = match key {
                Yaml::Str(s) => s,
                Yaml::Int(n) => n.to_string(),
                Yaml::Bool(b) => b.to_string(),
                other => {
                    return Err(de::Error::custom(format!(
                        "map keys must be strings, found {}",
                        other.kind()
                    )));
                }
            };
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = map.next_value::<Yaml>()?;
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }
}

/// Parses one YAML document into a [`Yaml`] tree, keeping key order.
pub fn parse(text: &str) -> Result<Yaml, String> {
    serde_saphyr::from_str::<Yaml>(text).map_err(|e| e.to_string())
}

/// Parses a stream of YAML documents.
pub fn parse_documents(text: &str) -> Result<Vec<Yaml>, String> {
    serde_saphyr::from_str_multiple::<Yaml, Vec<Yaml>>(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_scalar(input: &str, expect: &str) {
        assert_eq!(scalar(input), expect, "scalar for {input:?}");
        // Whatever we write must read back as the same string.
        let doc = Yaml::map([("k", Yaml::from(input))]).to_document();
        let back = parse(&doc).expect("emitted YAML parses");
        assert_eq!(
            back.get("k"),
            Some(&Yaml::from(input)),
            "round trip of {doc}"
        );
    }

    #[test]
    fn plain_strings_stay_plain() {
        check_scalar("kubesched", "kubesched");
        check_scalar("kubesched:0.1.0", "kubesched:0.1.0");
        check_scalar("100m", "100m");
        check_scalar("128Mi", "128Mi");
        check_scalar("/healthz", "/healthz");
        check_scalar("--config", "--config");
        check_scalar("app.kubernetes.io/name", "app.kubernetes.io/name");
        check_scalar(
            "gcr.io/distroless/cc-debian12:nonroot",
            "gcr.io/distroless/cc-debian12:nonroot",
        );
    }

    #[test]
    fn ambiguous_strings_are_quoted() {
        check_scalar("", "\"\"");
        check_scalar("10259", "\"10259\"");
        check_scalar("1.95", "\"1.95\"");
        check_scalar("0.1.0", "\"0.1.0\"");
        check_scalar("1e3", "\"1e3\"");
        check_scalar("0x1F", "\"0x1F\"");
        check_scalar("1:20", "\"1:20\"");
        check_scalar("-5", "\"-5\"");
        check_scalar("yes", "\"yes\"");
        check_scalar("Off", "\"Off\"");
        check_scalar("null", "\"null\"");
        check_scalar("~", "\"~\"");
        check_scalar("*", "\"*\"");
        check_scalar("-", "\"-\"");
        check_scalar("- a", "\"- a\"");
        check_scalar("---", "\"---\"");
        check_scalar("a: b", "\"a: b\"");
        check_scalar("a #b", "\"a #b\"");
        check_scalar("trailing ", "\"trailing \"");
        check_scalar("{x}", "\"{x}\"");
        check_scalar("tab\there", "\"tab\\there\"");
        check_scalar("say \"hi\"\\", "\"say \\\"hi\\\"\\\\\"");
        check_scalar("bell\u{7}", "\"bell\\u0007\"");
    }

    #[test]
    fn layout_follows_kubectl() {
        let doc = Yaml::map([
            ("apiVersion", Yaml::from("v1")),
            (
                "items",
                Yaml::seq([
                    Yaml::map([("name", Yaml::from("a")), ("port", Yaml::Int(1))]),
                    Yaml::from("plain"),
                ]),
            ),
            ("empty", Yaml::Map(vec![])),
            ("none", Yaml::Seq(vec![])),
            ("ratio", Yaml::Float(1.0)),
            ("nested", Yaml::map([("on", Yaml::Bool(true))])),
            ("text", Yaml::from("line one\n\n  indented\n")),
            ("unterminated", Yaml::from("a\nb")),
        ]);
        let text = doc.to_document();
        assert_eq!(
            text,
            "apiVersion: v1\n\
             items:\n\
             - name: a\n  port: 1\n\
             - plain\n\
             empty: {}\n\
             none: []\n\
             ratio: 1.0\n\
             nested:\n  \"on\": true\n\
             text: |\n  line one\n\n    indented\n\
             unterminated: |-\n  a\n  b\n"
        );
        assert_eq!(parse(&text).expect("parses"), doc);
    }

    #[test]
    fn awkward_multiline_strings_are_quoted() {
        for s in [
            " leading\nspace",
            "\nblank first",
            "two trailing\n\n",
            "cr\r\nlf",
        ] {
            let doc = Yaml::map([("k", Yaml::from(s))]).to_document();
            assert!(doc.starts_with("k: \""), "{s:?} gave {doc}");
            assert_eq!(parse(&doc).expect("parses").get("k"), Some(&Yaml::from(s)));
        }
    }

    #[test]
    fn parsing_keeps_key_order_and_refuses_duplicates() {
        let v = parse("z: 1\na: [x, 2, true, null, 1.5]\nm: {b: 1, a: 2}\n").expect("parses");
        let Yaml::Map(entries) = &v else {
            panic!("a map, got {v:?}")
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["z", "a", "m"]);
        assert_eq!(
            v.get("a"),
            Some(&Yaml::Seq(vec![
                Yaml::from("x"),
                Yaml::Int(2),
                Yaml::Bool(true),
                Yaml::Null,
                Yaml::Float(1.5)
            ]))
        );
        let err = parse("a: 1\na: 2\n").expect_err("duplicate keys are refused");
        assert!(err.contains("duplicate"), "{err}");
    }

    #[test]
    fn set_default_keeps_present_values() {
        let mut m = Yaml::map([("a", Yaml::Int(1)), ("b", Yaml::Null)]);
        m.set_default("a", Yaml::Int(2));
        m.set_default("b", Yaml::Int(3));
        m.set_default("c", Yaml::Int(4));
        assert_eq!(
            m,
            Yaml::map([
                ("a", Yaml::Int(1)),
                ("b", Yaml::Int(3)),
                ("c", Yaml::Int(4))
            ])
        );
        assert_eq!(Yaml::Int(1).set_default("a", Yaml::Null), None);
    }

    #[test]
    fn several_documents() {
        let text = documents(&[
            Yaml::map([("a", Yaml::Int(1))]),
            Yaml::map([("b", Yaml::Int(2))]),
        ]);
        assert_eq!(text, "a: 1\n---\nb: 2\n");
        assert_eq!(parse_documents(&text).expect("parses").len(), 2);
    }
}
