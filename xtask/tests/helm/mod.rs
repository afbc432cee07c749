//! A small stand-in for `helm template`, for tests: no `helm` binary can be installed here,
//! so the chart's templates are executed by gtmpl (Go's text/template language in Rust)
//! with the Helm and sprig functions the kubesched chart uses, implemented below as Helm
//! defines them: `include`, `toYaml`, `nindent`, `indent`, `quote`, `default`, `int`,
//! `replace`, `trunc`, `trimSuffix`, `sha256sum`, `fail` (and Go's own `printf`, `and`,
//! `not`, `gt`, `eq`, ...). A chart that uses anything else fails to render here, which
//! keeps the chart to this subset.
//!
//! Like Helm: values are the chart's values.yaml with the overrides merged in (maps merge
//! key by key, anything else is replaced), the data is `.Values`, `.Release` and `.Chart`,
//! every `templates/*` file but the `_` helpers and NOTES.txt is a stream of manifests,
//! documents that render empty are dropped, and `crds/` is installed as it is. Stricter than
//! Helm: a missing value (`<no value>` in Go's output, which Helm blanks) is an error.

use std::cell::RefCell;
use std::collections::HashMap;

use gtmpl::{Context, FuncError, Template, Value};
use sha2::{Digest, Sha256};
use xtask::yaml::{self, Yaml};

/// A release: the rendered manifests and notes.
#[derive(Debug)]
pub struct Release {
    /// Every object, CRDs first, then the templates' in file name order.
    pub objects: Vec<Yaml>,
    /// NOTES.txt, rendered.
    pub notes: String,
}

thread_local! {
    /// The chart's helper templates, for `include`: gtmpl's functions are plain function
    /// pointers and cannot carry the template set themselves.
    static HELPERS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// Renders the chart whose files are `files` (paths relative to the chart's folder) as
/// `helm template NAME CHART -n NAMESPACE -f OVERRIDES` would.
pub fn template(
    files: &[(String, String)],
    release_name: &str,
    namespace: &str,
    overrides: &Yaml,
) -> Result<Release, String> {
    let file = |path: &str| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, text)| text.as_str())
            .ok_or_else(|| format!("the chart has no {path}"))
    };
    let chart = yaml::parse(file("Chart.yaml")?).map_err(|e| format!("Chart.yaml: {e}"))?;
    let mut values = yaml::parse(file("values.yaml")?).map_err(|e| format!("values.yaml: {e}"))?;
    merge(&mut values, overrides);
    let chart_field = |key: &str| chart.get(key).cloned().unwrap_or(Yaml::Null);
    let data = Yaml::map([
        ("Values", values),
        (
            "Release",
            Yaml::map([
                ("Name", Yaml::from(release_name)),
                ("Namespace", Yaml::from(namespace)),
                ("Service", Yaml::from("Helm")),
            ]),
        ),
        (
            "Chart",
            Yaml::map([
                ("Name", chart_field("name")),
                ("Version", chart_field("version")),
                ("AppVersion", chart_field("appVersion")),
            ]),
        ),
    ]);
    let data = to_value(&data);

    let mut templates: Vec<&(String, String)> = files
        .iter()
        .filter(|(p, _)| p.starts_with("templates/"))
        .collect();
    templates.sort_by(|a, b| a.0.cmp(&b.0));
    let helpers: Vec<(String, String)> = templates
        .iter()
        .filter(|(p, _)| p.rsplit('/').next().is_some_and(|n| n.starts_with('_')))
        .map(|(p, t)| (p.clone(), t.clone()))
        .collect();
    HELPERS.with(|h| *h.borrow_mut() = helpers);

    let mut objects = Vec::new();
    let mut crds: Vec<&(String, String)> = files
        .iter()
        .filter(|(p, _)| p.starts_with("crds/"))
        .collect();
    crds.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, text) in crds {
        objects.extend(yaml::parse_documents(text).map_err(|e| format!("{path}: {e}"))?);
    }
    let mut notes = String::new();
    for (path, text) in templates {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with('_') {
            continue;
        }
        let out = execute(path, text, &data)?;
        if name == "NOTES.txt" {
            notes = out;
            continue;
        }
        let docs = yaml::parse_documents(&out)
            .map_err(|e| format!("{path} renders YAML that does not parse: {e}\n{out}"))?;
        objects.extend(docs.into_iter().filter(|d| *d != Yaml::Null));
    }
    Ok(Release { objects, notes })
}

