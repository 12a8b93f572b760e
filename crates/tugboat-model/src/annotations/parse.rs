//! The parsers of key values: each accepts only the syntax its key documents and refuses
//! everything else (newlines, quotes, `%`, `$`, `\`, ...), so a value that passes can be
//! written into haproxy's config as it is. A refusal is a [`ValueError`] whose text says
//! what was expected; the problem on the object shows it after "expected".

use std::net::IpAddr;

use thiserror::Error;

use crate::features::{
    Balance, CorsOrigins, PathRewrite, ProxyProtocol, RedirectTarget, VerifyClient,
};
use crate::validate::{self, printable};

/// Why a value was refused: each case's text is what the key expects.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    #[error("true or false")]
    NotBool,
    #[error("a whole number from {min} to {max}")]
    OutOfRange { min: u64, max: u64 },
    #[error("301, 302, 303, 307 or 308")]
    NotRedirectCode,
    #[error("301, 302, 307 or 308")]
    NotHttpRedirectCode,
    #[error("a port from 1 to 65535")]
    NotPort,
    #[error("a duration: a number and ms, s, m or h (e.g. 500ms, 30s, 5m)")]
    NotDuration,
    #[error("a duration above zero: a number and ms, s, m or h (e.g. 500ms, 2s)")]
    NotPositiveDuration,
    #[error("a header name (letters, digits and - _ . * + ^ ` ~; not if, unless or or)")]
    NotHeaderName,
    #[error(
        "one 'Name value' per line: a header name, a space and printable ASCII without \", \\, $ or %"
    )]
    NotHeaderLines,
    #[error(
        "an absolute http:// or https:// URL of letters, digits and - . _ ~ : / ? [ ] @ ! & ( ) * + , ; ="
    )]
    NotUrl,
    #[error("normalized or original")]
    NotBackendPath,
    #[error(
        "HOST, HOST:PORT (a lower-case host name or IPv4 address, a port from 1 to 65535), or an absolute http:// or https:// URL{}",
        as_url.as_ref().map(|e| format!("; as a URL: {e}")).unwrap_or_default()
    )]
    NotRedirectTarget { as_url: Option<Box<ValueError>> },
    #[error("a lower-case host name with an optional :port")]
    NotHostPort,
    #[error(
        "'REGEX REPLACEMENT' (a regular expression on the path and its replacement, printable ASCII without quotes, % or #)"
    )]
    NotPathRewrite,
    #[error(
        "'REGEX REPLACEMENT' (a regular expression on the path and its replacement, printable ASCII without quotes, % or #); the expression does not parse: {0}"
    )]
    RegexDoesNotParse(String),
    #[error(
        "'REGEX REPLACEMENT' (a regular expression on the path and its replacement, printable ASCII without quotes, % or #); the replacement starts with / and uses \\ only as \\1 to \\9"
    )]
    NotReplacement,
    #[error("* or origins such as https://app.example.com separated by commas")]
    NotOrigins,
    #[error("upper-case HTTP methods separated by commas")]
    NotMethods,
    #[error("header names separated by commas")]
    NotHeaderNames,
    #[error("IP addresses or CIDR networks; '{0}' is neither")]
    NotNetwork(String),
    #[error("a prefix length from 0 to {max} in '{item}'")]
    NotPrefixLength { max: u8, item: String },
    #[error("1 to 1000 IP addresses or CIDR networks")]
    NetworkCount,
    #[error(
        "configmap:NAME/KEY: a ConfigMap name and one of its keys (letters, digits, '-', '_', '.')"
    )]
    NotConfigMapKey,
    #[error("line {line}: {error}")]
    PatternLine { line: usize, error: Box<ValueError> },
    #[error("1 to 100000 IP addresses or CIDR networks, one per line")]
    PatternCount,
    #[error("a path: / then letters, digits and - . _ ~ / ? = &")]
    NotCheckPath,
    #[error("a cookie name: letters, digits, '-' and '_', at most 64")]
    NotCookieName,
    #[error("a size in bytes with an optional unit k, m or g (1024-based), e.g. 8m; 0 is no limit")]
    NotBodySize,
    #[error("cookie")]
    NotAffinity,
    #[error("sticky or legacy")]
    NotAffinityCanaryBehavior,
    #[error(
        "a regular expression of printable ASCII without spaces, quotes, % or #, at most 512; {0}"
    )]
    NotHeaderPattern(String),
    #[error("a cookie path: / then letters, digits and - . _ ~ /, at most 256")]
    NotCookiePath,
    #[error("printable ASCII without spaces, quotes, \\, $, %, #, {{ or }}, at most 1024")]
    NotMatchValue,
    #[error("at most 8 KB of directives")]
    SnippetTooLarge,
    #[error("directives separated by line breaks, without other control characters")]
    SnippetControlCharacter,
    #[error("directives Tugboat allows in snippets; line {line} uses '{what}', which {why}")]
    SnippetDirective {
        line: usize,
        what: String,
        why: &'static str,
    },
    #[error("1 to 64 directives")]
    SnippetLineCount,
    #[error("basic-auth")]
    NotAuthType,
    #[error("on, optional, optional_no_ca or off")]
    NotVerifyClient,
    #[error(
        "a regular expression on the subject DN (RFC 2253, e.g. CN=app), printable ASCII without spaces, quotes, % or #, at most 512; {0}"
    )]
    NotSubjectPattern(String),
    #[error("at most 64 printable ASCII characters without \", \\, $ or %")]
    NotRealm,
    #[error("roundrobin, leastconn, source, uri, random or hdr(Name)")]
    NotBalance,
    #[error("stdout or ADDRESS:PORT (an IP address and a port)")]
    NotSyslogServer,
    #[error("an haproxy log-format of printable ASCII without \", \\ or $")]
    NotLogFormat,
    #[error("h2 or h1")]
    NotServerProto,
    #[error("v1 or v2")]
    NotProxyProtocol,
    #[error("the name of a Secret (lower-case letters, digits, '-', '.')")]
    NotSecretName,
    /// An external authentication URL ([`validate::service_url`]): why it was refused.
    #[error("an http:// or https:// URL; {0}")]
    NotServiceUrl(String),
    /// An external authentication URL with a variable Tugboat does not fill in.
    #[error(
        "a URL whose variables are {known}; not ${0}",
        known = url_variable_names()
    )]
    UnknownUrlVariable(String),
    #[error("a URL whose '$' starts a variable: $name or ${{name}}")]
    MalformedUrlVariable,
    /// An external authentication URL with a variable other than `$host` in its host
    /// or port: the client would choose where the request goes.
    #[error(
        "a URL whose host and port hold no variable but $host; ${0} stands in the host or port, so the client would choose where the request goes"
    )]
    VariableInAuthority(String),
    #[error("GET, HEAD, POST, PUT or DELETE")]
    NotAuthMethod,
    #[error(
        "a path starting with / of letters, digits and - . _ ~ / ! & ( ) * + , ; = : @ ?, with $1 to $9 for the path's groups"
    )]
    NotRewriteTarget,
    #[error("a lower-case DNS name (letters, digits, '-', '.')")]
    NotServerName,
    #[error("on or off")]
    NotOnOff,
    /// A path written literally into a redirect ([`validate::literal_path`]): why not.
    #[error("a path starting with / (no $ or %); {0}")]
    NotLiteralPath(String),
    #[error("1 to 32 header names (letters, digits and - _ .) separated by commas")]
    NotHeaderNameList,
    /// A host of `server-alias` that is not a valid Ingress host: why not.
    #[error("1 to 32 host names separated by commas; {0}")]
    NotHostList(String),
    /// A value of another controller's key that Tugboat cannot write as its own.
    #[error("{0}")]
    NotPeerValue(&'static str),
    #[error("the name of a Service in the object's namespace (lower-case letters, digits, '-')")]
    NotServiceName,
    /// `custom-http-errors`: the item that is not a status code from 400 to 599.
    #[error("status codes from 400 to 599 separated by commas; '{0}' is not one")]
    NotErrorCode(String),
    #[error("1 to {max} status codes from 400 to 599 separated by commas")]
    ErrorCodeCount { max: usize },
    /// `no-tls-redirect-locations`: why the list was refused.
    #[error(
        "path prefixes separated by commas (at most {MOST_PATH_PREFIXES}, each starting with / and without spaces, ;, $, % or '), or nothing; {0}"
    )]
    NotPathPrefixList(String),
}

