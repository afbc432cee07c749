//! Host ports, with the wildcard semantics of `0.0.0.0`.

use std::collections::{HashMap, HashSet};

/// The wildcard host IP: a port on it conflicts with the same port on every IP.
pub const DEFAULT_BIND_ALL_HOST_IP: &str = "0.0.0.0";

/// One host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct HostPort {
    /// Host IP; `0.0.0.0` when the pod gives none.
    pub ip: String,
    /// `TCP`, `UDP` or `SCTP`; `TCP` when the pod gives none.
    pub protocol: String,
    /// The port, > 0.
    pub port: i32,
}

impl HostPort {
    /// Normalises empty IP and protocol to their defaults.
    pub fn new(ip: Option<&str>, protocol: Option<&str>, port: i32) -> Self {
        Self {
            ip: ip
                .filter(|s| !s.is_empty())
                .unwrap_or(DEFAULT_BIND_ALL_HOST_IP)
                .to_string(),
            protocol: protocol
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP")
                .to_string(),
            port,
        }
    }
}

/// The host ports in use on a node, by IP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortInfo {
    by_ip: HashMap<String, HashMap<(String, i32), u32>>,
}

impl HostPortInfo {
    /// Records a port (counted, so two pods' identical ports both need removing).
    pub fn add(&mut self, p: &HostPort) {
        *self
            .by_ip
            .entry(p.ip.clone())
            .or_default()
            .entry((p.protocol.clone(), p.port))
            .or_insert(0) += 1;
    }

    /// Forgets a port recorded by `add`.
    pub fn remove(&mut self, p: &HostPort) {
        if let Some(ports) = self.by_ip.get_mut(&p.ip) {
            let key = (p.protocol.clone(), p.port);
            if let Some(n) = ports.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    ports.remove(&key);
                }
            }
            if ports.is_empty() {
                self.by_ip.remove(&p.ip);
            }
        }
    }

    /// Whether the port conflicts with one in use: same protocol and port on the same IP,
    /// or where either side is the wildcard IP.
    pub fn conflicts(&self, p: &HostPort) -> bool {
        let key = (p.protocol.clone(), p.port);
        if p.ip == DEFAULT_BIND_ALL_HOST_IP {
            return self.by_ip.values().any(|ports| ports.contains_key(&key));
        }
        [p.ip.as_str(), DEFAULT_BIND_ALL_HOST_IP].iter().any(|ip| {
            self.by_ip
                .get(*ip)
                .is_some_and(|ports| ports.contains_key(&key))
        })
    }

    /// How many distinct (ip, protocol, port) entries are in use.
    pub fn len(&self) -> usize {
        self.by_ip.values().map(HashMap::len).sum()
    }

    /// Whether no port is in use.
    pub fn is_empty(&self) -> bool {
        self.by_ip.is_empty()
    }

    /// All entries, sorted, for dumps and comparisons.
    pub fn entries(&self) -> Vec<HostPort> {
        let mut out: Vec<HostPort> = self
            .by_ip
            .iter()
            .flat_map(|(ip, ports)| {
                ports.keys().map(|(proto, port)| HostPort {
                    ip: ip.clone(),
                    protocol: proto.clone(),
                    port: *port,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.ip, &a.protocol, a.port).cmp(&(&b.ip, &b.protocol, b.port)));
        out
    }
}

/// Whether any of the wanted ports conflicts with the ports in use.
pub fn any_conflict(used: &HostPortInfo, wanted: &[HostPort]) -> bool {
    wanted.iter().any(|p| used.conflicts(p))
}

/// Distinct ports of a set, for de-duplicating a pod's own list.
pub fn dedup(ports: Vec<HostPort>) -> Vec<HostPort> {
    let mut seen = HashSet::new();
    ports
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_semantics() {
        let mut used = HostPortInfo::default();
        used.add(&HostPort::new(Some("127.0.0.1"), None, 8080));
        assert!(
            used.conflicts(&HostPort::new(None, None, 8080)),
            "wildcard vs specific"
        );
        assert!(used.conflicts(&HostPort::new(Some("127.0.0.1"), Some("TCP"), 8080)));
        assert!(!used.conflicts(&HostPort::new(Some("127.0.0.2"), None, 8080)));
        assert!(!used.conflicts(&HostPort::new(Some("127.0.0.1"), Some("UDP"), 8080)));
        used.add(&HostPort::new(None, Some("UDP"), 53));
        assert!(
            used.conflicts(&HostPort::new(Some("10.0.0.1"), Some("UDP"), 53)),
            "specific vs wildcard"
        );
        used.remove(&HostPort::new(None, Some("UDP"), 53));
        assert!(!used.conflicts(&HostPort::new(Some("10.0.0.1"), Some("UDP"), 53)));
    }
}
