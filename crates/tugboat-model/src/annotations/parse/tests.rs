//! The parsers' tests: what each accepts, and each refusal as its own case with the
//! exact [`ValueError`] it gives.

use super::*;

#[test]
fn parsers_refuse_what_could_reach_the_config() {
    assert!(parse_url("https://a.example.com/x\nuse_backend y").is_err());
    assert!(parse_url("https://a.example.com/%[env(X)]").is_err());
    assert!(parse_header_lines("X-A \"b\"").is_err());
    assert!(parse_header_lines("X-A ${HOME}").is_err());
    assert_eq!(
        parse_header_lines("X-A one two\nX-B three"),
        Ok(vec![
            ("X-A".into(), "one two".into()),
            ("X-B".into(), "three".into())
        ])
    );
    assert!(parse_path_rewrite("^/api/(.*) /\\1").is_ok());
    assert!(parse_path_rewrite("^/api/(.* /\\1").is_err());
    assert!(parse_path_rewrite("^/a /b if TRUE").is_err());
    assert!(parse_path_rewrite("^/a /%[env(X)]").is_err());
    assert_eq!(
        parse_networks("10.0.0.0/8, 127.0.0.1"),
        Ok(vec!["10.0.0.0/8".into(), "127.0.0.1".into()])
    );
    assert!(parse_networks("10.0.0.0/33").is_err());
    assert!(parse_duration("10s").is_ok());
    assert!(parse_duration("10 s").is_err());
    assert!(parse_realm("a\"b").is_err());
}

#[test]
fn request_redirect_takes_a_host() {
    assert_eq!(
        parse_redirect_target("example.com"),
        Ok(RedirectTarget::Host("example.com".into()))
    );
    assert_eq!(
        parse_redirect_target("10.0.0.7"),
        Ok(RedirectTarget::Host("10.0.0.7".into()))
    );
}

#[test]
fn request_redirect_takes_a_host_and_port() {
    assert_eq!(
        parse_redirect_target("example.com:8443"),
        Ok(RedirectTarget::Host("example.com:8443".into()))
    );
    assert_eq!(
        parse_redirect_target("example.com:08443"),
        Ok(RedirectTarget::Host("example.com:8443".into()))
    );
}

#[test]
fn request_redirect_takes_an_absolute_url() {
    assert_eq!(
        parse_redirect_target("https://www.example.com/new?from=old"),
        Ok(RedirectTarget::Url(
            "https://www.example.com/new?from=old".into()
        ))
    );
    assert_eq!(
        parse_redirect_target("http://example.com:8080"),
        Ok(RedirectTarget::Url("http://example.com:8080".into()))
    );
}

/// The error of `parse_redirect_target(value)`, which must name the three forms.
fn redirect_error(value: &str) -> String {
    let err = parse_redirect_target(value).expect_err(value).to_string();
    assert!(err.starts_with("HOST, HOST:PORT"), "{value}: {err}");
    err
}

#[test]
fn request_redirect_refuses_an_empty_value() {
    redirect_error("");
}

#[test]
fn request_redirect_refuses_an_upper_case_host() {
    redirect_error("Example.com");
}

#[test]
fn request_redirect_refuses_a_wildcard_host() {
    redirect_error("*.example.com");
}

#[test]
fn request_redirect_refuses_an_ipv6_address() {
    redirect_error("[::1]:8443");
}

#[test]
fn request_redirect_refuses_an_empty_port() {
    redirect_error("example.com:");
}

#[test]
fn request_redirect_refuses_port_zero() {
    redirect_error("example.com:0");
}

#[test]
fn request_redirect_refuses_a_port_above_65535() {
    redirect_error("example.com:65536");
}

#[test]
fn request_redirect_refuses_a_port_that_is_not_a_number() {
    redirect_error("example.com:https");
    redirect_error("example.com:+443");
}

#[test]
fn request_redirect_refuses_a_host_with_a_path() {
    redirect_error("example.com/new");
    redirect_error("example.com:8443/new");
}

#[test]
fn request_redirect_refuses_a_scheme_without_slashes() {
    redirect_error("https:example.com");
}

#[test]
fn request_redirect_refuses_a_url_of_another_scheme() {
    let err = redirect_error("ftp://example.com/");
    assert!(err.contains("as a URL"), "{err}");
}

#[test]
fn request_redirect_refuses_a_url_without_a_host() {
    redirect_error("https:///path");
}