pub type Parsed<T> = Result<T, ValueError>;

pub fn parse_bool(value: &str) -> Parsed<bool> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError::NotBool),
    }
}

/// A whole number from `min` to `max`, digits only.
pub fn parse_number(value: &str, min: u64, max: u64) -> Parsed<u64> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n) && value.bytes().all(|b| b.is_ascii_digit()))
        .ok_or(ValueError::OutOfRange { min, max })
}

/// `http-redirect-code` (ingress-nginx's ConfigMap key): the codes it accepts.
pub fn parse_http_redirect_code(value: &str) -> Parsed<u16> {
    match value {
        "301" => Ok(301),
        "302" => Ok(302),
        "307" => Ok(307),
        "308" => Ok(308),
        _ => Err(ValueError::NotHttpRedirectCode),
    }
}

pub fn parse_redirect_code(value: &str) -> Parsed<u16> {
    match value {
        "301" => Ok(301),
        "302" => Ok(302),
        "303" => Ok(303),
        "307" => Ok(307),
        "308" => Ok(308),
        _ => Err(ValueError::NotRedirectCode),
    }
}

pub fn parse_port(value: &str) -> Parsed<u16> {
    parse_number(value, 1, 65_535)
        .map(|n| n as u16)
        .map_err(|_| ValueError::NotPort)
}

