//! What a rule of an HTTPRoute asks besides its backends, read and validated: its
//! matches (paths, and the method, headers, query and bind as [`Conditions`]) and its
//! filters (header changes, redirects, rewrites). An error names the first field this
//! controller does not support or accept; the translation then refuses the route.

use crate::desired::PathMatch;
use crate::gateway::features::{
    Conditions, GatewayFeatures, HeaderChanges, PathReplacement, Redirect,
};
use crate::gateway::objects::{
    HeaderModifier, HttpPathModifier, HttpRouteFilter, HttpRouteRule, HttpValueMatch,
    RequestRedirect,
};
use crate::validate;

/// The paths of a rule's matches (`PathPrefix /` when it has none); an error names the
/// first field this controller does not support.
pub(super) fn rule_paths(
    rule: &HttpRouteRule,
    field: &str,
) -> Result<Vec<(PathMatch, Conditions)>, (String, String)> {
    let not_yet = |what: String, name: &str| {
        Err((
            what,
            format!("{name} is not supported yet (docs/gateway-api.md)"),
        ))
    };
    if rule.session_persistence.is_some() {
        return not_yet(format!("{field}.sessionPersistence"), "sessionPersistence");
    }
    if rule.retry.is_some() {
        return not_yet(format!("{field}.retry"), "retry");
    }
    if rule.matches.is_empty() {
        return Ok(vec![(PathMatch::Prefix("/".into()), Conditions::default())]);
    }
    let mut paths = Vec::new();
    for (index, found) in rule.matches.iter().enumerate() {
        let field = format!("{field}.matches[{index}]");
        let conditions = Conditions {
            method: match found.method.as_deref() {
                None => None,
                Some(
                    method @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "CONNECT" | "OPTIONS"
                    | "TRACE" | "PATCH"),
                ) => Some(method.to_string()),
                Some(other) => {
                    return Err((
                        format!("{field}.method"),
                        format!("'{}' is not an HTTP method", validate::printable(other)),
                    ));
                }
            },
            ..Conditions::default()
        };
        let mut conditions = conditions;
        (conditions.headers, conditions.headers_regex) =
            value_matches(found.headers.as_deref(), &format!("{field}.headers"), true)?;
        (conditions.query, _) = value_matches(
            found.query_params.as_deref(),
            &format!("{field}.queryParams"),
            false,
        )?;
        let path = found.path.clone().unwrap_or_default();
        let value = path.value.as_deref().unwrap_or("/");
        let kind = path.type_.as_deref().unwrap_or("PathPrefix");
        if kind == "RegularExpression" {
            validate::regex(value).map_err(|err| (format!("{field}.path.value"), err.0))?;
            conditions.path_regex = Some(value.to_string());
            paths.push((PathMatch::Prefix("/".into()), conditions));
            continue;
        }
        validate::route_path(value).map_err(|err| (format!("{field}.path.value"), err.0))?;
        let path = match kind {
            "Exact" => PathMatch::Exact(value.to_string()),
            "PathPrefix" => {
                let trimmed = value.trim_end_matches('/');
                PathMatch::Prefix(if trimmed.is_empty() {
                    "/".to_string()
                } else {
                    trimmed.to_string()
                })
            }
            other => {
                return Err((
                    format!("{field}.path.type"),
                    format!(
                        "path match type '{}' is not supported yet: Exact and PathPrefix are",
                        validate::printable(other)
                    ),
                ));
            }
        };
        paths.push((path, conditions));
    }
    Ok(paths)
}

/// Header (`headers`: names lower-cased, as they compare; `RegularExpression` too) or
/// query parameter matches (`Exact` only): the exact ones and the expressions. The first
/// of equivalent names counts, as the spec says.
type ValueMatches = (Vec<(String, String)>, Vec<(String, String)>);

fn value_matches(
    matches: Option<&[HttpValueMatch]>,
    field: &str,
    headers: bool,
) -> Result<ValueMatches, (String, String)> {
    let mut exact: Vec<(String, String)> = Vec::new();
    let mut regex: Vec<(String, String)> = Vec::new();
    for (index, found) in matches.unwrap_or_default().iter().enumerate() {
        let at = format!("{field}[{index}]");
        validate::header_name(&found.name).map_err(|e| (format!("{at}.name"), e.0))?;
        let name = if headers {
            found.name.to_ascii_lowercase()
        } else {
            found.name.clone()
        };
        if exact.iter().chain(&regex).any(|(known, _)| *known == name) {
            continue;
        }
        match found.type_.as_deref().unwrap_or("Exact") {
            "Exact" => {
                validate::match_value(&found.value).map_err(|e| (format!("{at}.value"), e.0))?;
                exact.push((name, found.value.clone()));
            }
            "RegularExpression" if headers => {
                validate::regex(&found.value).map_err(|e| (format!("{at}.value"), e.0))?;
                regex.push((name, found.value.clone()));
            }
            other => {
                return Err((
                    format!("{at}.type"),
                    format!(
                        "match type '{}' is not supported here",
                        validate::printable(other)
                    ),
                ));
            }
        }
    }
    Ok((exact, regex))
}

