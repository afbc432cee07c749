//! Kubernetes protobuf (`k8s.io.api.core.v1`) encoding of the objects a guest reads.
//!
//! Guests decode Pod, Node and NodeList with code generated from Kubernetes' `generated.proto`
//! (proto2), so any subset of fields with the right numbers and wire types is a valid message.
//! Encoded here, from the k8s-openapi objects:
//!
//! * `ObjectMeta`: name, generateName, namespace, uid, resourceVersion, generation,
//!   creationTimestamp, deletionTimestamp, labels, annotations, ownerReferences, finalizers.
//! * `PodSpec`: containers and initContainers (name, image, command, args, ports, env name/value,
//!   resources, restartPolicy, imagePullPolicy), restartPolicy, terminationGracePeriodSeconds,
//!   dnsPolicy, nodeSelector, serviceAccountName, nodeName, hostNetwork, hostname, subdomain,
//!   affinity.nodeAffinity, schedulerName, tolerations, priorityClassName, priority,
//!   preemptionPolicy, overhead, schedulingGates, runtimeClassName.
//! * `PodStatus`: phase, conditions, message, reason, nominatedNodeName, hostIP, podIP, qosClass.
//! * `NodeSpec`: podCIDR, podCIDRs, providerID, unschedulable, taints.
//! * `NodeStatus`: capacity, allocatable, phase, conditions, addresses, images,
//!   declaredFeatures.
//!
//! Not encoded (the guest sees them unset): volumes, pod (anti-)affinity, topology spread
//! constraints, security contexts, probes, container statuses and the other fields no example
//! guest reads.

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

fn container(w: &mut W, c: &api::Container) {
    w.string(1, &c.name);
    w.opt_string(2, &c.image);
    w.strings(3, &c.command);
    w.strings(4, &c.args);
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
        });
    }
    if let Some(r) = &c.resources {
        w.message(8, |w| {
            w.quantity_map(1, &r.limits);
            w.quantity_map(2, &r.requests);
        });
    }
    w.opt_string(14, &c.image_pull_policy);
    w.opt_string(24, &c.restart_policy);
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

fn pod_spec(w: &mut W, s: &api::PodSpec) {
    for c in &s.containers {
        w.message(2, |w| container(w, c));
    }
    w.opt_string(3, &s.restart_policy);
    w.opt_int64(4, s.termination_grace_period_seconds);
    w.opt_string(6, &s.dns_policy);
    w.string_map(7, &s.node_selector);
    w.opt_string(8, &s.service_account_name);
    w.opt_string(10, &s.node_name);
    w.opt_bool(11, s.host_network);
    w.opt_string(16, &s.hostname);
    w.opt_string(17, &s.subdomain);
    if let Some(na) = s.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()) {
        w.message(18, |w| {
            w.message(1, |w| {
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
            });
        });
    }
    w.opt_string(19, &s.scheduler_name);
    for c in s.init_containers.iter().flatten() {
        w.message(20, |w| container(w, c));
    }
    for t in s.tolerations.iter().flatten() {
        w.message(22, |w| {
            w.opt_string(1, &t.key);
            w.opt_string(2, &t.operator);
            w.opt_string(3, &t.value);
            w.opt_string(4, &t.effect);
            w.opt_int64(5, t.toleration_seconds);
        });
    }
    w.opt_string(24, &s.priority_class_name);
    w.opt_int32(25, s.priority);
    w.opt_string(29, &s.runtime_class_name);
    w.opt_string(31, &s.preemption_policy);
    w.quantity_map(32, &s.overhead);
    for g in s.scheduling_gates.iter().flatten() {
        w.message(38, |w| w.string(1, &g.name));
    }
}

fn pod_status(w: &mut W, s: &api::PodStatus) {
    w.opt_string(1, &s.phase);
    for c in s.conditions.iter().flatten() {
        w.message(2, |w| {
            w.string(1, &c.type_);
            w.string(2, &c.status);
            w.opt_string(5, &c.reason);
            w.opt_string(6, &c.message);
        });
    }
    w.opt_string(3, &s.message);
    w.opt_string(4, &s.reason);
    w.opt_string(5, &s.host_ip);
    w.opt_string(6, &s.pod_ip);
    w.opt_string(9, &s.qos_class);
    w.opt_string(11, &s.nominated_node_name);
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
            w.opt_string(3, &s.provider_id);
            w.opt_bool(4, s.unschedulable);
            for t in s.taints.iter().flatten() {
                w.message(5, |w| {
                    w.string(1, &t.key);
                    w.opt_string(2, &t.value);
                    w.string(3, &t.effect);
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
            for i in s.images.iter().flatten() {
                w.message(8, |w| {
                    w.strings(1, &i.names);
                    w.opt_int64(2, i.size_bytes);
                });
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
}
