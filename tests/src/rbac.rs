//! Kubernetes RBAC, evaluated the way the API server's RBAC authorizer does, on the
//! ClusterRoles, Roles and bindings a chart renders: may this user (a ServiceAccount)
//! do this verb on this resource, in this namespace, on this name? The chart pod test
//! puts it in front of the fake API server, so that the controller gets exactly the
//! permissions the chart grants and a 403 for anything else.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::Value;

use crate::fake_apiserver::RequestAttributes;

/// Rules granted to subjects, cluster-wide or in one namespace.
#[derive(Debug, Clone, Default)]
pub struct Rbac {
    grants: Vec<Grant>,
}

#[derive(Debug, Clone)]
struct Grant {
    /// Where the grant applies: `None` everywhere (ClusterRoleBinding), else one namespace.
    namespace: Option<String>,
    /// Who: user names as the authenticator reports them.
    subjects: Vec<String>,
    rules: Vec<PolicyRule>,
    /// Which binding granted it, for messages.
    source: String,
}

/// The user name of a ServiceAccount's token.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

impl Rbac {
    /// The grants of every binding in `objects` (rendered manifests, as JSON values);
    /// a binding whose role is not among them grants nothing, as in a cluster.
    pub fn from_objects(objects: &[Value]) -> anyhow::Result<Self> {
        let kind = |o: &Value| o["kind"].as_str().unwrap_or_default().to_string();
        let parse = |o: &Value, what: &str| -> anyhow::Result<Value> {
            anyhow::ensure!(
                o["apiVersion"] == "rbac.authorization.k8s.io/v1",
                "{what} {} has apiVersion {}",
                o["metadata"]["name"],
                o["apiVersion"]
            );
            Ok(o.clone())
        };
        let mut cluster_roles = Vec::new();
        let mut roles = Vec::new();
        let mut cluster_bindings = Vec::new();
        let mut bindings = Vec::new();
        for object in objects {
            match kind(object).as_str() {
                "ClusterRole" => cluster_roles.push(serde_json::from_value::<ClusterRole>(parse(
                    object,
                    "ClusterRole",
                )?)?),
                "Role" => roles.push(serde_json::from_value::<Role>(parse(object, "Role")?)?),
                "ClusterRoleBinding" => {
                    cluster_bindings.push(serde_json::from_value::<ClusterRoleBinding>(parse(
                        object,
                        "ClusterRoleBinding",
                    )?)?)
                }
                "RoleBinding" => bindings.push(serde_json::from_value::<RoleBinding>(parse(
                    object,
                    "RoleBinding",
                )?)?),
                _ => {}
            }
        }
        let cluster_rules = |name: &str| {
            cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
                .map(|r| r.rules.clone().unwrap_or_default())
        };
        let mut grants = Vec::new();
        for binding in &cluster_bindings {
            let name = binding.metadata.name.clone().unwrap_or_default();
            let rules = if binding.role_ref.kind == "ClusterRole" {
                cluster_rules(&binding.role_ref.name)
            } else {
                None
            };
            grants.push(Grant {
                namespace: None,
                subjects: subjects(binding.subjects.as_deref().unwrap_or_default(), None),
                rules: rules.unwrap_or_default(),
                source: format!("ClusterRoleBinding {name}"),
            });
        }
        for binding in &bindings {
            let name = binding.metadata.name.clone().unwrap_or_default();
            let namespace = binding.metadata.namespace.clone().unwrap_or_default();
            let rules = match binding.role_ref.kind.as_str() {
                "ClusterRole" => cluster_rules(&binding.role_ref.name),
                "Role" => roles
                    .iter()
                    .find(|r| {
                        r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str())
                            && r.metadata.namespace.as_deref() == Some(namespace.as_str())
                    })
                    .map(|r| r.rules.clone().unwrap_or_default()),
                _ => None,
            };
            grants.push(Grant {
                subjects: subjects(
                    binding.subjects.as_deref().unwrap_or_default(),
                    Some(&namespace),
                ),
                namespace: Some(namespace.clone()),
                rules: rules.unwrap_or_default(),
                source: format!("RoleBinding {namespace}/{name}"),
            });
        }
        Ok(Self { grants })
    }

    /// Whether `user` may do what `request` asks.
    pub fn allows(&self, user: &str, request: &RequestAttributes) -> bool {
        self.grant_for(user, request).is_some()
    }

    /// The binding that allows the request, if any.
    pub fn grant_for(&self, user: &str, request: &RequestAttributes) -> Option<&str> {
        self.grants
            .iter()
            .filter(|g| g.subjects.iter().any(|s| s == user))
            .filter(|g| match (&g.namespace, &request.namespace) {
                (None, _) => true,
                (Some(scope), Some(ns)) => scope == ns,
                // A Role never grants a cluster-scoped request or an all-namespaces list.
                (Some(_), None) => false,
            })
            .find(|g| g.rules.iter().any(|rule| rule_allows(rule, request)))
            .map(|g| g.source.as_str())
    }
}