/// A new path as a filter gives it, before the rule's match is known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSpec {
    Full(String),
    /// The replacement of the matched prefix.
    Prefix(String),
}

/// A redirect as a filter gives it: scheme, hostname, port, path and code.
type RedirectSpec = (
    Option<String>,
    Option<String>,
    Option<u16>,
    Option<PathSpec>,
    u16,
);

/// The filters of a rule, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FilterSpec {
    request_headers: HeaderChanges,
    response_headers: HeaderChanges,
    redirect: Option<RedirectSpec>,
    rewrite_host: Option<String>,
    rewrite_path: Option<PathSpec>,
    /// See [`GatewayFeatures::server_timeout_ms`].
    server_timeout_ms: Option<u64>,
}

impl FilterSpec {
    /// Whether the rule redirects (it then needs no backend).
    pub(super) fn redirects(&self) -> bool {
        self.redirect.is_some()
    }

    /// The features of the rule's routes of `path`.
    pub(super) fn for_path(&self, path: &PathMatch) -> GatewayFeatures {
        let replace = |spec: &PathSpec| match spec {
            PathSpec::Full(full) => PathReplacement::Full(full.clone()),
            PathSpec::Prefix(replacement) => PathReplacement::Prefix {
                matched: match path {
                    PathMatch::Prefix(prefix) if prefix == "/" => 0,
                    PathMatch::Prefix(prefix) | PathMatch::Exact(prefix) => prefix.len(),
                    // HTTPRoutes make no regex routes (their expressions are conditions).
                    PathMatch::Regex(_) => 0,
                },
                replacement: replacement.trim_end_matches('/').to_string(),
            },
        };
        GatewayFeatures {
            request_headers: self.request_headers.clone(),
            response_headers: self.response_headers.clone(),
            redirect: self
                .redirect
                .as_ref()
                .map(|(scheme, hostname, port, path, code)| Redirect {
                    scheme: scheme.clone(),
                    hostname: hostname.clone(),
                    port: *port,
                    request_port: false,
                    path: path.as_ref().map(replace),
                    code: *code,
                }),
            rewrite_host: self.rewrite_host.clone(),
            rewrite_path: self.rewrite_path.as_ref().map(replace),
            split: Vec::new(),
            dispatch: None,
            only_tls: None,
            server_timeout_ms: self.server_timeout_ms,
        }
    }
}

/// A field this controller does not support or accept, and why.
type Unsupported = (String, String);

fn header_changes(modifier: &HeaderModifier, field: &str) -> Result<HeaderChanges, Unsupported> {
    let check = |list: &[crate::gateway::objects::HttpHeader], part: &str| {
        list.iter()
            .enumerate()
            .map(|(index, header)| {
                let at = format!("{field}.{part}[{index}]");
                validate::header_name(&header.name).map_err(|e| (format!("{at}.name"), e.0))?;
                validate::header_value(&header.value).map_err(|e| (format!("{at}.value"), e.0))?;
                Ok((header.name.to_ascii_lowercase(), header.value.clone()))
            })
            .collect::<Result<Vec<_>, Unsupported>>()
    };
    let remove = modifier
        .remove
        .iter()
        .enumerate()
        .map(|(index, name)| {
            validate::header_name(name)
                .map(|()| name.to_ascii_lowercase())
                .map_err(|e| (format!("{field}.remove[{index}]"), e.0))
        })
        .collect::<Result<Vec<_>, Unsupported>>()?;
    Ok(HeaderChanges {
        set: check(&modifier.set, "set")?,
        add: check(&modifier.add, "add")?,
        remove,
    })
}

fn path_spec(modifier: &HttpPathModifier, field: &str) -> Result<PathSpec, Unsupported> {
    let (value, spec): (Option<&String>, fn(String) -> PathSpec) = match modifier.type_.as_str() {
        "ReplaceFullPath" => (modifier.replace_full_path.as_ref(), PathSpec::Full),
        "ReplacePrefixMatch" => (modifier.replace_prefix_match.as_ref(), PathSpec::Prefix),
        other => {
            return Err((
                format!("{field}.type"),
                format!(
                    "path modifier type '{}' is not supported: ReplaceFullPath and \
                     ReplacePrefixMatch are",
                    validate::printable(other)
                ),
            ));
        }
    };
    let value = value.map_or("/", String::as_str);
    validate::literal_path(value).map_err(|e| (field.to_string(), e.0))?;
    Ok(spec(value.to_string()))
}

