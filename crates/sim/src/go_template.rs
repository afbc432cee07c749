//! The part of Go's text/template that upstream scheduler_perf's object templates use:
//! `{{.Name}}` (a value of the environment: `Index`, `Count` and the op's
//! `templateParams`), number and string literals, parenthesised calls and scheduler_perf's
//! arithmetic functions (`AddInt`, `SubtractInt`, `MultiplyInt`, `DivideInt`, `Mod` and
//! their `Float` twins), with `{{-` / `-}}` trimming. Anything else (`if`, `range`, pipes,
//! variables…) is refused with its name, so a template kubesched cannot expand is reported,
//! never half-rendered.

use serde_json::{Map, Value};

/// A parsed template.
#[derive(Debug, Clone)]
pub struct GoTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Action(Expr),
}

#[derive(Debug, Clone)]
enum Expr {
    Field(String),
    Number(f64, bool),
    Text(String),
    Call(String, Vec<Expr>),
}

/// A value while evaluating: Go's templates print integers without a fraction.
#[derive(Debug, Clone)]
enum Val {
    Int(i64),
    Float(f64),
    Text(String),
    Json(Value),
}

impl Val {
    fn number(&self) -> Result<f64, String> {
        match self {
            Val::Int(i) => Ok(*i as f64),
            Val::Float(f) => Ok(*f),
            Val::Text(s) => s
                .trim()
                .parse()
                .map_err(|_| format!("cannot use {s:?} as a number")),
            Val::Json(Value::Number(n)) => n
                .as_f64()
                .ok_or_else(|| format!("cannot use {n} as a number")),
            Val::Json(Value::String(s)) => Val::Text(s.clone()).number(),
            Val::Json(v) => Err(format!("cannot use {v} as a number")),
        }
    }

    fn print(&self) -> String {
        match self {
            Val::Int(i) => i.to_string(),
            Val::Float(f) => format_float(*f),
            Val::Text(s) => s.clone(),
            Val::Json(Value::String(s)) => s.clone(),
            Val::Json(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) => format_float(f),
                _ => n.to_string(),
            },
            Val::Json(v) => v.to_string(),
        }
    }
}

/// Go prints a float64 in the shortest form that reads back the same (`3`, `2.5`).
fn format_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

impl GoTemplate {
    /// Parses a template's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut trim_next = false;
        while let Some(open) = rest.find("{{") {
            let mut before = &rest[..open];
            if trim_next {
                before = before.trim_start();
            }
            let after_open = &rest[open + 2..];
            let (trim_left, body_start) = match after_open.strip_prefix("- ") {
                Some(b) => (true, b),
                None => (false, after_open),
            };
            if trim_left {
                before = before.trim_end();
            }
            if !before.is_empty() {
                parts.push(Part::Text(before.to_string()));
            }
            let close = body_start
                .find("}}")
                .ok_or_else(|| "an action is not closed with }}".to_string())?;
            let mut body = &body_start[..close];
            trim_next = false;
            if let Some(b) = body.strip_suffix(" -") {
                body = b;
                trim_next = true;
            }
            parts.push(Part::Action(parse_action(body.trim())?));
            rest = &body_start[close + 2..];
        }
        let tail = if trim_next { rest.trim_start() } else { rest };
        if !tail.is_empty() {
            parts.push(Part::Text(tail.to_string()));
        }
        Ok(Self { parts })
    }

    /// Whether the text reads the named value anywhere (e.g. `Index`: the object depends
    /// on its position).
    pub fn reads(&self, name: &str) -> bool {
        fn reads(e: &Expr, name: &str) -> bool {
            match e {
                Expr::Field(f) => f == name,
                Expr::Call(_, args) => args.iter().any(|a| reads(a, name)),
                Expr::Number(..) | Expr::Text(_) => false,
            }
        }
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Action(e) if reads(e, name)))
    }

    /// Renders the template with `env` as its data.
    pub fn render(&self, env: &Map<String, Value>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Action(e) => out.push_str(&eval(e, env)?.print()),
            }
        }
        Ok(out)
    }
}

fn parse_action(body: &str) -> Result<Expr, String> {
    if body.starts_with("/*") {
        return Err("comments in actions are not supported by kubesched".into());
    }
    let tokens = tokenize(body)?;
    let mut pos = 0;
    let expr = parse_command(&tokens, &mut pos)?;
    if pos != tokens.len() {
        return Err(format!("unexpected {:?} in {{{{{body}}}}}", tokens[pos]));
    }
    Ok(expr)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Text(String),
    Open,
    Close,
}

fn tokenize(body: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            '"' => {
                let mut s = String::new();
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, 'n')) => s.push('\n'),
                            Some((_, 't')) => s.push('\t'),
                            Some((_, other)) => s.push(other),
                            None => break,
                        },
                        other => s.push(other),
                    }
                }
                if !closed {
                    return Err(format!("unterminated string in {{{{{body}}}}}"));
                }
                tokens.push(Token::Text(s));
            }
            '|' => return Err("pipelines (|) are not supported by kubesched".into()),
            '$' => return Err("template variables ($) are not supported by kubesched".into()),
            _ => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == '"' || c == '|' {
                        break;
                    }
                    end = j + c.len_utf8();
                    chars.next();
                }
                tokens.push(Token::Word(body[i..end].to_string()));
            }
        }
    }
    Ok(tokens)
}

const KEYWORDS: [&str; 9] = [
    "if", "else", "end", "range", "with", "define", "template", "block", "break",
];

