//! Validation of every user-supplied value that can reach haproxy's files.
//!
//! This is the one door for user text: hosts, paths and names are checked against the
//! syntax Kubernetes defines for them, and anything else (whitespace, control characters,
//! characters haproxy would treat specially) is rejected with a message that says what was
//! expected. Nothing is escaped: a value is either valid as it is, or refused.

use thiserror::Error;

/// Why a value was refused; the message is written for the user who wrote the object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct InvalidValue(pub String);

fn invalid(msg: impl Into<String>) -> InvalidValue {
    InvalidValue(msg.into())
}

/// Printable form of a user value for error messages: control characters are shown
/// escaped so that the message itself cannot break a log line.
pub fn printable(value: &str) -> String {
    const MAX: usize = 80;
    let mut out: String = value
        .chars()
        .take(MAX)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > MAX {
        out.push('…');
    }
    out
}

/// A DNS-1123 label: what Kubernetes accepts as a namespace or Service name.
pub fn dns_label(value: &str) -> Result<(), InvalidValue> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a valid name: expected at most 63 lower-case letters, digits or '-', \
             starting and ending with a letter or digit",
            printable(value)
        )))
    }
}

/// A DNS-1123 subdomain: what Kubernetes accepts as the name of most objects (Secrets,
/// ConfigMaps) and as an ExternalName.
pub fn dns_subdomain(value: &str) -> Result<(), InvalidValue> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| dns_label(label).is_ok());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a valid DNS name: expected lower-case letters, digits, '-' and '.'",
            printable(value)
        )))
    }
}

/// A named port (IANA service name, as Kubernetes validates `ports[].name`).
pub fn port_name(value: &str) -> Result<(), InvalidValue> {
    let ok = !value.is_empty()
        && value.len() <= 15
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && value.bytes().any(|b| b.is_ascii_lowercase())
        && !value.starts_with('-')
        && !value.ends_with('-')
        && !value.contains("--");
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a valid port name: expected at most 15 lower-case letters, digits \
             or single '-', with at least one letter",
            printable(value)
        )))
    }
}

/// A port number in 1..=65535.
pub fn port_number(value: i32) -> Result<u16, InvalidValue> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| invalid(format!("{value} is not a valid port: expected 1 to 65535")))
}

/// The host of an Ingress rule, lower-cased: a DNS-1123 subdomain, or a wildcard
/// `*.` followed by one. Returns the normalised host.
pub fn ingress_host(value: &str) -> Result<String, InvalidValue> {
    let host = value.to_ascii_lowercase();
    let (wildcard, rest) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host.as_str()),
    };
    let labels_ok = !rest.is_empty()
        && rest.len() <= 253
        && rest.split('.').all(|label| dns_label(label).is_ok());
    if !labels_ok {
        let what = if wildcard {
            "a wildcard host ('*.' followed by a DNS name)"
        } else {
            "a DNS name of lower-case letters, digits, '-' and '.' (or '*.' and a DNS name)"
        };
        return Err(invalid(format!(
            "'{}' is not a valid host: expected {what}",
            printable(value)
        )));
    }
    if rest.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(invalid(format!(
            "'{}' is not a valid host: an IP address cannot be used as an Ingress host",
            printable(value)
        )));
    }
    Ok(host)
}

/// The path of an `Exact` or `Prefix` rule: an absolute URI path made only of the
/// characters RFC 3986 allows in a path (percent-encoding included).
pub fn ingress_path(value: &str) -> Result<(), InvalidValue> {
    const MAX: usize = 2048;
    if !value.starts_with('/') {
        return Err(invalid(format!(
            "'{}' is not a valid path: it must start with '/'",
            printable(value)
        )));
    }
    if value.len() > MAX {
        return Err(invalid(format!(
            "path is {} bytes long: at most {MAX} are accepted",
            value.len()
        )));
    }
    if let Some(bad) = value.chars().find(|c| !is_path_char(*c)) {
        return Err(invalid(format!(
            "'{}' is not a valid path: '{}' is not allowed (expected letters, digits, \
             percent-encoding and - . _ ~ ! $ & ' ( ) * + , ; = : @ /)",
            printable(value),
            bad.escape_debug()
        )));
    }
    Ok(())
}

