//! Request logs as one JSON object per line (`log-format-json`), valid on every haproxy
//! series. haproxy 3.0+'s `%{+json}o` leaves control characters raw (a tab in a
//! User-Agent gives a line no JSON parser reads) and 2.6 has no JSON encoding at all,
//! so every text field goes through the `json(utf8s)` converter (2.6 to 3.4): quotes,
//! backslashes and control characters are escaped, invalid UTF-8 bytes dropped.
//!
//! The request's headers are gone when the line is written, so the frontend copies what
//! the line needs into `txn.log_*` variables first. `txn.owner` (the Ingress or
//! HTTPRoute whose route served the request) comes from the route maps' values;
//! `txn.service` is the route's backend written as `NAMESPACE/SERVICE:PORT`.

use tugboat_model::GlobalOptions;

/// The separator between a route's backend and feature set and its owner
/// (`Route::owner`) in the route maps' values: neither side can hold it.
pub const OWNER_SEPARATOR: char = '|';

/// The rules right after the route lookup: `txn.owner` and the route's id in the
/// request counters (`txn.rid`, see `request_stats`) from the route's map value, then
/// the value without them, as the rules after read it (backend, feature set, canary).
pub fn owner_rules() -> String {
    format!(
        "    http-request set-var(txn.owner) var(txn.route),field(2,{OWNER_SEPARATOR}) if {{ var(txn.route) -m found }}
    http-request set-var(txn.rid) var(txn.route),field(3,{OWNER_SEPARATOR}) if {{ var(txn.route) -m found }}
    http-request set-var(txn.route) var(txn.route),field(1,{OWNER_SEPARATOR}) if {{ var(txn.route) -m found }}
"
    )
}

/// The frontend's rules that keep what the JSON line needs from the request (its
/// headers are gone when the line is written); empty without `log-format-json`.
pub fn capture_rules(global: &GlobalOptions) -> &'static str {
    if !json_lines(global) {
        return "";
    }
    "    http-request set-var(txn.log_method) method
    http-request set-var(txn.log_host) req.hdr(host)
    http-request set-var(txn.log_path) path
    http-request set-var(txn.log_agent) req.fhdr(user-agent)
    http-request set-var(txn.log_id) req.fhdr(x-request-id)
"
}

/// The rule after the route features (which may move the request to a canary's
/// backend): `txn.service`, `NAMESPACE/SERVICE:PORT` from the backend's name
/// `NAMESPACE_SERVICE_PORT` (Kubernetes names hold no `_`); empty without
/// `log-format-json`.
pub fn service_rule(global: &GlobalOptions) -> &'static str {
    if !json_lines(global) {
        return "";
    }
    "    http-request set-var(txn.service) var(txn.backend),regsub(_,/),regsub(_,:) if { var(txn.backend) -m found }\n"
}

/// The `log-format` line of the `defaults` section: the operator's `log-format`, else
/// the JSON one with `log-format-json`, else none (haproxy's `option httplog`).
pub fn log_format_line(global: &GlobalOptions) -> Option<String> {
    if let Some(format) = &global.log_format {
        return Some(format!("    log-format \"{format}\"\n"));
    }
    json_lines(global).then(|| format!("    log-format \"{}\"\n", json_format()))
}

fn json_lines(global: &GlobalOptions) -> bool {
    global.log_format_json && global.log_format.is_none()
}

/// The JSON log-format, quoted for haproxy.cfg: each `"` of the JSON is `\"` there.
/// Text fields are samples through `json(utf8s)`; numbers are haproxy's own (`-1` where
/// a step did not happen); `-` where haproxy has no value (no route: no owner).
fn json_format() -> String {
    const TEXT: &[(&str, &str)] = &[
        ("client", "src"),
        ("method", "var(txn.log_method)"),
        ("host", "var(txn.log_host)"),
        ("path", "var(txn.log_path)"),
        ("user_agent", "var(txn.log_agent)"),
        ("request_id", "var(txn.log_id)"),
        ("owner", "var(txn.owner)"),
        ("service", "var(txn.service)"),
        ("backend", "be_name"),
        ("server", "srv_name"),
    ];
    const NUMBERS: &[(&str, &str)] = &[
        ("status", "%ST"),
        ("bytes", "%B"),
        ("tq", "%Tq"),
        ("tw", "%Tw"),
        ("tc", "%Tc"),
        ("tr", "%Tr"),
        ("ta", "%Ta"),
    ];
    let mut fields = vec![
        r#"\"time\":\"%trg\""#.to_string(),
        r#"\"termination\":\"%tsc\""#.to_string(),
    ];
    fields.extend(
        TEXT.iter()
            .map(|(name, sample)| format!(r#"\"{name}\":\"%[{sample},json(utf8s)]\""#)),
    );
    fields.extend(
        NUMBERS
            .iter()
            .map(|(name, variable)| format!(r#"\"{name}\":{variable}"#)),
    );
    format!("{{{}}}", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_json(log_format: Option<&str>) -> GlobalOptions {
        GlobalOptions {
            log_format_json: true,
            log_format: log_format.map(str::to_string),
            ..GlobalOptions::default()
        }
    }

    #[test]
    fn the_json_log_format_escapes_every_text_field() {
        insta::assert_snapshot!(log_format_line(&with_json(None)).unwrap_or_default());
    }

    #[test]
    fn the_json_log_format_is_json_once_haproxy_fills_it() {
        let line = json_format()
            .replace("\\\"", "\"")
            .replace("%trg", "26/Nov/2026:14:51:51 +0000")
            .replace("%tsc", "----");
        let filled = regex_like_fill(&line);
        let parsed: serde_json::Value = serde_json::from_str(&filled).expect(&filled);
        assert_eq!(parsed["owner"], "x");
        assert_eq!(parsed["status"], -1);
    }

    /// Each `%[...]` becomes `x`, each `%XX` number `-1`.
    fn regex_like_fill(line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            if let Some(sample) = rest.strip_prefix('[') {
                let end = sample.find(']').expect("a closed sample");
                out.push('x');
                rest = &sample[end + 1..];
            } else {
                let end = rest
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(rest.len());
                out.push_str("-1");
                rest = &rest[end..];
            }
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn an_operators_log_format_wins() {
        let global = with_json(Some("%ci %ST"));
        assert_eq!(
            log_format_line(&global).as_deref(),
            Some("    log-format \"%ci %ST\"\n")
        );
        assert_eq!(capture_rules(&global), "");
        assert_eq!(service_rule(&global), "");
    }

    #[test]
    fn without_the_key_nothing_changes() {
        let global = GlobalOptions::default();
        assert_eq!(log_format_line(&global), None);
        assert_eq!(capture_rules(&global), "");
    }
}
