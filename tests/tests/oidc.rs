//! Dashboard sign-in with OIDC, against a real pamd on real
//! PostgreSQL and the tests' own issuer (pam_tests::oidc): the code flow
//! with PKCE, a session that may do what its groups map to and no more,
//! CSRF on every change made with the cookie, logout and expiry (pamd's
//! clock moved through `--clock-file`), and the bad input of a broken or
//! hostile issuer, browser or page.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_tests::oidc::{Browser, Callback, Issuer, CLIENT_ID, CLIENT_SECRET, REDIRECT_URL};
use pam_tests::{ok, Pamd, PamdOptions};
use reqwest::Method;
use serde_json::{json, Value};

/// How a case bends the issuer.
type BendWith = Box<dyn Fn(&mut pam_tests::oidc::Bend)>;

struct World {
    pamd: Pamd,
    issuer: Issuer,
    clock: PathBuf,
    t0: DateTime<Utc>,
    _dir: tempfile::TempDir,
}

fn set_clock(file: &Path, t: DateTime<Utc>) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{}\n", t.to_rfc3339())).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

fn tree(project: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {project}}}\nspec: {{}}\n\
---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {project}-task, project: {project}}}\nspec: {{title: T}}\n\
---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {project}-run, project: {project}}}\nspec: {{task: {project}-task, provider: claude, prompt: hi, cwd: /tmp}}\n"
    )
}

/// pamd with `[oidc]` against the tests' issuer: team-web operates web,
/// team-docs views docs, pam-admins is admin; projects web, api, docs.
async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("now");
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    set_clock(&clock, t0);
    let issuer = Issuer::start(t0.timestamp()).await;
    let secret = dir.path().join("client-secret");
    std::fs::write(&secret, format!("{CLIENT_SECRET}\n")).unwrap();
    let config = format!(
        "[rate_limits]\nenabled = false\n\
         [oidc]\nissuer = \"{}\"\nclient_id = \"{CLIENT_ID}\"\nclient_secret_file = \"{}\"\n\
         redirect_url = \"{REDIRECT_URL}\"\nsession_ttl = \"1h\"\n\
         [oidc.groups]\n\"team-web\" = {{ role = \"operator\", projects = [\"web\"] }}\n\
         \"team-docs\" = {{ role = \"viewer\", projects = [\"docs\"] }}\n\
         \"pam-admins\" = {{ role = \"admin\" }}\n",
        issuer.url,
        secret.display()
    );
    let pamd = Pamd::start(PamdOptions {
        config_toml: config,
        args: vec!["--clock-file".into(), clock.display().to_string()],
        ..Default::default()
    })
    .await
    .unwrap();
    let yaml = format!("{}---\n{}---\n{}", tree("web"), tree("api"), tree("docs"));
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));
    World {
        pamd,
        issuer,
        clock,
        t0,
        _dir: dir,
    }
}

impl World {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.pamd.url)
    }

    /// Moves pamd's (and the issuer's) clock to t0 + `secs`, and waits for
    /// pamd to read it (its clock file is re-read every 50 ms).
    async fn at(&self, secs: i64) {
        let t = self.t0 + chrono::Duration::seconds(secs);
        set_clock(&self.clock, t);
        self.issuer.set_now(t.timestamp());
        tokio::time::sleep(Duration::from_millis(120)).await;
    }

    /// The journal as the admin reads it.
    async fn journal(&self) -> String {
        self.pamd
            .get("/api/v1/events?limit=10000")
            .await
            .unwrap()
            .to_string()
    }

    async fn run(&self, project: &str) -> Value {
        self.pamd
            .get(&format!("/api/v1/projects/{project}/runs/{project}-run"))
            .await
            .unwrap()
    }
}

/// An apply's body: one Task in web.
fn task(name: &str) -> Value {
    json!({"objects": [{"apiVersion": "pam.dev/v1", "kind": "Task",
        "metadata": {"name": name, "project": "web"}, "spec": {"title": "T"}}]})
}

fn stop(project: &str) -> String {
    format!("/api/v1/projects/{project}/runs/{project}-run/stop")
}

