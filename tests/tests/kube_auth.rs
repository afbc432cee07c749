//! The secure port's delegated authentication and authorization, against the test API
//! server's TokenReview and SubjectAccessReview: anonymous requests to /metrics and
//! /configz are refused (403, or 401 with anonymous access off), an authorised scraper
//! gets its metrics, the health paths stay open, and answers are cached.

use std::time::Duration;

use kubesched_live::{DelegatedAuth, Runner};
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    TestCa, assert_rbac_covers, bounded, http_get, http_get_bytes, http_get_with, https_get,
    options, requests_to,
};

fn secured(server: &TestApiServer, anonymous: bool) -> kubesched_live::RunOptions {
    let mut o = options(server, false, "solo");
    let kubeconfig = server.write_kubeconfig();
    if let Some(serving) = o.serving.as_mut() {
        serving.auth = Some(DelegatedAuth {
            authentication_kubeconfig: Some(kubeconfig.clone()),
            authorization_kubeconfig: Some(kubeconfig),
            anonymous,
            ..DelegatedAuth::default()
        });
    }
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_configz_need_an_authorised_user() {
    bounded(60, "secured endpoints", async {
        let server = TestApiServer::start().await;
        server.add_user_token("scraper-token", "prometheus", &["monitoring"]);
        server.add_user_token("nobody-token", "nobody", &[]);
        server.grant_non_resource("monitoring", "get", "/metrics");
        let runner = Runner::start(secured(&server, true)).await.expect("start");
        let addr = runner.http_addr().expect("served");

        // Anonymous: the health paths only.
        for path in ["/healthz", "/livez"] {
            assert_eq!(http_get(addr, path).await.0, 200, "{path}");
        }
        for path in ["/metrics", "/configz"] {
            let (code, body) = http_get(addr, path).await;
            assert_eq!(code, 403, "{path}: {body}");
            assert!(
                body.contains(&format!(
                    r#"forbidden: User \"system:anonymous\" cannot get path \"{path}\""#
                )),
                "{body}"
            );
        }
        // The scraper gets /metrics, and only /metrics.
        let (code, body) = http_get_with(addr, "/metrics", Some("scraper-token")).await;
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("# TYPE scheduler_"), "{body}");
        assert_eq!(
            http_get_with(addr, "/configz", Some("scraper-token"))
                .await
                .0,
            403
        );
        // Someone the API server knows but did not grant anything.
        assert_eq!(
            http_get_with(addr, "/metrics", Some("nobody-token"))
                .await
                .0,
            403
        );
        // A token the API server refuses: 401, even on a health path (as upstream).
        assert_eq!(http_get_with(addr, "/metrics", Some("forged")).await.0, 401);
        assert_eq!(http_get_with(addr, "/healthz", Some("forged")).await.0, 401);

        // Answers are cached: more scrapes within the TTL send no new review.
        let reviews = |s: &TestApiServer| {
            (
                requests_to(s, "POST", "/tokenreviews").len(),
                requests_to(s, "POST", "/subjectaccessreviews").len(),
            )
        };
        let before = reviews(&server);
        for _ in 0..3 {
            assert_eq!(
                http_get_with(addr, "/metrics", Some("scraper-token"))
                    .await
                    .0,
                200
            );
            assert_eq!(http_get(addr, "/metrics").await.0, 403);
        }
        assert_eq!(reviews(&server), before, "served from the caches");
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");

        // Anonymous access off: no credentials is 401.
        let runner = Runner::start(secured(&server, false)).await.expect("start");
        let addr = runner.http_addr().expect("served");
        assert_eq!(http_get(addr, "/metrics").await.0, 401);
        assert_eq!(http_get(addr, "/healthz").await.0, 401);
        assert_eq!(
            http_get_with(addr, "/metrics", Some("scraper-token"))
                .await
                .0,
            200
        );
        runner.stop();
        tokio::time::timeout(Duration::from_secs(10), runner.wait())
            .await
            .expect("stops")
            .expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_profile_for_the_authorised_when_profiling_is_on() {
    bounded(60, "profiling endpoints", async {
        let server = TestApiServer::start().await;
        server.add_user_token("profiler-token", "someone", &["debuggers"]);
        server.grant_non_resource("debuggers", "get", "/debug/pprof/profile");
        // enableProfiling is on by default, as upstream's.
        let runner = Runner::start(secured(&server, true)).await.expect("start");
        let addr = runner.http_addr().expect("served");
        let path = "/debug/pprof/profile?seconds=1";
        // The same authorization as every other path; the query is not part of the path.
        let (code, body) = http_get(addr, path).await;
        assert_eq!(code, 403, "{body}");
        assert!(
            body.contains(r#"cannot get path \"/debug/pprof/profile\""#),
            "{body}"
        );
        let (code, head, body) = http_get_bytes(addr, path, Some("profiler-token")).await;
        assert_eq!(code, 200, "{head}");
        let head = head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/octet-stream"),
            "{head}"
        );
        assert!(
            head.contains("content-disposition: attachment; filename=\"profile\""),
            "{head}"
        );
        // Gzipped protobuf, as Go serves it; its string table names the sample types.
        assert_eq!(&body[..2], [0x1f, 0x8b], "gzip magic");
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(body.as_slice()), &mut raw)
            .expect("gunzip");
        for word in [&b"samples"[..], b"count", b"cpu", b"nanoseconds"] {
            assert!(
                raw.windows(word.len()).any(|w| w == word),
                "profile names {word:?}"
            );
        }
        // The Go runtime's other profiles have no counterpart: Go's answer for those.
        server.grant_non_resource("debuggers", "get", "/debug/pprof/heap");
        assert_eq!(
            http_get_with(addr, "/debug/pprof/heap", Some("profiler-token")).await,
            (404, "Unknown profile\n".to_string())
        );
        runner.stop();
        runner.wait().await.expect("clean stop");

        // Profiling off: nothing under /debug/pprof, and /configz says so.
        let mut off = secured(&server, true);
        off.config.config.enable_profiling = false;
        let runner = Runner::start(off).await.expect("start");
        let addr = runner.http_addr().expect("served");
        assert_eq!(
            http_get_with(addr, path, Some("profiler-token")).await.0,
            404
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

/// `secured`, over TLS with the self-signed certificate (client certificates need TLS).
fn secured_tls(server: &TestApiServer) -> kubesched_live::RunOptions {
    let mut o = secured(server, true);
    if let Some(serving) = o.serving.as_mut() {
        serving.tls = kubesched_live::Tls::SelfSigned;
    }
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_ca_and_front_proxies_come_from_the_configmap() {
    bounded(60, "extension-apiserver-authentication", async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let server = TestApiServer::start().await;
        let clients = TestCa::new("client-ca");
        let proxies = TestCa::new("front-proxy-ca");
        // What kube-apiserver publishes for delegated authentication.
        server.create(
            "configmaps",
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": {
                    "client-ca-file": clients.pem,
                    "requestheader-client-ca-file": proxies.pem,
                    "requestheader-allowed-names": "[\"front-proxy-client\"]",
                    "requestheader-username-headers": "[\"X-Remote-User\"]",
                    "requestheader-group-headers": "[\"X-Remote-Group\"]",
                    "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
                },
            }),
        );
        server.grant_non_resource("monitoring", "get", "/metrics");
        let runner = Runner::start(secured_tls(&server)).await.expect("start");
        let addr = runner.http_addr().expect("served");

        // A client certificate the ConfigMap's client CA signed: its O is the group.
        let scraper = clients.client("prometheus", &["monitoring"]);
        let (code, body) = https_get(addr, "/metrics", Some(scraper), &[]).await;
        assert_eq!(code, 200, "{body}");
        // A front proxy (the API server's aggregator) speaking for a user in its headers.
        let proxy = proxies.client("front-proxy-client", &[]);
        let (code, body) = https_get(
            addr,
            "/metrics",
            Some((proxy.0.clone(), proxy.1.clone_key())),
            &[("X-Remote-User", "jane"), ("X-Remote-Group", "monitoring")],
        )
        .await;
        assert_eq!(code, 200, "{body}");
        // The same proxy speaking for a user without the group: that user, forbidden.
        let (code, body) = https_get(addr, "/metrics", Some(proxy), &[("X-Remote-User", "joe")]).await;
        assert_eq!(code, 403, "{body}");
        assert!(body.contains(r#"User \"joe\" cannot get path \"/metrics\""#), "{body}");
        // A proxy certificate with a name not allowed: not authenticated at all.
        let impostor = proxies.client("someone-else", &[]);
        let (code, _) = https_get(addr, "/metrics", Some(impostor), &[("X-Remote-User", "jane")]).await;
        assert_eq!(code, 401);
        // Client certificates authenticate users; the proxy CA's do not.
        let (code, _) = https_get(addr, "/metrics", Some(proxies.client("x", &["monitoring"])), &[]).await;
        assert_eq!(code, 401);
        // Without a certificate: anonymous, forbidden.
        assert_eq!(https_get(addr, "/metrics", None, &[]).await.0, 403);
        // Read with the access the deploy manifests grant (the bound reader Role).
        assert_eq!(
            requests_to(&server, "GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication").len(),
            1
        );
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");

        // --authentication-skip-lookup: the ConfigMap is not read, certificates mean nothing.
        let mut skip = secured_tls(&server);
        if let Some(auth) = skip.serving.as_mut().and_then(|s| s.auth.as_mut()) {
            auth.skip_lookup = true;
        }
        let runner = Runner::start(skip).await.expect("start");
        let addr = runner.http_addr().expect("served");
        let scraper = clients.client("prometheus", &["monitoring"]);
        assert_eq!(https_get(addr, "/metrics", Some(scraper), &[]).await.0, 403);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_configmap_is_tolerated_unless_told_otherwise() {
    bounded(60, "lookup failure", async {
        let server = TestApiServer::start().await;
        // No ConfigMap: a warning, and tokens still work.
        let runner = Runner::start(secured(&server, true))
            .await
            .expect("tolerated");
        runner.stop();
        runner.wait().await.expect("clean stop");
        let mut strict = secured(&server, true);
        if let Some(auth) = strict.serving.as_mut().and_then(|s| s.auth.as_mut()) {
            auth.tolerate_lookup_failure = false;
        }
        let e = Runner::start(strict).await.expect_err("not tolerated");
        assert!(
            e.to_string().contains("extension-apiserver-authentication"),
            "{e}"
        );
    })
    .await;
}
