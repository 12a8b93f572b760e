//! Requests, responses, bytes and latencies per Ingress, HTTPRoute, route and Service,
//! read from haproxy's stick table at scrape time (see
//! [`tugboat_haproxy::request_stats`]) and named from the routes the controller
//! rendered: label values are validated names of the controller's own state, never
//! request text.
//!
//! haproxy's table starts empty in every new worker (a reload, a restart) and its 32-bit
//! counters wrap: each entry's last values are carried, keyed by the worker's pid, so
//! the exported counters never go back. What a worker counted between the last scrape
//! and its end is lost.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use tugboat_haproxy::MasterCli;
use tugboat_haproxy::request_stats::{
    BUCKETS_MS, CLASSES, NO_ROUTE_KEY, StatsRow, TABLE, parse_show_table, route_id, split_key,
};
use tugboat_model::{Desired, HostMatch, PathMatch};

/// How long a scrape waits for haproxy.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// haproxy's 32-bit counters wrap at this.
const WRAP: u64 = 1 << 32;

/// The labels of a route, from the controller's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteLabels {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub host: String,
    pub path: String,
}

/// The routes of the applied state by id ([`route_id`]).
pub fn route_labels(desired: &Desired) -> HashMap<String, RouteLabels> {
    desired
        .routes
        .iter()
        .map(|route| {
            let host = match &route.host {
                HostMatch::Any => String::new(),
                HostMatch::Exact(host) => host.clone(),
                HostMatch::Wildcard(suffix) | HostMatch::Subdomains(suffix) => {
                    format!("*{suffix}")
                }
            };
            let path = match &route.path {
                PathMatch::Exact(path) | PathMatch::Prefix(path) | PathMatch::Regex(path) => {
                    path.clone()
                }
            };
            let labels = RouteLabels {
                kind: route.owner_kind.as_str(),
                namespace: route.ingress.namespace.to_string(),
                name: route.ingress.name.to_string(),
                host,
                path,
            };
            (route_id(route), labels)
        })
        .collect()
}

/// `NAMESPACE/NAME:PORT` of a backend `NAMESPACE_NAME_PORT` (Kubernetes names hold no
/// `_`), as `txn.service` in the access log; another backend's name as it is.
pub fn service_label(backend: &str) -> String {
    let mut parts = backend.splitn(3, '_');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(namespace), Some(name), Some(port))
            if backend != tugboat_haproxy::rules::NOT_FOUND_BACKEND =>
        {
            format!("{namespace}/{name}:{port}")
        }
        _ => backend.to_string(),
    }
}

/// One entry's counters, carried or current.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub classes: [u64; CLASSES.len()],
    pub buckets: [u64; BUCKETS_MS.len()],
    pub sum_ms: u64,
}

impl Totals {
    fn of(row: &StatsRow) -> Self {
        Totals {
            requests: row.requests,
            bytes_in: row.bytes_in,
            bytes_out: row.bytes_out,
            classes: std::array::from_fn(|i| row.class(i)),
            buckets: std::array::from_fn(|i| row.bucket(i)),
            sum_ms: row.sum_ms(),
        }
    }

    /// The 32-bit counters as one list, and the 64-bit ones (bytes) as another.
    fn fields_mut(&mut self) -> (Vec<&mut u64>, [&mut u64; 2]) {
        let mut narrow: Vec<&mut u64> = vec![&mut self.requests, &mut self.sum_ms];
        narrow.extend(self.classes.iter_mut());
        narrow.extend(self.buckets.iter_mut());
        (narrow, [&mut self.bytes_in, &mut self.bytes_out])
    }

    fn add(&mut self, other: &Totals) {
        let mut other = *other;
        let (mine, mine_wide) = self.fields_mut();
        let (theirs, theirs_wide) = other.fields_mut();
        for (a, b) in mine.into_iter().zip(theirs) {
            *a = a.saturating_add(*b);
        }
        for (a, b) in mine_wide.into_iter().zip(theirs_wide) {
            *a = a.saturating_add(*b);
        }
    }

