//! The whole deploy/ tree of `cargo xtask deploy`: the manifests, Dockerfile and examples
//! ([`crate::render`]), the Helm chart made from the same parts ([`crate::chart`]) and the
//! Grafana dashboard ([`crate::dashboard`]). Kept apart so that the chart, which reads the
//! manifests' constants, and the manifests do not need each other.

use crate::Error;
use crate::render::{DeployOptions, Rendered, RenderedFile};

/// Renders every file.
pub fn render(opts: &DeployOptions) -> Result<Rendered, Error> {
    let (mut rendered, parts) = crate::render::render_manifests(opts)?;
    rendered
        .files
        .extend(crate::chart::files(&crate::chart::ChartInput {
            opts,
            cluster_rules: parts.cluster_rules,
            lease_rules: parts.lease_rules,
            auth_rules: parts.auth_rules,
            profile_plugins: parts.profile_plugins,
            crds: &parts.crds,
        }));
    rendered.files.push(RenderedFile {
        path: crate::dashboard::FILE,
        contents: crate::dashboard::render(),
    });
    Ok(rendered)
}
