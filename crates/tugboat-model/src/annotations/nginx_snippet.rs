//! ingress-nginx's snippet keys (`configuration-snippet`, `server-snippet`, ...): raw
//! nginx configuration, which Tugboat never runs. A snippet that only adds headers is
//! refused with a warning and its routes are served; one whose directives restrict
//! access (`deny`, `allow`, `auth_basic`, `auth_request`, `satisfy`, `return 403`,
//! `limit_req`, ...) is a restriction Tugboat cannot honour, and fails closed like any
//! other. The snippet is read as nginx reads its configuration (comments, quotes,
//! several directives per line, blocks); what cannot be read is taken as restricting.

/// Whether `key` (without its prefix) of ingress-nginx (or of the legacy prefix that
/// its early releases used) holds nginx configuration.
pub fn is_snippet_key(key: &str) -> bool {
    key.to_ascii_lowercase().ends_with("-snippet")
}

/// The first directive of an nginx snippet that restricts who may reach its routes,
/// as `` `NAME` `` for the problem (or what could not be read); `None` when no
/// directive does.
pub fn restriction(snippet: &str) -> Option<String> {
    let mut statement: Vec<String> = Vec::new();
    let mut depth = 0usize;
    let mut tokens = Tokens::new(snippet);
    loop {
        let token = match tokens.next_token() {
            Ok(Some(token)) => token,
            Ok(None) => break,
            Err(what) => return Some(what.to_string()),
        };
        match token {
            Token::Word(word) => statement.push(word),
            Token::End | Token::Open => {
                if let Some(found) = restricting(&statement) {
                    return Some(found);
                }
                if token == Token::Open {
                    if statement.is_empty() {
                        return Some("a block without a directive".into());
                    }
                    depth += 1;
                }
                statement.clear();
            }
            Token::Close => {
                if !statement.is_empty() {
                    return Some("a directive without its `;`".into());
                }
                let Some(outer) = depth.checked_sub(1) else {
                    return Some("a `}` without its block".into());
                };
                depth = outer;
            }
        }
    }
    // A last directive without its `;`, as users often write it.
    if let Some(found) = restricting(&statement) {
        return Some(found);
    }
    (depth > 0).then(|| "a block without its `}`".into())
}

/// Directives that restrict access by themselves, whatever their arguments.
const RESTRICTING: &[&str] = &[
    "allow",
    "deny",
    "satisfy",
    "internal",
    "include",
    "limit_except",
    "ssl_verify_client",
    "ssl_client_certificate",
    "modsecurity",
    "modsecurity_rules",
    "modsecurity_rules_file",
];

/// Prefixes of directives that restrict access (families of modules), or run code
/// that may.
const RESTRICTING_PREFIXES: &[&str] = &[
    "auth_",
    "limit_",
    "secure_link",
    "access_by_",
    "js_",
    "perl",
];

/// Whether one statement (directive and arguments) restricts access: `` `NAME` ``.
fn restricting(statement: &[String]) -> Option<String> {
    let name = statement.first()?.to_ascii_lowercase();
    let found = RESTRICTING.contains(&name.as_str())
        || RESTRICTING_PREFIXES.iter().any(|p| name.starts_with(p))
        || name.contains("lua")
        || name == "return" && returns_refusal(statement.get(1).map(String::as_str));
    found.then(|| match statement.get(1) {
        Some(argument) if name == "return" => format!("`return {argument}`"),
        _ => format!("`{name}`"),
    })
}

