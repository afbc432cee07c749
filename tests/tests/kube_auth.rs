//! The secure port's delegated authentication and authorization, against the test API
//! server's TokenReview and SubjectAccessReview: anonymous requests to /metrics and
//! /configz are refused (403, or 401 with anonymous access off), an authorised scraper
//! gets its metrics, the health paths stay open, and answers are cached.

use std::time::Duration;

use kubesched_live::{DelegatedAuth, Runner};
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, http_get, http_get_bytes, http_get_with, options, requests_to,
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