/// An haproxy duration: digits and a unit.
pub fn parse_duration(value: &str) -> Parsed<String> {
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let unit = &value[digits..];
    if digits == 0 || digits > 9 || !["ms", "s", "m", "h"].contains(&unit) {
        return Err(ValueError::NotDuration);
    }
    Ok(value.to_string())
}

/// An haproxy duration above zero, for what haproxy refuses at 0 (a server's check
/// `inter`: a config with `inter 0` does not load).
pub fn parse_positive_duration(value: &str) -> Parsed<String> {
    let duration = parse_duration(value)?;
    if duration
        .bytes()
        .take_while(u8::is_ascii_digit)
        .all(|b| b == b'0')
    {
        return Err(ValueError::NotPositiveDuration);
    }
    Ok(duration)
}

fn is_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"*+-.^_`~".contains(&b))
        // Words that mean something in an haproxy rule are not header names here.
        && !["if", "unless", "or"].contains(&value.to_ascii_lowercase().as_str())
}

pub fn parse_header_name(value: &str) -> Parsed<String> {
    if is_token(value) {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotHeaderName)
    }
}

/// Text that can go between double quotes in haproxy's config: printable ASCII
/// without the characters haproxy interprets there (`"`, `\`, `$`) nor `%` (log-format).
fn is_quotable(value: &str, max: usize) -> bool {
    value.len() <= max
        && value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !b"\"\\$%".contains(&b))
}

pub fn parse_header_lines(value: &str) -> Parsed<Vec<(String, String)>> {
    let mut headers = Vec::new();
    for line in value.split('\n').filter(|l| !l.trim().is_empty()) {
        let (name, header_value) = line
            .trim()
            .split_once(' ')
            .ok_or(ValueError::NotHeaderLines)?;
        let header_value = header_value.trim();
        if parse_header_name(name).is_err()
            || header_value.is_empty()
            || !is_quotable(header_value, 1024)
        {
            return Err(ValueError::NotHeaderLines);
        }
        headers.push((name.to_string(), header_value.to_string()));
    }
    if headers.is_empty() || headers.len() > 32 {
        return Err(ValueError::NotHeaderLines);
    }
    Ok(headers)
}

fn is_url_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?[]@!&()*+,;=".contains(&b)
}

pub fn parse_url(value: &str) -> Parsed<String> {
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or(ValueError::NotUrl)?;
    let host = rest.split(['/', '?']).next().unwrap_or("");
    if host.is_empty() || value.len() > 2048 || !value.bytes().all(is_url_char) {
        return Err(ValueError::NotUrl);
    }
    Ok(value.to_string())
}

