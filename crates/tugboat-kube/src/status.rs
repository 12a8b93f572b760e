//! Ingress status: the addresses clients reach the controller on, written to
//! `status.loadBalancer.ingress` of the Ingresses it serves and cleared from those it
//! stops serving.
//!
//! The addresses come from `--publish-service` (its LoadBalancer ingress, else its
//! external IPs, else its cluster IP) or `--publish-address`. Only the leader writes;
//! a write happens only when an Ingress' status differs from what it should be, so a
//! steady state costs no API calls. An Ingress is cleared only when its status holds
//! exactly our addresses, so that the status another controller wrote is left alone.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressLoadBalancerIngress};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tugboat_model::ObjectKey;

/// The field manager the controller writes status with.
pub const FIELD_MANAGER: &str = "tugboat";

/// Where the published addresses come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishTarget {
    /// `--publish-service NAMESPACE/NAME`.
    pub service: Option<ObjectKey>,
    /// `--publish-address`: IPs and host names.
    pub addresses: Vec<String>,
}

impl PublishTarget {
    /// Whether the operator asked for status at all.
    pub fn is_set(&self) -> bool {
        self.service.is_some() || !self.addresses.is_empty()
    }
}

/// Status writing failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("cannot read the publish Service {service}: {source}")]
    PublishService {
        service: ObjectKey,
        source: kube::Error,
    },
    #[error("cannot write the status of Ingress {ingress}: {source}")]
    Patch {
        ingress: ObjectKey,
        source: kube::Error,
    },
}

/// `--publish-address` values as status entries: IPs become `ip`, names `hostname`.
pub fn entries_from_addresses(addresses: &[String]) -> Vec<IngressLoadBalancerIngress> {
    addresses
        .iter()
        .map(|address| address.trim())
        .filter(|address| !address.is_empty())
        .map(|address| match address.parse::<IpAddr>() {
            Ok(_) => IngressLoadBalancerIngress {
                ip: Some(address.to_string()),
                ..Default::default()
            },
            Err(_) => IngressLoadBalancerIngress {
                hostname: Some(address.to_string()),
                ..Default::default()
            },
        })
        .collect()
}

/// A Service's addresses as status entries: its LoadBalancer ingress, else its external
/// IPs, else its cluster IP.
pub fn entries_from_service(service: &Service) -> Vec<IngressLoadBalancerIngress> {
    let load_balancer: Vec<IngressLoadBalancerIngress> = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(|lb| IngressLoadBalancerIngress {
            ip: lb.ip.clone(),
            hostname: lb.hostname.clone(),
            ..Default::default()
        })
        .collect();
    if !load_balancer.is_empty() {
        return load_balancer;
    }
    let spec = service.spec.as_ref();
    let external: Vec<String> = spec
        .and_then(|s| s.external_ips.clone())
        .unwrap_or_default();
    if !external.is_empty() {
        return entries_from_addresses(&external);
    }
    spec.and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None")
        .map(|ip| entries_from_addresses(&[ip]))
        .unwrap_or_default()
}

fn current_entries(ingress: &Ingress) -> Vec<IngressLoadBalancerIngress> {
    ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
}

/// What to write to one Ingress: `Some(entries)` (empty: clear), or `None` to leave it.
pub fn status_change(
    ingress: &Ingress,
    served: bool,
    ours: &[IngressLoadBalancerIngress],
) -> Option<Vec<IngressLoadBalancerIngress>> {
    let current = current_entries(ingress);
    if served {
        (current != ours).then(|| ours.to_vec())
    } else {
        (!current.is_empty() && current == ours).then(Vec::new)
    }
}

/// Writes Ingress status through the API.
#[derive(Clone)]
pub struct StatusWriter {
    client: Client,
    target: PublishTarget,
}

impl StatusWriter {
    pub fn new(client: Client, target: PublishTarget) -> Self {
        Self { client, target }
    }

    /// The addresses to publish now.
    pub async fn addresses(&self) -> Result<Vec<IngressLoadBalancerIngress>, StatusError> {
        let mut entries = entries_from_addresses(&self.target.addresses);
        if let Some(key) = &self.target.service {
            let api: Api<Service> = Api::namespaced(self.client.clone(), &key.namespace);
            let service =
                api.get(&key.name)
                    .await
                    .map_err(|source| StatusError::PublishService {
                        service: key.clone(),
                        source,
                    })?;
            entries.extend(entries_from_service(&service));
        }
        Ok(entries)
    }

