//! Per-request counters by route, kept inside haproxy: a stick table
//! ([`TABLE`]) whose entries are keyed by the route's id and the backend that served the
//! request, tracked with stick counter 2 once the route features have chosen the backend
//! (canary, Gateway API weights). Responses by class and a latency histogram are
//! general purpose counters (`gpc`) of the entry. No request costs the controller
//! anything: it reads the table at scrape time (`show table`, [`parse_show_table`]) and
//! names each key from the state it rendered ([`route_id`], [`split_key`]).
//!
//! What each haproxy series counts (measured on 2.6, 3.0, 3.2 and 3.4):
//! - 3.0+: `http-after-response` takes `sc-inc-gpc`/`sc-add-gpc`, so every response of
//!   a tracked request counts, haproxy's own too (401, 404, 503 without a server,
//!   redirects), and the latencies add up to a sum;
//! - 2.6: `http-after-response` has no `sc-*` action and there is no `sc-add-gpc`, so
//!   only `http-response` counts: the responses of servers, no sum of latencies.

use std::fmt::Write;

use thiserror::Error;
use tugboat_model::{HostMatch, PathMatch, Route, stable_hash};

/// The stick table's backend.
pub const TABLE: &str = "tugboat_request_stats";

/// The key of requests that matched no route.
pub const NO_ROUTE_KEY: &str = "-";

/// Between a route's id and its backend in a key.
pub const KEY_SEPARATOR: char = '/';

/// The response classes, in the order of their counters (`gpc0` to `gpc4`).
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The upper bounds of the latency buckets, in milliseconds (`gpc5` to `gpc15`, each
/// counting the responses above the previous bound up to its own).
pub const BUCKETS_MS: [u64; 11] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/// The first counter of the classes.
const CLASS_GPC: usize = 0;
/// The first counter of the latency buckets.
const BUCKET_GPC: usize = CLASSES.len();
/// The counter of the sum of latencies in milliseconds (3.0+).
const SUM_GPC: usize = BUCKET_GPC + BUCKETS_MS.len();
/// How many counters an entry has.
pub const GPC_COUNT: usize = SUM_GPC + 1;

/// The longest key: a route id, the separator, a backend name
/// (`NAMESPACE_SERVICE_PORT`, two names of at most 63 characters and a port).
const KEY_LENGTH: usize = 160;

/// The most entries: every route and backend pair of a large cluster; entries of
/// routes that take no request for [`EXPIRE`] go, so removed routes do not stay.
const SIZE: &str = "100k";
const EXPIRE: &str = "1h";

/// A route's id in the keys: a hash of its owner, host and path, twelve hex digits.
/// The controller finds the route back from the routes it rendered.
pub fn route_id(route: &Route) -> String {
    let host = match &route.host {
        HostMatch::Any => String::new(),
        HostMatch::Exact(host) => host.clone(),
        HostMatch::Wildcard(suffix) => format!("*{suffix}"),
        HostMatch::Subdomains(suffix) => format!("**{suffix}"),
    };
    let path = match &route.path {
        PathMatch::Exact(path) => format!("={path}"),
        PathMatch::Prefix(path) => format!("^{path}"),
        PathMatch::Regex(path) => format!("~{path}"),
    };
    let identity = format!("{}\n{host}\n{path}", route.owner());
    format!("{:012x}", stable_hash(identity.as_bytes()) >> 16)
}

/// The first `http-request` rule: when haproxy had the request.
pub fn start_rule() -> &'static str {
    "    http-request set-var(txn.stats_t0) date(0,ms)\n"
}

/// The rules that track the request in [`TABLE`] once its backend is chosen.
pub fn track_rules(out: &mut String) {
    let _ = write!(
        out,
        "    http-request set-var(txn.stats_key) var(txn.rid),concat({KEY_SEPARATOR},txn.backend) if {{ var(txn.rid) -m found }}
    http-request set-var(txn.stats_key) str({NO_ROUTE_KEY}) if !{{ var(txn.rid) -m found }}
    http-request track-sc2 var(txn.stats_key) table {TABLE}
"
    );
}

