//! The HTTP side of the test API server: paths, verbs, list/watch, subresources, faults.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::selector::FieldSelector;
use super::{
    ApiError, FaultAction, RequestRecord, ResourceDef, State, WatchSub, event_line, typed,
};

type Shared = Arc<Mutex<State>>;

pub(crate) fn router(state: Shared) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// A parsed resource path.
#[derive(Debug)]
struct Target {
    def: &'static ResourceDef,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let find = |plural: &str| super::find_resource(group, version, plural);
    let (namespace, rest): (Option<String>, &[&str]) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => (Some(ns.to_string()), more),
        _ => (None, rest),
    };
    let (def, name, sub) = match rest {
        [plural] => (find(plural)?, None, None),
        [plural, name] => (find(plural)?, Some(name.to_string()), None),
        [plural, name, sub] => (find(plural)?, Some(name.to_string()), Some(sub.to_string())),
        _ => return None,
    };
    if namespace.is_some() && !def.namespaced {
        return None;
    }
    Some(Target {
        def,
        namespace,
        name,
        sub,
    })
}

fn query_map(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn param<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
}

fn json_response(code: u16, body: &Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The `reason` kube-apiserver puts in a Status for an HTTP code (metav1.StatusReason), so an
/// injected fault reads like the real server's answer (a 409 is a Conflict, a 410 Expired).
fn status_reason(code: u16) -> &'static str {
    match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        c if c >= 500 => "InternalError",
        _ => "BadRequest",
    }
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.status())
}

fn rbac_view(method: &Method, t: &Target, watch: bool) -> (String, String, String) {
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if t.name.is_none() => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "unknown",
    };
    // POST to a subresource is "create" on it; a named POST to the collection does not exist.
    let resource = match &t.sub {
        Some(sub) => format!("{}/{sub}", t.def.plural),
        None => t.def.plural.to_string(),
    };
    (t.def.group.to_string(), resource, verb.to_string())
}

