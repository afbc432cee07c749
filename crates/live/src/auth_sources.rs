//! Where the secure port's certificate authorities and front-proxy settings come from, as
//! upstream's delegated authentication finds them: the flags' files first, then whatever
//! they leave unset from the `extension-apiserver-authentication` ConfigMap in
//! `kube-system` (which the API server keeps), unless `--authentication-skip-lookup`. A
//! lookup that fails is tolerated with a warning (kube-scheduler's
//! `--authentication-tolerate-lookup-failure` defaults to true), and then only tokens and
//! anonymous requests are authenticated.
//!
//! The ConfigMap is read once at start-up; upstream also watches it to follow CA
//! rotation, which needs a restart here.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use rustls::pki_types::CertificateDer;

use crate::error::RunError;

/// The ConfigMap the API server publishes its client CAs and front-proxy settings in.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// Its namespace.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";

/// The request-header (front-proxy) authenticator's flags (`--requestheader-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderOptions {
    /// CA bundle the proxy's client certificate must chain to; None: from the ConfigMap.
    pub client_ca_file: Option<PathBuf>,
    /// Common names the proxy's certificate may have; empty: any.
    pub allowed_names: Vec<String>,
    /// Headers holding the user name, the first one set wins.
    pub username_headers: Vec<String>,
    /// Headers holding the user's UID.
    pub uid_headers: Vec<String>,
    /// Headers holding groups (every value of each).
    pub group_headers: Vec<String>,
    /// Header prefixes of extra attributes (`X-Remote-Extra-Scopes: a`).
    pub extra_headers_prefixes: Vec<String>,
}

impl Default for RequestHeaderOptions {
    /// kube-scheduler's flag defaults.
    fn default() -> Self {
        Self {
            client_ca_file: None,
            allowed_names: Vec::new(),
            username_headers: vec!["x-remote-user".into()],
            uid_headers: Vec::new(),
            group_headers: vec!["x-remote-group".into()],
            extra_headers_prefixes: vec!["x-remote-extra-".into()],
        }
    }
}

/// The request-header authenticator in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// The proxies' CA bundle.
    pub ca: Vec<CertificateDer<'static>>,
    /// Allowed common names (empty: any).
    pub allowed_names: Vec<String>,
    /// See [`RequestHeaderOptions`].
    pub username_headers: Vec<String>,
    /// See [`RequestHeaderOptions`].
    pub uid_headers: Vec<String>,
    /// See [`RequestHeaderOptions`].
    pub group_headers: Vec<String>,
    /// See [`RequestHeaderOptions`].
    pub extra_headers_prefixes: Vec<String>,
    /// Where it came from, for logs and errors.
    pub source: String,
}

/// The certificate authorities and front-proxy settings the secure port authenticates with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthnSources {
    /// Client certificates chaining to these authenticate as their CN (empty: none do).
    pub client_ca: Vec<CertificateDer<'static>>,
    /// Where the client CA came from.
    pub client_ca_source: String,
    /// The front-proxy authenticator, when configured.
    pub request_header: Option<RequestHeaderConfig>,
}

impl AuthnSources {
    /// Every root a client certificate may chain to (the TLS layer asks for certificates
    /// signed by any of them; the gatekeeper tells which authenticator one belongs to).
    pub fn all_roots(&self) -> Vec<CertificateDer<'static>> {
        let mut roots = self.client_ca.clone();
        if let Some(rh) = &self.request_header {
            roots.extend(rh.ca.iter().cloned());
        }
        roots
    }

    /// What the flags' files give, without looking anything up.
    pub fn from_files(
        client_ca_file: Option<&Path>,
        request_header: &RequestHeaderOptions,
    ) -> Result<Self, RunError> {
        let mut sources = Self::default();
        if let Some(path) = client_ca_file {
            sources.client_ca = read_ca_file(path)?;
            sources.client_ca_source = path.display().to_string();
        }
        if let Some(path) = &request_header.client_ca_file {
            sources.request_header = Some(RequestHeaderConfig {
                ca: read_ca_file(path)?,
                allowed_names: request_header.allowed_names.clone(),
                username_headers: request_header.username_headers.clone(),
                uid_headers: request_header.uid_headers.clone(),
                group_headers: request_header.group_headers.clone(),
                extra_headers_prefixes: request_header.extra_headers_prefixes.clone(),
                source: path.display().to_string(),
            });
        }
        Ok(sources)
    }

    /// The flags' files, then what they leave unset from the ConfigMap (read through
    /// `client`, the authentication kubeconfig's), unless `skip_lookup`.
    pub async fn resolve(
        client_ca_file: Option<&Path>,
        request_header: &RequestHeaderOptions,
        skip_lookup: bool,
        tolerate_lookup_failure: bool,
        client: Option<&Client>,
    ) -> Result<Self, RunError> {
        let mut sources = Self::from_files(client_ca_file, request_header)?;
        let missing = sources.client_ca_source.is_empty() || sources.request_header.is_none();
        if skip_lookup || !missing {
            return Ok(sources);
        }
        let Some(client) = client else {
            let message = format!(
                "no authentication kubeconfig to look up configmap/{AUTHENTICATION_CONFIGMAP} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}: client certificate and request-header authentication will not work"
            );
            return tolerate(tolerate_lookup_failure, message).map(|()| sources);
        };
        let api: Api<ConfigMap> =
            Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE);
        let cm = match api.get(AUTHENTICATION_CONFIGMAP).await {
            Ok(cm) => cm,
            Err(e) => {
                let message = format!(
                    "unable to get configmap/{AUTHENTICATION_CONFIGMAP} in {AUTHENTICATION_CONFIGMAP_NAMESPACE} ({e}); usually fixed by 'kubectl create rolebinding -n {AUTHENTICATION_CONFIGMAP_NAMESPACE} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'. Continuing without authentication configuration: requests with client certificates are not authenticated"
                );
                return tolerate(tolerate_lookup_failure, message).map(|()| sources);
            }
        };
        sources.fill_from_configmap(&cm)?;
        Ok(sources)
    }

    /// Takes what is still unset from the ConfigMap's data.
    pub fn fill_from_configmap(&mut self, cm: &ConfigMap) -> Result<(), RunError> {
        let data = cm.data.clone().unwrap_or_default();
        let at = |key: &str| {
            format!(
                "configmap/{AUTHENTICATION_CONFIGMAP} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}, key {key}"
            )
        };
        if self.client_ca_source.is_empty()
            && let Some(pem) = data.get("client-ca-file").filter(|p| !p.trim().is_empty())
        {
            self.client_ca = parse_ca(pem.as_bytes(), &at("client-ca-file"))?;
            self.client_ca_source = at("client-ca-file");
        }
        if self.request_header.is_none()
            && let Some(pem) = data
                .get("requestheader-client-ca-file")
                .filter(|p| !p.trim().is_empty())
        {
            let list = |key: &str| -> Result<Vec<String>, RunError> {
                match data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                    None => Ok(Vec::new()),
                    Some(v) => serde_json::from_str(v).map_err(|e| {
                        RunError::Serving(format!("{}: not a JSON list of strings: {e}", at(key)))
                    }),
                }
            };
            self.request_header = Some(RequestHeaderConfig {
                ca: parse_ca(pem.as_bytes(), &at("requestheader-client-ca-file"))?,
                allowed_names: list("requestheader-allowed-names")?,
                username_headers: list("requestheader-username-headers")?,
                uid_headers: list("requestheader-uid-headers")?,
                group_headers: list("requestheader-group-headers")?,
                extra_headers_prefixes: list("requestheader-extra-headers-prefix")?,
                source: format!(
                    "configmap/{AUTHENTICATION_CONFIGMAP} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}"
                ),
            });
        }
        Ok(())
    }
}

