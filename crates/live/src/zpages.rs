//! kube-scheduler's z-pages on the secure port: `/statusz` (ComponentStatusz) and
//! `/flagz` (ComponentFlagz), both beta and on since v1.36, behind the same authentication
//! and authorization as `/metrics` (upstream grants them to `system:monitoring`).
//!
//! As upstream's zpages: without an `Accept` header (or with `text/plain`, `text/*`,
//! `*/*`) a page for people, its delimiter drawn at random from `:`, `: `, `=` and a space
//! so that nobody parses it; with `application/json` or `application/yaml` carrying
//! `g=config.k8s.io`, `v=v1beta1` (or the deprecated `v1alpha1`, which adds a `Warning`
//! header) and `as=Statusz` / `as=Flagz`, the versioned object; anything else is refused
//! with 406 and the media types that would be accepted. Media ranges are tried in the
//! order given, so a bad structured range followed by `*/*` gets the text page.
//!
//! CBOR (`application/cbor`): v1.37's zpages add a CBOR serializer only with the
//! apiserver gate CBORServingAndStorage (alpha and off since v1.32), so by default
//! upstream skips such a range as this server does. kubesched has no such gate (it is
//! not among the scheduler's gates it knows), so it never serves CBOR.

use std::collections::BTreeMap;
use std::time::SystemTime;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The component name both pages carry, as upstream's scheduler names itself.
pub const COMPONENT: &str = "kube-scheduler";

const GROUP: &str = "config.k8s.io";
const HEADER_WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.";
const DEPRECATED_WARNING: &str =
    r#"299 - "This version of the statusz endpoint is deprecated. Please use a newer version.""#;
const DEPRECATED_FLAGZ_WARNING: &str =
    r#"299 - "This version of the flagz endpoint is deprecated. Please use a newer version.""#;
const DELIMITERS: [&str; 4] = [":", ": ", "=", " "];

/// What the two pages report, fixed when the server starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZPages {
    /// When the process started.
    pub started: SystemTime,
    /// The binary's version, as `/statusz` reports it.
    pub binary_version: String,
    /// The emulated Kubernetes version (`--emulated-version`), `<major>.<minor>`.
    pub emulation_version: String,
    /// The debugging paths served beside the pages (`/statusz` lists their first segment).
    pub paths: Vec<String>,
    /// Whether `/statusz` is served (ComponentStatusz).
    pub statusz: bool,
    /// The command line's flags and their values (`/flagz`); None: `/flagz` is off
    /// (ComponentFlagz).
    pub flags: Option<BTreeMap<String, String>>,
}

/// The binary version `/statusz` reports: the release kubesched reproduces, with
/// kubesched's own version as semver build metadata (which orders nothing), so a tool
/// comparing versions sees v1.37 and a person sees what actually runs.
pub fn binary_version() -> String {
    format!("1.37.0+kubesched.{}", env!("CARGO_PKG_VERSION"))
}

/// The pages' structured kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    Statusz,
    Flagz,
}

impl Page {
    fn kind(self) -> &'static str {
        match self {
            Self::Statusz => "Statusz",
            Self::Flagz => "Flagz",
        }
    }
}

/// How a request is to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Text,
    Structured { yaml: bool, version: &'static str },
}

/// The versions served, newest first; the others are deprecated.
const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];

/// Picks the answer for an `Accept` header, trying its media ranges in order.
fn negotiate(accept: Option<&str>, page: Page) -> Option<Answer> {
    let accept = accept.map(str::trim).unwrap_or_default();
    if accept.is_empty() {
        return Some(Answer::Text);
    }
    accept
        .split(',')
        .find_map(|range| media_range_answer(range, page))
}