/// The path of a route (an Ingress path, an HTTPRoute path match): an [`ingress_path`]
/// without `;`. Requests are routed on their path without its `;` parameters
/// (`/admin;jsessionid=1` meets the rules of `/admin`, as servers that drop path
/// parameters serve it), so a route path with one could never match.
pub fn route_path(value: &str) -> Result<(), InvalidValue> {
    ingress_path(value)?;
    if value.contains(';') {
        return Err(invalid(format!(
            "'{}' is not a path Tugboat routes: requests are routed on their path without \
             its ';' parameters (docs/path-normalization.md), so a path with ';' never matches",
            printable(value)
        )));
    }
    Ok(())
}

/// An HTTP header name as the Gateway API's filters set it: letters, digits, `-`, `_`
/// and `.` (what haproxy takes unquoted as a header name), at most 256.
pub fn header_name(value: &str) -> Result<(), InvalidValue> {
    let ok = !value.is_empty()
        && value.len() <= 256
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a header name Tugboat accepts: letters, digits, '-', '_' and '.'",
            printable(value)
        )))
    }
}

/// A header value written between double quotes in haproxy's config: printable ASCII
/// without `"`, `\`, `$` (haproxy expands variables there) nor `%` (log-format), at most
/// 4096.
pub fn header_value(value: &str) -> Result<(), InvalidValue> {
    let ok = value.len() <= 4096
        && value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !b"\"\\$%".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a header value Tugboat accepts: printable ASCII without \", \\, $ or %",
            printable(value)
        )))
    }
}

/// A value compared in an haproxy condition (a header or query parameter match):
/// printable ASCII without spaces, quotes, `\\`, `$`, `%`, `#`, `{` or `}`, at most 1024.
pub fn match_value(value: &str) -> Result<(), InvalidValue> {
    let ok = !value.is_empty()
        && value.len() <= 1024
        && value
            .bytes()
            .all(|b| (b'!'..=b'~').contains(&b) && !b"\"'\\$%#{}".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' is not a match value Tugboat accepts: printable ASCII without spaces, \
             quotes, \\, $, %, #, {{ or }}",
            printable(value)
        )))
    }
}

/// A regular expression written between single quotes in haproxy's config (a
/// `RegularExpression` match; haproxy reads nothing inside single quotes): printable
/// ASCII without spaces, quotes, `%` or `#`, at most 512, and a valid expression.
pub fn regex(value: &str) -> Result<(), InvalidValue> {
    let allowed = !value.is_empty()
        && value.len() <= 512
        && value
            .bytes()
            .all(|b| (b'!'..=b'~').contains(&b) && !b"\"'%#".contains(&b));
    if !allowed {
        return Err(invalid(format!(
            "'{}' is not a regular expression Tugboat accepts: printable ASCII without \
             spaces, quotes, % or #",
            printable(value)
        )));
    }
    regex_syntax::Parser::new().parse(value).map_err(|err| {
        let reason = err.to_string().lines().last().unwrap_or("").to_string();
        invalid(format!(
            "'{}' is not a valid regular expression: {reason}",
            printable(value)
        ))
    })?;
    Ok(())
}

/// A path written literally into a redirect's location or a rewrite: an
/// [`ingress_path`] without `$` (haproxy expands variables in quoted text), `%`
/// (log-format) nor `'` (it opens a quote that haproxy's line reader never sees closed,
/// and the config does not load).
pub fn literal_path(value: &str) -> Result<(), InvalidValue> {
    ingress_path(value)?;
    match value.chars().find(|c| matches!(c, '$' | '%' | '\'')) {
        None => Ok(()),
        Some(bad) => Err(invalid(format!(
            "'{}': '{bad}' is not accepted in a redirect or rewrite path",
            printable(value)
        ))),
    }
}

/// The longest timeout haproxy takes, in milliseconds (its timers are signed 32-bit).
pub const MAX_TIMEOUT_MS: u64 = 2_147_483_647;

