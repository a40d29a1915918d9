//! `/metrics` for an admin or a `metrics` token when `[metrics]
//! require_token = true` (off by default: a scraper set up before has no
//! token), through the real pamctl and a real pamd.

use pam_tests::{fails, ok, Pamd, PamdOptions};

async fn status(pamd: &Pamd, path: &str, token: Option<&str>) -> (u16, String) {
    let mut req = pamd.http().get(format!("{}{path}", pamd.url));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn token(pamd: &Pamd, args: &[&str]) -> String {
    let mut all = vec!["token", "create"];
    all.extend_from_slice(args);
    ok(&pamd.pamctl(&all)).trim().to_string()
}

#[tokio::test]
async fn metrics_needs_an_admin_or_metrics_token_when_required() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: "[metrics]\nrequire_token = true\n".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let yaml = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n";
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(yaml)));
    let scraper = token(&pamd, &["scraper", "--role", "metrics"]);
    let viewer = token(&pamd, &["web-view", "--role", "viewer", "--project", "web"]);
    let said = pamd.pamctl(&[
        "token",
        "create",
        "web-view-2",
        "--role",
        "viewer",
        "--project",
        "web",
    ]);
    let said = String::from_utf8_lossy(&said.stderr);
    assert!(
        said.contains("viewer token web-view-2 for projects web (id "),
        "token create says the role: {said}"
    );
    let list = ok(&pamd.pamctl(&["token", "list"]));
    assert!(
        list.lines()
            .any(|l| l.contains("scraper") && l.contains("metrics")),
        "{list}"
    );

    let (s, body) = status(&pamd, "/metrics", None).await;
    assert_eq!(s, 401, "{body}");
    assert!(body.contains("\"unauthorized\""), "{body}");
    let (s, body) = status(&pamd, "/metrics", Some(&viewer)).await;
    assert_eq!(s, 403, "{body}");
    assert!(body.contains("this token may not get metrics"), "{body}");
    let (s, body) = status(
        &pamd,
        "/metrics",
        Some("pam_0000000000000000000000000000000000000000"),
    )
    .await;
    assert_eq!(s, 401, "{body}");
    for t in [&scraper, &pamd.token] {
        let (s, body) = status(&pamd, "/metrics", Some(t)).await;
        assert_eq!(s, 200, "{body}");
        assert!(body.contains("pam_database_up"), "{body}");
    }
    // The refusals are counted per token (never its value).
    let (_, text) = status(&pamd, "/metrics", Some(&scraper)).await;
    assert!(text.contains("web-view"), "{text}");
    assert!(!text.contains(&viewer) && !text.contains(&scraper));

    // A metrics token is nothing else.
    for path in [
        "/api/v1/projects",
        "/api/v1/projects/web",
        "/api/v1/hosts",
        "/api/v1/tokens",
    ] {
        let (s, body) = status(&pamd, path, Some(&scraper)).await;
        assert!(s == 403 || s == 404, "{path}: {s} {body}");
        assert!(!body.contains("\"web\""), "{path}: {body}");
    }
    let (s, body) = status(&pamd, "/api/v1/whoami", Some(&scraper)).await;
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("\"metrics\""), "{body}");
    // It names no projects.
    let err = fails(
        &pamd.pamctl(&[
            "token",
            "create",
            "bad",
            "--role",
            "metrics",
            "--project",
            "web",
        ]),
        3,
    );
    assert!(err.contains("metrics token only scrapes /metrics"), "{err}");
}

#[tokio::test]
async fn metrics_stays_open_by_default() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let (s, body) = status(&pamd, "/metrics", None).await;
    assert_eq!(s, 200, "{body}");
}
