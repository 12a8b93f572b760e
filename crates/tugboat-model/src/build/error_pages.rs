//! Error pages from the operator's ConfigMap (`--configmap-errorfiles`), as the full
//! HTTP responses haproxy sends.

use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::validate;
use std::collections::BTreeMap;

use super::shared::Shared;

/// Status codes haproxy accepts an error page for.
pub const ERROR_PAGE_CODES: [u16; 17] = [
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504,
];

/// An error page must fit in haproxy's buffer with room to spare.
const ERROR_PAGE_MAX: usize = 12 * 1024;

/// The error pages of `--configmap-errorfiles`: keys are status codes.
pub(super) fn error_pages(shared: &mut Shared) -> BTreeMap<u16, String> {
    let mut pages = BTreeMap::new();
    let Some(key) = shared.settings.error_pages.clone() else {
        return pages;
    };
    let object = ObjectRef::of("ConfigMap", &key);
    let Some(config_map) = shared.snapshot.config_maps.get(&key) else {
        shared.problems.push(ObjectProblem {
            object,
            field: "metadata.name".into(),
            reason: ProblemReason::InvalidField,
            message: "the --configmap-errorfiles ConfigMap does not exist".into(),
        });
        return pages;
    };
    for (code_text, page) in config_map.data.iter().flatten() {
        let field = format!("data.{code_text}");
        let code = code_text
            .parse::<u16>()
            .ok()
            .filter(|c| ERROR_PAGE_CODES.contains(c));
        let Some(code) = code else {
            let message = format!(
                "'{}' is not a status code haproxy has error pages for: expected one of {}",
                validate::printable(code_text),
                ERROR_PAGE_CODES.map(|c| c.to_string()).join(", ")
            );
            shared.problem(&object, field, message);
            continue;
        };
        let response = error_response(code, page);
        if response.len() > ERROR_PAGE_MAX {
            let message = format!(
                "the page is {} bytes: at most {ERROR_PAGE_MAX} fit in haproxy's buffer",
                response.len()
            );
            shared.problem(&object, field, message);
            continue;
        }
        pages.insert(code, response);
    }
    pages
}

/// The full HTTP response haproxy sends for an error page: the value as it is when it is
/// already a response, else an HTML page.
fn error_response(code: u16, page: &str) -> String {
    if page.starts_with("HTTP/1.") {
        return page.replace("\r\n", "\n").replace('\n', "\r\n");
    }
    format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-cache\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{page}",
        reason_phrase(code),
        page.len()
    )
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        410 => "Gone",
        413 => "Payload Too Large",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}