/// A Gateway API duration (`timeouts` of an HTTPRoute rule): one to four groups of one
/// to five digits and a unit, `h`, `m`, `s` or `ms` (`1h30m`, `10s`, `500ms`; `0s`
/// means no timeout), in milliseconds. A duration longer than haproxy can time
/// ([`MAX_TIMEOUT_MS`]) is refused.
pub fn gateway_duration(value: &str) -> Result<u64, InvalidValue> {
    let refuse = |why: &str| {
        invalid(format!(
            "'{}' is not a duration: {why} (one to four groups of up to five digits and \
             h, m, s or ms, such as 1h30m, 10s or 500ms)",
            printable(value)
        ))
    };
    let mut rest = value;
    let mut total: u64 = 0;
    let mut groups = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return Err(refuse("expected one to five digits"));
        }
        let (number, after) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| refuse("expected a number"))?;
        let (unit_ms, after) = if let Some(after) = after.strip_prefix("ms") {
            (1, after)
        } else if let Some(after) = after.strip_prefix('h') {
            (3_600_000, after)
        } else if let Some(after) = after.strip_prefix('m') {
            (60_000, after)
        } else if let Some(after) = after.strip_prefix('s') {
            (1_000, after)
        } else {
            return Err(refuse("expected the unit h, m, s or ms"));
        };
        groups += 1;
        if groups > 4 {
            return Err(refuse("more than four groups"));
        }
        total += number * unit_ms;
        rest = after;
    }
    if groups == 0 {
        return Err(refuse("empty"));
    }
    if total > MAX_TIMEOUT_MS {
        return Err(invalid(format!(
            "'{}' is longer than haproxy can time ({MAX_TIMEOUT_MS}ms, about 24 days)",
            printable(value)
        )));
    }
    Ok(total)
}

/// A URL haproxy itself requests or sends clients to (external authentication's
/// `auth-url` and `auth-signin`): `http://` or `https://`, a lower-case host name, an
/// IPv4 address or a bracketed IPv6 address, an optional port from 1 to 65535, then an
/// optional path and query of letters, digits, percent-encoding (`%` and two hex
/// digits) and `- . _ ~ / : @ ! * + , ; = &` (`&` and `=` only in the query). No user
/// name, no fragment, no spaces, quotes, `\`, `$`, `#`, parentheses or braces, at most
/// 2048 bytes: it is written as one word of an haproxy rule.
pub fn service_url(value: &str) -> Result<(), InvalidValue> {
    service_url_shape(value).map_err(|why| {
        invalid(format!(
            "'{}' is not a URL Tugboat accepts: {why}",
            printable(value)
        ))
    })
}

/// [`service_url`]'s checks: why `value` is refused.
fn service_url_shape(value: &str) -> Result<(), &'static str> {
    let refuse = |why: &'static str| why;
    if value.len() > 2048 {
        return Err(refuse("at most 2048 bytes"));
    }
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| refuse("it must start with http:// or https://"))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (address, after) = inner
            .split_once(']')
            .ok_or_else(|| refuse("an IPv6 address must be closed with ']'"))?;
        address
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| refuse("the address between brackets is not an IPv6 address"))?;
        match after {
            "" => (address, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (address, Some(port)),
                None => return Err(refuse("only ':PORT' may follow an IPv6 address")),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if !authority.starts_with('[') {
        let is_ipv4 = host.parse::<std::net::Ipv4Addr>().is_ok();
        if !is_ipv4 && dns_subdomain(host).is_err() {
            return Err(refuse(
                "the host must be a lower-case DNS name, an IPv4 address or [IPv6]",
            ));
        }
    }
    if let Some(port) = port {
        let number: u32 =
            if !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()) {
                port.parse().unwrap_or(0)
            } else {
                0
            };
        if !(1..=65535).contains(&number) {
            return Err(refuse("the port must be a number from 1 to 65535"));
        }
    }
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    if !path.is_empty() && !path.starts_with('/') {
        return Err(refuse("the path must start with '/'"));
    }
    if !url_part_ok(path, b"-._~/:@!*+,;") {
        return Err(refuse(
            "the path may hold letters, digits, %XX and - . _ ~ / : @ ! * + , ;",
        ));
    }
    if let Some(query) = query
        && !url_part_ok(query, b"-._~/:@!*+,;=&?")
    {
        return Err(refuse(
            "the query may hold letters, digits, %XX and - . _ ~ / : @ ! * + , ; = & ?",
        ));
    }
    Ok(())
}

/// The nginx variables an external authentication URL (`auth-url`, `auth-signin`) may
/// hold, filled in per request by the authentication script: the names, then the
/// prefixes followed by a header or query argument name.
pub const URL_VARIABLES: &[&str] = &[
    "host",
    "scheme",
    "request_uri",
    "escaped_request_uri",
    "uri",
    "args",
    "query_string",
    "is_args",
    "remote_addr",
];
/// `$http_NAME`: the request header `NAME` (`_` for `-`); `$arg_NAME`: the query
/// argument `NAME`.
pub const URL_VARIABLE_PREFIXES: &[&str] = &["http_", "arg_"];

