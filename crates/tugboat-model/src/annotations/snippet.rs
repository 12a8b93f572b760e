//! The operator's raw haproxy lines (`*-config-snippet` keys, only with
//! `--allow-snippets`): one directive per line, and none that opens a section, reads
//! files, loads code, runs programs or changes the process. Also whether the HAProxy
//! controllers' snippets, which Tugboat does not run, restrict access ([`restriction`]).

use super::parse::{Parsed, ValueError};
use crate::validate::printable;

/// Section keywords: a snippet line starting with one would open a new section.
const SECTION_KEYWORDS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "userlist",
    "peers",
    "resolvers",
    "program",
    "ring",
    "cache",
    "mailers",
    "http-errors",
    "crt-store",
    "traces",
    "log-forward",
    "fcgi-app",
    "acme",
];

/// Directives a snippet may not start with, and why.
const REFUSED_DIRECTIVES: &[(&str, &str)] = &[
    ("server", "Tugboat owns the servers"),
    ("default-server", "Tugboat owns the servers"),
    ("server-template", "Tugboat owns the servers"),
    ("external-check", "runs programs"),
    ("setenv", "changes the environment"),
    ("presetenv", "changes the environment"),
    ("resetenv", "changes the environment"),
    ("unsetenv", "changes the environment"),
    ("ssl-engine", "loads code"),
    ("master-worker", "changes the process"),
    ("user", "changes the process"),
    ("group", "changes the process"),
    ("uid", "changes the process"),
    ("gid", "changes the process"),
    ("chroot", "changes the process"),
    ("daemon", "changes the process"),
    ("pidfile", "writes a file"),
    ("set-dumpable", "changes the process"),
    (
        "expose-experimental-directives",
        "enables experimental directives",
    ),
    ("filter", "loads filters (SPOE reads files)"),
    ("ca-base", "reads files"),
    ("crt-base", "reads files"),
    ("key-base", "reads files"),
    ("server-state-base", "reads files"),
    ("default-path", "reads files"),
];

/// Prefixes of directives a snippet may not start with.
const REFUSED_PREFIXES: &[(&str, &str)] = &[
    ("lua", "loads code"),
    ("tune.lua", "loads code"),
    ("ssl-provider", "loads code"),
    ("51degrees", "loads code and reads files"),
    ("deviceatlas", "loads code and reads files"),
    ("wurfl", "loads code and reads files"),
    ("insecure-", "lets haproxy run programs"),
    ("errorfile", "reads files"),
    ("crt", "reads files"),
    ("server-state", "reads files"),
];

/// Why one token of a snippet is refused (`None`: fine).
fn refused_token(token: &str) -> Option<&'static str> {
    let lower = token.to_ascii_lowercase();
    let t = lower.as_str();
    if t.contains("%[") {
        return Some("is a runtime expression");
    }
    if t.contains('$') || t.contains("env(") {
        return Some("reads the environment");
    }
    if t == "-f" || t == "file" || t.ends_with("-file") || t.contains("file(") {
        return Some("reads a file");
    }
    if t.starts_with("errorfile") || t == "crt" || t.starts_with("crt-") {
        return Some("reads files");
    }
    if t.contains("map(") || t.contains("map_") || t.contains("-acl(") || t.contains("-map(") {
        return Some("uses a map or ACL file");
    }
    if t.starts_with("lua") || t.contains("lua.") || t.contains("lua-") || t.contains("spoe") {
        return Some("loads code");
    }
    None
}