#[test]
fn request_redirect_refuses_what_could_reach_the_config() {
    redirect_error("example.com code 301 if TRUE");
    redirect_error("example.com\nuse_backend x");
    redirect_error("https://example.com/%[env(X)]");
    redirect_error("https://example.com/a b");
    redirect_error("https://example.com/\"x");
}

#[test]
fn backend_path_is_normalized_or_original() {
    assert_eq!(
        parse_backend_path("normalized"),
        Ok(BackendPath::Normalized)
    );
    assert_eq!(parse_backend_path("original"), Ok(BackendPath::Original));
    assert!(parse_backend_path("raw").is_err());
    assert!(parse_backend_path("Original").is_err());
}

#[test]
fn access_lists_inline_or_from_a_configmap_key() {
    assert_eq!(
        parse_access_list("configmap:office-ips/list.txt"),
        Ok(AccessList::ConfigMap(ConfigMapKeyRef {
            name: "office-ips".into(),
            key: "list.txt".into()
        }))
    );
    assert!(parse_access_list("configmap:office-ips").is_err());
    assert!(parse_access_list("configmap:../x/y").is_err());
    assert!(parse_access_list("configmap:a/../b").is_err());
    assert_eq!(
        parse_pattern_list("10.0.0.0/8 # office\n\n127.0.0.1\n"),
        Ok(vec!["10.0.0.0/8".into(), "127.0.0.1".into()])
    );
    assert!(
        parse_pattern_list("10.0.0.1\nnope\n").is_err_and(|e| e.to_string().contains("line 2"))
    );
}

// ---- Each refusal, its own case: the exact error a value gets. ----

#[test]
fn a_bool_is_true_or_false_only() {
    assert_eq!(parse_bool("yes"), Err(ValueError::NotBool));
    assert_eq!(parse_bool("True"), Err(ValueError::NotBool));
}

#[test]
fn a_number_out_of_its_range_or_not_digits_is_refused() {
    let range = ValueError::OutOfRange { min: 1, max: 10 };
    assert_eq!(parse_number("0", 1, 10), Err(range.clone()));
    assert_eq!(parse_number("11", 1, 10), Err(range.clone()));
    assert_eq!(parse_number("+5", 1, 10), Err(range.clone()));
    assert_eq!(parse_number("5s", 1, 10), Err(range));
    assert_eq!(parse_number("10", 1, 10), Ok(10));
}

#[test]
fn a_redirect_code_is_one_of_the_redirect_statuses() {
    assert_eq!(parse_redirect_code("300"), Err(ValueError::NotRedirectCode));
    assert_eq!(parse_redirect_code("308"), Ok(308));
}

#[test]
fn a_port_is_from_1_to_65535() {
    assert_eq!(parse_port("0"), Err(ValueError::NotPort));
    assert_eq!(parse_port("65536"), Err(ValueError::NotPort));
}

#[test]
fn a_duration_needs_digits_and_a_unit() {
    for value in ["10", "s", "10 s", "10d", "1234567890s", "-1s"] {
        assert_eq!(
            parse_duration(value),
            Err(ValueError::NotDuration),
            "{value}"
        );
    }
}

/// haproxy refuses a server's check `inter 0` and with it the whole config (found by
/// fuzzing `check-interval: 0s`).
#[test]
fn a_check_interval_is_above_zero() {
    for value in ["0s", "0ms", "000m"] {
        assert_eq!(
            parse_positive_duration(value),
            Err(ValueError::NotPositiveDuration),
            "{value}"
        );
    }
    assert_eq!(parse_positive_duration("10"), Err(ValueError::NotDuration));
    assert_eq!(parse_positive_duration("05s"), Ok("05s".to_string()));
    assert_eq!(
        (crate::annotations::keys::CHECK_INTERVAL.spec.check)("0s"),
        Err(ValueError::NotPositiveDuration)
    );
}

#[test]
fn a_header_name_is_a_token_and_not_a_rule_word() {
    for value in ["", "X A", "X:A", "if", "Unless", "OR"] {
        assert_eq!(
            parse_header_name(value),
            Err(ValueError::NotHeaderName),
            "{value:?}"
        );
    }
}

#[test]
fn header_lines_need_a_name_and_a_quotable_value() {
    for value in ["X-A", "X-A \"b\"", "X:A b", "", "X-A 100%"] {
        assert_eq!(
            parse_header_lines(value),
            Err(ValueError::NotHeaderLines),
            "{value:?}"
        );
    }
}

