//! Which Ingresses this controller serves, decided from IngressClasses the way the
//! Kubernetes documentation describes it.
//!
//! An Ingress names its class in `spec.ingressClassName` (or, the legacy way, in the
//! `kubernetes.io/ingress.class` annotation). A class is ours when its IngressClass has
//! `spec.controller` equal to `--controller-class`; `--ingress-class` narrows that to one
//! class name. An Ingress with no class goes to the IngressClass marked
//! `ingressclass.kubernetes.io/is-default-class: "true"`, or, when there is no default
//! class, to us only with `--watch-ingress-without-class`. Pure: no I/O, table-tested.
//!
//! This is the one place that decides: the API source, the manifests folder and
//! `tugboat render` all select Ingresses with [`ClassFilter::served_ingresses`].

use crate::objects::Ingress;
use k8s_openapi::api::networking::v1::IngressClass;

use crate::snapshot::Objects;
use crate::snapshot::follow;

/// The controller value of IngressClasses Tugboat serves unless told otherwise.
pub const DEFAULT_CONTROLLER_CLASS: &str = "tugboat.dev/ingress";
/// The legacy annotation naming an Ingress' class.
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The annotation that marks an IngressClass as the cluster's default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The operator's choice of Ingresses to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassFilter {
    /// `spec.controller` of the IngressClasses we serve (`--controller-class`).
    pub controller: String,
    /// Serve only this class name (`--ingress-class`).
    pub only_class: Option<String>,
    /// Serve Ingresses with no class when no default IngressClass claims them
    /// (`--watch-ingress-without-class`).
    pub watch_without_class: bool,
}

impl Default for ClassFilter {
    fn default() -> Self {
        Self {
            controller: DEFAULT_CONTROLLER_CLASS.to_string(),
            only_class: None,
            watch_without_class: false,
        }
    }
}

/// The part of an IngressClass the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    pub name: String,
    pub controller: String,
    pub is_default: bool,
}

impl ClassInfo {
    pub fn from_ingress_class(class: &IngressClass) -> Self {
        let is_default = class
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|value| value == "true");
        Self {
            name: class.metadata.name.clone().unwrap_or_default(),
            controller: class
                .spec
                .as_ref()
                .and_then(|spec| spec.controller.clone())
                .unwrap_or_default(),
            is_default,
        }
    }
}

/// The class an Ingress asks for: `spec.ingressClassName`, else the legacy annotation.
pub fn requested_class(ingress: &Ingress) -> Option<&str> {
    ingress
        .spec
        .as_ref()
        .and_then(|spec| spec.ingress_class_name.as_deref())
        .or_else(|| {
            ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(LEGACY_CLASS_ANNOTATION))
                .map(String::as_str)
        })
        .filter(|name| !name.is_empty())
}

impl ClassFilter {
    /// Whether the class named `name` is ours.
    fn serves_class(&self, name: &str, classes: &[ClassInfo]) -> bool {
        if self.only_class.as_deref().is_some_and(|only| only != name) {
            return false;
        }
        classes
            .iter()
            .any(|class| class.name == name && class.controller == self.controller)
    }

    /// Whether an Ingress asking for `requested` (None: no class) is served, given the
    /// cluster's IngressClasses.
    pub fn serves(&self, requested: Option<&str>, classes: &[ClassInfo]) -> bool {
        match requested {
            Some(name) => self.serves_class(name, classes),
            None => {
                let defaults: Vec<&ClassInfo> = classes.iter().filter(|c| c.is_default).collect();
                if defaults.is_empty() {
                    self.watch_without_class
                } else {
                    defaults
                        .iter()
                        .any(|class| self.serves_class(&class.name, classes))
                }
            }
        }
    }

    /// Whether this Ingress is served.
    pub fn serves_ingress(&self, ingress: &Ingress, classes: &[ClassInfo]) -> bool {
        self.serves(requested_class(ingress), classes)
    }

    /// The Ingresses among `ingresses` that this controller serves, given the
    /// IngressClasses (with one shared map when every Ingress is served).
    pub fn served_ingresses(
        &self,
        ingresses: &Objects<Ingress>,
        classes: &[ClassInfo],
    ) -> Objects<Ingress> {
        let mut served = ingresses.clone();
        for (key, ingress) in ingresses {
            if !self.serves_ingress(ingress, classes) {
                served.remove(key);
            }
        }
        served
    }

