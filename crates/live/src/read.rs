//! Reading a live cluster once, for `kubesched explain` and `kubesched simulate
//! --kubeconfig`: every object of the kinds the
//! compiled-in plugins declare (and pods and nodes), listed page by page, as plain JSON manifests. Nothing here
//! writes: the only requests are `list`s (RBAC: the `list` verb on each kind of
//! [`crate::watch::kinds_to_watch`]).

use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};

use crate::watch::{WatchedKind, kinds_to_watch};

/// A client of the cluster the kubeconfig (else kube's inference) names.
pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<Client, crate::RunError> {
    connect_in(kubeconfig, None).await
}

/// [`connect`] in a kubeconfig context other than the current one (kubectl's `--context`).
pub async fn connect_in(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<Client, crate::RunError> {
    let config = crate::connect::client_config_in(kubeconfig, context).await?;
    Client::try_from(config).map_err(|e| crate::RunError::Client(e.to_string()))
}

/// Objects per page (the API server's continue token carries on from there).
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// A list that failed.
#[derive(Debug, thiserror::Error)]
#[error("listing {resource}: {message}")]
pub struct ReadError {
    /// The plural resource, with its group (`pods`, `csinodes.storage.k8s.io`).
    pub resource: String,
    /// What went wrong.
    pub message: String,
}

/// The objects read, and the kinds the API server does not serve (skipped).
#[derive(Debug, Default)]
pub struct ClusterRead {
    /// Every object, with `apiVersion` and `kind` set, in list order per kind.
    pub objects: Vec<serde_json::Value>,
    /// Resources the server answered 404 for (an API group it does not serve).
    pub not_served: Vec<String>,
    /// List requests made (pages included).
    pub requests: usize,
}

impl ClusterRead {
    /// The objects as one `v1` `List` in JSON: what `explain` and `simulate --kubeconfig`
    /// load, exactly as they would load a `kubectl get -o json` dump.
    pub fn to_list_json(&self) -> String {
        self.list().to_string()
    }

    /// The same `List` in YAML, as `kubectl get -o yaml` writes one (`kubesched snapshot`).
    pub fn to_list_yaml(&self) -> Result<String, String> {
        serde_saphyr::to_string(&self.list()).map_err(|e| e.to_string())
    }

    fn list(&self) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": self.objects})
    }
}

fn resource_name(k: &WatchedKind) -> String {
    if k.api_group.is_empty() {
        k.resource.to_string()
    } else {
        format!("{}.{}", k.resource, k.api_group)
    }
}

/// Lists every object of the kinds the compiled-in plugins need (pods and nodes always),
/// `page_size` at a time.
pub async fn read_cluster(client: &Client, page_size: u32) -> Result<ClusterRead, ReadError> {
    let mut out = ClusterRead::default();
    for k in &kinds_to_watch() {
        let api_version = k.api_version();
        let resource = k.api_resource();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(page_size);
            // Finished pods hold nothing on their nodes, as the scheduler's informer has it.
            if k.kind == "Pod" {
                params = params.fields(crate::watch::POD_FIELD_SELECTOR);
            }
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            out.requests += 1;
            let page = match api.list(&params).await {
                Ok(p) => p,
                Err(kube::Error::Api(e)) if e.code == 404 && token.is_none() => {
                    // An API group a cluster does not enable (a beta one such as
                    // scheduling.k8s.io/v1beta1 is off unless asked for) is no fault: the
                    // plugins that read it find nothing, as they would find in the cluster.
                    tracing::info!(
                        resource = resource_name(k),
                        "the API server does not serve it; reading the cluster without it"
                    );
                    out.not_served.push(resource_name(k));
                    break;
                }
                Err(e) => {
                    return Err(ReadError {
                        resource: resource_name(k),
                        message: e.to_string(),
                    });
                }
            };
            for item in page.items {
                let mut doc = serde_json::to_value(&item).map_err(|e| ReadError {
                    resource: resource_name(k),
                    message: e.to_string(),
                })?;
                // List items come without their type; the manifest loader needs it.
                doc["apiVersion"] = api_version.clone().into();
                doc["kind"] = k.kind.into();
                out.objects.push(doc);
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
    }
    Ok(out)
}