#[test]
fn a_url_is_absolute_http_or_https_with_a_host() {
    for value in ["ftp://a", "https://", "https://a b", "//a.example.com"] {
        assert_eq!(parse_url(value), Err(ValueError::NotUrl), "{value}");
    }
}

#[test]
fn backend_path_refuses_other_words() {
    assert_eq!(parse_backend_path("raw"), Err(ValueError::NotBackendPath));
}

#[test]
fn a_redirect_target_error_says_why_the_url_failed() {
    assert_eq!(
        parse_redirect_target("ftp://a"),
        Err(ValueError::NotRedirectTarget {
            as_url: Some(Box::new(ValueError::NotUrl))
        })
    );
    assert_eq!(
        parse_redirect_target("A.example.com"),
        Err(ValueError::NotRedirectTarget { as_url: None })
    );
}

#[test]
fn a_host_port_is_a_lower_case_host_and_a_port() {
    for value in [
        "Example.com",
        "example.com:0",
        "example.com:x",
        "*.example.com",
    ] {
        assert_eq!(
            parse_host_port(value),
            Err(ValueError::NotHostPort),
            "{value}"
        );
    }
}

#[test]
fn a_path_rewrite_is_two_words_of_allowed_characters() {
    for value in ["^/a", "^/a /b /c", "^/a /%b", "^/'a /b"] {
        assert_eq!(
            parse_path_rewrite(value),
            Err(ValueError::NotPathRewrite),
            "{value}"
        );
    }
}

#[test]
fn a_path_rewrite_regex_must_parse() {
    assert!(matches!(
        parse_path_rewrite("^/a(b /c"),
        Err(ValueError::RegexDoesNotParse(_))
    ));
}

#[test]
fn a_path_rewrite_replacement_starts_with_a_slash_and_uses_only_group_numbers() {
    for value in ["^/a b", "^/a /\\x"] {
        assert_eq!(
            parse_path_rewrite(value),
            Err(ValueError::NotReplacement),
            "{value}"
        );
    }
}

#[test]
fn origins_are_star_or_http_origins() {
    for value in ["app.example.com", "https://app.example.com/x", ""] {
        assert_eq!(
            parse_origins(value),
            Err(ValueError::NotOrigins),
            "{value:?}"
        );
    }
}

#[test]
fn methods_are_upper_case_words() {
    for value in ["get", "GET,,POST", "GET POST"] {
        assert_eq!(parse_methods(value), Err(ValueError::NotMethods), "{value}");
    }
}

#[test]
fn header_name_lists_hold_header_names() {
    assert_eq!(
        parse_header_names("X-A, X B"),
        Err(ValueError::NotHeaderNames)
    );
}

#[test]
fn a_network_is_an_address_with_an_optional_prefix_length() {
    assert_eq!(
        parse_network("10.0.0"),
        Err(ValueError::NotNetwork("10.0.0".into()))
    );
    assert_eq!(
        parse_network("10.0.0.0/33"),
        Err(ValueError::NotPrefixLength {
            max: 32,
            item: "10.0.0.0/33".into()
        })
    );
    assert_eq!(
        parse_network("::/129"),
        Err(ValueError::NotPrefixLength {
            max: 128,
            item: "::/129".into()
        })
    );
}

#[test]
fn a_network_list_has_1_to_1000_entries() {
    assert_eq!(parse_networks(" , "), Err(ValueError::NetworkCount));
    let many: Vec<String> = (0..1001)
        .map(|i| format!("10.{}.{}.1", i / 256, i % 256))
        .collect();
    assert_eq!(
        parse_networks(&many.join(",")),
        Err(ValueError::NetworkCount)
    );
}

#[test]
fn a_configmap_reference_needs_a_name_and_a_plain_key() {
    for value in [
        "configmap:ips",
        "configmap:Ips/list",
        "configmap:ips/..",
        "configmap:ips/a/b",
    ] {
        assert_eq!(
            parse_access_list(value),
            Err(ValueError::NotConfigMapKey),
            "{value}"
        );
    }
}

#[test]
fn a_pattern_list_error_names_the_line() {
    assert_eq!(
        parse_pattern_list("10.0.0.1\nnope\n"),
        Err(ValueError::PatternLine {
            line: 2,
            error: Box::new(ValueError::NotNetwork("nope".into()))
        })
    );
}

#[test]
fn a_pattern_list_holds_at_least_one_entry() {
    assert_eq!(
        parse_pattern_list("# only a comment\n"),
        Err(ValueError::PatternCount)
    );
}

