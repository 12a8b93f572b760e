//! The ports users open beyond haproxy's HTTP and HTTPS binds: TCP services
//! (`--tcp-services-configmap`) and Gateway listeners on ports of their own
//! (`--gateway-listener-ports`). haproxy runs unprivileged, so it cannot bind the
//! well-known ports users name (22, 53, 80, ...): a user's port `P` is bound at
//! `P + 10000` in the pod, and the chart's Service (or the DaemonSet's `hostPort`) maps
//! `P` to it, as it maps 80 and 443 to the HTTP and HTTPS binds.

use std::collections::BTreeSet;

/// What is added to a user's port to get the port haproxy binds.
pub const BIND_PORT_OFFSET: u16 = 10000;

/// The highest user port that has a bind port: `65535 - BIND_PORT_OFFSET`.
pub const HIGHEST_USER_PORT: u16 = u16::MAX - BIND_PORT_OFFSET;

/// The port haproxy binds for the user's port `port`, or why there is none (the message
/// completes "port N ...").
pub fn bind_port(port: i64) -> Result<u16, String> {
    match u16::try_from(port) {
        Ok(port @ 1..=HIGHEST_USER_PORT) => Ok(port + BIND_PORT_OFFSET),
        _ => Err(format!(
            "is not between 1 and {HIGHEST_USER_PORT} (haproxy binds port + {BIND_PORT_OFFSET})"
        )),
    }
}

/// Parses a list of ports and ranges (`8080,8090,9000-9010`): the ports a flag allows.
/// Every port must have a bind port ([`bind_port`]).
pub fn parse_port_list(text: &str) -> Result<BTreeSet<u16>, String> {
    let mut ports = BTreeSet::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (first, last) = item.split_once('-').unwrap_or((item, item));
        let parse = |port: &str| -> Result<u16, String> {
            let number: i64 = port
                .trim()
                .parse()
                .map_err(|_| format!("'{item}': expected a port or a range FIRST-LAST"))?;
            bind_port(number).map_err(|why| format!("'{item}': port {number} {why}"))?;
            Ok(u16::try_from(number).unwrap_or_default())
        };
        let (first, last) = (parse(first)?, parse(last)?);
        if first > last {
            return Err(format!("'{item}': the range ends before it starts"));
        }
        ports.extend(first..=last);
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<impl std::fmt::Debug, String>) -> String {
        result.err().unwrap_or_default()
    }

    #[test]
    fn user_ports_bind_at_the_offset_and_out_of_range_ones_are_refused() {
        assert_eq!(bind_port(22), Ok(10022));
        assert_eq!(bind_port(55535), Ok(65535));
        assert!(refusal(bind_port(55536)).contains("between 1 and 55535"));
        assert!(bind_port(0).is_err());
        assert!(bind_port(-1).is_err());
    }

    #[test]
    fn port_lists_take_ports_and_ranges() {
        assert_eq!(
            parse_port_list("8080, 8090,9000-9002"),
            Ok(BTreeSet::from([8080, 8090, 9000, 9001, 9002]))
        );
        assert_eq!(parse_port_list(""), Ok(BTreeSet::new()));
        assert!(refusal(parse_port_list("9002-9000")).contains("ends before"));
        assert!(refusal(parse_port_list("60000")).contains("60000"));
        assert!(refusal(parse_port_list("http")).contains("expected a port"));
    }
}