/// The values of `backend-path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendPath {
    Normalized,
    Original,
}

pub fn parse_backend_path(value: &str) -> Parsed<BackendPath> {
    match value {
        "normalized" => Ok(BackendPath::Normalized),
        "original" => Ok(BackendPath::Original),
        _ => Err(ValueError::NotBackendPath),
    }
}

/// `request-redirect`: an absolute URL (it has a scheme), else `host` or `host:port`.
pub fn parse_redirect_target(value: &str) -> Parsed<RedirectTarget> {
    if value.contains("://") {
        return parse_url(value).map(RedirectTarget::Url).map_err(|e| {
            ValueError::NotRedirectTarget {
                as_url: Some(Box::new(e)),
            }
        });
    }
    parse_host_port(value)
        .map(RedirectTarget::Host)
        .map_err(|_| ValueError::NotRedirectTarget { as_url: None })
}

pub fn parse_host_port(value: &str) -> Parsed<String> {
    let (host, port) = match value.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (value, None),
    };
    validate::dns_subdomain(host).map_err(|_| ValueError::NotHostPort)?;
    match port {
        None => Ok(host.to_string()),
        // Written back as a number: `:08443` becomes `:8443`.
        Some(port) => {
            let port = parse_port(port).map_err(|_| ValueError::NotHostPort)?;
            Ok(format!("{host}:{port}"))
        }
    }
}

pub fn parse_path_rewrite(value: &str) -> Parsed<PathRewrite> {
    let mut words = value.split(' ').filter(|w| !w.is_empty());
    let (Some(pattern), Some(replacement), None) = (words.next(), words.next(), words.next())
    else {
        return Err(ValueError::NotPathRewrite);
    };
    let allowed = |w: &str| {
        w.len() <= 512
            && w.bytes()
                .all(|b| (b'!'..=b'~').contains(&b) && !b"\"'%#$".contains(&b))
    };
    if !allowed(pattern) || !allowed(replacement) {
        return Err(ValueError::NotPathRewrite);
    }
    if let Err(err) = regex_syntax::Parser::new().parse(pattern) {
        let first = err.to_string().lines().last().unwrap_or("").to_string();
        return Err(ValueError::RegexDoesNotParse(first));
    }
    // In the replacement, `\` only introduces a group number.
    let bytes = replacement.as_bytes();
    let groups_ok = bytes
        .iter()
        .enumerate()
        .all(|(i, b)| *b != b'\\' || bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
    if !groups_ok || !replacement.starts_with('/') && !replacement.starts_with('\\') {
        return Err(ValueError::NotReplacement);
    }
    Ok(PathRewrite {
        pattern: pattern.to_string(),
        replacement: replacement.to_string(),
    })
}

pub fn parse_origins(value: &str) -> Parsed<CorsOrigins> {
    if value.trim() == "*" {
        return Ok(CorsOrigins::Any);
    }
    let mut origins = Vec::new();
    for origin in value.split(',').map(str::trim) {
        let rest = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .ok_or(ValueError::NotOrigins)?;
        parse_host_port(rest).map_err(|_| ValueError::NotOrigins)?;
        origins.push(origin.to_string());
    }
    if origins.is_empty() || origins.len() > 64 {
        return Err(ValueError::NotOrigins);
    }
    Ok(CorsOrigins::List(origins))
}

pub fn parse_methods(value: &str) -> Parsed<String> {
    let methods: Vec<&str> = value.split(',').map(str::trim).collect();
    let ok = methods.len() <= 16
        && methods
            .iter()
            .all(|m| !m.is_empty() && m.len() <= 16 && m.bytes().all(|b| b.is_ascii_uppercase()));
    if ok {
        Ok(methods.join(", "))
    } else {
        Err(ValueError::NotMethods)
    }
}

pub fn parse_header_names(value: &str) -> Parsed<String> {
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    let ok = names.len() <= 64 && names.iter().all(|n| parse_header_name(n).is_ok());
    if ok {
        Ok(names.join(", "))
    } else {
        Err(ValueError::NotHeaderNames)
    }
}

/// One address or CIDR network, written back in its canonical form.
pub fn parse_network(item: &str) -> Parsed<String> {
    let (address, prefix) = match item.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (item, None),
    };
    let address: IpAddr = address
        .parse()
        .map_err(|_| ValueError::NotNetwork(printable(item)))?;
    let max: u8 = if address.is_ipv4() { 32 } else { 128 };
    Ok(match prefix {
        None => address.to_string(),
        Some(prefix) => {
            let bits = parse_number(prefix, 0, u64::from(max)).map_err(|_| {
                ValueError::NotPrefixLength {
                    max,
                    item: printable(item),
                }
            })?;
            format!("{address}/{bits}")
        }
    })
}