/// The rules that count a tracked request's response by class and latency: after
/// every response on 3.0+, after servers' responses only on 2.6.
pub fn response_rules() -> String {
    let counting = |action: &str, with_sum: bool| {
        let mut out = format!("    {action} set-var(txn.stats_ms) date(0,ms),sub(txn.stats_t0)\n");
        for (index, _) in CLASSES.iter().enumerate() {
            let low = (index + 1) * 100;
            let _ = writeln!(
                out,
                "    {action} sc-inc-gpc({},2) if {{ status {low}:{} }}",
                CLASS_GPC + index,
                low + 99
            );
        }
        let mut low = 0;
        for (index, high) in BUCKETS_MS.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {action} sc-inc-gpc({},2) if {{ var(txn.stats_ms) -m int {low}:{high} }}",
                BUCKET_GPC + index
            );
            low = high + 1;
        }
        if with_sum {
            let _ = writeln!(
                out,
                "    {action} sc-add-gpc({SUM_GPC},2) var(txn.stats_ms)"
            );
        }
        out
    };
    format!(
        ".if version_atleast(3.0)\n{}.else\n{}.endif\n",
        counting("http-after-response", true),
        counting("http-response", false)
    )
}

/// The stick table's section.
pub fn table_section() -> String {
    format!(
        "\n# Requests, bytes, responses by class and latencies per route and backend, read \
         by the controller's /metrics.\nbackend {TABLE}\n    stick-table type string len \
         {KEY_LENGTH} size {SIZE} expire {EXPIRE} store \
         http_req_cnt,bytes_in_cnt,bytes_out_cnt,gpc({GPC_COUNT})\n"
    )
}

/// A key's route id and backend; `None` for [`NO_ROUTE_KEY`] or a key of another form.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(KEY_SEPARATOR)
}

/// One entry of [`TABLE`], as `show table` gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsRow {
    pub key: String,
    /// Requests tracked (`http_req_cnt`, 32 bits in haproxy: it wraps).
    pub requests: u64,
    /// Bytes received from clients (`bytes_in_cnt`, 64 bits).
    pub bytes_in: u64,
    /// Bytes sent to clients (`bytes_out_cnt`, 64 bits).
    pub bytes_out: u64,
    /// The general purpose counters (32 bits: they wrap), [`GPC_COUNT`] of them.
    pub gpc: [u64; GPC_COUNT],
}

impl StatsRow {
    /// Responses of class `index` (of [`CLASSES`]).
    pub fn class(&self, index: usize) -> u64 {
        self.gpc[CLASS_GPC + index]
    }

    /// Responses in latency bucket `index` (of [`BUCKETS_MS`]), not cumulative.
    pub fn bucket(&self, index: usize) -> u64 {
        self.gpc[BUCKET_GPC + index]
    }

    /// The sum of the latencies in milliseconds (0 on 2.6).
    pub fn sum_ms(&self) -> u64 {
        self.gpc[SUM_GPC]
    }
}

/// A `show table` answer that is not the one of [`TABLE`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShowTableError {
    #[error("haproxy has no table {TABLE} (an older configuration?): {0}")]
    NoTable(String),
    #[error("unexpected line in `show table {TABLE}`: {0}")]
    Line(String),
}

/// The entries of `show table tugboat_request_stats`:
/// `# table: NAME, type: string, size:N, used:N` then one line per entry,
/// `0xADDR: key=K use=N exp=N [shard=N] http_req_cnt=N bytes_in_cnt=N bytes_out_cnt=N
/// gpc0=N ...` (`shard=` from 3.0 on).
pub fn parse_show_table(text: &str) -> Result<Vec<StatsRow>, ShowTableError> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    match lines.next() {
        Some(header) if header.starts_with(&format!("# table: {TABLE},")) => {}
        other => return Err(ShowTableError::NoTable(other.unwrap_or("").to_string())),
    }
    lines.map(parse_row).collect()
}