/// A template set with the helpers and the functions, ready to parse `text` into.
fn template_set() -> Result<Template, String> {
    let mut t = Template::default();
    t.add_funcs(&[
        ("include", include as gtmpl::Func),
        ("toYaml", to_yaml),
        ("nindent", nindent),
        ("indent", indent),
        ("quote", quote),
        ("default", default),
        ("int", int),
        ("replace", replace),
        ("trunc", trunc),
        ("trimSuffix", trim_suffix),
        ("sha256sum", sha256sum),
        ("fail", fail),
    ]);
    let helpers = HELPERS.with(|h| h.borrow().clone());
    for (path, text) in helpers {
        t.add_template(path.clone(), text)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(t)
}

fn execute(path: &str, text: &str, data: &Value) -> Result<String, String> {
    let mut t = template_set()?;
    t.parse(text).map_err(|e| format!("{path}: {e}"))?;
    let out = t
        .render(&Context::from(data.clone()))
        .map_err(|e| format!("{path}: {e}"))?;
    if out.contains("<no value>") {
        return Err(format!("{path} refers to a value that is not set:\n{out}"));
    }
    Ok(out)
}

/// Helm's value coalescing: maps merge key by key, anything else replaces.
pub fn merge(base: &mut Yaml, over: &Yaml) {
    match (base, over) {
        (Yaml::Map(base), Yaml::Map(over)) => {
            for (key, value) in over {
                match base.iter_mut().find(|(k, _)| k == key) {
                    Some((_, existing)) => merge(existing, value),
                    None => base.push((key.clone(), value.clone())),
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

fn to_value(v: &Yaml) -> Value {
    match v {
        Yaml::Null => Value::Nil,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(n) => Value::from(*n),
        Yaml::Float(f) => Value::from(*f),
        Yaml::Str(s) => Value::from(s.as_str()),
        Yaml::Seq(items) => Value::Array(items.iter().map(to_value).collect()),
        Yaml::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_value(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// Back to YAML, map keys sorted (Helm's toYaml sorts them too).
fn to_yaml_tree(v: &Value) -> Yaml {
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => Yaml::Null,
        Value::Bool(b) => Yaml::Bool(*b),
        Value::String(s) => Yaml::from(s.as_str()),
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| Yaml::Float(n.as_f64().unwrap_or_default()), Yaml::Int),
        Value::Array(items) => Yaml::Seq(items.iter().map(to_yaml_tree).collect()),
        Value::Map(m) | Value::Object(m) => {
            let mut entries: Vec<(String, Yaml)> = m
                .iter()
                .map(|(k, v)| (k.clone(), to_yaml_tree(v)))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Yaml::Map(entries)
        }
    }
}

fn error(message: String) -> FuncError {
    FuncError::Generic(message)
}

/// The text of a value as Go prints it.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

/// Helm's emptiness (sprig's `empty`): nil, false, 0, "" and empty lists and maps.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Map(m) | Value::Object(m) => m.is_empty(),
        Value::Function(_) => false,
    }
}

fn count(name: &str, args: &[Value], n: usize) -> Result<(), FuncError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(FuncError::ExactlyXArgs(name.to_string(), n))
    }
}

fn number(name: &str, v: &Value) -> Result<usize, FuncError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| error(format!("{name}: {n:?} is not a count"))),
        other => Err(error(format!("{name}: {other} is not a number"))),
    }
}

/// `include NAME DATA`: the named template's output, as a string to pipe on.
fn include(args: &[Value]) -> Result<Value, FuncError> {
    count("include", args, 2)?;
    let Value::String(name) = &args[0] else {
        return Err(error("include: the template name must be a string".into()));
    };
    let mut t = template_set().map_err(error)?;
    t.parse(format!("{{{{ template {name:?} . }}}}"))
        .map_err(|e| error(format!("include {name}: {e}")))?;
    t.render(&Context::from(args[1].clone()))
        .map(Value::from)
        .map_err(|e| error(format!("include {name}: {e}")))
}

/// `toYaml V`: block YAML without the final newline.
fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    count("toYaml", args, 1)?;
    let doc = to_yaml_tree(&args[0]).to_document();
    Ok(Value::from(doc.trim_end_matches('\n')))
}

/// `indent N S`: every line of S after N spaces (sprig pads after every newline).
fn indent(args: &[Value]) -> Result<Value, FuncError> {
    count("indent", args, 2)?;
    let pad = " ".repeat(number("indent", &args[0])?);
    Ok(Value::from(format!(
        "{pad}{}",
        text(&args[1]).replace('\n', &format!("\n{pad}"))
    )))
}

/// `nindent N S`: a newline, then `indent N S`.
fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    let indented = indent(args)?;
    Ok(Value::from(format!("\n{}", text(&indented))))
}

/// `quote V...`: each non-nil value as a double-quoted string (Go's %q), space-separated.
fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| serde_json::to_string(&text(v)).unwrap_or_default())
        .collect();
    Ok(Value::from(quoted.join(" ")))
}

