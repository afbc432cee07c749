//! Why `kubesched run` could not start or had to stop.

/// A failure of the run command.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The client configuration (kubeconfig or in-cluster) could not be loaded.
    #[error("loading the client configuration: {0}")]
    ClientConfig(String),
    /// The API client could not be built.
    #[error("building the API client: {0}")]
    Client(String),
    /// The scheduler could not be built from the configuration.
    #[error("{0}")]
    Build(#[from] kubesched_scheduler::BuildError),
    /// The HTTP endpoints could not be served.
    #[error("serving the HTTP endpoints: {0}")]
    Serving(String),
    /// The leader lost its lease; it stopped scheduling and must exit, as upstream does.
    #[error("leader election lost")]
    LeaderLost,
    /// A task of the scheduler stopped unexpectedly.
    #[error("internal error: {0}")]
    Internal(String),
}