/// Addresses and networks separated by commas, spaces or line breaks.
pub fn parse_networks(value: &str) -> Parsed<Vec<String>> {
    let mut networks = Vec::new();
    for item in value.split([',', ' ', '\n']).filter(|i| !i.is_empty()) {
        networks.push(parse_network(item)?);
    }
    if networks.is_empty() || networks.len() > 1000 {
        return Err(ValueError::NetworkCount);
    }
    networks.sort();
    networks.dedup();
    Ok(networks)
}

/// A key of a ConfigMap in the object's namespace: `configmap:NAME/KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapKeyRef {
    pub name: String,
    pub key: String,
}

/// An access list as a key gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessList {
    Inline(Vec<String>),
    ConfigMap(ConfigMapKeyRef),
}

/// `configmap:NAME/KEY`, or inline addresses and networks.
pub fn parse_access_list(value: &str) -> Parsed<AccessList> {
    let Some(reference) = value.trim().strip_prefix("configmap:") else {
        return parse_networks(value).map(AccessList::Inline);
    };
    let (name, key) = reference
        .split_once('/')
        .ok_or(ValueError::NotConfigMapKey)?;
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && key != "."
        && key != "..";
    if validate::dns_subdomain(name).is_err() || !key_ok {
        return Err(ValueError::NotConfigMapKey);
    }
    Ok(AccessList::ConfigMap(ConfigMapKeyRef {
        name: name.to_string(),
        key: key.to_string(),
    }))
}

/// The entries of an access list kept in a ConfigMap: one address or network per line,
/// `#` starts a comment. Normalised, sorted, without duplicates.
pub fn parse_pattern_list(text: &str) -> Parsed<Vec<String>> {
    let mut networks = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let entry = parse_network(line).map_err(|e| ValueError::PatternLine {
            line: number + 1,
            error: Box::new(e),
        })?;
        networks.push(entry);
    }
    if networks.is_empty() || networks.len() > 100_000 {
        return Err(ValueError::PatternCount);
    }
    networks.sort();
    networks.dedup();
    Ok(networks)
}

pub fn parse_check_path(value: &str) -> Parsed<String> {
    let ok = value.starts_with('/')
        && value.len() <= 256
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/?=&".contains(&b));
    if ok {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotCheckPath)
    }
}

/// A regular expression matched against a header's value (`canary-by-header-pattern`),
/// written between single quotes (see [`validate::regex`]).
pub fn parse_header_pattern(value: &str) -> Parsed<String> {
    validate::regex(value)
        .map(|()| value.to_string())
        .map_err(|err| ValueError::NotHeaderPattern(err.0))
}

/// `affinity`: only `cookie` (ingress-nginx's only type).
pub fn parse_affinity(value: &str) -> Parsed<()> {
    match value {
        "cookie" => Ok(()),
        _ => Err(ValueError::NotAffinity),
    }
}

/// `affinity-canary-behavior`: whether a canary keeps the clients it gets with the main
/// backend's affinity cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityCanaryBehavior {
    Sticky,
    Legacy,
}

pub fn parse_affinity_canary_behavior(value: &str) -> Parsed<AffinityCanaryBehavior> {
    match value {
        "sticky" => Ok(AffinityCanaryBehavior::Sticky),
        "legacy" => Ok(AffinityCanaryBehavior::Legacy),
        _ => Err(ValueError::NotAffinityCanaryBehavior),
    }
}