/// `default D V`: V unless it is empty, else D.
fn default(args: &[Value]) -> Result<Value, FuncError> {
    match args {
        [d] => Ok(d.clone()),
        [d, v] => Ok(if is_empty(v) { d.clone() } else { v.clone() }),
        _ => Err(FuncError::AtLeastXArgs("default".into(), 1)),
    }
}

/// `int V`: V as a whole number (0 when it is none).
fn int(args: &[Value]) -> Result<Value, FuncError> {
    count("int", args, 1)?;
    let n: i64 = match &args[0] {
        Value::Number(n) => n
            .as_i64()
            // Helm's values are float64: `int` truncates them.
            .or_else(|| n.as_f64().map(|f| f.trunc() as i64))
            .unwrap_or_default(),
        Value::String(s) => s.trim().parse().unwrap_or_default(),
        Value::Bool(b) => i64::from(*b),
        _ => 0,
    };
    Ok(Value::from(n))
}

/// `replace OLD NEW S`.
fn replace(args: &[Value]) -> Result<Value, FuncError> {
    count("replace", args, 3)?;
    Ok(Value::from(
        text(&args[2]).replace(&text(&args[0]), &text(&args[1])),
    ))
}

/// `trunc N S`: the first N characters.
fn trunc(args: &[Value]) -> Result<Value, FuncError> {
    count("trunc", args, 2)?;
    let n = number("trunc", &args[0])?;
    Ok(Value::from(
        text(&args[1]).chars().take(n).collect::<String>(),
    ))
}

/// `trimSuffix SUFFIX S`: S without one trailing SUFFIX.
fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    count("trimSuffix", args, 2)?;
    let s = text(&args[1]);
    let suffix = text(&args[0]);
    Ok(Value::from(
        s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string(),
    ))
}

/// `sha256sum S`: the hex SHA-256 of S.
fn sha256sum(args: &[Value]) -> Result<Value, FuncError> {
    count("sha256sum", args, 1)?;
    Ok(Value::from(sha256_hex(&text(&args[0]))))
}

/// The hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `fail MESSAGE`: rendering stops with MESSAGE.
fn fail(args: &[Value]) -> Result<Value, FuncError> {
    Err(error(format!(
        "fail: {}",
        args.first().map(text).unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, data: Yaml) -> Result<String, String> {
        HELPERS.with(|h| {
            *h.borrow_mut() = vec![(
                "templates/_h.tpl".to_string(),
                "{{- define \"h.pair\" -}}\na: {{ .a }}\nb: 2\n{{- end }}".to_string(),
            )]
        });
        execute("t", text, &to_value(&data))
    }

    #[test]
    fn functions_behave_as_helms() {
        let data = Yaml::map([
            ("a", Yaml::from("x")),
            ("empty", Yaml::from("")),
            ("n", Yaml::Float(2.0)),
            (
                "m",
                Yaml::map([("z", Yaml::Int(1)), ("a", Yaml::seq(["p", "q"]))]),
            ),
        ]);
        for (template, want) in [
            (
                "k:{{ include \"h.pair\" . | nindent 2 }}",
                "k:\n  a: x\n  b: 2",
            ),
            ("{{ include \"h.pair\" . | indent 1 }}", " a: x\n b: 2"),
            ("{{ toYaml .m }}", "a:\n- p\n- q\nz: 1"),
            ("{{ .a | quote }}", "\"x\""),
            (
                "{{ .empty | default \"d\" }}|{{ .a | default \"d\" }}",
                "d|x",
            ),
            ("{{ int .n }}|{{ if gt (int .n) 1 }}more{{ end }}", "2|more"),
            (
                "{{ printf \"%s.b-metrics-\" .a | replace \".\" \"-\" | trunc 9 | trimSuffix \"-\" }}",
                "x-b-metri",
            ),
            (
                "{{ \"abc\" | sha256sum }}",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
        ] {
            assert_eq!(
                run(template, data.clone()).as_deref(),
                Ok(want),
                "{template}"
            );
        }
        assert!(run("{{ fail \"no\" }}", data.clone()).is_err_and(|e| e.contains("no")));
        assert!(run("{{ .missing }}", data.clone()).is_err_and(|e| e.contains("not set")));
        assert!(
            run("{{ lower .a }}", data).is_err(),
            "functions outside the subset fail"
        );
    }

    #[test]
    fn overrides_merge_into_maps() {
        let mut base = yaml::parse("a: {b: 1, c: [1]}\nd: x\n").expect("yaml");
        merge(
            &mut base,
            &yaml::parse("a: {c: [2], e: 3}\n").expect("yaml"),
        );
        assert_eq!(
            base,
            yaml::parse("a: {b: 1, c: [2], e: 3}\nd: x\n").expect("yaml")
        );
    }
}