fn hostname(value: &str, field: String) -> Result<String, Unsupported> {
    match validate::ingress_host(value) {
        Ok(host) if !host.starts_with('*') => Ok(host),
        Ok(_) => Err((field, "a wildcard is not a hostname".into())),
        Err(err) => Err((field, err.0)),
    }
}

fn redirect_spec(redirect: &RequestRedirect, at: &str) -> Result<RedirectSpec, Unsupported> {
    let scheme = match redirect.scheme.as_deref() {
        None => None,
        Some(scheme @ ("http" | "https")) => Some(scheme.to_string()),
        Some(other) => {
            return Err((
                format!("{at}.scheme"),
                format!(
                    "scheme '{}' is not supported: http and https are",
                    validate::printable(other)
                ),
            ));
        }
    };
    let host = match redirect.hostname.as_deref() {
        None => None,
        Some(host) => Some(hostname(host, format!("{at}.hostname"))?),
    };
    let port = match redirect.port {
        None => None,
        Some(port) => Some(validate::port_number(port).map_err(|e| (format!("{at}.port"), e.0))?),
    };
    let path = match &redirect.path {
        None => None,
        Some(path) => Some(path_spec(path, &format!("{at}.path"))?),
    };
    // 301 and 302 in the standard channel; 303, 307 and 308 as later versions add them.
    let code = match redirect.status_code.unwrap_or(302) {
        code @ (301 | 302 | 303 | 307 | 308) => u16::try_from(code).unwrap_or(302),
        other => {
            return Err((
                format!("{at}.statusCode"),
                format!("status code {other} is not a redirect: 301, 302, 303, 307 or 308"),
            ));
        }
    };
    Ok((scheme, host, port, path, code))
}

/// The filters of a rule; an error names the first field this controller does not
/// support or accept.
pub(super) fn rule_filters(rule: &HttpRouteRule, field: &str) -> Result<FilterSpec, Unsupported> {
    let mut spec = FilterSpec::default();
    for (index, filter) in rule.filters.iter().enumerate() {
        let at = format!("{field}.filters[{index}]");
        let missing = |name: &str| (format!("{at}.{name}"), format!("the filter needs {name}"));
        let HttpRouteFilter {
            type_,
            request_header_modifier,
            response_header_modifier,
            request_redirect,
            url_rewrite,
        } = filter;
        match type_.as_str() {
            "RequestHeaderModifier" => {
                let modifier = request_header_modifier
                    .as_ref()
                    .ok_or_else(|| missing("requestHeaderModifier"))?;
                spec.request_headers =
                    header_changes(modifier, &format!("{at}.requestHeaderModifier"))?;
            }
            "ResponseHeaderModifier" => {
                let modifier = response_header_modifier
                    .as_ref()
                    .ok_or_else(|| missing("responseHeaderModifier"))?;
                spec.response_headers =
                    header_changes(modifier, &format!("{at}.responseHeaderModifier"))?;
            }
            "RequestRedirect" => {
                let redirect = request_redirect
                    .as_ref()
                    .ok_or_else(|| missing("requestRedirect"))?;
                spec.redirect = Some(redirect_spec(redirect, &format!("{at}.requestRedirect"))?);
            }
            "URLRewrite" => {
                let rewrite = url_rewrite.as_ref().ok_or_else(|| missing("urlRewrite"))?;
                let at = format!("{at}.urlRewrite");
                if let Some(host) = rewrite.hostname.as_deref() {
                    spec.rewrite_host = Some(hostname(host, format!("{at}.hostname"))?);
                }
                if let Some(path) = &rewrite.path {
                    spec.rewrite_path = Some(path_spec(path, &format!("{at}.path"))?);
                }
            }
            other => {
                return Err((
                    format!("{at}.type"),
                    format!(
                        "filter type '{}' is not supported yet (docs/gateway-api.md)",
                        validate::printable(other)
                    ),
                ));
            }
        }
    }
    if spec.redirect.is_some() && (spec.rewrite_host.is_some() || spec.rewrite_path.is_some()) {
        return Err((
            format!("{field}.filters"),
            "RequestRedirect and URLRewrite cannot be used together".into(),
        ));
    }
    spec.server_timeout_ms = server_timeout(rule, field)?;
    Ok(spec)
}