fn parse_operand(tokens: &[Token], pos: &mut usize) -> Result<Expr, String> {
    let token = tokens
        .get(*pos)
        .ok_or_else(|| "an action ends too early".to_string())?
        .clone();
    *pos += 1;
    match token {
        Token::Open => {
            let e = parse_command(tokens, pos)?;
            if tokens.get(*pos) != Some(&Token::Close) {
                return Err("a parenthesis is not closed".into());
            }
            *pos += 1;
            Ok(e)
        }
        Token::Close => Err("unexpected )".into()),
        Token::Text(s) => Ok(Expr::Text(s)),
        Token::Word(w) => {
            if let Some(field) = w.strip_prefix('.') {
                if field.is_empty() || field.contains('.') {
                    return Err(format!("the field {w} is not supported by kubesched"));
                }
                return Ok(Expr::Field(field.to_string()));
            }
            if let Ok(i) = w.parse::<i64>() {
                return Ok(Expr::Number(i as f64, true));
            }
            if let Ok(f) = w.parse::<f64>() {
                return Ok(Expr::Number(f, false));
            }
            if KEYWORDS.contains(&w.as_str()) {
                return Err(format!("{{{{{w}}}}} is not supported by kubesched"));
            }
            // A function called without arguments.
            Ok(Expr::Call(w, Vec::new()))
        }
    }
}

/// A command: a function with its arguments, or one operand.
fn parse_command(tokens: &[Token], pos: &mut usize) -> Result<Expr, String> {
    let first = parse_operand(tokens, pos)?;
    let Expr::Call(name, _) = first else {
        return Ok(first);
    };
    let mut args = Vec::new();
    while let Some(t) = tokens.get(*pos) {
        if *t == Token::Close {
            break;
        }
        args.push(parse_operand(tokens, pos)?);
    }
    Ok(Expr::Call(name, args))
}

fn eval(e: &Expr, env: &Map<String, Value>) -> Result<Val, String> {
    match e {
        Expr::Field(f) => env
            .get(f)
            .map(|v| Val::Json(v.clone()))
            .ok_or_else(|| format!("the template reads .{f}, which is not set")),
        Expr::Number(n, true) => Ok(Val::Int(*n as i64)),
        Expr::Number(n, false) => Ok(Val::Float(*n)),
        Expr::Text(s) => Ok(Val::Text(s.clone())),
        Expr::Call(name, args) => {
            let values = args
                .iter()
                .map(|a| eval(a, env)?.number())
                .collect::<Result<Vec<f64>, String>>()?;
            call(name, &values)
        }
    }
}

/// scheduler_perf's template functions: integers are the float result truncated, as there.
fn call(name: &str, args: &[f64]) -> Result<Val, String> {
    let two = || -> Result<(f64, f64), String> {
        match args {
            [a, b] => Ok((*a, *b)),
            _ => Err(format!("{name} takes two arguments, got {}", args.len())),
        }
    };
    let divide = |(a, b): (f64, f64)| {
        if b == 0.0 {
            Err(format!("{name}: division by zero"))
        } else {
            Ok(a / b)
        }
    };
    Ok(match name {
        "AddInt" => Val::Int(args.iter().sum::<f64>() as i64),
        "AddFloat" => Val::Float(args.iter().sum()),
        "MultiplyInt" => Val::Int(args.iter().product::<f64>() as i64),
        "MultiplyFloat" => Val::Float(args.iter().product()),
        "SubtractInt" => two().map(|(a, b)| Val::Int((a - b) as i64))?,
        "SubtractFloat" => two().map(|(a, b)| Val::Float(a - b))?,
        "DivideInt" => Val::Int(divide(two()?)? as i64),
        "DivideFloat" => Val::Float(divide(two()?)?),
        "Mod" => {
            let (a, b) = two()?;
            let (a, b) = (a as i64, b as i64);
            if b == 0 {
                return Err("Mod: division by zero".into());
            }
            Val::Int(a % b)
        }
        other => {
            return Err(format!(
                "the function {other} is not supported by kubesched"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn fields_functions_and_literals_render_as_go_prints_them() {
        let t = GoTemplate::parse(
            "name: gang-{{DivideInt .Index .podsPerGroup}}\nmin: {{.podsPerGroup}}\nz: {{ Mod .Index 3 }}\nf: {{DivideFloat .Index 4}}\nn: {{AddInt 1 (MultiplyInt .Index 2)}}\n",
        )
        .expect("parses");
        assert!(t.reads("Index"));
        assert!(!t.reads("Count"));
        let out = t
            .render(&env(json!({"Index": 7, "podsPerGroup": 3.0})))
            .expect("renders");
        assert_eq!(out, "name: gang-2\nmin: 3\nz: 1\nf: 1.75\nn: 15\n");
    }

    #[test]
    fn trimming_markers_eat_the_white_space_beside_them() {
        let t = GoTemplate::parse("a   {{- .X -}}   b").expect("parses");
        assert_eq!(t.render(&env(json!({"X": "x"}))).expect("renders"), "axb");
    }

    #[test]
    fn what_kubesched_cannot_expand_is_named() {
        for (text, why) in [
            ("{{if .X}}y{{end}}", "{{if}} is not supported"),
            ("{{.X | printf}}", "pipelines"),
            ("{{$x := 1}}", "variables"),
            ("{{Sqrt .X}}", "the function Sqrt"),
            ("{{.X", "not closed"),
        ] {
            let err = GoTemplate::parse(text)
                .and_then(|t| t.render(&env(json!({"X": 1}))))
                .expect_err(text);
            assert!(err.contains(why), "{text}: {err}");
        }
        let t = GoTemplate::parse("{{.Missing}}").expect("parses");
        assert_eq!(
            t.render(&Map::new()).expect_err("unset"),
            "the template reads .Missing, which is not set"
        );
        let t = GoTemplate::parse("{{DivideInt 1 0}}").expect("parses");
        assert!(t.render(&Map::new()).is_err());
    }
}
