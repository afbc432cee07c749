//! Kubernetes protobuf (`k8s.io.api.core.v1`) encoding of the objects a guest reads.
//!
//! Guests decode Pod, Node and NodeList with code generated from Kubernetes' `generated.proto`
//! (proto2), so any subset of fields with the right numbers and wire types is a valid message.
//! The field numbers here are those of k8s.io/api's and k8s.io/apimachinery's
//! `generated.proto` for v1.37. Encoded, from the k8s-openapi objects:
//!
//! * `ObjectMeta`: every field but selfLink and managedFields.
//! * `PodSpec`: every field of v1.37 but `evictionResponders`: volumes, containers, init and
//!   ephemeral containers, affinity (node affinity, pod affinity and anti-affinity with their
//!   label and namespace selectors and match/mismatch label keys), topology spread
//!   constraints, tolerations, security context (without its Windows and AppArmor options),
//!   resource claims, pod-level resources,
//!   scheduling gates and group, and the scalar fields.
//! * `Container`: name, image, command, args, workingDir, ports, env (with `valueFrom`'s
//!   field, resource, ConfigMap and Secret references), resources (with claims), volumeMounts,
//!   volumeDevices, imagePullPolicy, securityContext, resizePolicy, restartPolicy. Not sent:
//!   probes, lifecycle hooks, envFrom, restartPolicyRules and the terminal settings.
//! * `Volume`: every source. Those a scheduler reads carry their fields (persistentVolumeClaim,
//!   ephemeral with its claim template, csi, the in-tree disks gcePersistentDisk,
//!   awsElasticBlockStore, azureDisk, cinder, rbd, iscsi, plus hostPath, emptyDir, nfs,
//!   secret, configMap, projected, image, azureFile); the others (gitRepo, flexVolume, cephfs,
//!   fc, ...) are sent as their message without fields, so the guest sees which source it is.
//! * `PodStatus`: every field of v1.37 but `nodeAllocatableResourceClaimStatuses` and
//!   `volumeHealth`; container statuses carry their state, readiness, restarts, image,
//!   container ID, allocated resources and resources.
//! * `NodeSpec`: every field but configSource and podPreemptionPolicy.
//! * `NodeStatus`: every field but config (the dynamic kubelet configuration, gone).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A protobuf writer.
#[derive(Default)]
struct W(Vec<u8>);

const VARINT: u32 = 0;
const LEN: u32 = 2;