/// Subject user names; a RoleBinding's ServiceAccount without namespace is the binding's.
fn subjects(
    subjects: &[k8s_openapi::api::rbac::v1::Subject],
    binding_namespace: Option<&str>,
) -> Vec<String> {
    subjects
        .iter()
        .filter_map(|s| match s.kind.as_str() {
            "ServiceAccount" => {
                let ns = s.namespace.as_deref().or(binding_namespace)?;
                Some(service_account_user(ns, &s.name))
            }
            "User" => Some(s.name.clone()),
            _ => None,
        })
        .collect()
}

fn rule_allows(rule: &PolicyRule, request: &RequestAttributes) -> bool {
    let has = |list: &Option<Vec<String>>, value: &str| {
        list.as_ref()
            .is_some_and(|l| l.iter().any(|v| v == "*" || v == value))
    };
    let resource_matches = rule.resources.as_ref().is_some_and(|resources| {
        resources.iter().any(|r| {
            r == "*"
                || *r == request.resource
                || r.strip_suffix("/*").is_some_and(|base| {
                    request
                        .resource
                        .split_once('/')
                        .is_some_and(|(b, _)| b == base)
                })
        })
    });
    let name_matches = match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => request
            .name
            .as_ref()
            .is_some_and(|name| names.iter().any(|n| n == name)),
    };
    rule.verbs.iter().any(|v| v == "*" || *v == request.verb)
        && has(&rule.api_groups, &request.api_group)
        && resource_matches
        && name_matches
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> RequestAttributes {
        RequestAttributes {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            namespace: ns.map(str::to_string),
            name: None,
        }
    }

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "lease", "namespace": "ns"},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "resourceNames": ["l"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "lease", "namespace": "ns"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
        ]
    }

    #[test]
    fn cluster_role_binding_grants_everywhere_only_its_verbs() {
        let rbac = Rbac::from_objects(&objects()).expect("rbac");
        let sa = service_account_user("ns", "sa");
        assert!(rbac.allows(&sa, &request("list", "", "secrets", None)));
        assert!(rbac.allows(&sa, &request("get", "", "secrets", Some("other"))));
        assert!(!rbac.allows(&sa, &request("watch", "", "secrets", None)));
        assert!(!rbac.allows(
            &service_account_user("ns", "other"),
            &request("list", "", "secrets", None)
        ));
    }

    #[test]
    fn role_grants_its_namespace_and_names_only() {
        let rbac = Rbac::from_objects(&objects()).expect("rbac");
        let sa = service_account_user("ns", "sa");
        let mut get = request("get", "coordination.k8s.io", "leases", Some("ns"));
        assert!(!rbac.allows(&sa, &get), "no name: not granted");
        get.name = Some("l".into());
        assert!(rbac.allows(&sa, &get));
        get.namespace = Some("other".into());
        assert!(!rbac.allows(&sa, &get));
    }
}