/// A raw snippet: directives one per line, none that reads files, loads code, runs
/// programs, changes the process or opens a section. Empty lines and comments are
/// dropped; the error names the line and the directive.
pub fn parse_snippet(value: &str) -> Parsed<Vec<String>> {
    if value.len() > 8192 {
        return Err(ValueError::SnippetTooLarge);
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(ValueError::SnippetControlCharacter);
    }
    let mut lines = Vec::new();
    for (number, line) in value.split('\n').enumerate() {
        let line = line.replace('\t', " ");
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let refuse = |what: &str, why: &'static str| {
            Err(ValueError::SnippetDirective {
                line: number + 1,
                what: printable(what),
                why,
            })
        };
        if !line.is_ascii() {
            return refuse(line, "is not ASCII");
        }
        let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        let first = words.first().copied().unwrap_or("").to_ascii_lowercase();
        if first.starts_with('.') {
            return refuse(&first, "is a conditional block");
        }
        if SECTION_KEYWORDS.contains(&first.as_str()) {
            return refuse(&first, "opens a section");
        }
        if let Some((_, why)) = REFUSED_DIRECTIVES.iter().find(|(d, _)| *d == first) {
            return refuse(&first, why);
        }
        if let Some((_, why)) = REFUSED_PREFIXES.iter().find(|(p, _)| first.starts_with(p)) {
            return refuse(&first, why);
        }
        if first == "stats"
            && words
                .get(1)
                .is_some_and(|w| w.eq_ignore_ascii_case("socket"))
        {
            return refuse("stats socket", "opens an admin socket");
        }
        for word in &words {
            if let Some(why) = refused_token(word) {
                return refuse(word, why);
            }
        }
        lines.push(words.join(" "));
    }
    if lines.is_empty() || lines.len() > 64 {
        return Err(ValueError::SnippetLineCount);
    }
    Ok(lines)
}

/// Directives of a haproxy snippet that restrict nobody's access.
const OPEN_DIRECTIVES: &[&str] = &[
    "acl",
    "option",
    "no",
    "timeout",
    "balance",
    "hash-type",
    "hash-balance-factor",
    "cookie",
    "compression",
    "retries",
    "retry-on",
    "http-reuse",
    "http-check",
    "stick-table",
    "stick",
    "log",
    "log-format",
    "capture",
    "description",
    "redirect",
    "http-send-name-header",
    "unique-id-format",
    "unique-id-header",
    "max-keep-alive-queue",
    "source",
];

/// `http-request` and kin: actions that restrict nobody's access.
const OPEN_ACTIONS: &[&str] = &[
    "set-header",
    "add-header",
    "del-header",
    "replace-header",
    "replace-value",
    "set-path",
    "set-pathq",
    "set-query",
    "set-uri",
    "replace-path",
    "replace-pathq",
    "replace-uri",
    "set-method",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "set-log-level",
    "set-nice",
    "set-tos",
    "set-mark",
    "capture",
    "redirect",
    "normalize-uri",
    "early-hint",
    "set-timeout",
    "cache-use",
    "cache-store",
    "set-status",
    "strict-mode",
    "del-acl",
];

/// The first line of a haproxy snippet (another controller's, which Tugboat does not
/// run) that restricts who may reach its routes, as `` `LINE` `` for the problem;
/// `None` when no line does. Denials, authentication, tarpits, rejections, `return`s
/// and trackers of `http-request`, `http-response`, `tcp-request` and kin, and
/// connection limits (`maxconn`, `rate-limit`) restrict; so does, in doubt, a directive
/// not known to be harmless.
pub fn restriction(value: &str) -> Option<String> {
    for line in value.lines() {
        // Up to a comment.
        let words: Vec<String> = line
            .split_whitespace()
            .take_while(|w| !w.starts_with('#'))
            .map(str::to_ascii_lowercase)
            .collect();
        let Some(first) = words.first() else {
            continue;
        };
        let restricts = match first.as_str() {
            "http-request"
            | "http-response"
            | "http-after-response"
            | "tcp-request"
            | "tcp-response" => {
                let action = words[1..]
                    .iter()
                    .find(|w| !matches!(w.as_str(), "content" | "connection" | "session"));
                match action.map(String::as_str) {
                    // `inspect-delay` only waits.
                    Some("inspect-delay") => false,
                    Some("return") => !returns_success(&words),
                    Some(action) => !OPEN_ACTIONS.contains(&action),
                    None => true,
                }
            }
            other => !OPEN_DIRECTIVES.contains(&other),
        };
        if restricts {
            return Some(format!("`{}`", printable(&words.join(" "))));
        }
    }
    None
}