#[test]
fn a_check_path_starts_with_a_slash() {
    for value in ["healthz", "/a b", "/a%20"] {
        assert_eq!(
            parse_check_path(value),
            Err(ValueError::NotCheckPath),
            "{value}"
        );
    }
}

#[test]
fn a_cookie_name_is_letters_digits_dash_underscore() {
    for value in ["", "a;b", "a=b"] {
        assert_eq!(
            parse_cookie_name(value),
            Err(ValueError::NotCookieName),
            "{value:?}"
        );
    }
}

#[test]
fn auth_type_is_basic_auth_only() {
    assert_eq!(parse_auth_type("basic"), Err(ValueError::NotAuthType));
}

#[test]
fn a_realm_is_short_quotable_text() {
    for value in ["", "a\"b", "a$b", &"x".repeat(65)] {
        assert_eq!(parse_realm(value), Err(ValueError::NotRealm), "{value:?}");
    }
}

#[test]
fn balance_is_one_of_the_algorithms() {
    for value in ["hdr()", "hdr(if)", "rr"] {
        assert_eq!(parse_balance(value), Err(ValueError::NotBalance), "{value}");
    }
}

#[test]
fn a_syslog_server_is_stdout_or_an_address_and_port() {
    assert_eq!(
        parse_syslog_server("logs:514"),
        Err(ValueError::NotSyslogServer)
    );
    assert_eq!(parse_syslog_server("stdout"), Ok(None));
}

#[test]
fn a_log_format_has_no_quotes_backslashes_or_dollars() {
    for value in ["", "%ci \"x\"", "%ci $x"] {
        assert_eq!(
            parse_log_format(value),
            Err(ValueError::NotLogFormat),
            "{value:?}"
        );
    }
}

#[test]
fn server_proto_is_h1_or_h2() {
    assert_eq!(parse_server_proto("h3"), Err(ValueError::NotServerProto));
}

#[test]
fn proxy_protocol_is_v1_or_v2() {
    assert_eq!(
        parse_proxy_protocol("v3"),
        Err(ValueError::NotProxyProtocol)
    );
}

#[test]
fn a_secret_name_is_a_dns_subdomain() {
    assert_eq!(
        parse_secret_name("Shop_Users"),
        Err(ValueError::NotSecretName)
    );
}

#[test]
fn error_texts_say_what_was_expected() {
    assert_eq!(ValueError::NotBool.to_string(), "true or false");
    assert_eq!(
        ValueError::OutOfRange {
            min: 0,
            max: 86_400
        }
        .to_string(),
        "a whole number from 0 to 86400"
    );
    assert_eq!(
        ValueError::NotRedirectTarget {
            as_url: Some(Box::new(ValueError::NotUrl))
        }
        .to_string(),
        format!(
            "HOST, HOST:PORT (a lower-case host name or IPv4 address, a port from 1 to 65535), \
             or an absolute http:// or https:// URL; as a URL: {}",
            ValueError::NotUrl
        )
    );
}

#[test]
fn auth_url_takes_an_http_or_https_url() {
    assert_eq!(
        parse_service_url("http://127.0.0.1:9000/auth?app=shop"),
        Ok("http://127.0.0.1:9000/auth?app=shop".into())
    );
}

#[test]
fn auth_url_takes_the_nginx_variables_tugboat_fills_in() {
    for url in [
        "https://$host/oauth2/auth",
        "https://${host}:8443/oauth2/auth",
        "https://login.example.com/oauth2/start?rd=$escaped_request_uri",
        "http://auth.example.com/check?uri=$request_uri&s=$scheme&a=$args$is_args",
        "http://auth.example.com/check/$uri?q=$query_string&ip=$remote_addr",
        "http://auth.example.com/check?tenant=$http_x_tenant&page=$arg_page",
        "http://auth.$host/check",
    ] {
        assert_eq!(parse_service_url(url), Ok(url.into()), "{url}");
    }
}

#[test]
fn auth_url_refuses_a_variable_it_does_not_fill_in() {
    assert_eq!(
        parse_service_url("https://$server_name/oauth2/auth"),
        Err(ValueError::UnknownUrlVariable("server_name".into()))
    );
    assert_eq!(
        parse_service_url("https://a.com/?h=$HOST"),
        Err(ValueError::UnknownUrlVariable("HOST".into()))
    );
    assert_eq!(
        parse_service_url("https://a.com/?h=$http_X_Tenant"),
        Err(ValueError::UnknownUrlVariable("http_X_Tenant".into()))
    );
    assert_eq!(
        parse_service_url("https://a.com/?a=$arg_"),
        Err(ValueError::UnknownUrlVariable("arg_".into()))
    );
    let text = ValueError::UnknownUrlVariable("server_name".into()).to_string();
    assert!(
        text.contains("$server_name") && text.contains("$host"),
        "{text}"
    );
}