async fn handle(AxState(state): AxState<Shared>, req: Request) -> Response {
    let at = std::time::Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    let q = query_map(&query);
    let target = parse_path(&path);
    let watch = matches!(param(&q, "watch"), Some("true") | Some("1"));
    let rbac = target.as_ref().map(|t| rbac_view(&method, t, watch));

    let index = state.lock().request_received(RequestRecord {
        method: method.to_string(),
        path: path.clone(),
        query,
        status: None,
        rbac,
        at,
    });
    let response = serve(&state, &method, &path, &q, &headers, &body, target, watch).await;
    state
        .lock()
        .request_answered(index, response.status().as_u16());
    response
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    state: &Shared,
    method: &Method,
    path: &str,
    q: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    target: Option<Target>,
    watch: bool,
) -> Response {
    let token = state.lock().token.clone();
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {token}"));
    if !authorized {
        return error_response(&ApiError::new(401, "Unauthorized", "Unauthorized"));
    }
    // Injected faults first.
    let action = {
        let mut st = state.lock();
        st.faults
            .iter_mut()
            .find(|f| {
                f.method.eq_ignore_ascii_case(method.as_str())
                    && path.contains(&f.path_contains)
                    && f.remaining.is_none_or(|r| r > 0)
                    && (f.probability >= 1.0 || super::random_f64() < f.probability)
            })
            .map(|f| {
                if let Some(r) = f.remaining.as_mut() {
                    *r -= 1;
                }
                f.action.clone()
            })
    };
    match action {
        Some(FaultAction::Status(code, message)) => {
            return error_response(&ApiError::new(code, status_reason(code), message));
        }
        Some(FaultAction::Hold(gate)) => gate.pass().await,
        Some(FaultAction::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    if target.is_none() && method == Method::GET && path == "/version" {
        let version = json!({"major": "1", "minor": "37", "gitVersion": "v1.37.0-kubesched-test"});
        return (StatusCode::OK, axum::Json(version)).into_response();
    }
    let Some(t) = target else {
        return error_response(&ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        ));
    };
    let result = match (method.clone(), &t.name, t.sub.as_deref()) {
        (Method::GET, None, None) if watch => return watch_response(state, &t, q),
        (Method::GET, None, None) => list(state, &t, q),
        (Method::GET, Some(name), None) => {
            let st = state.lock();
            st.get(t.def, ns(&t), name)
                .map(|o| typed(t.def, o))
                .ok_or_else(|| ApiError::not_found(t.def, name))
                .map(|o| (200, o))
        }
        (Method::POST, None, None) if t.def.plural == "tokenreviews" => {
            parse_body(body).map(|r| (201, token_review(state, r)))
        }
        (Method::POST, None, None) if t.def.plural == "subjectaccessreviews" => {
            parse_body(body).map(|r| (201, access_review(state, r)))
        }
        (Method::POST, None, None) => parse_body(body)
            .and_then(|obj| state.lock().create(t.def, ns(&t), obj))
            .map(|o| (201, typed(t.def, &o))),
        (Method::POST, Some(name), Some("binding")) if t.def.plural == "pods" => parse_body(body)
            .and_then(|b| bind(state, &t, name, &b))
            .map(|s| (201, s)),
        (Method::PUT, Some(name), None) => parse_body(body)
            .and_then(|obj| {
                let body_name = obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if body_name != name {
                    return Err(ApiError::new(
                        400,
                        "BadRequest",
                        "the name of the object does not match the name on the URL",
                    ));
                }
                state.lock().update(t.def, ns(&t), name, obj, true)
            })
            .map(|o| (200, typed(t.def, &o))),
        (Method::PUT, Some(name), Some("status")) => parse_body(body)
            .and_then(|obj| state.lock().update_status(t.def, ns(&t), name, obj))
            .map(|o| (200, typed(t.def, &o))),
        (Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            patch(state, &t, name, sub, headers, body).map(|o| (200, typed(t.def, &o)))
        }
        (Method::DELETE, Some(name), None) => {
            let opts: Value = if body.is_empty() {
                json!({})
            } else {
                serde_json::from_slice(body).unwrap_or(json!({}))
            };
            let uid = opts.pointer("/preconditions/uid").and_then(Value::as_str);
            let rv = opts
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str);
            let grace = opts
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or_else(|| param(q, "gracePeriodSeconds").and_then(|g| g.parse().ok()));
            state
                .lock()
                .delete(t.def, ns(&t), name, uid, rv, grace)
                .map(|o| (200, typed(t.def, &o)))
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {path}"),
        )),
    };
    match result {
        Ok((code, body)) => json_response(code, &body),
        Err(e) => error_response(&e),
    }
}

fn ns(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or("")
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(400, "BadRequest", format!("decoding the request body: {e}")))
}

fn unsupported(q: &[(String, String)]) -> Option<ApiError> {
    if param(q, "labelSelector").is_some_and(|s| !s.is_empty()) {
        return Some(ApiError::new(
            400,
            "BadRequest",
            "label selectors are not supported by the test API server",
        ));
    }
    if param(q, "resourceVersionMatch") == Some("Exact") {
        return Some(ApiError::new(
            400,
            "BadRequest",
            "exact resourceVersion lists are not supported by the test API server",
        ));
    }
    if param(q, "sendInitialEvents") == Some("true") {
        return Some(ApiError::new(
            400,
            "BadRequest",
            "streaming lists are not supported by the test API server",
        ));
    }
    None
}

fn list(state: &Shared, t: &Target, q: &[(String, String)]) -> Result<(u16, Value), ApiError> {
    if let Some(e) = unsupported(q) {
        return Err(e);
    }
    let selector = FieldSelector::parse(t.def.plural, param(q, "fieldSelector").unwrap_or(""))
        .map_err(|m| ApiError::new(400, "BadRequest", m))?;
    let limit: usize = param(q, "limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut st = state.lock();
    let (list_rv, items, offset) = match param(q, "continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (id, offset) = token
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<usize>().ok()?)))
                .ok_or_else(|| ApiError::new(400, "BadRequest", "invalid continue token"))?;
            let Some((rv, items)) = st.snapshots.get(&id).cloned() else {
                return Err(ApiError::new(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            };
            (rv, items, offset)
        }
        None => (
            st.rv,
            Arc::new(st.list(t.def, t.namespace.as_deref(), &selector)),
            0,
        ),
    };
    let end = if limit > 0 {
        (offset + limit).min(items.len())
    } else {
        items.len()
    };
    let page: Vec<Value> = items[offset.min(items.len())..end].to_vec();
    let mut metadata = json!({ "resourceVersion": list_rv.to_string() });
    if end < items.len() {
        let id = st.next_id;
        st.next_id += 1;
        st.snapshots.insert(id, (list_rv, items));
        metadata["continue"] = Value::String(format!("{id}:{end}"));
        metadata["remainingItemCount"] = json!(0);
    }
    Ok((
        200,
        json!({
            "kind": format!("{}List", t.def.kind),
            "apiVersion": t.def.api_version(),
            "metadata": metadata,
            "items": page,
        }),
    ))
}