    /// What to carry for an entry that went from `self` to `next` in one worker: a
    /// 32-bit counter that went back wrapped; a 64-bit one that went back started again
    /// (the entry expired and came back), so its old value is carried.
    fn carried_into(&self, next: &Totals) -> Totals {
        let mut carried = Totals::default();
        let mut old = *self;
        let mut new = *next;
        let (old_narrow, old_wide) = old.fields_mut();
        let (new_narrow, new_wide) = new.fields_mut();
        let (carried_narrow, carried_wide) = carried.fields_mut();
        for ((old, new), carry) in old_narrow.into_iter().zip(new_narrow).zip(carried_narrow) {
            if *new < *old {
                *carry = WRAP;
            }
        }
        for ((old, new), carry) in old_wide.into_iter().zip(new_wide).zip(carried_wide) {
            if *new < *old {
                *carry = *old;
            }
        }
        carried
    }
}

/// What the scrapes remember: the routes' labels, the last values read and what earlier
/// workers (and wraps) counted.
#[derive(Debug, Default)]
pub struct Ledger {
    routes: HashMap<String, RouteLabels>,
    worker_pid: Option<u32>,
    last: HashMap<String, Totals>,
    carried: HashMap<String, Totals>,
}

impl Ledger {
    /// The routes of a new applied state; the counters of keys no route has any more go.
    pub fn set_routes(&mut self, routes: HashMap<String, RouteLabels>) {
        self.routes = routes;
        let known = |key: &String| key_is_known(&self.routes, key);
        self.carried.retain(|key, _| known(key));
    }

    /// Takes the entries worker `pid` shows.
    pub fn observe(&mut self, pid: u32, rows: &[StatsRow]) {
        if self.worker_pid != Some(pid) {
            for (key, totals) in self.last.drain() {
                self.carried.entry(key).or_default().add(&totals);
            }
            self.worker_pid = Some(pid);
        }
        let mut current: HashMap<String, Totals> = HashMap::with_capacity(rows.len());
        for row in rows {
            if !key_is_known(&self.routes, &row.key) {
                continue;
            }
            let totals = Totals::of(row);
            if let Some(old) = self.last.get(&row.key) {
                let carry = old.carried_into(&totals);
                if carry != Totals::default() {
                    self.carried.entry(row.key.clone()).or_default().add(&carry);
                }
            }
            current.insert(row.key.clone(), totals);
        }
        // Entries gone from the table (expired) keep what they counted.
        for (key, totals) in self.last.drain() {
            if !current.contains_key(&key) {
                self.carried.entry(key).or_default().add(&totals);
            }
        }
        self.last = current;
    }

    /// Every key's exported totals with its labels, in a stable order.
    fn series(&self) -> BTreeMap<String, (Labels, Totals)> {
        let mut out = BTreeMap::new();
        for key in self.carried.keys().chain(self.last.keys()) {
            let Some(labels) = labels_of(&self.routes, key) else {
                continue;
            };
            let mut totals = self.carried.get(key).copied().unwrap_or_default();
            if let Some(current) = self.last.get(key) {
                totals.add(current);
            }
            out.insert(key.clone(), (labels, totals));
        }
        out
    }

