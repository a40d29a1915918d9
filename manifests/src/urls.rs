//! The rules for URLs a manifest names — a Source's git repository and a
//! Webhook's endpoint — in one place: no credentials in a URL,
//! no URL printed with its user info, and only the git transports that
//! cannot run commands.

use std::borrow::Cow;

/// What a refused URL is told (the credentials' home is pamd's config).
pub const CREDENTIALS_REFUSED: &str =
    "holds a password or token, expected a URL without one: credentials never come from a manifest";

/// The byte range of a URL's user info and its `@`
/// (`https://user:pass@host` → `user:pass@`), when it has one. Only
/// `scheme://` URLs have an authority; the scp-like `user@host:path` names
/// an ssh user, which is not a secret.
fn userinfo_range(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let authority_len = url[start..]
        .find(['/', '?', '#'])
        .unwrap_or(url.len() - start);
    let at = url[start..start + authority_len].rfind('@')?;
    Some(start..start + at + 1)
}

/// Whether a URL carries a user or a password in its authority
/// (`https://user:pass@host`, `https://token@host`, `ssh://git:pw@host`).
/// `ssh://git@host` names a user only, which is not a secret.
pub fn has_credentials(url: &str) -> bool {
    let Some(r) = userinfo_range(url) else {
        return false;
    };
    let userinfo = &url[r.start..r.end - 1];
    let scheme = &url[..url.find("://").unwrap_or(0)];
    // A user alone is a name over ssh, but a token over http(s).
    userinfo.contains(':') || !scheme.eq_ignore_ascii_case("ssh")
}

/// The URL as errors and logs may print it: without its user info.
pub fn redacted(url: &str) -> Cow<'_, str> {
    match userinfo_range(url) {
        Some(r) => Cow::Owned(format!("{}{}", &url[..r.start], &url[r.end..])),
        None => Cow::Borrowed(url),
    }
}

/// The git URL schemes a Source may name: none of them runs a command.
const GIT_SCHEMES: [&str; 5] = ["https", "http", "ssh", "git", "file"];

/// Why git must not be given `url`, or None when it may: `https`, `http`,
/// `ssh`, `git` and `file` URLs (schemes compared case-insensitively), the
/// scp-like `[user@]host:path` and local paths. Refused: a `<transport>::`
/// form (git runs a remote helper — `ext::` runs any command, `fd::`
/// talks over a descriptor), other schemes (also remote helpers), leading
/// or trailing whitespace and control characters, and a URL, host or user
/// starting with `-` (ssh would take it as an option:
/// `ssh://-oProxyCommand=…`). Credentials are [`has_credentials`]'s.
pub fn git_url_problem(url: &str) -> Option<String> {
    const EXPECTED: &str =
        "expected https://, http://, ssh://, git://, file://, user@host:path or a local path";
    if url.trim().is_empty() {
        return Some(format!("empty, {EXPECTED}"));
    }
    if url.trim() != url || url.contains(char::is_control) {
        return Some(format!(
            "has leading or trailing whitespace or a control character, {EXPECTED}"
        ));
    }
    if url.starts_with('-') {
        return Some(format!("starts with '-' (an option to git), {EXPECTED}"));
    }
    // git's own test: the scheme characters, then `::` — a remote helper.
    let scheme_len = url
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .unwrap_or(url.len());
    if url[scheme_len..].starts_with("::") {
        return Some(format!(
            "the {}:: transport runs a remote helper (ext:: runs commands), {EXPECTED}",
            &url[..scheme_len]
        ));
    }
    let (user, host) = if url[scheme_len..].starts_with("://") {
        let scheme = &url[..scheme_len];
        if !GIT_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
            return Some(format!("the {scheme}:// scheme is not allowed, {EXPECTED}"));
        }
        let rest = &url[scheme_len + 3..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        match authority.rsplit_once('@') {
            Some((u, h)) => (u, h),
            None => ("", authority),
        }
    } else {
        // scp-like when a colon comes before any slash (git's rule);
        // otherwise a local path.
        match url.find(':') {
            Some(colon) if !url[..colon].contains('/') => {
                let target = &url[..colon];
                match target.rsplit_once('@') {
                    Some((u, h)) => (u, h),
                    None => ("", target),
                }
            }
            _ => ("", ""),
        }
    };
    let host = host.trim_start_matches('[');
    if host.starts_with('-') || user.starts_with('-') {
        return Some(format!(
            "the host or user starts with '-' (ssh would take it as an option), {EXPECTED}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_and_redacted() {
        for url in [
            "https://user:tok@example.com/r.git",
            "https://ghp_token@example.com/r.git",
            "HTTPS://token@example.com/r.git",
            "ssh://git:pw@example.com/r.git",
        ] {
            assert!(has_credentials(url), "{url}");
            assert!(!redacted(url).contains('@'), "{url}");
        }
        assert_eq!(
            redacted("https://u:p@ci.example:8443/h?x=1"),
            "https://ci.example:8443/h?x=1"
        );
        for url in [
            "ssh://git@example.com/r.git",
            "git@example.com:r.git",
            "https://example.com/r.git",
            "https://example.com/r@v1.git",
            "file:///srv/r.git",
        ] {
            assert!(!has_credentials(url), "{url}");
        }
        assert_eq!(
            redacted("https://example.com/r@v1.git"),
            "https://example.com/r@v1.git"
        );
    }

    #[test]
    fn only_transports_that_run_no_command() {
        for url in [
            "https://example.com/r.git",
            "HTTPS://example.com/r.git",
            "http://example.com:8080/r.git",
            "ssh://git@example.com/r.git",
            "ssh://[::1]:22/r.git",
            "git://example.com/r.git",
            "file:///srv/r.git",
            "git@example.com:team/r.git",
            "example.com:r.git",
            "/srv/r.git",
            "./r.git",
        ] {
            assert_eq!(git_url_problem(url), None, "{url}");
        }
        for url in [
            "",
            " ",
            "ext::sh -c touch% /tmp/x",
            "EXT::sh -c id",
            " ext::sh -c id",
            "https://example.com/r.git ",
            "fd::3",
            "fd::3,4",
            "ftp://example.com/r.git",
            "foo://example.com/r.git",
            "ssh://-oProxyCommand=touch%20/tmp/x/r.git",
            "ssh://git@-oProxyCommand=x/r.git",
            "ssh://-oProxyCommand=x@host/r.git",
            "-oProxyCommand=x:r.git",
            "git@-oProxyCommand=x:r.git",
            "-u@host:r.git",
            "https://example.com/r.git\n",
        ] {
            assert!(git_url_problem(url).is_some(), "{url:?}");
        }
    }
}