impl W {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from((field << 3) | wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn opt_string(&mut self, field: u32, s: &Option<String>) {
        if let Some(s) = s {
            self.string(field, s);
        }
    }

    fn strings(&mut self, field: u32, v: &Option<Vec<String>>) {
        for s in v.iter().flatten() {
            self.string(field, s);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        self.key(field, VARINT);
        self.varint(v as u64);
    }

    fn opt_int64(&mut self, field: u32, v: Option<i64>) {
        if let Some(v) = v {
            self.int64(field, v);
        }
    }

    fn opt_int32(&mut self, field: u32, v: Option<i32>) {
        if let Some(v) = v {
            // int32 is sign-extended to 64 bits on the wire.
            self.int64(field, i64::from(v));
        }
    }

    fn opt_bool(&mut self, field: u32, v: Option<bool>) {
        if let Some(v) = v {
            self.key(field, VARINT);
            self.varint(u64::from(v));
        }
    }

    fn message(&mut self, field: u32, f: impl FnOnce(&mut W)) {
        let mut inner = W::default();
        f(&mut inner);
        self.bytes(field, &inner.0);
    }

    fn string_map(&mut self, field: u32, m: &Option<BTreeMap<String, String>>) {
        for (k, v) in m.iter().flatten() {
            self.message(field, |w| {
                w.string(1, k);
                w.string(2, v);
            });
        }
    }

    fn quantity_map(&mut self, field: u32, m: &Option<BTreeMap<String, Quantity>>) {
        for (k, v) in m.iter().flatten() {
            self.message(field, |w| {
                w.string(1, k);
                w.message(2, |q| q.string(1, &v.0));
            });
        }
    }

    fn time(&mut self, field: u32, t: &Option<meta::Time>) {
        if let Some(t) = t {
            self.message(field, |w| {
                w.int64(1, t.0.as_second());
                let nanos = t.0.subsec_nanosecond();
                if nanos != 0 {
                    w.opt_int32(2, Some(nanos));
                }
            });
        }
    }
}

fn object_meta(w: &mut W, m: &meta::ObjectMeta) {
    w.opt_string(1, &m.name);
    w.opt_string(2, &m.generate_name);
    w.opt_string(3, &m.namespace);
    w.opt_string(5, &m.uid);
    w.opt_string(6, &m.resource_version);
    w.opt_int64(7, m.generation);
    w.time(8, &m.creation_timestamp);
    w.time(9, &m.deletion_timestamp);
    w.opt_int64(10, m.deletion_grace_period_seconds);
    w.string_map(11, &m.labels);
    w.string_map(12, &m.annotations);
    for o in m.owner_references.iter().flatten() {
        w.message(13, |w| {
            w.string(1, &o.kind);
            w.string(3, &o.name);
            w.string(4, &o.uid);
            w.string(5, &o.api_version);
            w.opt_bool(6, o.controller);
            w.opt_bool(7, o.block_owner_deletion);
        });
    }
    w.strings(14, &m.finalizers);
}

fn label_selector(w: &mut W, field: u32, s: &Option<meta::LabelSelector>) {
    let Some(s) = s else { return };
    w.message(field, |w| {
        w.string_map(1, &s.match_labels);
        for r in s.match_expressions.iter().flatten() {
            w.message(2, |w| {
                w.string(1, &r.key);
                w.string(2, &r.operator);
                w.strings(3, &r.values);
            });
        }
    });
}

/// A `LocalObjectReference` (its one field, `name`) as field `field`.
fn local_ref(w: &mut W, field: u32, name: &str) {
    w.message(field, |w| w.string(1, name));
}

fn key_to_paths(w: &mut W, field: u32, items: &Option<Vec<api::KeyToPath>>) {
    for i in items.iter().flatten() {
        w.message(field, |w| {
            w.string(1, &i.key);
            w.string(2, &i.path);
            w.opt_int32(3, i.mode);
            w.opt_int64(4, i.user);
        });
    }
}

fn resource_requirements(w: &mut W, r: &api::ResourceRequirements) {
    w.quantity_map(1, &r.limits);
    w.quantity_map(2, &r.requests);
    for c in r.claims.iter().flatten() {
        w.message(3, |w| {
            w.string(1, &c.name);
            w.opt_string(2, &c.request);
        });
    }
}

fn se_linux_options(w: &mut W, field: u32, o: &Option<api::SELinuxOptions>) {
    let Some(o) = o else { return };
    w.message(field, |w| {
        w.opt_string(1, &o.user);
        w.opt_string(2, &o.role);
        w.opt_string(3, &o.type_);
        w.opt_string(4, &o.level);
    });
}

fn seccomp_profile(w: &mut W, field: u32, p: &Option<api::SeccompProfile>) {
    let Some(p) = p else { return };
    w.message(field, |w| {
        w.string(1, &p.type_);
        w.opt_string(2, &p.localhost_profile);
    });
}

fn security_context(w: &mut W, s: &api::SecurityContext) {
    if let Some(c) = &s.capabilities {
        w.message(1, |w| {
            w.strings(1, &c.add);
            w.strings(2, &c.drop);
        });
    }
    w.opt_bool(2, s.privileged);
    se_linux_options(w, 3, &s.se_linux_options);
    w.opt_int64(4, s.run_as_user);
    w.opt_bool(5, s.run_as_non_root);
    w.opt_bool(6, s.read_only_root_filesystem);
    w.opt_bool(7, s.allow_privilege_escalation);
    w.opt_int64(8, s.run_as_group);
    w.opt_string(9, &s.proc_mount);
    seccomp_profile(w, 11, &s.seccomp_profile);
}

fn pod_security_context(w: &mut W, s: &api::PodSecurityContext) {
    se_linux_options(w, 1, &s.se_linux_options);
    w.opt_int64(2, s.run_as_user);
    w.opt_bool(3, s.run_as_non_root);
    for g in s.supplemental_groups.iter().flatten() {
        w.int64(4, *g);
    }
    w.opt_int64(5, s.fs_group);
    w.opt_int64(6, s.run_as_group);
    for c in s.sysctls.iter().flatten() {
        w.message(7, |w| {
            w.string(1, &c.name);
            w.string(2, &c.value);
        });
    }
    w.opt_string(9, &s.fs_group_change_policy);
    seccomp_profile(w, 10, &s.seccomp_profile);
    w.opt_string(12, &s.supplemental_groups_policy);
    w.opt_string(13, &s.se_linux_change_policy);
}

/// The fields of a Container, or of an EphemeralContainer's EphemeralContainerCommon: the
/// two share their field names and numbers.
macro_rules! container_fields {
    ($w:expr, $c:expr) => {{
        let (w, c) = ($w, $c);
        w.string(1, &c.name);
        w.opt_string(2, &c.image);
        w.strings(3, &c.command);
        w.strings(4, &c.args);
        w.opt_string(5, &c.working_dir);
        for p in c.ports.iter().flatten() {
            w.message(6, |w| {
                w.opt_string(1, &p.name);
                w.opt_int32(2, p.host_port);
                w.opt_int32(3, Some(p.container_port));
                w.opt_string(4, &p.protocol);
                w.opt_string(5, &p.host_ip);
            });
        }
        for e in c.env.iter().flatten() {
            w.message(7, |w| {
                w.string(1, &e.name);
                w.opt_string(2, &e.value);
                if let Some(from) = &e.value_from {
                    w.message(3, |w| env_var_source(w, from));
                }
            });
        }
        if let Some(r) = &c.resources {
            w.message(8, |w| resource_requirements(w, r));
        }
        for m in c.volume_mounts.iter().flatten() {
            w.message(9, |w| {
                w.string(1, &m.name);
                w.opt_bool(2, m.read_only);
                w.string(3, &m.mount_path);
                w.opt_string(4, &m.sub_path);
                w.opt_string(5, &m.mount_propagation);
                w.opt_string(6, &m.sub_path_expr);
                w.opt_string(7, &m.recursive_read_only);
            });
        }
        w.opt_string(14, &c.image_pull_policy);
        if let Some(s) = &c.security_context {
            w.message(15, |w| security_context(w, s));
        }
        for d in c.volume_devices.iter().flatten() {
            w.message(21, |w| {
                w.string(1, &d.name);
                w.string(2, &d.device_path);
            });
        }
        for r in c.resize_policy.iter().flatten() {
            w.message(23, |w| {
                w.string(1, &r.resource_name);
                w.string(2, &r.restart_policy);
            });
        }
        w.opt_string(24, &c.restart_policy);
    }};
}

fn env_var_source(w: &mut W, s: &api::EnvVarSource) {
    if let Some(f) = &s.field_ref {
        w.message(1, |w| {
            w.opt_string(1, &f.api_version);
            w.string(2, &f.field_path);
        });
    }
    if let Some(r) = &s.resource_field_ref {
        w.message(2, |w| {
            w.opt_string(1, &r.container_name);
            w.string(2, &r.resource);
            if let Some(d) = &r.divisor {
                w.message(3, |q| q.string(1, &d.0));
            }
        });
    }
    if let Some(k) = &s.config_map_key_ref {
        w.message(3, |w| {
            local_ref(w, 1, &k.name);
            w.string(2, &k.key);
            w.opt_bool(3, k.optional);
        });
    }
    if let Some(k) = &s.secret_key_ref {
        w.message(4, |w| {
            local_ref(w, 1, &k.name);
            w.string(2, &k.key);
            w.opt_bool(3, k.optional);
        });
    }
}

fn container(w: &mut W, c: &api::Container) {
    container_fields!(w, c);
}

fn ephemeral_container(w: &mut W, c: &api::EphemeralContainer) {
    w.message(1, |w| container_fields!(w, c));
    w.opt_string(2, &c.target_container_name);
}

fn node_selector_requirement(w: &mut W, r: &api::NodeSelectorRequirement) {
    w.string(1, &r.key);
    w.string(2, &r.operator);
    w.strings(3, &r.values);
}

fn node_selector_term(w: &mut W, t: &api::NodeSelectorTerm) {
    for r in t.match_expressions.iter().flatten() {
        w.message(1, |w| node_selector_requirement(w, r));
    }
    for r in t.match_fields.iter().flatten() {
        w.message(2, |w| node_selector_requirement(w, r));
    }
}

fn node_affinity(w: &mut W, na: &api::NodeAffinity) {
    if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
        w.message(1, |w| {
            for t in &req.node_selector_terms {
                w.message(1, |w| node_selector_term(w, t));
            }
        });
    }
    for p in na
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
    {
        w.message(2, |w| {
            w.opt_int32(1, Some(p.weight));
            w.message(2, |w| node_selector_term(w, &p.preference));
        });
    }
}

fn pod_affinity_term(w: &mut W, t: &api::PodAffinityTerm) {
    label_selector(w, 1, &t.label_selector);
    w.strings(2, &t.namespaces);
    w.string(3, &t.topology_key);
    label_selector(w, 4, &t.namespace_selector);
    w.strings(5, &t.match_label_keys);
    w.strings(6, &t.mismatch_label_keys);
}

/// PodAffinity and PodAntiAffinity have the same shape.
fn pod_affinity_terms(
    w: &mut W,
    required: &Option<Vec<api::PodAffinityTerm>>,
    preferred: &Option<Vec<api::WeightedPodAffinityTerm>>,
) {
    for t in required.iter().flatten() {
        w.message(1, |w| pod_affinity_term(w, t));
    }
    for p in preferred.iter().flatten() {
        w.message(2, |w| {
            w.opt_int32(1, Some(p.weight));
            w.message(2, |w| pod_affinity_term(w, &p.pod_affinity_term));
        });
    }
}

fn affinity(w: &mut W, a: &api::Affinity) {
    if let Some(na) = &a.node_affinity {
        w.message(1, |w| node_affinity(w, na));
    }
    if let Some(pa) = &a.pod_affinity {
        w.message(2, |w| {
            pod_affinity_terms(
                w,
                &pa.required_during_scheduling_ignored_during_execution,
                &pa.preferred_during_scheduling_ignored_during_execution,
            )
        });
    }
    if let Some(pa) = &a.pod_anti_affinity {
        w.message(3, |w| {
            pod_affinity_terms(
                w,
                &pa.required_during_scheduling_ignored_during_execution,
                &pa.preferred_during_scheduling_ignored_during_execution,
            )
        });
    }
}

fn topology_spread_constraint(w: &mut W, c: &api::TopologySpreadConstraint) {
    w.opt_int32(1, Some(c.max_skew));
    w.string(2, &c.topology_key);
    w.string(3, &c.when_unsatisfiable);
    label_selector(w, 4, &c.label_selector);
    w.opt_int32(5, c.min_domains);
    w.opt_string(6, &c.node_affinity_policy);
    w.opt_string(7, &c.node_taints_policy);
    w.strings(8, &c.match_label_keys);
}

fn persistent_volume_claim_spec(w: &mut W, s: &api::PersistentVolumeClaimSpec) {
    w.strings(1, &s.access_modes);
    if let Some(r) = &s.resources {
        w.message(2, |w| {
            w.quantity_map(1, &r.limits);
            w.quantity_map(2, &r.requests);
        });
    }
    w.opt_string(3, &s.volume_name);
    label_selector(w, 4, &s.selector);
    w.opt_string(5, &s.storage_class_name);
    w.opt_string(6, &s.volume_mode);
    if let Some(d) = &s.data_source {
        w.message(7, |w| {
            w.opt_string(1, &d.api_group);
            w.string(2, &d.kind);
            w.string(3, &d.name);
        });
    }
    if let Some(d) = &s.data_source_ref {
        w.message(8, |w| {
            w.opt_string(1, &d.api_group);
            w.string(2, &d.kind);
            w.string(3, &d.name);
            w.opt_string(4, &d.namespace);
        });
    }
    w.opt_string(9, &s.volume_attributes_class_name);
}

/// A volume's source (the `VolumeSource` message). The sources kubesched's plugins and
/// upstream's read (claims, the cloud disks, CSI, ephemeral, and the common ones) carry
/// their fields; any other source is sent as its message without fields, so the guest
/// still sees which source the volume has.
fn volume_source(w: &mut W, v: &api::Volume) {
    if let Some(s) = &v.host_path {
        w.message(1, |w| {
            w.string(1, &s.path);
            w.opt_string(2, &s.type_);
        });
    }
    if let Some(s) = &v.empty_dir {
        w.message(2, |w| {
            w.opt_string(1, &s.medium);
            if let Some(q) = &s.size_limit {
                w.message(2, |w| w.string(1, &q.0));
            }
        });
    }
    if let Some(s) = &v.gce_persistent_disk {
        w.message(3, |w| {
            w.string(1, &s.pd_name);
            w.opt_string(2, &s.fs_type);
            w.opt_int32(3, s.partition);
            w.opt_bool(4, s.read_only);
        });
    }
    if let Some(s) = &v.aws_elastic_block_store {
        w.message(4, |w| {
            w.string(1, &s.volume_id);
            w.opt_string(2, &s.fs_type);
            w.opt_int32(3, s.partition);
            w.opt_bool(4, s.read_only);
        });
    }
    if v.git_repo.is_some() {
        w.message(5, |_| {});
    }
    if let Some(s) = &v.secret {
        w.message(6, |w| {
            w.opt_string(1, &s.secret_name);
            key_to_paths(w, 2, &s.items);
            w.opt_int32(3, s.default_mode);
            w.opt_bool(4, s.optional);
        });
    }
    if let Some(s) = &v.nfs {
        w.message(7, |w| {
            w.string(1, &s.server);
            w.string(2, &s.path);
            w.opt_bool(3, s.read_only);
        });
    }
    if let Some(s) = &v.iscsi {
        w.message(8, |w| {
            w.string(1, &s.target_portal);
            w.string(2, &s.iqn);
            w.opt_int32(3, Some(s.lun));
            w.opt_string(4, &s.iscsi_interface);
            w.opt_string(5, &s.fs_type);
            w.opt_bool(6, s.read_only);
            w.strings(7, &s.portals);
        });
    }
    if v.glusterfs.is_some() {
        w.message(9, |_| {});
    }
    if let Some(s) = &v.persistent_volume_claim {
        w.message(10, |w| {
            w.string(1, &s.claim_name);
            w.opt_bool(2, s.read_only);
        });
    }
    if let Some(s) = &v.rbd {
        w.message(11, |w| {
            for m in &s.monitors {
                w.string(1, m);
            }
            w.string(2, &s.image);
            w.opt_string(3, &s.fs_type);
            w.opt_string(4, &s.pool);
            w.opt_string(5, &s.user);
            w.opt_bool(8, s.read_only);
        });
    }
    if v.flex_volume.is_some() {
        w.message(12, |_| {});
    }
    if let Some(s) = &v.cinder {
        w.message(13, |w| {
            w.string(1, &s.volume_id);
            w.opt_string(2, &s.fs_type);
            w.opt_bool(3, s.read_only);
        });
    }
    if v.cephfs.is_some() {
        w.message(14, |_| {});
    }
    if v.flocker.is_some() {
        w.message(15, |_| {});
    }
    if let Some(s) = &v.downward_api {
        w.message(16, |w| w.opt_int32(2, s.default_mode));
    }
    if v.fc.is_some() {
        w.message(17, |_| {});
    }
    if let Some(s) = &v.azure_file {
        w.message(18, |w| {
            w.string(1, &s.secret_name);
            w.string(2, &s.share_name);
            w.opt_bool(3, s.read_only);
        });
    }
    if let Some(s) = &v.config_map {
        w.message(19, |w| {
            local_ref(w, 1, &s.name);
            key_to_paths(w, 2, &s.items);
            w.opt_int32(3, s.default_mode);
            w.opt_bool(4, s.optional);
        });
    }
    if v.vsphere_volume.is_some() {
        w.message(20, |_| {});
    }
    if v.quobyte.is_some() {
        w.message(21, |_| {});
    }
    if let Some(s) = &v.azure_disk {
        w.message(22, |w| {
            w.string(1, &s.disk_name);
            w.string(2, &s.disk_uri);
            w.opt_string(3, &s.caching_mode);
            w.opt_string(4, &s.fs_type);
            w.opt_bool(5, s.read_only);
            w.opt_string(6, &s.kind);
        });
    }
    if v.photon_persistent_disk.is_some() {
        w.message(23, |_| {});
    }
    if v.portworx_volume.is_some() {
        w.message(24, |_| {});
    }
    if v.scale_io.is_some() {
        w.message(25, |_| {});
    }
    if let Some(s) = &v.projected {
        w.message(26, |w| {
            for p in s.sources.iter().flatten() {
                w.message(1, |w| volume_projection(w, p));
            }
            w.opt_int32(2, s.default_mode);
        });
    }
    if v.storageos.is_some() {
        w.message(27, |_| {});
    }
    if let Some(s) = &v.csi {
        w.message(28, |w| {
            w.string(1, &s.driver);
            w.opt_bool(2, s.read_only);
            w.opt_string(3, &s.fs_type);
            w.string_map(4, &s.volume_attributes);
            if let Some(r) = &s.node_publish_secret_ref {
                local_ref(w, 5, &r.name);
            }
        });
    }
    if let Some(s) = &v.ephemeral {
        w.message(29, |w| {
            if let Some(t) = &s.volume_claim_template {
                w.message(1, |w| {
                    if let Some(m) = &t.metadata {
                        w.message(1, |w| object_meta(w, m));
                    }
                    w.message(2, |w| persistent_volume_claim_spec(w, &t.spec));
                });
            }
        });
    }
    if let Some(s) = &v.image {
        w.message(30, |w| {
            w.opt_string(1, &s.reference);
            w.opt_string(2, &s.pull_policy);
        });
    }
}

fn volume_projection(w: &mut W, p: &api::VolumeProjection) {
    if let Some(s) = &p.secret {
        w.message(1, |w| {
            local_ref(w, 1, &s.name);
            key_to_paths(w, 2, &s.items);
            w.opt_bool(4, s.optional);
        });
    }
    if p.downward_api.is_some() {
        w.message(2, |_| {});
    }
    if let Some(s) = &p.config_map {
        w.message(3, |w| {
            local_ref(w, 1, &s.name);
            key_to_paths(w, 2, &s.items);
            w.opt_bool(4, s.optional);
        });
    }
    if let Some(s) = &p.service_account_token {
        w.message(4, |w| {
            w.opt_string(1, &s.audience);
            w.opt_int64(2, s.expiration_seconds);
            w.string(3, &s.path);
        });
    }
    if p.cluster_trust_bundle.is_some() {
        w.message(5, |_| {});
    }
    if p.pod_certificate.is_some() {
        w.message(6, |_| {});
    }
}

fn pod_spec(w: &mut W, s: &api::PodSpec) {
    for v in s.volumes.iter().flatten() {
        w.message(1, |w| {
            w.string(1, &v.name);
            w.message(2, |w| volume_source(w, v));
        });
    }
    for c in &s.containers {
        w.message(2, |w| container(w, c));
    }
    w.opt_string(3, &s.restart_policy);
    w.opt_int64(4, s.termination_grace_period_seconds);
    w.opt_int64(5, s.active_deadline_seconds);
    w.opt_string(6, &s.dns_policy);
    w.string_map(7, &s.node_selector);
    w.opt_string(8, &s.service_account_name);
    w.opt_string(9, &s.service_account);
    w.opt_string(10, &s.node_name);
    w.opt_bool(11, s.host_network);
    w.opt_bool(12, s.host_pid);
    w.opt_bool(13, s.host_ipc);
    if let Some(sc) = &s.security_context {
        w.message(14, |w| pod_security_context(w, sc));
    }
    for r in s.image_pull_secrets.iter().flatten() {
        local_ref(w, 15, &r.name);
    }
    w.opt_string(16, &s.hostname);
    w.opt_string(17, &s.subdomain);
    if let Some(a) = &s.affinity {
        w.message(18, |w| affinity(w, a));
    }
    w.opt_string(19, &s.scheduler_name);
    for c in s.init_containers.iter().flatten() {
        w.message(20, |w| container(w, c));
    }
    w.opt_bool(21, s.automount_service_account_token);
    for t in s.tolerations.iter().flatten() {
        w.message(22, |w| {
            w.opt_string(1, &t.key);
            w.opt_string(2, &t.operator);
            w.opt_string(3, &t.value);
            w.opt_string(4, &t.effect);
            w.opt_int64(5, t.toleration_seconds);
        });
    }
    for h in s.host_aliases.iter().flatten() {
        w.message(23, |w| {
            w.string(1, &h.ip);
            w.strings(2, &h.hostnames);
        });
    }
    w.opt_string(24, &s.priority_class_name);
    w.opt_int32(25, s.priority);
    if let Some(d) = &s.dns_config {
        w.message(26, |w| {
            w.strings(1, &d.nameservers);
            w.strings(2, &d.searches);
            for o in d.options.iter().flatten() {
                w.message(3, |w| {
                    w.opt_string(1, &o.name);
                    w.opt_string(2, &o.value);
                });
            }
        });
    }
    w.opt_bool(27, s.share_process_namespace);
    for g in s.readiness_gates.iter().flatten() {
        w.message(28, |w| w.string(1, &g.condition_type));
    }
    w.opt_string(29, &s.runtime_class_name);
    w.opt_bool(30, s.enable_service_links);
    w.opt_string(31, &s.preemption_policy);
    w.quantity_map(32, &s.overhead);
    for c in s.topology_spread_constraints.iter().flatten() {
        w.message(33, |w| topology_spread_constraint(w, c));
    }
    for c in s.ephemeral_containers.iter().flatten() {
        w.message(34, |w| ephemeral_container(w, c));
    }
    w.opt_bool(35, s.set_hostname_as_fqdn);
    if let Some(os) = &s.os {
        w.message(36, |w| w.string(1, &os.name));
    }
    w.opt_bool(37, s.host_users);
    for g in s.scheduling_gates.iter().flatten() {
        w.message(38, |w| w.string(1, &g.name));
    }
    for c in s.resource_claims.iter().flatten() {
        w.message(39, |w| {
            w.string(1, &c.name);
            w.opt_string(3, &c.resource_claim_name);
            w.opt_string(4, &c.resource_claim_template_name);
        });
    }
    if let Some(r) = &s.resources {
        w.message(40, |w| resource_requirements(w, r));
    }
    w.opt_string(41, &s.hostname_override);
    if let Some(g) = &s.scheduling_group {
        w.message(43, |w| w.opt_string(1, &g.pod_group_name));
    }
}

fn container_state(w: &mut W, field: u32, s: &Option<api::ContainerState>) {
    let Some(s) = s else { return };
    w.message(field, |w| {
        if let Some(x) = &s.waiting {
            w.message(1, |w| {
                w.opt_string(1, &x.reason);
                w.opt_string(2, &x.message);
            });
        }
        if let Some(x) = &s.running {
            w.message(2, |w| w.time(1, &x.started_at));
        }
        if let Some(x) = &s.terminated {
            w.message(3, |w| {
                w.opt_int32(1, Some(x.exit_code));
                w.opt_int32(2, x.signal);
                w.opt_string(3, &x.reason);
                w.opt_string(4, &x.message);
                w.time(5, &x.started_at);
                w.time(6, &x.finished_at);
                w.opt_string(7, &x.container_id);
            });
        }
    });
}

fn container_statuses(w: &mut W, field: u32, v: &Option<Vec<api::ContainerStatus>>) {
    for c in v.iter().flatten() {
        w.message(field, |w| {
            w.string(1, &c.name);
            container_state(w, 2, &c.state);
            container_state(w, 3, &c.last_state);
            w.opt_bool(4, Some(c.ready));
            w.opt_int32(5, Some(c.restart_count));
            w.string(6, &c.image);
            w.string(7, &c.image_id);
            w.opt_string(8, &c.container_id);
            w.opt_bool(9, c.started);
            w.quantity_map(10, &c.allocated_resources);
            if let Some(r) = &c.resources {
                w.message(11, |w| resource_requirements(w, r));
            }
            w.opt_string(15, &c.stop_signal);
        });
    }
}

fn pod_status(w: &mut W, s: &api::PodStatus) {
    w.opt_string(1, &s.phase);
    for c in s.conditions.iter().flatten() {
        w.message(2, |w| {
            w.string(1, &c.type_);
            w.string(2, &c.status);
            w.time(3, &c.last_probe_time);
            w.time(4, &c.last_transition_time);
            w.opt_string(5, &c.reason);
            w.opt_string(6, &c.message);
            w.opt_int64(7, c.observed_generation);
        });
    }
    w.opt_string(3, &s.message);
    w.opt_string(4, &s.reason);
    w.opt_string(5, &s.host_ip);
    w.opt_string(6, &s.pod_ip);
    w.time(7, &s.start_time);
    container_statuses(w, 8, &s.container_statuses);
    w.opt_string(9, &s.qos_class);
    container_statuses(w, 10, &s.init_container_statuses);
    w.opt_string(11, &s.nominated_node_name);
    for ip in s.pod_ips.iter().flatten() {
        w.message(12, |w| w.string(1, &ip.ip));
    }
    container_statuses(w, 13, &s.ephemeral_container_statuses);
    w.opt_string(14, &s.resize);
    for c in s.resource_claim_statuses.iter().flatten() {
        w.message(15, |w| {
            w.string(1, &c.name);
            w.opt_string(2, &c.resource_claim_name);
        });
    }
    for ip in s.host_ips.iter().flatten() {
        w.message(16, |w| w.string(1, &ip.ip));
    }
    w.opt_int64(17, s.observed_generation);
    if let Some(e) = &s.extended_resource_claim_status {
        w.message(18, |w| {
            for m in &e.request_mappings {
                w.message(1, |w| {
                    w.string(1, &m.container_name);
                    w.string(2, &m.resource_name);
                    w.string(3, &m.request_name);
                });
            }
            w.string(2, &e.resource_claim_name);
        });
    }
    w.quantity_map(19, &s.allocated_resources);
    if let Some(r) = &s.resources {
        w.message(20, |w| resource_requirements(w, r));
    }
}

fn pod_into(w: &mut W, p: &api::Pod) {
    w.message(1, |w| object_meta(w, &p.metadata));
    if let Some(s) = &p.spec {
        w.message(2, |w| pod_spec(w, s));
    }
    if let Some(s) = &p.status {
        w.message(3, |w| pod_status(w, s));
    }
}

fn node_into(w: &mut W, n: &api::Node) {
    w.message(1, |w| object_meta(w, &n.metadata));
    if let Some(s) = &n.spec {
        w.message(2, |w| {
            w.opt_string(1, &s.pod_cidr);
            w.opt_string(2, &s.external_id);
            w.opt_string(3, &s.provider_id);
            w.opt_bool(4, s.unschedulable);
            for t in s.taints.iter().flatten() {
                w.message(5, |w| {
                    w.string(1, &t.key);
                    w.opt_string(2, &t.value);
                    w.string(3, &t.effect);
                    w.time(4, &t.time_added);
                });
            }
            w.strings(7, &s.pod_cidrs);
        });
    }
    if let Some(s) = &n.status {
        w.message(3, |w| {
            w.quantity_map(1, &s.capacity);
            w.quantity_map(2, &s.allocatable);
            w.opt_string(3, &s.phase);
            for c in s.conditions.iter().flatten() {
                w.message(4, |w| {
                    w.string(1, &c.type_);
                    w.string(2, &c.status);
                    w.time(3, &c.last_heartbeat_time);
                    w.time(4, &c.last_transition_time);
                    w.opt_string(5, &c.reason);
                    w.opt_string(6, &c.message);
                });
            }
            for a in s.addresses.iter().flatten() {
                w.message(5, |w| {
                    w.string(1, &a.type_);
                    w.string(2, &a.address);
                });
            }
            if let Some(d) = &s.daemon_endpoints {
                w.message(6, |w| {
                    if let Some(k) = &d.kubelet_endpoint {
                        w.message(1, |w| w.opt_int32(1, Some(k.port)));
                    }
                });
            }
            if let Some(i) = &s.node_info {
                w.message(7, |w| {
                    w.string(1, &i.machine_id);
                    w.string(2, &i.system_uuid);
                    w.string(3, &i.boot_id);
                    w.string(4, &i.kernel_version);
                    w.string(5, &i.os_image);
                    w.string(6, &i.container_runtime_version);
                    w.string(7, &i.kubelet_version);
                    w.string(8, &i.kube_proxy_version);
                    w.string(9, &i.operating_system);
                    w.string(10, &i.architecture);
                    if let Some(swap) = &i.swap {
                        w.message(11, |w| w.opt_int64(1, swap.capacity));
                    }
                });
            }
            for i in s.images.iter().flatten() {
                w.message(8, |w| {
                    w.strings(1, &i.names);
                    w.opt_int64(2, i.size_bytes);
                });
            }
            w.strings(9, &s.volumes_in_use);
            for v in s.volumes_attached.iter().flatten() {
                w.message(10, |w| {
                    w.string(1, &v.name);
                    w.string(2, &v.device_path);
                });
            }
            for h in s.runtime_handlers.iter().flatten() {
                w.message(12, |w| {
                    w.opt_string(1, &h.name);
                    if let Some(f) = &h.features {
                        w.message(2, |w| {
                            w.opt_bool(1, f.recursive_read_only_mounts);
                            w.opt_bool(2, f.user_namespaces);
                        });
                    }
                });
            }
            if let Some(f) = &s.features {
                w.message(13, |w| w.opt_bool(1, f.supplemental_groups_policy));
            }
            w.strings(14, &s.declared_features);
        });
    }
}

/// A `k8s.io.api.core.v1.Pod` message.
pub fn pod(p: &api::Pod) -> Vec<u8> {
    let mut w = W::default();
    pod_into(&mut w, p);
    w.0
}

/// A `k8s.io.api.core.v1.Node` message.
pub fn node(n: &api::Node) -> Vec<u8> {
    let mut w = W::default();
    node_into(&mut w, n);
    w.0
}

/// A `k8s.io.api.core.v1.NodeList` message of these nodes.
pub fn node_list<'a>(nodes: impl IntoIterator<Item = &'a api::Node>) -> Vec<u8> {
    let mut w = W::default();
    w.message(1, |_| {});
    for n in nodes {
        w.message(2, |w| node_into(w, n));
    }
    w.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_encodes_its_name_and_node_name() {
        let p = api::Pod {
            metadata: meta::ObjectMeta {
                name: Some("p1".into()),
                ..Default::default()
            },
            spec: Some(api::PodSpec {
                node_name: Some("n".into()),
                priority: Some(-1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let b = pod(&p);
        // metadata{name:"p1"}, spec{nodeName:"n", priority:-1 (10-byte varint)}
        let mut want = vec![
            0x0a, 4, 0x0a, 2, b'p', b'1', 0x12, 15, 0x52, 1, b'n', 0xc8, 0x01,
        ];
        want.extend_from_slice(&[0xff; 9]);
        want.push(0x01);
        assert_eq!(b, want);
    }

    /// A decoded field: a varint or a length-delimited body.
    #[derive(Debug)]
    enum V {
        Int(u64),
        Len(Vec<u8>),
    }

    fn varint(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*i];
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// A message's fields in wire order (only the two wire types the encoder writes).
    fn fields(b: &[u8]) -> Vec<(u32, V)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let key = varint(b, &mut i);
            let (field, wire) = ((key >> 3) as u32, key & 7);
            match wire {
                0 => out.push((field, V::Int(varint(b, &mut i)))),
                2 => {
                    let len = varint(b, &mut i) as usize;
                    out.push((field, V::Len(b[i..i + len].to_vec())));
                    i += len;
                }
                other => panic!("wire type {other} is not written by the encoder"),
            }
        }
        out
    }

    /// Every value at a path of field numbers (each step into every occurrence).
    fn at(b: &[u8], path: &[u32]) -> Vec<V> {
        let Some((first, rest)) = path.split_first() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (f, v) in fields(b) {
            if f != *first {
                continue;
            }
            match (rest.is_empty(), v) {
                (true, v) => out.push(v),
                (false, V::Len(inner)) => out.extend(at(&inner, rest)),
                (false, V::Int(_)) => {}
            }
        }
        out
    }

    fn strs(b: &[u8], path: &[u32]) -> Vec<String> {
        at(b, path)
            .into_iter()
            .filter_map(|v| match v {
                V::Len(s) => Some(String::from_utf8(s).expect("utf-8")),
                V::Int(_) => None,
            })
            .collect()
    }

    fn ints(b: &[u8], path: &[u32]) -> Vec<u64> {
        at(b, path)
            .into_iter()
            .filter_map(|v| match v {
                V::Int(i) => Some(i),
                V::Len(_) => None,
            })
            .collect()
    }

    /// One row: the path (as `generated.proto` numbers it) and the strings or integers there.
    fn check(b: &[u8], rows: &[(&str, &[u32], &[&str])], int_rows: &[(&str, &[u32], &[u64])]) {
        for (what, path, want) in rows {
            assert_eq!(strs(b, path), *want, "{what} at {path:?}");
        }
        for (what, path, want) in int_rows {
            assert_eq!(ints(b, path), *want, "{what} at {path:?}");
        }
    }

    fn web_pod() -> api::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u1",
                         "deletionGracePeriodSeconds": 30},
            "spec": {
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1", "readOnly": true}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}}},
                    {"name": "cfg", "configMap": {"name": "settings"}},
                    {"name": "disk", "csi": {"driver": "ebs.csi.aws.com"}},
                    {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1"}},
                    {"name": "gce", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": true}},
                    {"name": "flex", "flexVolume": {"driver": "example/flex"}}
                ],
                "containers": [{"name": "app", "image": "nginx",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "securityContext": {"privileged": true}}],
                "ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "app"}],
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone",
                         "matchLabelKeys": ["version"]}]},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "podAffinityTerm": {
                            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                            "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}}]}
                },
                "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}},
                    "minDomains": 3, "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["pod-template-hash"]}],
                "securityContext": {"fsGroup": 2000, "supplementalGroups": [1, 2]},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
                "os": {"name": "linux"}
            },
            "status": {"startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 3,
                                       "image": "nginx", "imageID": "sha"}],
                "podIPs": [{"ip": "10.0.0.1"}]}
        }))
        .expect("a valid pod")
    }

    #[test]
    fn a_pod_carries_its_volumes_with_their_sources() {
        let b = pod(&web_pod());
        check(
            &b,
            &[
                (
                    "volume names",
                    &[2, 1, 1],
                    &["data", "scratch", "cfg", "disk", "ebs", "gce", "flex"],
                ),
                ("claim name", &[2, 1, 2, 10, 1], &["data-web-1"]),
                (
                    "ephemeral storage class",
                    &[2, 1, 2, 29, 1, 2, 5],
                    &["fast"],
                ),
                (
                    "ephemeral access modes",
                    &[2, 1, 2, 29, 1, 2, 1],
                    &["ReadWriteOnce"],
                ),
                (
                    "ephemeral request name",
                    &[2, 1, 2, 29, 1, 2, 2, 2, 1],
                    &["storage"],
                ),
                (
                    "ephemeral request quantity",
                    &[2, 1, 2, 29, 1, 2, 2, 2, 2, 1],
                    &["1Gi"],
                ),
                ("configMap name", &[2, 1, 2, 19, 1, 1], &["settings"]),
                ("csi driver", &[2, 1, 2, 28, 1], &["ebs.csi.aws.com"]),
                ("ebs volume", &[2, 1, 2, 4, 1], &["vol-1"]),
                ("gce disk", &[2, 1, 2, 3, 1], &["pd-1"]),
                ("mount path", &[2, 2, 9, 3], &["/data"]),
            ],
            &[
                ("claim readOnly", &[2, 1, 2, 10, 2], &[1]),
                ("gce readOnly", &[2, 1, 2, 3, 4], &[1]),
                ("privileged", &[2, 2, 15, 2], &[1]),
            ],
        );
        // A source sent without its fields is still there, so the guest knows the kind.
        assert_eq!(at(&b, &[2, 1, 2, 12]).len(), 1, "flexVolume present");
        assert!(at(&b, &[2, 1, 2, 1]).is_empty(), "no hostPath");
    }

    #[test]
    fn a_pod_carries_its_pod_affinity_and_spread_constraints() {
        let b = pod(&web_pod());
        check(
            &b,
            &[
                ("affinity topology key", &[2, 18, 2, 1, 3], &["zone"]),
                ("affinity selector key", &[2, 18, 2, 1, 1, 1, 1], &["app"]),
                ("affinity selector value", &[2, 18, 2, 1, 1, 1, 2], &["db"]),
                ("affinity matchLabelKeys", &[2, 18, 2, 1, 5], &["version"]),
                (
                    "anti-affinity topology key",
                    &[2, 18, 3, 2, 2, 3],
                    &["kubernetes.io/hostname"],
                ),
                (
                    "anti-affinity expression key",
                    &[2, 18, 3, 2, 2, 1, 2, 1],
                    &["app"],
                ),
                (
                    "anti-affinity expression operator",
                    &[2, 18, 3, 2, 2, 1, 2, 2],
                    &["In"],
                ),
                (
                    "anti-affinity expression values",
                    &[2, 18, 3, 2, 2, 1, 2, 3],
                    &["web"],
                ),
                ("spread topology key", &[2, 33, 2], &["zone"]),
                ("spread when unsatisfiable", &[2, 33, 3], &["DoNotSchedule"]),
                ("spread selector value", &[2, 33, 4, 1, 2], &["web"]),
                ("spread taints policy", &[2, 33, 7], &["Honor"]),
                ("spread matchLabelKeys", &[2, 33, 8], &["pod-template-hash"]),
            ],
            &[
                ("anti-affinity weight", &[2, 18, 3, 2, 1], &[50]),
                ("spread maxSkew", &[2, 33, 1], &[2]),
                ("spread minDomains", &[2, 33, 5], &[3]),
            ],
        );
        assert_eq!(
            at(&b, &[2, 18, 3, 2, 2, 4]).len(),
            1,
            "empty namespaceSelector kept"
        );
        assert!(at(&b, &[2, 18, 1]).is_empty(), "no node affinity");
    }

    #[test]
    fn a_pod_carries_its_other_spec_and_status_fields() {
        let b = pod(&web_pod());
        check(
            &b,
            &[
                ("ephemeral container", &[2, 34, 1, 1], &["debug"]),
                ("ephemeral target", &[2, 34, 2], &["app"]),
                ("claim template", &[2, 39, 4], &["gpu-template"]),
                ("os", &[2, 36, 1], &["linux"]),
                ("container status", &[3, 8, 1], &["app"]),
                ("pod IPs", &[3, 12, 1], &["10.0.0.1"]),
            ],
            &[
                ("grace period", &[1, 10], &[30]),
                ("fsGroup", &[2, 14, 5], &[2000]),
                ("supplemental groups", &[2, 14, 4], &[1, 2]),
                ("start time", &[3, 7, 1], &[1_767_225_600]),
                ("ready", &[3, 8, 4], &[1]),
                ("restarts", &[3, 8, 5], &[3]),
            ],
        );
    }

    #[test]
    fn a_node_carries_its_system_info_and_volumes() {
        let n: api::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}],
                     "externalID": "ext"},
            "status": {
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1",
                    "osImage": "os", "containerRuntimeVersion": "containerd://2", "kubeletVersion": "v1.37.0",
                    "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "arm64"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"],
                "volumesAttached": [{"name": "kubernetes.io/csi/ebs^vol-1", "devicePath": "/dev/xvdb"}],
                "runtimeHandlers": [{"name": "runc", "features": {"userNamespaces": true}}],
                "features": {"supplementalGroupsPolicy": true}
            }
        }))
        .expect("a valid node");
        let b = node(&n);
        check(
            &b,
            &[
                ("external ID", &[2, 2], &["ext"]),
                ("kubelet version", &[3, 7, 7], &["v1.37.0"]),
                ("architecture", &[3, 7, 10], &["arm64"]),
                ("volumes in use", &[3, 9], &["kubernetes.io/csi/ebs^vol-1"]),
                ("attached device", &[3, 10, 2], &["/dev/xvdb"]),
                ("runtime handler", &[3, 12, 1], &["runc"]),
            ],
            &[
                ("taint added", &[2, 5, 4, 1], &[1_767_225_600]),
                ("kubelet port", &[3, 6, 1, 1], &[10250]),
                ("user namespaces", &[3, 12, 2, 2], &[1]),
                ("supplemental groups policy", &[3, 13, 1], &[1]),
            ],
        );
    }
}