    /// The metrics in Prometheus' text format; `with_sum`: haproxy sums latencies
    /// (3.0+), else the histogram has no `_sum`.
    pub fn encode(&self, with_sum: bool) -> String {
        let series = self.series();
        let mut out = String::new();
        let mut family =
            |name: &str,
             kind: &str,
             help: &str,
             write: &dyn Fn(&mut String, &str, &str, &Totals)| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                for (labels, totals) in series.values() {
                    write(&mut out, name, &labels.text, totals);
                }
            };
        family(
            "tugboat_http_requests_total",
            "counter",
            "HTTP requests by route owner, host, path and Service",
            &|out, name, labels, t| sample(out, name, labels, t.requests),
        );
        family(
            "tugboat_http_responses_total",
            "counter",
            "HTTP responses by route owner, host, path, Service and class",
            &|out, name, labels, t| {
                for (class, count) in CLASSES.iter().zip(t.classes) {
                    sample(
                        out,
                        name,
                        &format!("{labels},code_class=\"{class}\""),
                        count,
                    );
                }
            },
        );
        family(
            "tugboat_http_request_bytes_total",
            "counter",
            "Bytes received from clients, by route owner, host, path and Service",
            &|out, name, labels, t| sample(out, name, labels, t.bytes_in),
        );
        family(
            "tugboat_http_response_bytes_total",
            "counter",
            "Bytes sent to clients, by route owner, host, path and Service",
            &|out, name, labels, t| sample(out, name, labels, t.bytes_out),
        );
        family(
            "tugboat_http_response_duration_seconds",
            "histogram",
            "From haproxy having the request to the response's headers",
            &|out, name, labels, t| {
                let mut cumulative = 0;
                for (bound, count) in BUCKETS_MS.iter().zip(t.buckets) {
                    cumulative += count;
                    let le = *bound as f64 / 1000.0;
                    sample(
                        out,
                        &format!("{name}_bucket"),
                        &format!("{labels},le=\"{le}\""),
                        cumulative,
                    );
                }
                let count: u64 = t.classes.iter().sum();
                sample(
                    out,
                    &format!("{name}_bucket"),
                    &format!("{labels},le=\"+Inf\""),
                    count,
                );
                if with_sum {
                    sample(
                        out,
                        &format!("{name}_sum"),
                        labels,
                        t.sum_ms as f64 / 1000.0,
                    );
                }
                sample(out, &format!("{name}_count"), labels, count);
            },
        );
        out
    }
}

/// One sample line: `NAME{LABELS} VALUE`.
fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    // Writing into a String cannot fail.
    let _ = writeln!(out, "{name}{{{labels}}} {value}");
}

/// A series' label set, as text between the braces.
#[derive(Debug, Clone)]
struct Labels {
    text: String,
}

fn key_is_known(routes: &HashMap<String, RouteLabels>, key: &str) -> bool {
    key == NO_ROUTE_KEY || split_key(key).is_some_and(|(id, _)| routes.contains_key(id))
}

fn labels_of(routes: &HashMap<String, RouteLabels>, key: &str) -> Option<Labels> {
    let (route, service) = if key == NO_ROUTE_KEY {
        (RouteLabels::default(), String::new())
    } else {
        let (id, backend) = split_key(key)?;
        (routes.get(id)?.clone(), service_label(backend))
    };
    let pairs = [
        ("kind", route.kind),
        ("namespace", &route.namespace),
        ("name", &route.name),
        ("host", &route.host),
        ("path", &route.path),
        ("service", &service),
    ];
    let text = pairs
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect::<Vec<_>>()
        .join(",");
    Some(Labels { text })
}

/// A label value escaped for the text format.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The request metrics of the process: the ledger, read and updated one scrape at a
/// time (a scrape that read older values after a newer one would see counters go back).
#[derive(Debug, Default)]
pub struct RequestMetrics {
    ledger: Mutex<Ledger>,
    scrape: tokio::sync::Mutex<()>,
}