    /// Why an Ingress asking for `requested` is not served (for a note to the user).
    pub fn why_not_served(&self, requested: Option<&str>, classes: &[ClassInfo]) -> String {
        let Some(name) = requested else {
            return if classes.iter().any(|c| c.is_default) {
                "it names no class and the default IngressClass is not this controller's".into()
            } else {
                "it names no class and there is no default IngressClass \
                 (--watch-ingress-without-class serves such Ingresses)"
                    .into()
            };
        };
        if let Some(only) = &self.only_class
            && only != name
        {
            return format!("its class '{name}' is not --ingress-class '{only}'");
        }
        match classes.iter().find(|c| c.name == name) {
            None => format!("its class '{name}' has no IngressClass"),
            Some(class) => format!(
                "its class '{name}' belongs to controller '{}', not '{}'",
                class.controller, self.controller
            ),
        }
    }
}

/// [`ClassFilter::served_ingresses`] kept between calls: a new map of every Ingress
/// costs the Ingresses that changed since the last one (the maps share their unchanged
/// parts), unless the filter or the classes changed.
#[derive(Debug, Default)]
pub struct ServedMemo {
    last: Option<Served>,
}

#[derive(Debug)]
struct Served {
    filter: ClassFilter,
    classes: Vec<ClassInfo>,
    all: Objects<Ingress>,
    served: Objects<Ingress>,
}

impl ServedMemo {
    /// What `filter.served_ingresses(all, classes)` answers.
    pub fn get(
        &mut self,
        filter: &ClassFilter,
        all: &Objects<Ingress>,
        classes: &[ClassInfo],
    ) -> Objects<Ingress> {
        if let Some(last) = &mut self.last
            && last.filter == *filter
            && last.classes == classes
        {
            follow(&last.all, all, &mut last.served, |_, ingress| {
                filter.serves_ingress(ingress, classes)
            });
            last.all = all.clone();
            return last.served.clone();
        }
        let served = filter.served_ingresses(all, classes);
        self.last = Some(Served {
            filter: filter.clone(),
            classes: classes.to_vec(),
            all: all.clone(),
            served: served.clone(),
        });
        served
    }
}

#[cfg(test)]
mod tests {
    use tugboat_test_objects::{
        mk_ingress_class, mk_ingress_with_rules, with_annotations, with_class,
    };

    use super::*;

    fn class(name: &str, controller: &str, is_default: bool) -> ClassInfo {
        ClassInfo {
            name: name.into(),
            controller: controller.into(),
            is_default,
        }
    }

    const OURS: &str = DEFAULT_CONTROLLER_CLASS;
    const NGINX: &str = "k8s.io/ingress-nginx";