#[test]
fn auth_url_refuses_a_variable_other_than_host_in_its_host_or_port() {
    for (url, variable) in [
        ("https://$http_x_auth_host/oauth2/auth", "http_x_auth_host"),
        ("https://$arg_next/oauth2/start", "arg_next"),
        ("https://auth.example.com:$arg_port/check", "arg_port"),
        ("https://${remote_addr}/check", "remote_addr"),
        ("https://$host.$http_x_zone/check", "http_x_zone"),
    ] {
        assert_eq!(
            parse_service_url(url),
            Err(ValueError::VariableInAuthority(variable.into())),
            "{url}"
        );
    }
    let text = ValueError::VariableInAuthority("arg_next".into()).to_string();
    assert!(
        text.contains("$arg_next") && text.contains("the client would choose"),
        "{text}"
    );
    // In the path and the query, every variable still stands.
    let url = "http://127.0.0.1:9000/check/$http_x_tenant?host=$host&next=$arg_next";
    assert_eq!(parse_service_url(url), Ok(url.into()));
}

#[test]
fn auth_url_refuses_a_dollar_that_starts_no_variable() {
    for url in [
        "https://a.com/x$",
        "https://a.com/$/x",
        "https://a.com/${host",
        "https://a.com/${}",
        "https://a.com/${ho-st}",
    ] {
        assert_eq!(
            parse_service_url(url),
            Err(ValueError::MalformedUrlVariable),
            "{url}"
        );
    }
}

#[test]
fn auth_url_with_variables_is_still_checked_as_a_url() {
    for url in [
        "$scheme://$host/check",
        "https://$host/check if TRUE",
        "https://$host/\"check",
        "https://$host/check#x",
        "https://user@$host/check",
    ] {
        assert!(
            matches!(parse_service_url(url), Err(ValueError::NotServiceUrl(_))),
            "{url}"
        );
    }
}

#[test]
fn auth_url_refuses_a_word_break() {
    assert!(matches!(
        parse_service_url("http://a.com/auth if TRUE"),
        Err(ValueError::NotServiceUrl(_))
    ));
}

#[test]
fn auth_method_takes_what_the_http_client_sends() {
    for method in ["GET", "HEAD", "POST", "PUT", "DELETE"] {
        assert_eq!(parse_auth_method(method), Ok(method.into()));
    }
}

#[test]
fn auth_method_refuses_other_methods() {
    for method in ["get", "PATCH", "OPTIONS", "GET POST", ""] {
        assert_eq!(
            parse_auth_method(method),
            Err(ValueError::NotAuthMethod),
            "{method}"
        );
    }
}

#[test]
fn header_name_lists_are_split_on_commas() {
    assert_eq!(
        parse_header_name_list("X-User, X-Email,X-Groups"),
        Ok(vec!["X-User".into(), "X-Email".into(), "X-Groups".into()])
    );
}

#[test]
fn header_name_lists_refuse_bad_names() {
    for value in ["", " , ", "X-User X-Email", "X-User,X:Email", "X-User\nX-A"] {
        assert_eq!(
            parse_header_name_list(value),
            Err(ValueError::NotHeaderNameList),
            "{value:?}"
        );
    }
    let many = vec!["X-A"; 33].join(",");
    assert_eq!(
        parse_header_name_list(&many),
        Err(ValueError::NotHeaderNameList)
    );
}

#[test]
fn rewrite_target_groups_become_haproxy_groups() {
    assert_eq!(parse_rewrite_target("/$2"), Ok("/\\2".into()));
    assert_eq!(parse_rewrite_target("/api/$1/x"), Ok("/api/\\1/x".into()));
    assert_eq!(parse_rewrite_target("/"), Ok("/".into()));
}

#[test]
fn rewrite_target_refuses_nginx_variables() {
    for value in ["/$host", "/$", "/$0", "$1"] {
        assert_eq!(
            parse_rewrite_target(value),
            Err(ValueError::NotRewriteTarget),
            "{value}"
        );
    }
}