impl RequestMetrics {
    /// The routes of the state haproxy now serves.
    pub fn set_routes(&self, desired: &Desired) {
        let routes = route_labels(desired);
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.set_routes(routes);
        }
    }

    /// Reads the table from haproxy's current worker and gives the metrics' text; empty
    /// when haproxy does not answer within [`READ_TIMEOUT`] (the counters stay for the
    /// next scrape).
    pub async fn scrape(&self, master_socket: &Path) -> String {
        let _one_at_a_time = self.scrape.lock().await;
        let cli = MasterCli::new(master_socket).with_timeouts(READ_TIMEOUT, READ_TIMEOUT);
        let read = async {
            let proc = cli.show_proc().await.ok()?;
            let pid = proc.worker_pid?;
            let answer = cli
                .command(&format!("@!{pid} show table {TABLE}"))
                .await
                .ok()?;
            Some((pid, proc.version, answer))
        };
        let read = tokio::time::timeout(READ_TIMEOUT, read)
            .await
            .ok()
            .flatten();
        let Ok(mut ledger) = self.ledger.lock() else {
            return String::new();
        };
        let mut with_sum = true;
        if let Some((pid, version, answer)) = read {
            with_sum = !version.starts_with("2.");
            match parse_show_table(&answer) {
                Ok(rows) => ledger.observe(pid, &rows),
                Err(err) => tracing::debug!("request metrics: {err}"),
            }
        }
        ledger.encode(with_sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, requests: u64, bytes_out: u64, ok: u64) -> StatsRow {
        let mut row = StatsRow {
            key: key.to_string(),
            requests,
            bytes_in: requests * 10,
            bytes_out,
            ..StatsRow::default()
        };
        row.gpc[1] = ok;
        row.gpc[5] = ok;
        row
    }

    fn ledger() -> Ledger {
        let mut ledger = Ledger::default();
        ledger.set_routes(HashMap::from([(
            "0123456789ab".to_string(),
            RouteLabels {
                kind: "Ingress",
                namespace: "shop".into(),
                name: "web".into(),
                host: "shop.test".into(),
                path: "/".into(),
            },
        )]));
        ledger
    }

    const KEY: &str = "0123456789ab/shop_web_80";

    fn requests(ledger: &Ledger) -> u64 {
        ledger.series()[KEY].1.requests
    }

    #[test]
    fn a_key_names_its_route_and_service() {
        let mut ledger = ledger();
        ledger.observe(7, &[row(KEY, 3, 100, 3), row(NO_ROUTE_KEY, 1, 0, 0)]);
        let text = ledger.encode(true);
        let labels = r#"kind="Ingress",namespace="shop",name="web",host="shop.test",path="/",service="shop/web:80""#;
        assert!(
            text.contains(&format!("tugboat_http_requests_total{{{labels}}} 3\n")),
            "{text}"
        );
        assert!(text.contains(&format!(
            "tugboat_http_responses_total{{{labels},code_class=\"2xx\"}} 3\n"
        )));
        assert!(text.contains(&format!(
            "tugboat_http_response_duration_seconds_bucket{{{labels},le=\"0.005\"}} 3\n"
        )));
        assert!(text.contains(&format!(
            "tugboat_http_response_duration_seconds_count{{{labels}}} 3\n"
        )));
        let none = r#"kind="",namespace="",name="",host="",path="",service="""#;
        assert!(
            text.contains(&format!("tugboat_http_requests_total{{{none}}} 1\n")),
            "{text}"
        );
    }

    #[test]
    fn keys_of_unknown_routes_are_left_out() {
        let mut ledger = ledger();
        ledger.observe(7, &[row("ffffffffffff/shop_web_80", 3, 0, 0)]);
        assert!(ledger.series().is_empty());
    }

    #[test]
    fn a_new_worker_carries_the_old_workers_counts() {
        let mut ledger = ledger();
        ledger.observe(7, &[row(KEY, 5, 100, 5)]);
        ledger.observe(8, &[row(KEY, 2, 40, 2)]);
        assert_eq!(requests(&ledger), 7);
        ledger.observe(8, &[row(KEY, 3, 60, 3)]);
        assert_eq!(requests(&ledger), 8);
        assert_eq!(ledger.series()[KEY].1.bytes_out, 160);
    }

    #[test]
    fn a_wrapped_counter_keeps_counting() {
        let mut ledger = ledger();
        ledger.observe(7, &[row(KEY, WRAP - 1, 0, 0)]);
        ledger.observe(7, &[row(KEY, 1, 0, 0)]);
        assert_eq!(requests(&ledger), WRAP + 1);
    }

    #[test]
    fn an_expired_entry_keeps_what_it_counted() {
        let mut ledger = ledger();
        ledger.observe(7, &[row(KEY, 4, 100, 4)]);
        ledger.observe(7, &[]);
        assert_eq!(requests(&ledger), 4);
        ledger.observe(7, &[row(KEY, 1, 10, 1)]);
        assert_eq!(requests(&ledger), 5);
    }

    #[test]
    fn services_are_written_as_in_the_access_log() {
        assert_eq!(service_label("shop_web_80"), "shop/web:80");
        assert_eq!(service_label("shop_web_http"), "shop/web:http");
        assert_eq!(service_label("tugboat_unresolved"), "tugboat_unresolved");
        assert_eq!(service_label("tugboat_not_found"), "tugboat_not_found");
    }
}