/// A cookie's `Path` attribute, written into `attr "Path=..."`: nothing that ends the
/// attribute (`;`), the quotes or the line.
pub fn parse_cookie_path(value: &str) -> Parsed<String> {
    let ok = value.starts_with('/')
        && value.len() <= 256
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b));
    if ok {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotCookiePath)
    }
}

/// The largest body limit: 1 TiB (`Content-Length` is compared as a 64-bit number).
pub const BODY_SIZE_MAX: u64 = 1 << 40;

/// nginx's size syntax (`proxy-body-size`): digits and an optional `k`, `m` or `g`
/// (either case, powers of 1024); `0` is no limit (`None`).
pub fn parse_body_size(value: &str) -> Parsed<Option<u64>> {
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let unit = match &value[digits..] {
        "" => Some(1),
        "k" | "K" => Some(1 << 10),
        "m" | "M" => Some(1 << 20),
        "g" | "G" => Some(1 << 30),
        _ => None,
    };
    let bytes = unit
        .filter(|_| (1..=13).contains(&digits))
        .and_then(|unit| value[..digits].parse::<u64>().ok()?.checked_mul(unit))
        .filter(|bytes| *bytes <= BODY_SIZE_MAX)
        .ok_or(ValueError::NotBodySize)?;
    Ok((bytes > 0).then_some(bytes))
}

/// A value compared whole in an haproxy condition (see [`validate::match_value`]).
pub fn parse_match_value(value: &str) -> Parsed<String> {
    validate::match_value(value)
        .map(|()| value.to_string())
        .map_err(|_| ValueError::NotMatchValue)
}

pub fn parse_cookie_name(value: &str) -> Parsed<String> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotCookieName)
    }
}

/// `auth-type`: only `basic-auth`.
pub fn parse_auth_type(value: &str) -> Parsed<()> {
    if value == "basic-auth" {
        Ok(())
    } else {
        Err(ValueError::NotAuthType)
    }
}

pub fn parse_realm(value: &str) -> Parsed<String> {
    if !value.is_empty() && is_quotable(value, 64) {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotRealm)
    }
}

pub fn parse_balance(value: &str) -> Parsed<Balance> {
    let balance = match value {
        "roundrobin" => Balance::RoundRobin,
        "leastconn" => Balance::LeastConn,
        "source" => Balance::Source,
        "uri" => Balance::Uri,
        "random" => Balance::Random,
        _ => match value
            .strip_prefix("hdr(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|name| parse_header_name(name).ok())
        {
            Some(name) => Balance::Header(name),
            None => return Err(ValueError::NotBalance),
        },
    };
    Ok(balance)
}

/// `stdout` (`None`) or a syslog server's `ADDRESS:PORT`.
pub fn parse_syslog_server(value: &str) -> Parsed<Option<String>> {
    if value == "stdout" {
        return Ok(None);
    }
    value
        .parse::<std::net::SocketAddr>()
        .map(|a| Some(a.to_string()))
        .map_err(|_| ValueError::NotSyslogServer)
}

pub fn parse_log_format(value: &str) -> Parsed<String> {
    let ok = !value.is_empty()
        && value.len() <= 1024
        && value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !b"\"\\$".contains(&b));
    if ok {
        Ok(value.to_string())
    } else {
        Err(ValueError::NotLogFormat)
    }
}

/// `server-proto`: `true` for HTTP/2.
pub fn parse_server_proto(value: &str) -> Parsed<bool> {
    match value {
        "h2" => Ok(true),
        "h1" => Ok(false),
        _ => Err(ValueError::NotServerProto),
    }
}

pub fn parse_proxy_protocol(value: &str) -> Parsed<ProxyProtocol> {
    match value {
        "v1" => Ok(ProxyProtocol::V1),
        "v2" => Ok(ProxyProtocol::V2),
        _ => Err(ValueError::NotProxyProtocol),
    }
}