#[test]
fn a_body_size_is_bytes_or_nginx_units() {
    assert_eq!(parse_body_size("512"), Ok(Some(512)));
    assert_eq!(parse_body_size("1k"), Ok(Some(1024)));
    assert_eq!(parse_body_size("1K"), Ok(Some(1024)));
    assert_eq!(parse_body_size("8m"), Ok(Some(8 << 20)));
    assert_eq!(parse_body_size("2G"), Ok(Some(2 << 30)));
    assert_eq!(parse_body_size("1024g"), Ok(Some(BODY_SIZE_MAX)));
}

#[test]
fn a_body_size_of_zero_is_no_limit() {
    assert_eq!(parse_body_size("0"), Ok(None));
    assert_eq!(parse_body_size("0m"), Ok(None));
}

#[test]
fn a_body_size_with_another_unit_is_refused() {
    for value in ["8mb", "8 m", "1.5m", "8t", "m", ""] {
        assert_eq!(
            parse_body_size(value),
            Err(ValueError::NotBodySize),
            "{value:?}"
        );
    }
}

#[test]
fn a_negative_body_size_is_refused() {
    assert_eq!(parse_body_size("-1"), Err(ValueError::NotBodySize));
}

#[test]
fn a_body_size_above_one_tib_is_refused() {
    for value in ["1025g", "99999999999999", "18446744073709551616k"] {
        assert_eq!(
            parse_body_size(value),
            Err(ValueError::NotBodySize),
            "{value:?}"
        );
    }
}

#[test]
fn rewrite_target_refuses_what_could_reach_the_config() {
    for value in [
        "/a b", "/a'", "/a\"", "/a%20", "/a\\1", "/a#", "/a\nb", "relative",
    ] {
        assert_eq!(
            parse_rewrite_target(value),
            Err(ValueError::NotRewriteTarget),
            "{value:?}"
        );
    }
}

#[test]
fn a_canary_header_value_is_a_match_value() {
    assert_eq!(parse_match_value("beta-2"), Ok("beta-2".into()));
    for value in [
        "", "a b", "a\"b", "a'b", "${X}", "50%", "a#b", "{x}", "a\nb",
    ] {
        assert_eq!(
            parse_match_value(value),
            Err(ValueError::NotMatchValue),
            "{value:?}"
        );
    }
}

#[test]
fn app_root_takes_a_path() {
    assert_eq!(parse_app_root("/app1"), Ok("/app1".into()));
    assert_eq!(parse_app_root("/app/v2/"), Ok("/app/v2/".into()));
}

#[test]
fn app_root_refuses_a_url_or_a_relative_path() {
    for value in ["https://example.com/app", "app1", ""] {
        assert!(
            matches!(parse_app_root(value), Err(ValueError::NotLiteralPath(_))),
            "{value}"
        );
    }
}

#[test]
fn app_root_refuses_what_could_reach_the_config() {
    for value in [
        "/app $x",
        "/a%[env(X)]",
        "/${HOME}",
        "/a\nb",
        "/a\"b",
        "/a#b",
    ] {
        assert!(
            matches!(parse_app_root(value), Err(ValueError::NotLiteralPath(_))),
            "{value:?}"
        );
    }
}

#[test]
fn server_name_takes_a_dns_name() {
    assert_eq!(parse_server_name("web.shop.svc"), Ok("web.shop.svc".into()));
}

#[test]
fn server_name_refuses_other_text() {
    for value in ["Web.shop", "web shop", "web.shop:443", "", "str(x)", "a\nb"] {
        assert_eq!(
            parse_server_name(value),
            Err(ValueError::NotServerName),
            "{value:?}"
        );
    }
}

#[test]
fn affinity_is_cookie_only() {
    assert_eq!(parse_affinity("cookie"), Ok(()));
    for value in ["", "Cookie", "ip", "cookie "] {
        assert_eq!(
            parse_affinity(value),
            Err(ValueError::NotAffinity),
            "{value:?}"
        );
    }
}

#[test]
fn a_cookie_path_starts_with_a_slash() {
    assert_eq!(parse_cookie_path("/shop/v1"), Ok("/shop/v1".into()));
    assert_eq!(parse_cookie_path("shop"), Err(ValueError::NotCookiePath));
}

#[test]
fn a_cookie_path_cannot_end_the_attribute() {
    for value in ["/a;Domain=evil", "/a b", "/a\"", "/%2e", "/a\n"] {
        assert_eq!(
            parse_cookie_path(value),
            Err(ValueError::NotCookiePath),
            "{value:?}"
        );
    }
}