fn tolerate(tolerated: bool, message: String) -> Result<(), RunError> {
    if tolerated {
        tracing::warn!("{message}");
        Ok(())
    } else {
        Err(RunError::Serving(message))
    }
}

fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, RunError> {
    let bytes = std::fs::read(path)
        .map_err(|e| RunError::Serving(format!("reading {}: {e}", path.display())))?;
    parse_ca(&bytes, &path.display().to_string())
}

/// The certificates of a PEM bundle; at least one.
fn parse_ca(pem: &[u8], source: &str) -> Result<Vec<CertificateDer<'static>>, RunError> {
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| RunError::Serving(format!("{source}: {e}")))?;
    if certs.is_empty() {
        return Err(RunError::Serving(format!(
            "{source}: no PEM certificate in the CA bundle"
        )));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).expect("ca").pem()
    }

    fn configmap(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_configmap_fills_in_what_the_flags_leave_unset() {
        let (client, proxy) = (ca_pem(), ca_pem());
        let mut s = AuthnSources::default();
        s.fill_from_configmap(&configmap(&[
            ("client-ca-file", &client),
            ("requestheader-client-ca-file", &proxy),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#,
            ),
        ]))
        .expect("valid");
        assert_eq!(s.client_ca.len(), 1);
        assert!(
            s.client_ca_source.ends_with("key client-ca-file"),
            "{}",
            s.client_ca_source
        );
        let rh = s.request_header.clone().expect("request header");
        assert_eq!(rh.allowed_names, ["front-proxy-client"]);
        assert_eq!(rh.username_headers, ["X-Remote-User"]);
        assert!(rh.uid_headers.is_empty());
        assert_eq!(s.all_roots().len(), 2);

        // What a flag set stays the flag's.
        let mut flagged = AuthnSources {
            client_ca: s.client_ca.clone(),
            client_ca_source: "/etc/ca.crt".into(),
            request_header: None,
        };
        flagged
            .fill_from_configmap(&configmap(&[("client-ca-file", &proxy)]))
            .expect("valid");
        assert_eq!(flagged.client_ca, s.client_ca);
        assert_eq!(flagged.client_ca_source, "/etc/ca.crt");
        assert_eq!(
            flagged.request_header, None,
            "no proxy CA in that ConfigMap"
        );
    }

    #[test]
    fn a_broken_configmap_is_an_error_naming_the_key() {
        let mut s = AuthnSources::default();
        let e = s
            .fill_from_configmap(&configmap(&[("client-ca-file", "not a certificate")]))
            .expect_err("no certificate");
        assert!(e.to_string().contains("key client-ca-file"), "{e}");
        let e = s
            .fill_from_configmap(&configmap(&[
                ("requestheader-client-ca-file", &ca_pem()),
                ("requestheader-allowed-names", "front-proxy-client"),
            ]))
            .expect_err("not JSON");
        assert!(e.to_string().contains("requestheader-allowed-names"), "{e}");
    }

    #[tokio::test]
    async fn without_a_client_the_lookup_is_skipped_or_tolerated_or_fatal() {
        let rh = RequestHeaderOptions::default();
        let tolerated = AuthnSources::resolve(None, &rh, false, true, None)
            .await
            .expect("tolerated");
        assert_eq!(tolerated, AuthnSources::default());
        let skipped = AuthnSources::resolve(None, &rh, true, false, None)
            .await
            .expect("skipped");
        assert_eq!(skipped, AuthnSources::default());
        let e = AuthnSources::resolve(None, &rh, false, false, None)
            .await
            .expect_err("fatal when not tolerated");
        assert!(e.to_string().contains(AUTHENTICATION_CONFIGMAP), "{e}");
    }
}