/// `auth-tls-verify-client`: nginx's `ssl_verify_client` values.
pub fn parse_verify_client(value: &str) -> Parsed<VerifyClient> {
    match value {
        "on" => Ok(VerifyClient::On),
        "optional" => Ok(VerifyClient::Optional),
        "optional_no_ca" => Ok(VerifyClient::OptionalNoCa),
        "off" => Ok(VerifyClient::Off),
        _ => Err(ValueError::NotVerifyClient),
    }
}

/// `auth-tls-match-cn`: a regular expression matched against the client certificate's
/// subject DN, written between single quotes (see [`validate::regex`]).
pub fn parse_subject_pattern(value: &str) -> Parsed<String> {
    validate::regex(value)
        .map(|()| value.to_string())
        .map_err(|err| ValueError::NotSubjectPattern(err.0))
}

pub fn parse_secret_name(value: &str) -> Parsed<String> {
    validate::dns_subdomain(value)
        .map(|()| value.to_string())
        .map_err(|_| ValueError::NotSecretName)
}

/// `auth-url` and `auth-signin`: a URL haproxy requests or sends clients to.
pub fn parse_service_url(value: &str) -> Parsed<String> {
    match validate::url_variables(value) {
        Err(validate::UrlVariableError::Unknown(name)) => {
            return Err(ValueError::UnknownUrlVariable(name));
        }
        Err(validate::UrlVariableError::Malformed) => {
            return Err(ValueError::MalformedUrlVariable);
        }
        Ok(_) => {}
    }
    if let Some(name) = validate::authority_variables(value)
        .unwrap_or_default()
        .into_iter()
        .find(|name| *name != validate::AUTHORITY_VARIABLE)
    {
        return Err(ValueError::VariableInAuthority(name.to_string()));
    }
    validate::service_url_template(value)
        .map(|()| value.to_string())
        .map_err(|e| ValueError::NotServiceUrl(e.0))
}

