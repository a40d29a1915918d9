//! Database setup: the embedded migrations and connection URLs.

use sqlx::migrate::Migrator;

/// Every file in `migrations/`, embedded at compile time. An applied
/// migration is never edited; schema changes go in a new file.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// The schema version this build migrates to (the newest migration).
pub fn schema_version() -> Option<i64> {
    MIGRATOR.iter().map(|m| m.version).max()
}

/// libpq accepts `postgresql://user@/db?host=/socket/dir` (a user and an
/// empty host); sqlx refuses it ("empty host"). This moves the user (and
/// password) into the query, a form both read. Other URLs pass unchanged.
pub fn sqlx_compatible_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let Some(userinfo) = authority.strip_suffix('@') else {
        return url.to_string();
    };
    if userinfo.is_empty() {
        return url.to_string();
    }
    let mut params = match userinfo.split_once(':') {
        Some((user, password)) => format!("user={user}&password={password}"),
        None => format!("user={userinfo}"),
    };
    let tail = if tail.is_empty() { "/" } else { tail };
    if tail.contains('?') {
        params.insert(0, '&');
    } else {
        params.insert(0, '?');
    }
    format!("{scheme}://{tail}{params}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_socket_urls_become_sqlx_urls() {
        assert_eq!(
            sqlx_compatible_url("postgresql://pam@/postgres?host=/tmp/devpg"),
            "postgresql:///postgres?host=/tmp/devpg&user=pam"
        );
        assert_eq!(
            sqlx_compatible_url("postgres://u:pw@/db"),
            "postgres:///db?user=u&password=pw"
        );
        for unchanged in [
            "postgresql://u@db.example:5432/pam",
            "postgresql:///pam?host=/run&user=pam",
            "postgresql://localhost/pam",
        ] {
            assert_eq!(sqlx_compatible_url(unchanged), unchanged);
        }
    }
}