#[test]
fn a_cookie_path_is_at_most_256() {
    let long = format!("/{}", "a".repeat(256));
    assert_eq!(parse_cookie_path(&long), Err(ValueError::NotCookiePath));
}

#[test]
fn a_header_pattern_is_a_regular_expression() {
    assert_eq!(
        parse_header_pattern("^(beta|canary)$"),
        Ok("^(beta|canary)$".into())
    );
}

#[test]
fn a_header_pattern_that_does_not_parse_is_refused() {
    let refused = parse_header_pattern("(beta");
    assert!(
        matches!(&refused, Err(ValueError::NotHeaderPattern(why)) if why.contains("not a valid regular expression")),
        "{refused:?}"
    );
}

#[test]
fn a_header_pattern_with_a_quote_or_space_is_refused() {
    for value in ["a'b", "a b", "a\"b", "50%", "a#b", ""] {
        assert!(
            matches!(
                parse_header_pattern(value),
                Err(ValueError::NotHeaderPattern(_))
            ),
            "{value:?}"
        );
    }
}

#[test]
fn host_aliases_are_lower_case_hosts_without_repeats() {
    assert_eq!(
        parse_host_aliases("www.Shop.example.com, shop.example.net,,www.shop.example.com"),
        Ok(vec![
            "www.shop.example.com".to_string(),
            "shop.example.net".to_string()
        ])
    );
    assert_eq!(
        parse_host_aliases("*.shop.example.com"),
        Ok(vec!["*.shop.example.com".to_string()])
    );
}

#[test]
fn host_aliases_refuse_an_invalid_host() {
    for value in [
        "shop.example.com,bad host",
        "shop.example.com\nbind :1",
        "\r\nglobalwww.shop.example.com,shop.example.net",
        "shop.example.com,\twww.shop.example.com",
        "10.0.0.1",
        "shop.example.com:8080",
        "*",
        "%[env(A)]",
    ] {
        assert!(
            matches!(parse_host_aliases(value), Err(ValueError::NotHostList(_))),
            "{value:?}"
        );
    }
}

#[test]
fn host_aliases_refuse_an_empty_list() {
    assert!(matches!(
        parse_host_aliases(" , "),
        Err(ValueError::NotHostList(_))
    ));
}

#[test]
fn host_aliases_refuse_more_than_32() {
    let many: Vec<String> = (0..33).map(|i| format!("h{i}.example.com")).collect();
    assert!(matches!(
        parse_host_aliases(&many.join(",")),
        Err(ValueError::NotHostList(_))
    ));
}

#[test]
fn error_codes_are_sorted_without_repeats() {
    assert_eq!(
        parse_error_codes("503, 404,404 ,500"),
        Ok(vec![404, 500, 503])
    );
}

#[test]
fn error_codes_refuse_a_word() {
    assert_eq!(
        parse_error_codes("404,teapot"),
        Err(ValueError::NotErrorCode("teapot".into()))
    );
}

#[test]
fn error_codes_refuse_a_code_below_400() {
    assert_eq!(
        parse_error_codes("302,404"),
        Err(ValueError::NotErrorCode("302".into()))
    );
}

#[test]
fn error_codes_refuse_a_code_above_599() {
    assert_eq!(
        parse_error_codes("600"),
        Err(ValueError::NotErrorCode("600".into()))
    );
}

#[test]
fn error_codes_refuse_a_sign() {
    assert_eq!(
        parse_error_codes("+404"),
        Err(ValueError::NotErrorCode("+404".into()))
    );
}

#[test]
fn error_codes_refuse_an_empty_list() {
    assert_eq!(
        parse_error_codes(" , "),
        Err(ValueError::ErrorCodeCount { max: 200 })
    );
}

#[test]
fn error_codes_refuse_a_line_break() {
    assert_eq!(
        parse_error_codes("404\n500"),
        Err(ValueError::NotErrorCode("404?500".into()))
    );
}

#[test]
fn service_name_is_a_dns_label() {
    assert_eq!(parse_service_name("error-pages"), Ok("error-pages".into()));
}

#[test]
fn service_name_refuses_a_namespace() {
    assert_eq!(
        parse_service_name("other/error-pages"),
        Err(ValueError::NotServiceName)
    );
}

#[test]
fn service_name_refuses_upper_case() {
    assert_eq!(
        parse_service_name("Errors"),
        Err(ValueError::NotServiceName)
    );
}