/// Why a variable of an external authentication URL was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlVariableError {
    /// A `$` not followed by a name (or `${` not closed by `}`).
    Malformed,
    /// A name Tugboat does not fill in.
    Unknown(String),
}

/// The variables of `value`, in order: `$name` (the longest run of letters, digits and
/// `_`, as nginx reads it) or `${name}`.
pub fn url_variables(value: &str) -> Result<Vec<&str>, UrlVariableError> {
    Ok(variable_spans(value)?
        .into_iter()
        .map(|(_, name)| name)
        .collect())
}

/// Each variable of `value`: the byte range it takes (from its `$`) and its name.
fn variable_spans(value: &str) -> Result<Vec<(std::ops::Range<usize>, &str)>, UrlVariableError> {
    let is_name_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = value[from..].find('$') {
        let start = from + found;
        let after = &value[start + 1..];
        let (name, taken) = if let Some(inner) = after.strip_prefix('{') {
            let end = inner.find('}').ok_or(UrlVariableError::Malformed)?;
            (&inner[..end], end + 2)
        } else {
            let end = after
                .bytes()
                .position(|b| !is_name_byte(b))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() || !name.bytes().all(is_name_byte) {
            return Err(UrlVariableError::Malformed);
        }
        let known = URL_VARIABLES.contains(&name)
            || URL_VARIABLE_PREFIXES.iter().any(|prefix| {
                name.strip_prefix(prefix).is_some_and(|rest| {
                    !rest.is_empty()
                        && rest
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                })
            });
        if !known {
            return Err(UrlVariableError::Unknown(name.to_string()));
        }
        let end = start + 1 + taken;
        spans.push((start..end, name));
        from = end;
    }
    Ok(spans)
}

/// The one variable that may stand in the authority (host or port) of an external
/// authentication URL: the request's own Host, and then only on routes whose hosts
/// are exact (see [`authority_variables`]).
pub const AUTHORITY_VARIABLE: &str = "host";

/// The variables of `value` that stand in its authority, the host and port between
/// `://` and the first `/` or `?`, in order. A variable there lets the request choose
/// where haproxy sends it: any but [`AUTHORITY_VARIABLE`] lets the client name the
/// authentication service outright (a header, an argument, its own address...), and
/// `$host` does on a route that takes any Host (no host, or a wildcard).
pub fn authority_variables(value: &str) -> Result<Vec<&str>, UrlVariableError> {
    let Some(scheme_end) = value.find("://") else {
        return Ok(Vec::new());
    };
    let start = scheme_end + 3;
    let end = value[start..]
        .find(['/', '?'])
        .map_or(value.len(), |offset| start + offset);
    Ok(variable_spans(value)?
        .into_iter()
        .filter(|(span, _)| span.start >= start && span.start < end)
        .map(|(_, name)| name)
        .collect())
}

/// A [`service_url`] that may hold nginx variables ([`url_variables`]): each variable
/// stands for a value the authentication script fills in per request (and checks
/// there: a host that is not a host name or address fails the request). Only
/// [`AUTHORITY_VARIABLE`] may stand in the host or port ([`authority_variables`]);
/// whether the routes allow it there is the model's call. Written as it is into
/// haproxy's config: `$` and `{}` are plain bytes outside double quotes, and the rest
/// of the URL is checked as [`service_url`] checks it.
pub fn service_url_template(value: &str) -> Result<(), InvalidValue> {
    let spans = variable_spans(value).map_err(|e| {
        invalid(match e {
            UrlVariableError::Malformed => format!(
                "'{}' has a '$' that does not start a variable ($name or ${{name}})",
                printable(value)
            ),
            UrlVariableError::Unknown(name) => format!(
                "'{}' holds the variable ${name}, which Tugboat does not fill in",
                printable(value),
            ),
        })
    })?;
    if let Some(name) = authority_variables(value)
        .unwrap_or_default()
        .into_iter()
        .find(|name| *name != AUTHORITY_VARIABLE)
    {
        return Err(invalid(format!(
            "'{}' has the variable ${name} in its host or port: the client would choose \
             where the request goes; only ${AUTHORITY_VARIABLE} may stand there",
            printable(value)
        )));
    }
    // Each variable stands in as one letter, valid in a host, a path and a query.
    let mut stand_in = String::with_capacity(value.len());
    let mut from = 0;
    for (span, _) in spans {
        stand_in.push_str(&value[from..span.start]);
        stand_in.push('x');
        from = span.end;
    }
    stand_in.push_str(&value[from..]);
    service_url_shape(&stand_in).map_err(|why| {
        invalid(format!(
            "'{}' is not a URL Tugboat accepts: {why}",
            printable(value)
        ))
    })
}

/// Letters, digits, `%` with two hex digits, and the `extra` bytes.
fn url_part_ok(part: &str, extra: &[u8]) -> bool {
    let bytes = part.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'%' {
            let hex = bytes.get(index + 1..index + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            index += 3;
            continue;
        }
        if !(byte.is_ascii_alphanumeric() || extra.contains(&byte)) {
            return false;
        }
        index += 1;
    }
    true
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/%".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_durations() {
        assert_eq!(gateway_duration("10s"), Ok(10_000));
        assert_eq!(gateway_duration("500ms"), Ok(500));
        assert_eq!(gateway_duration("1h"), Ok(3_600_000));
        assert_eq!(gateway_duration("1h30m5s250ms"), Ok(5_405_250));
        assert_eq!(gateway_duration("0s"), Ok(0));
        for bad in [
            "",
            "10",
            "s",
            "1.5s",
            "-1s",
            "10 s",
            "100000s",
            "1d",
            "1s1s1s1s1s",
            "10S",
            "1s\n",
            "999h",
        ] {
            assert!(gateway_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn hosts() {
        assert_eq!(
            ingress_host("Foo.Example.com").as_deref(),
            Ok("foo.example.com")
        );
        assert_eq!(
            ingress_host("*.example.com").as_deref(),
            Ok("*.example.com")
        );
        for bad in [
            "",
            "*",
            "*.",
            "a..b",
            "-a.com",
            "a_b.com",
            "a.com\nbackend x",
            "a.com ",
            "*.*.a.com",
            "a.*.com",
            "10.0.0.1",
            "a.com:80",
        ] {
            assert!(ingress_host(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn paths() {
        for good in ["/", "/foo", "/foo/", "/a%20b", "/v1;x=1", "/~user/@me"] {
            assert_eq!(ingress_path(good), Ok(()), "{good:?}");
        }
        // A route path is matched against request paths without their parameters.
        assert_eq!(route_path("/v1/x"), Ok(()));
        let err = route_path("/v1;x=1").expect_err("a route path with ';'");
        assert!(err.0.contains("without its ';' parameters"), "{err:?}");
        for bad in [
            "",
            "foo",
            "/a b",
            "/a\tb",
            "/a\nuse_backend x",
            "/a#b",
            "/a\"b",
            "/é",
        ] {
            assert!(ingress_path(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn names_and_ports() {
        assert!(dns_label("web-1").is_ok());
        assert!(dns_label("Web").is_err());
        assert!(dns_label("a_b").is_err());
        assert!(port_name("http").is_ok());
        assert!(port_name("8080").is_err());
        assert!(port_name("a--b").is_err());
        assert_eq!(port_number(80), Ok(80));
        assert!(port_number(0).is_err());
        assert!(port_number(70000).is_err());
    }

    #[test]
    fn header_names_values_and_literal_paths() {
        assert!(header_name("X-Request-Id").is_ok());
        for bad in ["", "a b", "a:b", "a\nb", "#x", "a$b"] {
            assert!(header_name(bad).is_err(), "{bad:?}");
        }
        assert!(header_value("text/html; charset=utf-8").is_ok());
        assert!(header_value("").is_ok());
        for bad in ["a\"b", "a\\b", "${HOME}", "100%", "a\nb", "é"] {
            assert!(header_value(bad).is_err(), "{bad:?}");
        }
        assert!(match_value("v2").is_ok());
        for bad in ["", "a b", "a}b", "a'b", "100%"] {
            assert!(match_value(bad).is_err(), "{bad:?}");
        }
        assert!(regex("^/v[0-9]+/items$").is_ok());
        for bad in ["", "/a(", "/a b", "/a'b", "/a#b", "/100%"] {
            assert!(regex(bad).is_err(), "{bad:?}");
        }
        assert!(literal_path("/new/place").is_ok());
        // `/a'b`: found by fuzzing `app-root`; the config with it did not load.
        for bad in ["/a$b", "/a%20b", "relative", "/a b", "/a'b"] {
            assert!(literal_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_urls_with_host_ip_port_path_and_query() {
        for good in [
            "http://auth.example.com",
            "https://oauth2-proxy.auth.svc.cluster.local/oauth2/auth",
            "http://127.0.0.1:9000/check?app=shop&x=1",
            "http://[::1]:8080/auth",
            "https://login.example.com/start?rd=https%3A%2F%2Fa",
        ] {
            assert_eq!(service_url(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn service_urls_need_http_or_https() {
        for bad in [
            "ftp://a.com/",
            "auth.example.com/x",
            "//a.com/",
            "HTTP://a.com/",
        ] {
            assert!(service_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_urls_need_a_valid_host() {
        for bad in [
            "http:///x",
            "http://A.com/",
            "http://user@a.com/",
            "http://a_b.com/",
            "http://[::1/",
            "http://[nope]/",
            "http://[::1]x/",
        ] {
            assert!(service_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_urls_need_a_valid_port() {
        for bad in [
            "http://a.com:0/",
            "http://a.com:65536/",
            "http://a.com:/",
            "http://a.com:8x/",
        ] {
            assert!(service_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_urls_refuse_what_could_reach_the_config() {
        for bad in [
            "http://a.com/x y",
            "http://a.com/x\nuse_backend y",
            "http://a.com/x\"",
            "http://a.com/x'",
            "http://a.com/${HOME}",
            "http://a.com/%[env(X)]",
            "http://a.com/x#frag",
            "http://a.com/%zz",
            "http://a.com/x?a=(b)",
            "http://a.com/é",
            "http://a.com/a=b",
        ] {
            assert!(service_url(bad).is_err(), "{bad:?}");
        }
        let long = format!("http://a.com/{}", "a".repeat(2048));
        assert!(service_url(&long).is_err());
    }

    #[test]
    fn url_variables_are_read_as_nginx_reads_them() {
        assert_eq!(
            url_variables("https://$host/a?rd=${escaped_request_uri}x&t=$http_x_tenant-"),
            Ok(vec!["host", "escaped_request_uri", "http_x_tenant"])
        );
        assert_eq!(url_variables("https://a.com/"), Ok(vec![]));
        assert_eq!(
            url_variables("https://$hostname/"),
            Err(UrlVariableError::Unknown("hostname".into()))
        );
        assert_eq!(
            url_variables("https://a/$"),
            Err(UrlVariableError::Malformed)
        );
    }

    #[test]
    fn service_url_templates_check_the_url_around_the_variables() {
        assert_eq!(
            service_url_template("https://$host:8443/oauth2/auth"),
            Ok(())
        );
        assert_eq!(service_url_template("http://127.0.0.1/a"), Ok(()));
        for bad in [
            "https://$host:0/",
            "https://$host/a b",
            "ftp://$host/",
            "https://$host/%[env(X)]",
            "https://$nope/",
        ] {
            let error = service_url_template(bad).expect_err(bad);
            assert!(error.0.contains(bad), "{error:?}");
        }
    }

    #[test]
    fn authority_variables_are_those_before_the_path_and_query() {
        assert_eq!(
            authority_variables("https://auth.$host:$arg_port/a/$host?h=${host}"),
            Ok(vec!["host", "arg_port"])
        );
        assert_eq!(
            authority_variables("https://${host}?next=$http_x_next"),
            Ok(vec!["host"])
        );
        assert_eq!(
            authority_variables("http://127.0.0.1:9000/check?host=$host"),
            Ok(vec![])
        );
        assert_eq!(authority_variables("no scheme $host"), Ok(vec![]));
    }

    #[test]
    fn service_url_templates_allow_only_host_in_the_authority() {
        for good in [
            "https://$host/oauth2/auth",
            "https://${host}:8443/oauth2/auth",
            "https://auth.$host/check",
            "http://127.0.0.1:9000/check/$http_x_tenant?h=$host&a=$arg_next&ip=$remote_addr",
        ] {
            assert_eq!(service_url_template(good), Ok(()), "{good}");
        }
        for (bad, variable) in [
            ("https://$http_x_auth_host/check", "$http_x_auth_host"),
            ("https://$arg_next/start", "$arg_next"),
            ("https://auth.example.com:$arg_port/check", "$arg_port"),
            ("https://$remote_addr/check", "$remote_addr"),
            ("https://${http_x_target}?x=1", "$http_x_target"),
            ("https://$host.$http_x_zone/check", "$http_x_zone"),
        ] {
            let error = service_url_template(bad).expect_err(bad);
            assert!(
                error.0.contains(variable) && error.0.contains("the client would choose"),
                "{error:?}"
            );
        }
    }

    #[test]
    fn printable_escapes_control_characters() {
        assert_eq!(printable("a\nb"), "a\\nb");
    }
}