fn watch_response(state: &Shared, t: &Target, q: &[(String, String)]) -> Response {
    if let Some(e) = unsupported(q) {
        return error_response(&e);
    }
    let selector = match FieldSelector::parse(t.def.plural, param(q, "fieldSelector").unwrap_or(""))
    {
        Ok(s) => s,
        Err(m) => return error_response(&ApiError::new(400, "BadRequest", m)),
    };
    let bookmarks = param(q, "allowWatchBookmarks") == Some("true");
    let timeout = param(q, "timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let (tx, rx) = mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    let (id, interval) = {
        let mut st = state.lock();
        let from = param(q, "resourceVersion").unwrap_or("");
        match from {
            "" | "0" => {
                // Start at the current state: synthetic ADDED events first.
                for obj in st.list(t.def, t.namespace.as_deref(), &selector) {
                    let _ = tx.send(Ok(event_line("ADDED", &typed(t.def, &obj))));
                }
            }
            rv => {
                let Ok(rv) = rv.parse::<u64>() else {
                    return error_response(&ApiError::new(
                        400,
                        "BadRequest",
                        format!("invalid resourceVersion {rv:?}"),
                    ));
                };
                if rv < st.compacted {
                    // What kube-apiserver does: a 200 response carrying one ERROR event.
                    let status = ApiError::new(
                        410,
                        "Expired",
                        format!("too old resource version: {rv} ({})", st.compacted),
                    )
                    .status();
                    let line = event_line("ERROR", &status);
                    return (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "application/json")],
                        line,
                    )
                        .into_response();
                }
                for c in st
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && c.res == t.def.plural)
                {
                    if t.namespace.as_deref().is_some_and(|n| n != c.ns) {
                        continue;
                    }
                    if let Some(line) =
                        State::event_for(t.def, &selector, c.old.as_ref(), c.new.as_ref())
                    {
                        let _ = tx.send(Ok(line));
                    }
                }
            }
        }
        let id = st.next_id;
        st.next_id += 1;
        st.watchers.push(WatchSub {
            id,
            res: t.def.plural,
            ns: t.namespace.clone(),
            selector,
            tx: tx.clone(),
        });
        (id, st.bookmark_interval)
    };
    if bookmarks {
        let state = state.clone();
        let def = t.def;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let mut st = state.lock();
                let Some(w) = st.watchers.iter().find(|w| w.id == id) else {
                    return;
                };
                let rv = st.rv;
                let bm = json!({
                    "kind": def.kind, "apiVersion": def.api_version(),
                    "metadata": {"resourceVersion": rv.to_string()},
                });
                if w.tx.send(Ok(event_line("BOOKMARK", &bm))).is_err() {
                    return;
                }
                st.bookmark_sent(def.plural, rv);
            }
        });
    }
    drop(tx);
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = futures::stream::unfold(
        (rx, deadline, state.clone(), id),
        |(mut rx, deadline, state, id)| async move {
            tokio::select! {
                item = rx.recv() => item.map(|i| (i, (rx, deadline, state, id))),
                _ = tokio::time::sleep_until(deadline) => {
                    state.lock().watchers.retain(|w| w.id != id);
                    None
                }
            }
        },
    )
    .boxed();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A TokenReview: the spec as sent, with the status filled in from the known tokens.