#[test]
fn affinity_canary_behavior_is_sticky_or_legacy() {
    assert_eq!(
        parse_affinity_canary_behavior("sticky"),
        Ok(AffinityCanaryBehavior::Sticky)
    );
    assert_eq!(
        parse_affinity_canary_behavior("legacy"),
        Ok(AffinityCanaryBehavior::Legacy)
    );
    for bad in ["", "Sticky", "persistent", "sticky "] {
        assert_eq!(
            parse_affinity_canary_behavior(bad),
            Err(ValueError::NotAffinityCanaryBehavior),
            "{bad:?}"
        );
    }
}

#[test]
fn http_redirect_code_takes_what_ingress_nginx_takes() {
    for (value, code) in [("301", 301), ("302", 302), ("307", 307), ("308", 308)] {
        assert_eq!(parse_http_redirect_code(value), Ok(code));
    }
    for bad in ["303", "200", "", "308 ", "3O1"] {
        assert_eq!(
            parse_http_redirect_code(bad),
            Err(ValueError::NotHttpRedirectCode),
            "{bad:?}"
        );
    }
}

#[test]
fn path_prefixes_are_sorted_without_repeats() {
    assert_eq!(
        parse_path_prefixes("/.well-known/acme-challenge"),
        Ok(vec!["/.well-known/acme-challenge".to_string()])
    );
    assert_eq!(
        parse_path_prefixes(" /custom , /.well-known/acme-challenge,,/custom"),
        Ok(vec![
            "/.well-known/acme-challenge".to_string(),
            "/custom".to_string()
        ])
    );
}

#[test]
fn path_prefixes_may_be_none() {
    assert_eq!(parse_path_prefixes(""), Ok(vec![]));
    assert_eq!(parse_path_prefixes(" , "), Ok(vec![]));
}

#[test]
fn path_prefixes_refuse_what_haproxy_would_misread() {
    for value in [
        "custom",
        "/a b",
        "/a\tb",
        "/a\nuse_backend x",
        "/a#b",
        "/a\"b",
        "/a'b",
        "/a\\b",
        "/$HOME",
        "/%[env(A)]",
        "/a{b}",
        "/a;b",
        "/a,b c",
    ] {
        assert!(
            matches!(
                parse_path_prefixes(value),
                Err(ValueError::NotPathPrefixList(_))
            ),
            "{value:?}"
        );
    }
}

#[test]
fn path_prefixes_refuse_a_long_one() {
    let long = format!("/{}", "a".repeat(256));
    assert!(matches!(
        parse_path_prefixes(&long),
        Err(ValueError::NotPathPrefixList(_))
    ));
}

#[test]
fn path_prefixes_refuse_more_than_32() {
    let many: Vec<String> = (0..33).map(|i| format!("/p{i}")).collect();
    assert!(matches!(
        parse_path_prefixes(&many.join(",")),
        Err(ValueError::NotPathPrefixList(_))
    ));
}

#[test]
fn verify_client_takes_nginx_values() {
    assert_eq!(parse_verify_client("on"), Ok(VerifyClient::On));
    assert_eq!(parse_verify_client("optional"), Ok(VerifyClient::Optional));
    assert_eq!(
        parse_verify_client("optional_no_ca"),
        Ok(VerifyClient::OptionalNoCa)
    );
    assert_eq!(parse_verify_client("off"), Ok(VerifyClient::Off));
}

#[test]
fn verify_client_refuses_other_values() {
    for value in ["On", "true", "required", "optional-no-ca", ""] {
        assert_eq!(
            parse_verify_client(value),
            Err(ValueError::NotVerifyClient),
            "{value}"
        );
    }
}

#[test]
fn a_subject_pattern_is_a_regular_expression() {
    assert_eq!(
        parse_subject_pattern("CN=(alice|bob)$"),
        Ok("CN=(alice|bob)$".into())
    );
}

#[test]
fn a_subject_pattern_that_does_not_parse_is_refused() {
    let refused = parse_subject_pattern("CN=(alice");
    assert!(
        matches!(&refused, Err(ValueError::NotSubjectPattern(why)) if why.contains("not a valid regular expression")),
        "{refused:?}"
    );
}

#[test]
fn a_subject_pattern_with_a_quote_or_space_is_refused() {
    for value in ["CN=a b", "CN='a'", "CN=\"a\"", "CN=50%", "CN=a#b", ""] {
        assert!(
            matches!(
                parse_subject_pattern(value),
                Err(ValueError::NotSubjectPattern(_))
            ),
            "{value}"
        );
    }
}