    #[test]
    fn decides_like_the_kubernetes_documentation() {
        let filter = ClassFilter::default();
        let only_b = ClassFilter {
            only_class: Some("b".into()),
            ..ClassFilter::default()
        };
        let without_class = ClassFilter {
            watch_without_class: true,
            ..ClassFilter::default()
        };
        let ours_a = class("a", OURS, false);
        let ours_b = class("b", OURS, false);
        let ours_default = class("a", OURS, true);
        let nginx = class("nginx", NGINX, false);
        let nginx_default = class("nginx", NGINX, true);

        #[rustfmt::skip]
        // (what, filter, requested class, IngressClasses, served)
        type Case<'a> = (&'a str, &'a ClassFilter, Option<&'a str>, Vec<ClassInfo>, bool);
        let cases: Vec<Case> = vec![
            (
                "our class",
                &filter,
                Some("a"),
                vec![ours_a.clone(), nginx.clone()],
                true,
            ),
            (
                "another controller's class",
                &filter,
                Some("nginx"),
                vec![ours_a.clone(), nginx.clone()],
                false,
            ),
            (
                "a class with no IngressClass object",
                &filter,
                Some("ghost"),
                vec![ours_a.clone()],
                false,
            ),
            ("no classes at all", &filter, Some("a"), vec![], false),
            (
                "--ingress-class picks one of ours",
                &only_b,
                Some("b"),
                vec![ours_a.clone(), ours_b.clone()],
                true,
            ),
            (
                "--ingress-class leaves our other class",
                &only_b,
                Some("a"),
                vec![ours_a.clone(), ours_b.clone()],
                false,
            ),
            (
                "--ingress-class of another controller",
                &only_b,
                Some("b"),
                vec![class("b", NGINX, false)],
                false,
            ),
            (
                "no class, our default",
                &filter,
                None,
                vec![ours_default.clone(), nginx.clone()],
                true,
            ),
            (
                "no class, their default",
                &filter,
                None,
                vec![ours_a.clone(), nginx_default.clone()],
                false,
            ),
            (
                "no class, their default, even with --watch-ingress-without-class",
                &without_class,
                None,
                vec![nginx_default.clone()],
                false,
            ),
            (
                "no class, no default",
                &filter,
                None,
                vec![ours_a.clone()],
                false,
            ),
            (
                "no class, no default, --watch-ingress-without-class",
                &without_class,
                None,
                vec![ours_a.clone()],
                true,
            ),
            (
                "no class, our default, but --ingress-class names another",
                &only_b,
                None,
                vec![ours_default.clone(), ours_b.clone()],
                false,
            ),
        ];
        for (what, filter, requested, classes, expected) in cases {
            assert_eq!(filter.serves(requested, &classes), expected, "{what}");
        }
    }

    fn ingress(class_name: Option<&str>, annotation: Option<&str>) -> Ingress {
        let ingress = with_class(mk_ingress_with_rules("x", vec![]), class_name);
        match annotation {
            Some(name) => with_annotations(ingress, &[(LEGACY_CLASS_ANNOTATION, name)]).into(),
            None => ingress.into(),
        }
    }

    #[test]
    fn requested_class_prefers_the_field_to_the_legacy_annotation() {
        assert_eq!(requested_class(&ingress(Some("a"), None)), Some("a"));
        assert_eq!(requested_class(&ingress(None, Some("b"))), Some("b"));
        assert_eq!(requested_class(&ingress(Some("a"), Some("b"))), Some("a"));
        assert_eq!(requested_class(&ingress(None, None)), None);
        assert_eq!(requested_class(&ingress(Some(""), None)), None);
    }

    #[test]
    fn legacy_annotation_is_served_like_the_field() {
        let classes = [class("a", OURS, false)];
        let filter = ClassFilter::default();
        assert!(filter.serves_ingress(&ingress(None, Some("a")), &classes));
        assert!(!filter.serves_ingress(&ingress(None, Some("nginx")), &classes));
    }

    #[test]
    fn default_class_annotation_must_be_exactly_true() {
        let make = |value: &str| {
            let class = mk_ingress_class("a", OURS, false);
            with_annotations(class, &[(DEFAULT_CLASS_ANNOTATION, value)])
        };
        assert!(ClassInfo::from_ingress_class(&make("true")).is_default);
        assert!(!ClassInfo::from_ingress_class(&make("false")).is_default);
        assert!(!ClassInfo::from_ingress_class(&make("yes")).is_default);
    }

    #[test]
    fn served_ingresses_keeps_ours_and_says_why_not_the_others() {
        use crate::snapshot::ObjectKey;
        use std::sync::Arc;
        let classes = [class("tugboat", OURS, true), class("nginx", NGINX, false)];
        let mut all = Objects::new();
        for (name, class_name) in [("a", Some("tugboat")), ("b", Some("nginx")), ("c", None)] {
            all.insert(
                ObjectKey::new("default", name),
                Arc::new(ingress(class_name, None)),
            );
        }
        let filter = ClassFilter::default();
        let served: Vec<String> = filter
            .served_ingresses(&all, &classes)
            .keys()
            .map(|k| k.name.to_string())
            .collect();
        assert_eq!(served, ["a", "c"]);
        assert_eq!(
            filter.why_not_served(Some("nginx"), &classes),
            "its class 'nginx' belongs to controller 'k8s.io/ingress-nginx', not 'tugboat.dev/ingress'"
        );
        assert_eq!(
            filter.why_not_served(Some("some-invalid-class-name"), &classes),
            "its class 'some-invalid-class-name' has no IngressClass"
        );
    }

    #[test]
    fn the_memo_answers_what_a_full_walk_answers() {
        use crate::snapshot::ObjectKey;
        use std::sync::Arc;
        let ingress = |name: &str, class: Option<&str>| {
            let mut ingress = Ingress::default();
            ingress.metadata.name = Some(name.into());
            ingress.spec = Some(k8s_openapi::api::networking::v1::IngressSpec {
                ingress_class_name: class.map(str::to_string),
                ..Default::default()
            });
            (ObjectKey::new("ns", name), Arc::new(ingress))
        };
        let filter = ClassFilter::default();
        let mut classes = vec![class("a", OURS, false), class("nginx", NGINX, false)];
        let mut all: Objects<Ingress> = [ingress("one", Some("a")), ingress("two", Some("nginx"))]
            .into_iter()
            .collect();
        let mut memo = ServedMemo::default();
        let check = |memo: &mut ServedMemo, all: &Objects<Ingress>, classes: &[ClassInfo]| {
            let expected = filter.served_ingresses(all, classes);
            let got = memo.get(&filter, all, classes);
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                expected.keys().collect::<Vec<_>>()
            );
        };
        check(&mut memo, &all, &classes);
        for (name, class_name) in [
            ("three", Some("a")),
            ("one", Some("nginx")),
            ("two", Some("a")),
        ] {
            let (key, value) = ingress(name, class_name);
            all.insert(key, value);
            check(&mut memo, &all, &classes);
        }
        all.remove(&ObjectKey::new("ns", "three"));
        check(&mut memo, &all, &classes);
        classes[1].controller = OURS.into();
        check(&mut memo, &all, &classes);
    }
}
