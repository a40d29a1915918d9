//! `[oidc]` in pamd.toml: dashboard sign-in with an OIDC
//! issuer (api/oidc; docs/operations.md, "Signing in with OIDC"):
//! ```toml
//! [oidc]
//! issuer = "https://keycloak.example.com/realms/pam"
//! client_id = "pam"
//! client_secret_file = "/etc/pam/oidc-client-secret"  # unset: a public client (PKCE only)
//! redirect_url = "https://pam.example.com/auth/callback"
//! groups_claim = "groups"     # default
//! session_ttl = "8h"          # default; s, m, h or d; never past the ID token's exp
//! [oidc.groups]
//! "team-web" = { role = "operator", projects = ["web"] }
//! "pam-admins" = { role = "admin" }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::api::access::oidc::{ClientSecret, GroupGrant, Settings};
use crate::rules::access::Role;

/// The `[oidc]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OidcFile {
    issuer: String,
    client_id: String,
    client_secret_file: Option<PathBuf>,
    redirect_url: String,
    #[serde(default)]
    groups_claim: Option<String>,
    #[serde(default)]
    session_ttl: Option<String>,
    #[serde(default)]
    groups: BTreeMap<String, GroupFile>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    role: String,
    #[serde(default)]
    projects: Vec<String>,
}

/// `30s`, `15m`, `8h`, `1d`.
fn duration(s: &str) -> Option<chrono::Duration> {
    let (n, unit) = s
        .trim()
        .split_at(s.trim().find(|c: char| !c.is_ascii_digit())?);
    let n: i64 = n.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86_400)?,
        _ => return None,
    };
    (secs > 0).then(|| chrono::Duration::seconds(secs))
}

impl OidcFile {
    /// The settings, the client secret read (`expand`: the config's `~`
    /// expansion); `secure`: pamd serves TLS.
    pub(super) fn settings(
        self,
        secure: bool,
        expand: impl Fn(&Path) -> anyhow::Result<PathBuf>,
    ) -> anyhow::Result<Settings> {
        for (key, url) in [
            ("issuer", &self.issuer),
            ("redirect_url", &self.redirect_url),
        ] {
            let u = reqwest::Url::parse(url)
                .with_context(|| format!("[oidc] {key}: {url:?} is not a URL"))?;
            if !matches!(u.scheme(), "https" | "http") {
                bail!("[oidc] {key}: {url:?} must be an http(s) URL");
            }
        }
        if self.client_id.trim().is_empty() {
            bail!("[oidc] client_id must not be empty");
        }
        let client_secret = match self.client_secret_file {
            Some(f) => {
                let f = expand(&f)?;
                let s = std::fs::read_to_string(&f)
                    .with_context(|| format!("[oidc] client_secret_file {}", f.display()))?;
                Some(ClientSecret(s.trim().to_string()))
            }
            None => None,
        };
        let ttl = self.session_ttl.as_deref().unwrap_or("8h");
        let session_ttl = duration(ttl).with_context(|| {
            format!("[oidc] session_ttl: {ttl:?}, expected a number and s, m, h or d (8h)")
        })?;
        let mut groups = BTreeMap::new();
        for (name, g) in self.groups {
            let role = match Role::parse(&g.role) {
                Some(r @ (Role::Admin | Role::Operator | Role::Viewer)) => r,
                _ => bail!(
                    "[oidc.groups] {name:?}: role {:?}, expected admin, operator or viewer",
                    g.role
                ),
            };
            if role != Role::Admin && g.projects.is_empty() {
                bail!("[oidc.groups] {name:?}: a {} needs projects", g.role);
            }
            groups.insert(
                name,
                GroupGrant {
                    role,
                    projects: g.projects,
                },
            );
        }
        Ok(Settings {
            issuer: self.issuer,
            client_id: self.client_id,
            client_secret,
            groups_claim: self.groups_claim.unwrap_or_else(|| "groups".into()),
            redirect_url: self.redirect_url,
            session_ttl,
            groups,
            secure_cookies: secure,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config};

    const BASE: &str = "[oidc]\nissuer = \"https://id.example/realms/pam\"\nclient_id = \"pam\"\nredirect_url = \"https://pam.example/auth/callback\"\n";

    fn resolve(extra: &str) -> anyhow::Result<Config> {
        let text = format!("{BASE}{extra}");
        Config::resolve(
            Some((Path::new("pamd.toml"), &text)),
            &Cli::default(),
            Some(Path::new("/home/op")),
        )
    }

    #[test]
    fn oidc_defaults_and_groups() {
        assert_eq!(
            Config::resolve(None, &Cli::default(), Some(Path::new("/h")))
                .unwrap()
                .oidc,
            None
        );
        let c = resolve("[oidc.groups]\n\"team-web\" = { role = \"operator\", projects = [\"web\"] }\n\"ops\" = { role = \"admin\" }\n")
            .unwrap();
        let o = c.oidc.unwrap();
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(o.session_ttl, chrono::Duration::hours(8));
        assert_eq!(o.client_secret, None);
        assert!(!o.secure_cookies);
        assert_eq!(o.groups["team-web"].role, Role::Operator);
        assert_eq!(o.groups["ops"].projects, Vec::<String>::new());
        assert!(!c.metrics.require_token);
        // Served over TLS: the cookies are Secure.
        let c = resolve("[tls]\nself_signed = true\n").unwrap();
        assert!(c.oidc.unwrap().secure_cookies);
    }

    #[test]
    fn oidc_refusals_name_the_key() {
        for (extra, want) in [
            ("scope = \"x\"\n", "unknown field `scope`"),
            ("session_ttl = \"8 weeks\"\n", "[oidc] session_ttl"),
            (
                "client_secret_file = \"/nonexistent/secret\"\n",
                "[oidc] client_secret_file",
            ),
            (
                "[oidc.groups]\n\"g\" = { role = \"worker\" }\n",
                "expected admin, operator or viewer",
            ),
            (
                "[oidc.groups]\n\"g\" = { role = \"metrics\" }\n",
                "expected admin, operator or viewer",
            ),
            (
                "[oidc.groups]\n\"g\" = { role = \"viewer\" }\n",
                "a viewer needs projects",
            ),
            (
                "[oidc.groups]\n\"g\" = { role = \"viewer\", projects = [\"web\"], extra = 1 }\n",
                "unknown field `extra`",
            ),
        ] {
            let e = format!("{:#}", resolve(extra).unwrap_err());
            assert!(e.contains(want), "{extra}: {e}");
        }
        // Whole [oidc] tables with a bad or missing key.
        for (toml, want) in [
            (
                "[oidc]\nissuer = \"not a url\"\nclient_id = \"pam\"\nredirect_url = \"https://pam.example/cb\"\n",
                "[oidc] issuer",
            ),
            (
                "[oidc]\nissuer = \"https://id.example\"\nredirect_url = \"https://pam.example/cb\"\n",
                "client_id",
            ),
        ] {
            let e = format!(
                "{:#}",
                Config::resolve(
                    Some((Path::new("p.toml"), toml)),
                    &Cli::default(),
                    Some(Path::new("/h"))
                )
                .unwrap_err()
            );
            assert!(e.contains(want), "{toml}: {e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("8h"), Some(chrono::Duration::hours(8)));
        assert_eq!(duration("90s"), Some(chrono::Duration::seconds(90)));
        for bad in ["", "h", "8", "0h", "8w", "-1h", "1.5h"] {
            assert_eq!(duration(bad), None, "{bad}");
        }
    }
}