fn parse_row(line: &str) -> Result<StatsRow, ShowTableError> {
    let bad = || ShowTableError::Line(line.chars().take(200).collect());
    let (_, fields) = line.split_once(": ").ok_or_else(bad)?;
    let mut row = StatsRow::default();
    for field in fields.split_whitespace() {
        let (name, value) = field.split_once('=').ok_or_else(bad)?;
        if name == "key" {
            row.key = value.to_string();
            continue;
        }
        let number = || value.parse::<u64>().map_err(|_| bad());
        match name {
            "http_req_cnt" => row.requests = number()?,
            "bytes_in_cnt" => row.bytes_in = number()?,
            "bytes_out_cnt" => row.bytes_out = number()?,
            _ => {
                if let Some(index) = name
                    .strip_prefix("gpc")
                    .and_then(|index| index.parse::<usize>().ok())
                    .filter(|index| *index < GPC_COUNT)
                {
                    row.gpc[index] = number()?;
                }
            }
        }
    }
    if row.key.is_empty() {
        return Err(bad());
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{BackendName, ObjectKey, RouteOwnerKind};

    /// The answer of haproxy 3.4 (2.6 has no `shard=`), trimmed to 17 counters.
    const SHOWN: &str = "# table: tugboat_request_stats, type: string, size:102400, used:2
0x7f5a5805e698: key=- use=0 exp=3599870 shard=0 http_req_cnt=1 bytes_in_cnt=86 bytes_out_cnt=0 gpc0=0 gpc1=0 gpc2=0 gpc3=0 gpc4=1 gpc5=1 gpc6=0 gpc7=0 gpc8=0 gpc9=0 gpc10=0 gpc11=0 gpc12=0 gpc13=0 gpc14=0 gpc15=0 gpc16=0
0x55d8add1a698: key=0123456789ab/shop_web_80 use=0 exp=3599876 http_req_cnt=4 bytes_in_cnt=339 bytes_out_cnt=208 gpc0=0 gpc1=2 gpc2=0 gpc3=2 gpc4=0 gpc5=4 gpc6=0 gpc7=0 gpc8=0 gpc9=0 gpc10=0 gpc11=0 gpc12=0 gpc13=0 gpc14=0 gpc15=0 gpc16=4

";

    #[test]
    fn show_table_gives_every_entry_with_its_counters() {
        let rows = parse_show_table(SHOWN).expect("parsed");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key, NO_ROUTE_KEY);
        assert_eq!(rows[0].class(4), 1);
        let row = &rows[1];
        assert_eq!(split_key(&row.key), Some(("0123456789ab", "shop_web_80")));
        assert_eq!((row.requests, row.bytes_in, row.bytes_out), (4, 339, 208));
        assert_eq!((row.class(1), row.class(3), row.bucket(0)), (2, 2, 4));
        assert_eq!(row.sum_ms(), 4);
    }

    #[test]
    fn an_empty_table_has_no_entries() {
        let header = "# table: tugboat_request_stats, type: string, size:102400, used:0\n\n";
        assert_eq!(parse_show_table(header), Ok(Vec::new()));
    }

    #[test]
    fn a_missing_table_is_an_error() {
        let answer = "No such table\n";
        assert!(matches!(
            parse_show_table(answer),
            Err(ShowTableError::NoTable(_))
        ));
    }

    #[test]
    fn a_line_without_a_key_is_an_error() {
        let answer = "# table: tugboat_request_stats, type: string, size:1, used:1\n0x1: use=0 http_req_cnt=x\n";
        assert!(matches!(
            parse_show_table(answer),
            Err(ShowTableError::Line(_))
        ));
    }

    fn route(kind: RouteOwnerKind, host: HostMatch, path: PathMatch) -> Route {
        Route {
            host,
            path,
            backend: BackendName::for_service_port(
                &ObjectKey::new("shop", "web"),
                &ServicePortRef::Number(80),
            )
            .expect("valid names"),
            ingress: ObjectKey::new("shop", "web"),
            owner_kind: kind,
            features: None,
            canary: None,
        }
    }

    #[test]
    fn route_ids_tell_owners_hosts_and_paths_apart() {
        let exact = || HostMatch::Exact("a.test".into());
        let base = route(
            RouteOwnerKind::Ingress,
            exact(),
            PathMatch::Prefix("/".into()),
        );
        let ids = [
            route_id(&base),
            route_id(&route(
                RouteOwnerKind::HttpRoute,
                exact(),
                PathMatch::Prefix("/".into()),
            )),
            route_id(&route(
                RouteOwnerKind::Ingress,
                exact(),
                PathMatch::Exact("/".into()),
            )),
            route_id(&route(
                RouteOwnerKind::Ingress,
                HostMatch::Any,
                PathMatch::Prefix("/".into()),
            )),
        ];
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{ids:?}");
        assert_eq!(route_id(&base), ids[0], "stable");
        assert_eq!(ids[0].len(), 12);
        assert!(!ids[0].contains(KEY_SEPARATOR));
    }

    #[test]
    fn the_response_rules_count_each_class_and_bucket_once() {
        let rules = response_rules();
        assert!(rules.contains("http-after-response sc-inc-gpc(4,2) if { status 500:599 }"));
        assert!(
            rules.contains("http-response sc-inc-gpc(5,2) if { var(txn.stats_ms) -m int 0:5 }")
        );
        assert!(rules.contains("sc-inc-gpc(15,2) if { var(txn.stats_ms) -m int 5001:10000 }"));
        assert!(rules.contains("http-after-response sc-add-gpc(16,2) var(txn.stats_ms)"));
        assert!(
            !rules.contains("http-response sc-add-gpc"),
            "2.6 has no sc-add-gpc"
        );
        assert!(table_section().contains("gpc(17)"));
    }
}