fn token_review(state: &Shared, mut review: Value) -> Value {
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let st = state.lock();
    review["status"] = match st.users.get(&token) {
        Some((user, groups)) => json!({
            "authenticated": true,
            "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
        }),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    review["kind"] = json!("TokenReview");
    review["apiVersion"] = json!("authentication.k8s.io/v1");
    review
}

/// A SubjectAccessReview of a non-resource request, decided by the grants.
fn access_review(state: &Shared, mut review: Value) -> Value {
    let text = |p: &str| {
        review
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (user, verb, path) = (
        text("/spec/user"),
        text("/spec/nonResourceAttributes/verb"),
        text("/spec/nonResourceAttributes/path"),
    );
    let groups: Vec<String> = review
        .pointer("/spec/groups")
        .and_then(Value::as_array)
        .map(|gs| {
            gs.iter()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let st = state.lock();
    let allowed = st.grants.iter().any(|(subject, v, p)| {
        (subject == &user || groups.contains(subject))
            && (v == "*" || v == &verb)
            && match p.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => p == &path,
            }
    });
    review["status"] = if allowed {
        json!({"allowed": true, "reason": "granted by the test API server"})
    } else {
        json!({"allowed": false})
    };
    review["kind"] = json!("SubjectAccessReview");
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review
}

/// `pods/{name}/binding`, as the pod registry's binding storage: the pod must exist,
/// match the binding's UID, not be terminating and not be assigned yet.
fn bind(state: &Shared, t: &Target, name: &str, binding: &Value) -> Result<Value, ApiError> {
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                422,
                "Invalid",
                "Binding.core \"\" is invalid: target.name: Required value",
            )
        })?
        .to_string();
    let uid = binding
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string);
    let def = t.def;
    // One lock for the binding and its record, so the usage is the one it caused.
    let mut st = state.lock();
    st.mutate(def, ns(t), name, |pod| {
        let pod_uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        if let Some(u) = &uid && u != pod_uid {
            return Err(ApiError::conflict(def, name, &format!(
                "Precondition failed: UID in precondition: {u}, UID in object meta: {pod_uid}"
            )).with_binding());
        }
        if pod.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null()) {
            return Err(ApiError::conflict(def, name, &format!("pod {name} is being deleted, cannot be assigned to a host")).with_binding());
        }
        if let Some(current) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            return Err(ApiError::conflict(def, name, &format!("pod {name} is already assigned to node \"{current}\"")).with_binding());
        }
        pod["spec"]["nodeName"] = Value::String(node.clone());
        let condition = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": super::now_text()});
        if !pod["status"].is_object() {
            pod["status"] = json!({});
        }
        super::patch::apply(&mut pod["status"], &json!({"conditions": [condition]}), true);
        // kube-apiserver v1.35+ (ClearingNominatedNodeNameAfterBinding, beta and on): the
        // nomination has served its purpose once the pod is bound.
        if let Some(status) = pod["status"].as_object_mut() {
            status.remove("nominatedNodeName");
        }
        Ok(())
    })?;
    st.record_binding(def, ns(t), name);
    drop(st);
    Ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

impl ApiError {
    fn with_binding(mut self) -> Self {
        self.message = self.message.replacen("on pods ", "on pods/binding ", 1);
        self
    }
}

fn patch(
    state: &Shared,
    t: &Target,
    name: &str,
    sub: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let strategic = match content_type.split(';').next().unwrap_or("").trim() {
        "application/strategic-merge-patch+json" => true,
        "application/merge-patch+json" => false,
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
                ),
            ));
        }
    };
    let p = parse_body(body)?;
    state.lock().mutate(t.def, ns(t), name, |obj| {
        match sub {
            // The status subresource changes the status only.
            Some(_) => {
                if let Some(status) = p.get("status") {
                    if !obj["status"].is_object() {
                        obj["status"] = json!({});
                    }
                    super::patch::apply(&mut obj["status"], status, strategic);
                }
            }
            None => {
                let mut p = p.clone();
                if let Some(m) = p.as_object_mut() {
                    m.remove("status");
                    m.remove("kind");
                    m.remove("apiVersion");
                }
                super::patch::apply(obj, &p, strategic);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod status_reason_tests {
    use super::status_reason;

    #[test]
    fn injected_failures_carry_the_reason_kube_apiserver_gives_their_code() {
        let table = [
            (400, "BadRequest"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (409, "Conflict"),
            (410, "Expired"),
            (422, "Invalid"),
            (429, "TooManyRequests"),
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (504, "Timeout"),
        ];
        for (code, reason) in table {
            assert_eq!(status_reason(code), reason, "code {code}");
        }
    }
}