fn media_range_answer(range: &str, page: Page) -> Option<Answer> {
    let mut parts = range.split(';').map(str::trim);
    let media = parts.next()?.to_ascii_lowercase();
    let params: BTreeMap<String, String> = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_ascii_lowercase(),
                v.trim().trim_matches('"').to_string(),
            )
        })
        .collect();
    match media.as_str() {
        "text/plain" | "text/*" | "*/*" => Some(Answer::Text),
        "application/json" | "application/yaml" => {
            let version = VERSIONS
                .into_iter()
                .find(|v| params.get("v").map(String::as_str) == Some(*v))?;
            let fits = params.get("g").map(String::as_str) == Some(GROUP)
                && params.get("as").map(String::as_str) == Some(page.kind());
            fits.then_some(Answer::Structured {
                yaml: media == "application/yaml",
                version,
            })
        }
        _ => None,
    }
}

/// The 406 answer: a `Status` naming what would have been accepted.
fn not_acceptable(page: Page) -> Response {
    let mut accepted: Vec<String> = Vec::new();
    for media in ["application/json", "application/yaml"] {
        for version in VERSIONS {
            accepted.push(format!("{media};g={GROUP};v={version};as={}", page.kind()));
        }
    }
    accepted.push("text/plain".into());
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("only the following media types are accepted: {}", accepted.join(", ")),
        "reason": "NotAcceptable",
        "code": 406,
    });
    (
        StatusCode::NOT_ACCEPTABLE,
        [(header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatuszObject<'a> {
    kind: &'static str,
    api_version: String,
    metadata: Metadata,
    start_time: String,
    uptime_seconds: u64,
    go_version: &'static str,
    binary_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    emulation_version: &'a str,
    paths: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlagzObject<'a> {
    kind: &'static str,
    api_version: String,
    metadata: Metadata,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    flags: &'a BTreeMap<String, String>,
}

impl ZPages {
    /// The first segments of the served paths, sorted and without duplicates, as
    /// upstream's registry lists them.
    fn listed_paths(&self) -> Vec<String> {
        let mut firsts: Vec<String> = self
            .paths
            .iter()
            .filter_map(|p| p.split('/').nth(1).filter(|s| !s.is_empty()))
            .map(|s| format!("/{s}"))
            .collect();
        firsts.sort();
        firsts.dedup();
        firsts
    }

    fn uptime_seconds(&self, now: SystemTime) -> u64 {
        now.duration_since(self.started)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// `/statusz`'s answer at `now`, with `delimiter` for the text page.
    fn statusz_answer(&self, accept: Option<&str>, now: SystemTime, delimiter: &str) -> Response {
        let Some(answer) = negotiate(accept, Page::Statusz) else {
            return not_acceptable(Page::Statusz);
        };
        let started = k8s_openapi::jiff::Timestamp::try_from(self.started).unwrap_or_default();
        match answer {
            Answer::Text => {
                let up = self.uptime_seconds(now);
                let mut text = format!(
                    "\n{COMPONENT} statusz\n{HEADER_WARNING}\n\nStarted{d} {}\nUp{d} {} hr {:02} min {:02} sec\nGo version{d} \nBinary version{d} {}\n",
                    started.strftime("%a %b %e %H:%M:%S UTC %Y"),
                    up / 3600,
                    (up / 60) % 60,
                    up % 60,
                    self.binary_version,
                    d = delimiter,
                );
                if !self.emulation_version.is_empty() {
                    text.push_str(&format!(
                        "Emulation version{delimiter} {}",
                        self.emulation_version
                    ));
                }
                text.push('\n');
                let paths = self.listed_paths();
                if !paths.is_empty() {
                    text.push_str(&format!("Paths{delimiter} {}", paths.join(" ")));
                }
                text.push('\n');
                text_response(text)
            }
            Answer::Structured { yaml, version } => {
                let object = StatuszObject {
                    kind: Page::Statusz.kind(),
                    api_version: format!("{GROUP}/{version}"),
                    metadata: Metadata { name: COMPONENT },
                    start_time: started.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    uptime_seconds: self.uptime_seconds(now),
                    go_version: "",
                    binary_version: &self.binary_version,
                    emulation_version: &self.emulation_version,
                    paths: self.listed_paths(),
                };
                structured_response(&object, yaml, version, DEPRECATED_WARNING)
            }
        }
    }

    /// `/flagz`'s answer, with `delimiter` for the text page (None when `/flagz` is off).
    fn flagz_answer(&self, accept: Option<&str>, delimiter: &str) -> Option<Response> {
        let flags = self.flags.as_ref()?;
        let Some(answer) = negotiate(accept, Page::Flagz) else {
            return Some(not_acceptable(Page::Flagz));
        };
        Some(match answer {
            Answer::Text => {
                let mut text = format!("\n{COMPONENT} flagz\n{HEADER_WARNING}\n");
                for (name, value) in flags {
                    text.push_str(&format!("{name}{delimiter}{value}\n"));
                }
                text_response(text)
            }
            Answer::Structured { yaml, version } => {
                let object = FlagzObject {
                    kind: Page::Flagz.kind(),
                    api_version: format!("{GROUP}/{version}"),
                    metadata: Metadata { name: COMPONENT },
                    flags,
                };
                structured_response(&object, yaml, version, DEPRECATED_FLAGZ_WARNING)
            }
        })
    }
}

fn random_delimiter() -> &'static str {
    DELIMITERS[fastrand::usize(..DELIMITERS.len())]
}

fn accept_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

fn text_response(text: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

fn structured_response<T: Serialize>(
    object: &T,
    yaml: bool,
    version: &str,
    deprecated_warning: &'static str,
) -> Response {
    let (body, content_type) = if yaml {
        match serde_saphyr::to_string(object) {
            Ok(text) => (text, "application/yaml"),
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    } else {
        match serde_json::to_string(object) {
            Ok(text) => (text, "application/json"),
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    };
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    if version != VERSIONS[0] {
        response.headers_mut().insert(
            header::WARNING,
            HeaderValue::from_static(deprecated_warning),
        );
    }
    response
}

/// `GET /statusz`.
pub fn statusz(pages: &ZPages, headers: &HeaderMap) -> Response {
    pages.statusz_answer(accept_of(headers), SystemTime::now(), random_delimiter())
}

/// `GET /flagz`; 404 when the page is off.
pub fn flagz(pages: &ZPages, headers: &HeaderMap) -> Response {
    pages
        .flagz_answer(accept_of(headers), random_delimiter())
        .unwrap_or_else(|| StatusCode::NOT_FOUND.into_response())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pages() -> ZPages {
        ZPages {
            started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_729_112_623),
            binary_version: "1.37.0+kubesched.0.1.0".into(),
            emulation_version: "1.37".into(),
            paths: [
                "/healthz",
                "/livez",
                "/readyz",
                "/metrics",
                "/metrics/slis",
                "/configz",
                "/flagz",
            ]
            .map(String::from)
            .to_vec(),
            statusz: true,
            flags: Some(
                [("leader-elect-resource-name", "kube-scheduler"), ("v", "2")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            ),
        }
    }

    async fn body(response: Response) -> (StatusCode, HeaderMap, String) {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        (
            status,
            headers,
            String::from_utf8(bytes.to_vec()).expect("utf-8"),
        )
    }

    #[test]
    fn accept_headers_are_negotiated_as_upstream_does() {
        use Answer::*;
        let structured = |yaml, version| Some(Structured { yaml, version });
        let cases: &[(Option<&str>, Option<Answer>)] = &[
            (None, Some(Text)),
            (Some(""), Some(Text)),
            (Some("text/plain"), Some(Text)),
            (Some("*/*"), Some(Text)),
            (Some("application/xml"), None),
            (Some("application/json"), None),
            (Some("application/json;v=v1beta1;g=config.k8s.io"), None),
            (
                Some("application/json;v=v1beta1;g=config.k8s.io;as=Statusz"),
                structured(false, "v1beta1"),
            ),
            (
                Some("application/yaml;v=v1beta1;g=config.k8s.io;as=Statusz"),
                structured(true, "v1beta1"),
            ),
            (
                Some("application/json;v=foo;g=config.k8s.io;as=Statusz,*/*"),
                Some(Text),
            ),
            (
                Some(
                    "application/json;g=config.k8s.io;v=v1alpha1;as=Statusz,application/json;g=config.k8s.io;v=v1beta1;as=Statusz",
                ),
                structured(false, "v1alpha1"),
            ),
            (
                Some("application/json;v=v1beta1;g=config.k8s.io;as=Flagz"),
                None,
            ),
            (
                Some("application/cbor;v=v1beta1;g=config.k8s.io;as=Statusz"),
                None,
            ),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate(*accept, Page::Statusz), *want, "{accept:?}");
        }
    }

    #[tokio::test]
    async fn the_statusz_text_page_has_upstreams_lines() {
        let p = pages();
        let now = p.started + Duration::from_secs(3_725);
        // Upstream writes the delimiter, then a space: ": " gives two.
        let (_, _, wide) = body(p.statusz_answer(None, now, ": ")).await;
        assert!(
            wide.contains("\nStarted:  Wed Oct 16 21:03:43 UTC 2024\n"),
            "{wide}"
        );
        let (status, headers, text) = body(p.statusz_answer(None, now, ":")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "text/plain; charset=utf-8");
        assert_eq!(
            text,
            format!(
                "\nkube-scheduler statusz\n{HEADER_WARNING}\n\nStarted: Wed Oct 16 21:03:43 UTC 2024\nUp: 1 hr 02 min 05 sec\nGo version: \nBinary version: 1.37.0+kubesched.0.1.0\nEmulation version: 1.37\nPaths: /configz /flagz /healthz /livez /metrics /readyz\n"
            )
        );
    }

    #[tokio::test]
    async fn structured_pages_carry_their_kind_and_warn_for_the_old_version() {
        let p = pages();
        let now = p.started + Duration::from_secs(5);
        let beta = "application/json;v=v1beta1;g=config.k8s.io;as=Statusz";
        let (status, headers, text) = body(p.statusz_answer(Some(beta), now, ":")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers.get(header::WARNING).is_none());
        let object: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            object,
            serde_json::json!({
                "kind": "Statusz",
                "apiVersion": "config.k8s.io/v1beta1",
                "metadata": {"name": "kube-scheduler"},
                "startTime": "2024-10-16T21:03:43Z",
                "uptimeSeconds": 5,
                "goVersion": "",
                "binaryVersion": "1.37.0+kubesched.0.1.0",
                "emulationVersion": "1.37",
                "paths": ["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"],
            })
        );

        let alpha = "application/yaml;v=v1alpha1;g=config.k8s.io;as=Flagz";
        let (status, headers, text) = body(p.flagz_answer(Some(alpha), "=").expect("on")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "application/yaml");
        assert_eq!(headers[header::WARNING], DEPRECATED_FLAGZ_WARNING);
        assert!(text.contains("kind: Flagz"), "{text}");
        assert!(
            text.contains("apiVersion: config.k8s.io/v1alpha1"),
            "{text}"
        );
        assert!(
            text.contains("leader-elect-resource-name: kube-scheduler"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn flagz_lists_flags_sorted_and_refuses_what_it_cannot_produce() {
        let p = pages();
        let (_, _, text) = body(p.flagz_answer(Some("text/plain"), "=").expect("on")).await;
        assert_eq!(
            text,
            format!(
                "\nkube-scheduler flagz\n{HEADER_WARNING}\nleader-elect-resource-name=kube-scheduler\nv=2\n"
            )
        );
        let (status, _, text) =
            body(p.flagz_answer(Some("application/xml"), "=").expect("on")).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
        assert!(text.contains("only the following media types are accepted: application/json;g=config.k8s.io;v=v1beta1;as=Flagz"), "{text}");
        let off = ZPages {
            flags: None,
            ..pages()
        };
        assert!(off.flagz_answer(None, "=").is_none());
    }
}