/// Whether `return ARGUMENT` answers a refusal: a status of 400 or more, or one that is
/// not a literal (a variable), in doubt. A redirect (`return 301 URL`, `return URL`) or
/// a success does not refuse.
fn returns_refusal(argument: Option<&str>) -> bool {
    let Some(argument) = argument else {
        return true;
    };
    if argument.starts_with("http://")
        || argument.starts_with("https://")
        || argument.starts_with("$scheme")
    {
        return false;
    }
    match argument.parse::<u16>() {
        Ok(code) => code >= 400,
        Err(_) => true,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    /// `;`
    End,
    /// `{`
    Open,
    /// `}`
    Close,
}

/// nginx's configuration tokens: words, quoted strings (with `\` escapes), `#`
/// comments to the end of the line, `;`, `{` and `}`; `${NAME}` inside a word.
struct Tokens<'a> {
    rest: std::iter::Peekable<std::str::Chars<'a>>,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            rest: text.chars().peekable(),
        }
    }

    fn next_token(&mut self) -> Result<Option<Token>, &'static str> {
        loop {
            let Some(&c) = self.rest.peek() else {
                return Ok(None);
            };
            match c {
                c if c.is_whitespace() => {
                    self.rest.next();
                }
                '#' => {
                    for c in self.rest.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                ';' | '{' | '}' => {
                    self.rest.next();
                    return Ok(Some(match c {
                        ';' => Token::End,
                        '{' => Token::Open,
                        _ => Token::Close,
                    }));
                }
                '"' | '\'' => {
                    self.rest.next();
                    return self.quoted(c).map(|word| Some(Token::Word(word)));
                }
                _ => return self.word().map(|word| Some(Token::Word(word))),
            }
        }
    }

    fn quoted(&mut self, quote: char) -> Result<String, &'static str> {
        let mut word = String::new();
        while let Some(c) = self.rest.next() {
            match c {
                '\\' => word.extend(self.rest.next()),
                c if c == quote => return Ok(word),
                c => word.push(c),
            }
        }
        Err("a quote without its end")
    }

    fn word(&mut self) -> Result<String, &'static str> {
        let mut word = String::new();
        while let Some(&c) = self.rest.peek() {
            match c {
                c if c.is_whitespace() => break,
                ';' | '{' | '}' => break,
                '\\' => {
                    self.rest.next();
                    word.extend(self.rest.next());
                }
                '$' => {
                    self.rest.next();
                    word.push('$');
                    if self.rest.peek() == Some(&'{') {
                        // `${NAME}`: the braces belong to the variable.
                        for c in self.rest.by_ref() {
                            word.push(c);
                            if c == '}' {
                                break;
                            }
                        }
                        if !word.ends_with('}') {
                            return Err("a `${` without its `}`");
                        }
                    }
                }
                c => {
                    self.rest.next();
                    word.push(c);
                }
            }
        }
        Ok(word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_that_restrict_access_are_found() {
        for (snippet, found) in [
            ("deny all;", "`deny`"),
            ("allow 10.0.0.0/8; deny all;", "`allow`"),
            (
                "auth_basic \"Staff\";\nauth_basic_user_file /etc/htpasswd;",
                "`auth_basic`",
            ),
            ("auth_request /auth;", "`auth_request`"),
            ("satisfy any;", "`satisfy`"),
            ("return 403;", "`return 403`"),
            ("return 503 'down';", "`return 503`"),
            ("return $status;", "`return $status`"),
            ("limit_req zone=one burst=5;", "`limit_req`"),
            ("limit_conn addr 1;", "`limit_conn`"),
            ("limit_rate 10k;", "`limit_rate`"),
            ("internal;", "`internal`"),
            (
                "access_by_lua_block { ngx.exit(403) }",
                "`access_by_lua_block`",
            ),
            ("include /etc/nginx/deny.conf;", "`include`"),
            // Several directives per line, the restricting one last.
            ("more_set_headers \"X-A: b\"; DENY all;", "`deny`"),
            // Inside blocks, at any depth.
            ("if ($http_x_bad) { return 403; }", "`return 403`"),
            ("location /admin {\n  if ($a) { deny all; }\n}", "`deny`"),
            // A last directive without its `;`.
            ("add_header X-A b;\ndeny all", "`deny`"),
        ] {
            assert_eq!(restriction(snippet), Some(found.into()), "{snippet}");
        }
    }

    #[test]
    fn snippets_that_only_add_headers_or_redirect_do_not_restrict() {
        for snippet in [
            "more_set_headers \"X-Team: shop\";",
            "add_header X-Deny \"deny all;\";\nproxy_set_header X-Allow 'allow';",
            "# deny all;\nmore_set_headers \"X-A: b\"; # auth_basic on;",
            "add_header X-Path \"${uri}\";",
            "return 301 https://example.com$request_uri;",
            "return https://example.com/;",
            "return 200 'ok';",
            "rewrite ^/old(.*)$ /new$1 break;",
            "proxy_set_header X-Quote \"a \\\" deny\";",
            "",
            "# only a comment",
        ] {
            assert_eq!(restriction(snippet), None, "{snippet}");
        }
    }

    #[test]
    fn what_cannot_be_read_is_taken_as_restricting() {
        for (snippet, what) in [
            ("add_header X-A \"b;", "a quote without its end"),
            ("location / { add_header X-A b;", "a block without its `}`"),
            ("add_header X-A b; }", "a `}` without its block"),
            ("{ add_header X-A b; }", "a block without a directive"),
            (
                "location / { add_header X-A b }",
                "a directive without its `;`",
            ),
            ("add_header X-A ${uri;", "a `${` without its `}`"),
        ] {
            assert_eq!(restriction(snippet), Some(what.into()), "{snippet}");
        }
    }

    #[test]
    fn snippet_keys_are_named_so() {
        assert!(is_snippet_key("configuration-snippet"));
        assert!(is_snippet_key("server-snippet"));
        assert!(is_snippet_key("auth-snippet"));
        assert!(is_snippet_key("stream-snippet"));
        assert!(!is_snippet_key("proxy-buffering"));
    }
}