/// The one JSON error shape, with this status and code, and nothing
/// secret in it.
fn refused(status: u16, body: &Value, want: (u16, &str), what: &str) {
    assert_eq!(status, want.0, "{what}: {body}");
    assert_eq!(body["error"]["code"], want.1, "{what}: {body}");
    assert!(body["error"]["message"].is_string(), "{what}: {body}");
    let text = body.to_string();
    assert!(!text.contains(CLIENT_SECRET), "{what}: {text}");
    assert!(!text.contains("eyJ"), "{what} echoes a JWT: {text}");
}

/// A sign-in the issuer bends: refused with 401 (403 for `forbidden`),
/// the reason in the message, no session made.
fn sign_in_refused(c: &Callback, want: (u16, &str), reason: &str, what: &str) {
    refused(c.status, &c.body, want, what);
    let msg = c.body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(reason), "{what}: {msg:?} lacks {reason:?}");
    assert!(!c.browser.cookies.contains_key("pam_session"), "{what}");
    assert!(!c.browser.cookies.contains_key("pam_csrf"), "{what}");
    if let Some(code) = c.url.split("code=").nth(1) {
        let code = code.split('&').next().unwrap();
        assert!(!msg.contains(code), "{what} echoes the code: {msg}");
    }
}

#[tokio::test]
async fn a_team_web_session_acts_in_its_groups_projects_only_until_logout_or_expiry() {
    let w = world().await;
    w.issuer
        .bend(|b| b.groups = vec!["team-web".into(), "team-docs".into(), "other".into()]);
    let c = Browser::sign_in(&w.pamd.url).await;
    assert_eq!(c.status, 303, "{}", c.body);
    let session = c
        .set_cookies
        .iter()
        .find(|s| s.starts_with("pam_session="))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=3600"] {
        assert!(session.contains(flag), "{session}");
    }
    // Plain HTTP: not Secure (tls.rs serves HTTPS).
    assert!(!session.contains("Secure"), "{session}");
    let csrf_cookie = c
        .set_cookies
        .iter()
        .find(|s| s.starts_with("pam_csrf="))
        .unwrap();
    assert!(!csrf_cookie.contains("HttpOnly"), "{csrf_cookie}");
    let b = c.browser;
    let csrf = b.csrf();
    assert!(csrf.len() >= 32);

    // whoami: the union of team-web (operator of web) and team-docs
    // (viewer of docs).
    let (s, me) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["name"], "ada@example.com");
    assert_eq!(me["subject"], "user-1");
    assert_eq!(me["role"], "operator");
    assert_eq!(me["projects"], json!(["web", "docs"]));
    assert_eq!(me["readOnlyProjects"], json!(["docs"]));

    // Reads: web and docs, not api (as if it did not exist).
    for p in ["web", "docs"] {
        let (s, r) = b
            .send(
                Method::GET,
                &w.url(&format!("/api/v1/projects/{p}/runs/{p}-run")),
                None,
                None,
            )
            .await;
        assert_eq!(s, 200, "{p}: {r}");
    }
    let (s, r) = b
        .send(
            Method::GET,
            &w.url("/api/v1/projects/api/runs/api-run"),
            None,
            None,
        )
        .await;
    refused(s, &r, (404, "not_found"), "a get in api");
    let (s, r) = b
        .send(Method::GET, &w.url("/api/v1/runs"), None, None)
        .await;
    assert_eq!(s, 200, "{r}");
    assert!(!r.to_string().contains("api-run"), "{r}");
    // Admin-only resources are refused.
    let (s, r) = b
        .send(Method::GET, &w.url("/api/v1/tokens"), None, None)
        .await;
    refused(s, &r, (403, "forbidden"), "tokens");
    // Counted as a session's refusal, not under the user's name.
    assert_eq!(
        w.pamd
            .metric("pam_api_refused_total{token=\"session\",status=\"403\"}")
            .await,
        Some(1.0)
    );

    // can-i asks the same decision.
    let (s, r) = b
        .send(
            Method::GET,
            &w.url("/api/v1/auth/can-i?verb=signal&resource=runs&project=docs"),
            None,
            None,
        )
        .await;
    assert_eq!((s, &r["allowed"]), (200, &json!(false)), "{r}");

    // Changes: CSRF first; nothing written without it.
    let before = w.run("web").await;
    let journal = w.journal().await;
    let (s, r) = b.send(Method::POST, &w.url(&stop("web")), None, None).await;
    refused(s, &r, (403, "forbidden"), "a stop without X-PAM-CSRF");
    let (s, r) = b
        .send(
            Method::POST,
            &w.url(&stop("web")),
            Some("not-the-value"),
            None,
        )
        .await;
    refused(s, &r, (403, "forbidden"), "a stop with a wrong X-PAM-CSRF");
    assert!(!r.to_string().contains(&csrf), "{r}");
    assert_eq!(w.run("web").await, before, "nothing written");
    assert_eq!(w.journal().await, journal, "nothing journaled");
    // docs: read only; api: hidden.
    let (s, r) = b
        .send(Method::POST, &w.url(&stop("docs")), Some(&csrf), None)
        .await;
    refused(s, &r, (403, "forbidden"), "a stop in docs (viewer)");
    let (s, r) = b
        .send(Method::POST, &w.url(&stop("api")), Some(&csrf), None)
        .await;
    refused(s, &r, (404, "not_found"), "a stop in api");
    assert!(!r.to_string().contains("api-run"), "{r}");
    // web: allowed, and the journal records the OIDC subject.
    let (s, r) = b
        .send(Method::POST, &w.url(&stop("web")), Some(&csrf), None)
        .await;
    assert_eq!(s, 200, "{r}");
    let (s, r) = b
        .send(
            Method::POST,
            &w.url("/api/v1/apply"),
            Some(&csrf),
            Some(task("by-sso")),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let journal = w.pamd.get("/api/v1/events?limit=10000").await.unwrap();
    let mine: Vec<&Value> = journal["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.to_string().contains("\"subject\":\"user-1\""))
        .collect();
    assert!(!mine.is_empty(), "{journal}");
    for e in &mine {
        let actor = e
            .get("actor")
            .or_else(|| e["payload"].get("actor"))
            .unwrap_or(&Value::Null);
        assert_eq!(actor["name"], "ada@example.com", "{e}");
        assert_eq!(actor["role"], "operator", "{e}");
    }

    // A bearer token needs no CSRF value, cookie or not.
    let r = pam_tests::oidc::client()
        .post(w.url(&stop("api")))
        .bearer_auth(&w.pamd.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // The live feed with the session: open until logout ends it.
    let mut stream = pam_tests::oidc::client()
        .get(w.url("/api/v1/events/stream"))
        .header("cookie", b.cookie_header())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // A session is held as itself, not as a token the re-check (every
    // second) would find gone.
    let open = tokio::time::timeout(Duration::from_millis(2500), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(
        open.is_err(),
        "the session's stream ended before its logout"
    );

    // Logout needs the CSRF value too, then ends the session here.
    let (s, r) = b
        .send(Method::POST, &w.url("/auth/logout"), None, None)
        .await;
    refused(s, &r, (403, "forbidden"), "a logout without X-PAM-CSRF");
    let (s, _) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    assert_eq!(s, 200, "the session outlives a refused logout");
    let (s, _) = b
        .send(Method::POST, &w.url("/auth/logout"), Some(&csrf), None)
        .await;
    assert_eq!(s, 204);
    // The stream ends (not merely goes quiet): read to its end.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the session's stream outlived its logout");
    let (s, r) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    refused(s, &r, (401, "unauthorized"), "whoami after logout");

    // Expiry: session_ttl (1h) ends a session…
    let b = Browser::sign_in(&w.pamd.url).await.browser;
    w.at(3599).await;
    let (s, _) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    assert_eq!(s, 200);
    let mut stream = pam_tests::oidc::client()
        .get(w.url("/api/v1/events/stream"))
        .header("cookie", b.cookie_header())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    w.at(3601).await;
    let (s, r) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    refused(s, &r, (401, "unauthorized"), "an expired session");
    // Its stream ends too (the session's re-check, once a second).
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the session's stream outlived its expiry");
    // …and so does the ID token's exp, when sooner.
    w.issuer.bend(|b| {
        b.groups = vec!["team-web".into()];
        b.exp_in = 600;
    });
    let b = Browser::sign_in(&w.pamd.url).await.browser;
    w.at(3601 + 599).await;
    let (s, _) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    assert_eq!(s, 200);
    w.at(3601 + 601).await;
    let (s, r) = b
        .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
        .await;
    refused(
        s,
        &r,
        (401, "unauthorized"),
        "a session past its ID token's exp",
    );
    let (s, r) = b
        .send(Method::POST, &w.url(&stop("web")), Some(&b.csrf()), None)
        .await;
    refused(
        s,
        &r,
        (401, "unauthorized"),
        "a change with an expired session",
    );
}

#[tokio::test]
async fn sign_in_bad_input_is_refused_with_nothing_made() {
    let w = world().await;
    let url = w.pamd.url.clone();
    let journal = w.journal().await;

    // A broken issuer's discovery (checked first: pamd keeps a good one).
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage discovery", b"<html>not json".to_vec(), "not OpenID configuration"),
        ("empty discovery", b"{}".to_vec(), "not OpenID configuration"),
        ("10 MB discovery", vec![b' '; 10 << 20], "larger than"),
        (
            "another issuer's discovery",
            json!({"issuer": "https://evil.example", "authorization_endpoint": "https://evil.example/a",
                   "token_endpoint": "https://evil.example/t", "jwks_uri": "https://evil.example/k"})
            .to_string()
            .into_bytes(),
            "not the configured",
        ),
        (
            "a discovery with a non-URL endpoint",
            json!({"issuer": w.issuer.url, "authorization_endpoint": "not a url",
                   "token_endpoint": "x", "jwks_uri": "y"})
            .to_string()
            .into_bytes(),
            "is not a URL",
        ),
    ];
    for (what, body, reason) in cases {
        w.issuer.bend(|b| b.discovery = Some(body));
        let c = Browser::sign_in(&url).await;
        sign_in_refused(&c, (401, "unauthorized"), reason, what);
    }
    // A broken JWKS.
    for (what, body, reason) in [
        ("garbage JWKS", b"nope".to_vec(), "not a key set"),
        ("10 MB JWKS", vec![b' '; 10 << 20], "larger than"),
        (
            "a JWKS without keys",
            br#"{"kids":[]}"#.to_vec(),
            "not a key set",
        ),
    ] {
        w.issuer.bend(|b| {
            b.groups = vec!["team-web".into()];
            b.jwks = Some(body);
        });
        let c = Browser::sign_in(&url).await;
        sign_in_refused(&c, (401, "unauthorized"), reason, what);
    }

    // Bad ID tokens.
    let none_token = {
        use base64::Engine;
        let e = |v: Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        let now = w.t0.timestamp();
        format!(
            "{}.{}.",
            e(json!({"alg": "none", "typ": "JWT"})),
            e(
                json!({"iss": w.issuer.url, "aud": CLIENT_ID, "sub": "user-1", "exp": now + 600, "groups": ["pam-admins"]})
            )
        )
    };
    let hs256 = {
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        h.kid = Some("k1".into());
        let claims = json!({"iss": w.issuer.url, "aud": CLIENT_ID, "sub": "user-1", "exp": w.t0.timestamp() + 600});
        jsonwebtoken::encode(
            &h,
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(CLIENT_SECRET.as_bytes()),
        )
        .unwrap()
    };
    let token_cases: Vec<(&str, BendWith, &str)> = vec![
        (
            "signed with another key",
            Box::new(|b| b.other_key = true),
            "not valid",
        ),
        (
            "wrong audience",
            Box::new(|b| b.claims = json!({"aud": "someone-else"})),
            "not valid",
        ),
        (
            "no audience",
            Box::new(|b| b.claims = json!({"aud": null})),
            "not valid",
        ),
        (
            "wrong issuer",
            Box::new(|b| b.claims = json!({"iss": "https://evil.example"})),
            "not valid",
        ),
        ("expired", Box::new(|b| b.exp_in = -120), "expired"),
        (
            "no exp",
            Box::new(|b| b.claims = json!({"exp": null})),
            "not valid",
        ),
        (
            "wrong nonce",
            Box::new(|b| b.claims = json!({"nonce": "another-sign-in"})),
            "nonce",
        ),
        (
            "no nonce",
            Box::new(|b| b.claims = json!({"nonce": null})),
            "nonce",
        ),
        (
            "no subject",
            Box::new(|b| b.claims = json!({"sub": null})),
            "not valid",
        ),
        (
            "unknown kid",
            Box::new(|b| b.kid = Some("k-unknown".into())),
            "does not publish",
        ),
        (
            "alg none",
            Box::new(move |b| b.raw_id_token = Some(none_token.clone())),
            "malformed",
        ),
        (
            "HS256 keyed with the client secret",
            Box::new(move |b| b.raw_id_token = Some(hs256.clone())),
            "HS256",
        ),
        (
            "not a JWT",
            Box::new(|b| b.raw_id_token = Some("not.a.jwt".into())),
            "malformed",
        ),
        (
            "an empty id_token",
            Box::new(|b| b.raw_id_token = Some(String::new())),
            "malformed",
        ),
        (
            "a token answer without id_token",
            Box::new(|b| b.token_answer = Some((200, json!({"access_token": "x"})))),
            "no id_token",
        ),
        (
            "a token endpoint error",
            Box::new(|b| b.token_answer = Some((500, json!({"error": "server_error"})))),
            "500",
        ),
    ];
    for (what, bend, reason) in &token_cases {
        w.issuer.bend(|b| {
            b.groups = vec!["pam-admins".into()];
            bend(b);
        });
        let c = Browser::sign_in(&url).await;
        sign_in_refused(&c, (401, "unauthorized"), reason, what);
    }

    // Groups that map to nothing.
    for (what, groups) in [
        ("no mapped group", vec!["strangers".to_string()]),
        ("no groups", vec![]),
    ] {
        w.issuer.bend(|b| b.groups = groups);
        let c = Browser::sign_in(&url).await;
        sign_in_refused(&c, (403, "forbidden"), "no group", what);
    }
    w.issuer.bend(|b| b.claims = json!({"groups": null}));
    let c = Browser::sign_in(&url).await;
    sign_in_refused(&c, (403, "forbidden"), "no group", "no groups claim");
    // The refusals are counted under a bounded label, never the user's
    // name or e-mail (personal data, without bound).
    let metrics = w.pamd.metrics_text().await.unwrap();
    assert!(
        metrics.contains("pam_api_refused_total{token=\"oidc\",status=\"403\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("ada"), "{metrics}");

    // The callback itself.
    w.issuer.bend(|b| b.groups = vec!["team-web".into()]);
    let mut b = Browser::default();
    let back = b.start(&url).await.unwrap();
    let wrong_state = back.replace("state=", "state=x");
    let c = b.callback(&wrong_state).await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "unknown, used or expired state",
        "a wrong state",
    );
    let no_state = back.split("&state=").next().unwrap().to_string();
    let c = b.callback(&no_state).await;
    sign_in_refused(&c, (401, "unauthorized"), "no state", "no state");
    let c = b
        .callback(&format!("{url}/auth/callback?error=access_denied&state=x"))
        .await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "access_denied",
        "the issuer's error",
    );
    // The good callback works once…
    let good = b.clone().callback(&back).await;
    assert_eq!(good.status, 303, "{}", good.body);
    // …and not twice (the state is used).
    let c = b.clone().callback(&back).await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "unknown, used or expired state",
        "a replayed callback",
    );
    // A used code with a fresh state: the issuer refuses it.
    let mut b2 = Browser::default();
    let fresh = b2.start(&url).await.unwrap();
    let code = back
        .split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    let fresh_code = fresh
        .split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    let replayed = fresh.replace(fresh_code, code);
    let c = b2.callback(&replayed).await;
    sign_in_refused(&c, (401, "unauthorized"), "400", "a replayed code");
    // No code.
    let mut b3 = Browser::default();
    let back3 = b3.start(&url).await.unwrap();
    let state3 = back3.split("state=").nth(1).unwrap();
    let c = b3
        .callback(&format!("{url}/auth/callback?state={state3}"))
        .await;
    sign_in_refused(&c, (401, "unauthorized"), "no code", "no code");
    // Another browser's callback (the state cookie is not its own).
    let mut victim = Browser::default();
    let theirs = victim.start(&url).await.unwrap();
    let mut attacker = Browser::default();
    let c = attacker.callback(&theirs).await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "not this browser's",
        "no state cookie",
    );
    let mut mixed = Browser::default();
    let _ = mixed.start(&url).await.unwrap();
    let theirs = victim.start(&url).await.unwrap();
    let c = mixed.callback(&theirs).await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "not this browser's",
        "another state cookie",
    );

    // Forged and tampered cookies; a session's CSRF value is its own.
    let alice = Browser::sign_in(&url).await.browser;
    let bob = Browser::sign_in(&url).await.browser;
    let mut forged = Browser::default();
    forged
        .cookies
        .insert("pam_session".into(), "forged-value".into());
    let mut tampered = alice.clone();
    let v = tampered.cookies["pam_session"].clone();
    let flipped = if v.ends_with('A') { "B" } else { "A" };
    tampered.cookies.insert(
        "pam_session".into(),
        format!("{}{flipped}", &v[..v.len() - 1]),
    );
    let mut empty = Browser::default();
    empty.cookies.insert("pam_session".into(), String::new());
    for (what, who) in [
        ("a forged cookie", &forged),
        ("a tampered cookie", &tampered),
        ("an empty cookie", &empty),
    ] {
        let (s, r) = who
            .send(Method::GET, &w.url("/api/v1/whoami"), None, None)
            .await;
        refused(s, &r, (401, "unauthorized"), what);
        let (s, r) = who
            .send(
                Method::POST,
                &w.url(&stop("web")),
                Some(&alice.csrf()),
                None,
            )
            .await;
        refused(s, &r, (401, "unauthorized"), what);
    }
    let (s, r) = alice
        .send(Method::POST, &w.url(&stop("web")), Some(&bob.csrf()), None)
        .await;
    refused(s, &r, (403, "forbidden"), "another session's CSRF value");
    let (s, r) = alice
        .send(
            Method::DELETE,
            &w.url("/api/v1/projects/web/runs/web-run"),
            None,
            None,
        )
        .await;
    refused(s, &r, (403, "forbidden"), "a delete without X-PAM-CSRF");
    let (s, r) = alice
        .send(
            Method::POST,
            &w.url("/api/v1/apply"),
            Some(""),
            Some(task("by-csrf")),
        )
        .await;
    refused(
        s,
        &r,
        (403, "forbidden"),
        "an apply with an empty X-PAM-CSRF",
    );
    // A session is not a worker.
    let (s, r) = alice
        .send(Method::GET, &w.url("/api/v1/workers/desired"), None, None)
        .await;
    refused(s, &r, (403, "forbidden"), "a session on a worker endpoint");

    // Nothing of any of it reached the journal.
    assert_eq!(w.journal().await, journal);
    assert!(w.issuer.tokens_issued() > 0);
    // The log names why, never the client secret.
    let log = w.pamd.log();
    assert!(log.contains("OIDC sign-in refused"), "{log}");
    assert!(!log.contains(CLIENT_SECRET));

    // A sign-in that took longer than 10 minutes (last: moving the clock
    // lets the loops time pending runs out, which journals).
    let mut slow = Browser::default();
    let late = slow.start(&url).await.unwrap();
    w.at(601).await;
    let c = slow.callback(&late).await;
    sign_in_refused(
        &c,
        (401, "unauthorized"),
        "expired state",
        "an expired state",
    );
}