/// A rule's `timeouts` as one server timeout (see [`GatewayFeatures::server_timeout_ms`]).
/// `backendRequest` may not exceed a `request` that is not zero, as the spec says.
fn server_timeout(rule: &HttpRouteRule, field: &str) -> Result<Option<u64>, Unsupported> {
    let Some(timeouts) = &rule.timeouts else {
        return Ok(None);
    };
    let read = |value: &Option<String>, name: &str| match value {
        None => Ok(None),
        Some(value) => validate::gateway_duration(value)
            .map(Some)
            .map_err(|e| (format!("{field}.timeouts.{name}"), e.0)),
    };
    let request = read(&timeouts.request, "request")?;
    let backend_request = read(&timeouts.backend_request, "backendRequest")?;
    if let (Some(request), Some(backend_request)) = (request, backend_request)
        && request != 0
        && backend_request > request
    {
        return Err((
            format!("{field}.timeouts.backendRequest"),
            format!(
                "backendRequest ({}) must not be longer than request ({})",
                validate::printable(timeouts.backend_request.as_deref().unwrap_or_default()),
                validate::printable(timeouts.request.as_deref().unwrap_or_default()),
            ),
        ));
    }
    // The shorter of the two that times at all (zero: no timeout).
    Ok(match (request, backend_request) {
        (None, None) => None,
        (Some(only), None) | (None, Some(only)) => Some(only),
        (Some(0), Some(other)) | (Some(other), Some(0)) => Some(other),
        (Some(request), Some(backend_request)) => Some(request.min(backend_request)),
    })
}

#[cfg(test)]
mod tests {
    use tugboat_test_objects::gateway::{
        RouteFilter, RouteRule, mk_filter, mk_redirect, mk_redirect_filter, mk_route_rule,
    };
    use tugboat_test_objects::to_json;

    use super::*;

    /// A rule without backends, of `filter`.
    fn rule_of(filter: RouteFilter) -> HttpRouteRule {
        rule(&mk_route_rule(vec![]).filter(filter))
    }

    fn rule(built: &RouteRule) -> HttpRouteRule {
        serde_json::from_value(to_json(built)).expect("a rule")
    }

    #[test]
    fn redirect_codes_are_the_redirect_ones() {
        for code in [301, 302, 303, 307, 308] {
            let found = rule_filters(
                &rule_of(mk_redirect_filter(mk_redirect().status_code(code))),
                "spec.rules[0]",
            );
            assert!(found.is_ok_and(|f| f.redirects()), "{code}");
        }
        let refused = rule_filters(
            &rule_of(mk_redirect_filter(mk_redirect().status_code(200))),
            "spec.rules[0]",
        );
        assert_eq!(
            refused.map(|_| ()).map_err(|(field, _)| field),
            Err("spec.rules[0].filters[0].requestRedirect.statusCode".to_string())
        );
    }

    #[test]
    fn a_filter_needs_its_settings_and_a_known_type() {
        let missing = rule_filters(&rule_of(mk_filter("URLRewrite")), "spec.rules[1]");
        assert_eq!(
            missing.map(|_| ()).map_err(|(field, _)| field),
            Err("spec.rules[1].filters[0].urlRewrite".to_string())
        );
        let unknown = rule_filters(&rule_of(mk_filter("RequestMirror")), "spec.rules[1]");
        assert!(unknown.is_err_and(|(_, message)| message.contains("RequestMirror")));
    }

    /// The server timeout of a rule of `timeouts` `request` and `backendRequest`.
    fn timeout_of(
        request: Option<&str>,
        backend_request: Option<&str>,
    ) -> Result<Option<u64>, Unsupported> {
        rule_filters(
            &rule(&mk_route_rule(vec![]).timeouts(request, backend_request)),
            "spec.rules[2]",
        )
        .map(|spec| spec.server_timeout_ms)
    }

    #[test]
    fn timeouts_become_the_shorter_one_that_times() {
        assert_eq!(timeout_of(None, None), Ok(None));
        assert_eq!(timeout_of(Some("10s"), None), Ok(Some(10_000)));
        assert_eq!(timeout_of(None, Some("1m500ms")), Ok(Some(60_500)));
        assert_eq!(timeout_of(Some("10s"), Some("2s")), Ok(Some(2_000)));
        assert_eq!(timeout_of(Some("10s"), Some("0s")), Ok(Some(10_000)));
        assert_eq!(timeout_of(Some("0s"), Some("3s")), Ok(Some(3_000)));
        assert_eq!(timeout_of(Some("0s"), None), Ok(Some(0)));
    }

    #[test]
    fn timeouts_are_refused_by_field() {
        let longer = timeout_of(Some("1s"), Some("2s"));
        assert_eq!(
            longer.map_err(|(field, _)| field),
            Err("spec.rules[2].timeouts.backendRequest".to_string())
        );
        let bad = timeout_of(Some("10 s"), None);
        assert_eq!(
            bad.map_err(|(field, _)| field),
            Err("spec.rules[2].timeouts.request".to_string())
        );
        let too_long = timeout_of(None, Some("99999h"));
        assert!(too_long.is_err_and(|(_, message)| message.contains("longer than haproxy")));
    }
}