/// The variables of an external authentication URL, as the documentation lists them.
pub fn url_variable_names() -> String {
    validate::URL_VARIABLES
        .iter()
        .map(|v| format!("${v}"))
        .chain(
            validate::URL_VARIABLE_PREFIXES
                .iter()
                .map(|p| format!("${p}NAME")),
        )
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rewrite-target` (ingress-nginx): the path the backend receives, `$1` to `$9` naming
/// the groups of the route's regex path; written as haproxy's replacement (`\1`).
pub fn parse_rewrite_target(value: &str) -> Parsed<String> {
    let bytes = value.as_bytes();
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~/!&()*+,;=:@?".contains(&b);
    let ok = value.starts_with('/')
        && value.len() <= 512
        && bytes.iter().enumerate().all(|(i, b)| {
            allowed(*b) || *b == b'$' && bytes.get(i + 1).is_some_and(|d| (b'1'..=b'9').contains(d))
        });
    if ok {
        Ok(value.replace('$', "\\"))
    } else {
        Err(ValueError::NotRewriteTarget)
    }
}

/// `server-ssl-name`: the name sent as SNI to a backend's servers and checked in their
/// certificates.
pub fn parse_server_name(value: &str) -> Parsed<String> {
    validate::dns_subdomain(value)
        .map(|()| value.to_string())
        .map_err(|_| ValueError::NotServerName)
}

/// `app-root`: the path a request for `/` is redirected to.
pub fn parse_app_root(value: &str) -> Parsed<String> {
    validate::literal_path(value)
        .map(|()| value.to_string())
        .map_err(|e| ValueError::NotLiteralPath(e.0))
}

/// `auth-method`: the methods haproxy's HTTP client sends.
pub fn parse_auth_method(value: &str) -> Parsed<String> {
    match value {
        "GET" | "HEAD" | "POST" | "PUT" | "DELETE" => Ok(value.to_string()),
        _ => Err(ValueError::NotAuthMethod),
    }
}

/// `auth-response-headers`: header names separated by commas, as the Gateway API's
/// header names are ([`validate::header_name`]).
pub fn parse_header_name_list(value: &str) -> Parsed<Vec<String>> {
    let names: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    let ok = !names.is_empty()
        && names.len() <= 32
        && names
            .iter()
            .all(|n| n.len() <= 64 && validate::header_name(n).is_ok());
    if ok {
        Ok(names)
    } else {
        Err(ValueError::NotHeaderNameList)
    }
}

/// The most host names one `server-alias` may list.
const MOST_HOST_ALIASES: usize = 32;

/// `server-alias`: host names separated by commas, each a valid Ingress host
/// ([`validate::ingress_host`], lower-cased), without repeats.
pub fn parse_host_aliases(value: &str) -> Parsed<Vec<String>> {
    let mut hosts = Vec::new();
    // Only spaces are trimmed: a line break or another control character is refused
    // with the host it is part of.
    for item in value
        .split(',')
        .map(|h| h.trim_matches(' '))
        .filter(|h| !h.is_empty())
    {
        let host = validate::ingress_host(item).map_err(|e| ValueError::NotHostList(e.0))?;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return Err(ValueError::NotHostList("there is none".into()));
    }
    if hosts.len() > MOST_HOST_ALIASES {
        return Err(ValueError::NotHostList(format!(
            "there are {}",
            hosts.len()
        )));
    }
    Ok(hosts)
}

/// `default-backend`: the name of a Service in the object's namespace.
pub fn parse_service_name(value: &str) -> Parsed<String> {
    validate::dns_label(value)
        .map(|()| value.to_string())
        .map_err(|_| ValueError::NotServiceName)
}

/// The most status codes one `custom-http-errors` may list (every code from 400 to 599).
pub const MOST_ERROR_CODES: usize = 200;

/// At most 16 characters of `item`, control characters shown as `?`: for a message.
fn shown(item: &str) -> String {
    item.chars()
        .take(16)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `custom-http-errors`: status codes from 400 to 599 separated by commas (spaces
/// around them allowed), sorted and without repeats.
pub fn parse_error_codes(value: &str) -> Parsed<Vec<u16>> {
    let mut codes = Vec::new();
    for item in value.split(',').map(|c| c.trim_matches(' ')) {
        if item.is_empty() {
            continue;
        }
        let code =
            parse_number(item, 400, 599).map_err(|_| ValueError::NotErrorCode(shown(item)))?;
        codes.push(code as u16);
    }
    codes.sort_unstable();
    codes.dedup();
    if codes.is_empty() || codes.len() > MOST_ERROR_CODES {
        return Err(ValueError::ErrorCodeCount {
            max: MOST_ERROR_CODES,
        });
    }
    Ok(codes)
}

/// The most path prefixes `no-tls-redirect-locations` may list.
pub const MOST_PATH_PREFIXES: usize = 32;

/// `no-tls-redirect-locations`: path prefixes separated by commas (spaces around them
/// allowed), sorted and without repeats; nothing (an empty value) is an empty list.
/// Each is a route path ([`validate::route_path`]: requests are matched on their
/// normalized path without `;` parameters, so a prefix with `;` would never match) of
/// at most 256 bytes, without `$`, `%` or `'`, so it is written into haproxy.cfg as a
/// pattern as it is.
pub fn parse_path_prefixes(value: &str) -> Parsed<Vec<String>> {
    let mut prefixes = Vec::new();
    // Only spaces are trimmed: a line break or another control character is refused
    // with the prefix it is part of.
    for item in value
        .split(',')
        .map(|p| p.trim_matches(' '))
        .filter(|p| !p.is_empty())
    {
        validate::route_path(item).map_err(|e| ValueError::NotPathPrefixList(e.0))?;
        if let Some(bad) = item.chars().find(|c| matches!(c, '$' | '%' | '\'')) {
            return Err(ValueError::NotPathPrefixList(format!(
                "'{}': '{bad}' is not accepted",
                shown(item)
            )));
        }
        if item.len() > 256 {
            return Err(ValueError::NotPathPrefixList(format!(
                "'{}...' is longer than 256 bytes",
                shown(item)
            )));
        }
        prefixes.push(item.to_string());
    }
    prefixes.sort();
    prefixes.dedup();
    if prefixes.len() > MOST_PATH_PREFIXES {
        return Err(ValueError::NotPathPrefixList(format!(
            "there are {}",
            prefixes.len()
        )));
    }
    Ok(prefixes)
}

#[cfg(test)]
mod tests;
