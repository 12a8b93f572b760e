//! Users for basic authentication, from a Secret: either an `auth` key in htpasswd
//! format (`user:hash` lines, as ingress-nginx users have it) or one key per user whose
//! value is the password hash.
//!
//! Only hash kinds haproxy verifies (through the C library's `crypt`) are accepted:
//! `$1$`, `$2b$`/`$2y$`, `$5$` and `$6$`. `$apr1$` (htpasswd's default) is refused with a
//! message saying how to make an accepted one. Hashes never appear in messages.

use k8s_openapi::api::core::v1::Secret;

/// One user and the password hash haproxy checks.
pub type User = (String, String);

/// The hash kinds haproxy verifies, for messages.
pub const ACCEPTED_HASHES: &str =
    "$1$ (MD5-crypt), $2b$/$2y$ (bcrypt), $5$ (SHA-256-crypt) or $6$ (SHA-512-crypt)";

/// The users of a basic-auth Secret, sorted by name. The error says what is wrong
/// without showing any hash.
pub fn users_from_secret(secret: &Secret) -> Result<Vec<User>, String> {
    let data = secret.data.as_ref();
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).ok();
    let mut users = Vec::new();
    if let Some(auth) = data.and_then(|d| d.get("auth")) {
        let auth = text(&auth.0).ok_or("the auth key is not UTF-8 text")?;
        for (index, line) in auth.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (user, hash) = line
                .split_once(':')
                .ok_or_else(|| format!("line {} of the auth key is not 'user:hash'", index + 1))?;
            check_user(user)?;
            check_hash(user, hash)?;
            users.push((user.to_string(), hash.to_string()));
        }
    } else {
        for (user, hash) in data.into_iter().flatten() {
            check_user(user)?;
            let hash = text(&hash.0)
                .ok_or_else(|| format!("the hash of user '{user}' is not UTF-8 text"))?;
            let hash = hash.trim();
            check_hash(user, hash)?;
            users.push((user.clone(), hash.to_string()));
        }
    }
    if users.is_empty() {
        return Err(
            "no users: expected an 'auth' key in htpasswd format or one key per user".into(),
        );
    }
    users.sort();
    users.dedup_by(|a, b| a.0 == b.0);
    Ok(users)
}

fn check_user(user: &str) -> Result<(), String> {
    let ok = !user.is_empty()
        && user.len() <= 64
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "user name '{}' is not valid: expected letters, digits and - _ . @",
            crate::validate::printable(user)
        ))
    }
}

fn check_hash(user: &str, hash: &str) -> Result<(), String> {
    let kind_ok = ["$1$", "$2b$", "$2y$", "$5$", "$6$"]
        .iter()
        .any(|prefix| hash.starts_with(prefix));
    let chars_ok = hash.len() <= 256
        && hash
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./$=".contains(&b));
    if hash.starts_with("$apr1$") {
        return Err(format!(
            "user '{user}': $apr1$ hashes (htpasswd's default) cannot be verified by haproxy; \
             expected {ACCEPTED_HASHES}, e.g. from 'htpasswd -B' or 'openssl passwd -6'"
        ));
    }
    if kind_ok && chars_ok {
        Ok(())
    } else {
        Err(format!(
            "user '{user}': the password hash is not of a kind haproxy verifies: expected \
             {ACCEPTED_HASHES}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(entries: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn htpasswd_and_per_user_keys() {
        let users = users_from_secret(&secret(&[("auth", "bob:$6$salt$abc\nann:$2y$05$xyz\n")]));
        assert_eq!(
            users,
            Ok(vec![
                ("ann".into(), "$2y$05$xyz".into()),
                ("bob".into(), "$6$salt$abc".into())
            ])
        );
        let users = users_from_secret(&secret(&[("carl", "$5$s$h")]));
        assert_eq!(users, Ok(vec![("carl".into(), "$5$s$h".into())]));
    }

    #[test]
    fn refused_hashes_say_which_are_accepted_and_never_show_the_hash() {
        let err = users_from_secret(&secret(&[("auth", "bob:$apr1$secret$hash")]))
            .expect_err("apr1 refused");
        assert!(err.contains("$6$"), "{err}");
        assert!(!err.contains("secret$hash"), "{err}");
        let err = users_from_secret(&secret(&[("bob", "plaintext")])).expect_err("refused");
        assert!(!err.contains("plaintext"), "{err}");
        assert!(users_from_secret(&secret(&[("bob", "$6$a b")])).is_err());
    }
}