/// Whether a `return` line answers with a status below 400 (`status CODE`).
fn returns_success(words: &[String]) -> bool {
    let code = words
        .iter()
        .position(|w| w == "status")
        .and_then(|i| words.get(i + 1))
        .and_then(|code| code.parse::<u16>().ok());
    // haproxy's `return` answers 200 without a status.
    match code {
        Some(code) => code < 400,
        None => !words.iter().any(|w| w == "status"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_lines_that_restrict_access_are_found() {
        for (snippet, found) in [
            (
                "http-request deny if !{ src 10.0.0.0/8 }",
                "`http-request deny if !{ src 10.0.0.0/8 }`",
            ),
            (
                "acl office src 10.0.0.0/8\nhttp-request auth unless office",
                "`http-request auth unless office`",
            ),
            ("tcp-request content reject", "`tcp-request content reject`"),
            ("http-request track-sc0 src", "`http-request track-sc0 src`"),
            (
                "http-request return status 403",
                "`http-request return status 403`",
            ),
            ("http-request tarpit", "`http-request tarpit`"),
            ("maxconn 10", "`maxconn 10`"),
            ("http-request lua.check", "`http-request lua.check`"),
        ] {
            assert_eq!(restriction(snippet), Some(found.into()), "{snippet}");
        }
        for snippet in [
            "http-response set-header X-Team shop",
            "# http-request deny\nhttp-request set-header X-A b\t# deny",
            "option forwardfor\ntimeout server 30s",
            "http-request return status 200 content-type text/plain string ok",
            "http-request redirect scheme https",
            "tcp-request inspect-delay 5s",
        ] {
            assert_eq!(restriction(snippet), None, "{snippet}");
        }
    }

    #[test]
    fn snippets_refuse_what_reads_files_loads_code_or_runs_programs() {
        let allowed = "http-response set-header X-Profile shop\n\n# a comment\ntimeout check 5s";
        assert_eq!(
            parse_snippet(allowed),
            Ok(vec![
                "http-response set-header X-Profile shop".to_string(),
                "timeout check 5s".to_string()
            ])
        );
        for (snippet, named) in [
            ("lua-load /x.lua", "lua-load"),
            ("http-request lua.act", "lua.act"),
            ("http-request use-service lua.svc", "lua.svc"),
            ("external-check command /bin/sh", "external-check"),
            ("errorfile 503 /etc/shadow", "errorfile"),
            ("acl a src -f /etc/passwd", "-f"),
            ("http-request return status 200 file /etc/passwd", "file"),
            (
                "http-request set-var(txn.a) req.hdr(host),map_str(/etc/x)",
                "req.hdr(host),map_str",
            ),
            ("http-request set-header X %[env(SECRET)]", "%["),
            ("acl a env(SECRET) -m str x", "env("),
            ("http-request set-header X \"$HOME\"", "\\\"$HOME"),
            ("setenv A B", "setenv"),
            ("stats socket /tmp/s level admin", "stats socket"),
            ("server s1 10.0.0.1:80", "server"),
            ("frontend evil", "frontend"),
            (".if defined(HOME)", ".if"),
            ("ssl-engine rdrand", "ssl-engine"),
            ("chroot /", "chroot"),
            ("filter spoe engine x config /x.conf", "filter"),
            (
                "load-server-state-from-file global",
                "load-server-state-from-file",
            ),
            ("server-state-file /x", "server-state-file"),
            ("51degrees-data-file /x", "51degrees-data-file"),
            ("ca-base /etc", "ca-base"),
        ] {
            let err = parse_snippet(snippet).expect_err(snippet).to_string();
            assert!(err.contains(&format!("'{named}")), "{snippet}: {err}");
        }
        assert!(parse_snippet("timeout check 5s\rtimeout server 1s").is_err());
        assert!(parse_snippet("").is_err());
    }

    #[test]
    fn a_snippet_over_8_kb_is_refused() {
        let big = "timeout check 5s\n".repeat(600);
        assert_eq!(parse_snippet(&big), Err(ValueError::SnippetTooLarge));
    }

    #[test]
    fn a_snippet_with_control_characters_is_refused() {
        assert_eq!(
            parse_snippet("timeout check 5s\rtimeout server 1s"),
            Err(ValueError::SnippetControlCharacter)
        );
    }

    #[test]
    fn a_refused_directive_is_named_with_its_line_and_reason() {
        assert_eq!(
            parse_snippet("timeout check 5s\nlua-load /x.lua"),
            Err(ValueError::SnippetDirective {
                line: 2,
                what: "lua-load".into(),
                why: "loads code"
            })
        );
    }

    #[test]
    fn a_snippet_has_1_to_64_directives() {
        assert_eq!(
            parse_snippet("# only a comment"),
            Err(ValueError::SnippetLineCount)
        );
        let many = "timeout check 5s\n".repeat(65);
        assert_eq!(parse_snippet(&many), Err(ValueError::SnippetLineCount));
    }
}