    /// Brings every Ingress' status in line; returns how many were written.
    pub async fn sync(
        &self,
        ingresses: impl IntoIterator<Item = Arc<Ingress>>,
        served: &BTreeSet<ObjectKey>,
    ) -> Result<usize, StatusError> {
        if !self.target.is_set() {
            return Ok(0);
        }
        let ours = self.addresses().await?;
        let mut written = 0;
        for ingress in ingresses {
            let key = ObjectKey::new(
                ingress.metadata.namespace.clone().unwrap_or_default(),
                ingress.metadata.name.clone().unwrap_or_default(),
            );
            let Some(entries) = status_change(&ingress, served.contains(&key), &ours) else {
                continue;
            };
            let api: Api<Ingress> = Api::namespaced(self.client.clone(), &key.namespace);
            let value = if entries.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::json!(entries)
            };
            let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": value}}});
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            match api
                .patch_status(&key.name, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => written += 1,
                // Deleted since the store saw it: nothing to write.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => {
                    return Err(StatusError::Patch {
                        ingress: key,
                        source,
                    });
                }
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(value: &str) -> IngressLoadBalancerIngress {
        IngressLoadBalancerIngress {
            ip: Some(value.into()),
            ..Default::default()
        }
    }

    fn hostname(value: &str) -> IngressLoadBalancerIngress {
        IngressLoadBalancerIngress {
            hostname: Some(value.into()),
            ..Default::default()
        }
    }

    #[test]
    fn addresses_become_ips_or_hostnames() {
        let addresses = vec![
            "192.0.2.10".to_string(),
            "2001:db8::1".to_string(),
            " lb.example.com ".to_string(),
            String::new(),
        ];
        assert_eq!(
            entries_from_addresses(&addresses),
            vec![
                ip("192.0.2.10"),
                ip("2001:db8::1"),
                hostname("lb.example.com")
            ]
        );
    }

    #[test]
    fn service_addresses_prefer_load_balancer_then_external_then_cluster_ip() {
        let service = |value: serde_json::Value| -> Service {
            serde_json::from_value(value).expect("valid Service")
        };
        let lb = service(serde_json::json!({
            "spec": {"clusterIP": "10.0.0.1", "externalIPs": ["192.0.2.1"]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "198.51.100.7"}]}}
        }));
        assert_eq!(
            entries_from_service(&lb),
            vec![hostname("lb.example.com"), ip("198.51.100.7")]
        );
        let external = service(serde_json::json!({
            "spec": {"clusterIP": "10.0.0.1", "externalIPs": ["192.0.2.1"]}
        }));
        assert_eq!(entries_from_service(&external), vec![ip("192.0.2.1")]);
        let cluster = service(serde_json::json!({"spec": {"clusterIP": "10.0.0.1"}}));
        assert_eq!(entries_from_service(&cluster), vec![ip("10.0.0.1")]);
        let headless = service(serde_json::json!({"spec": {"clusterIP": "None"}}));
        assert_eq!(entries_from_service(&headless), vec![]);
    }

    #[test]
    fn writes_only_what_differs_and_clears_only_our_own_status() {
        let ingress = |entries: serde_json::Value| -> Ingress {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "x", "namespace": "default"},
                "status": {"loadBalancer": {"ingress": entries}}
            }))
            .expect("valid Ingress")
        };
        let ours = vec![ip("192.0.2.10")];
        let empty = ingress(serde_json::json!([]));
        let with_ours = ingress(serde_json::json!([{"ip": "192.0.2.10"}]));
        let with_theirs = ingress(serde_json::json!([{"ip": "198.51.100.1"}]));
        assert_eq!(status_change(&empty, true, &ours), Some(ours.clone()));
        assert_eq!(status_change(&with_ours, true, &ours), None);
        assert_eq!(status_change(&with_theirs, true, &ours), Some(ours.clone()));
        assert_eq!(status_change(&with_ours, false, &ours), Some(vec![]));
        assert_eq!(status_change(&with_theirs, false, &ours), None);
        assert_eq!(status_change(&empty, false, &ours), None);
    }
}
