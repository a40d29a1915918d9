//! tmux lifecycle on a private socket, with a real tmux server.

mod common;

use std::collections::BTreeMap;

use common::PrivateTmux;
use nix::sys::signal::Signal;
use pam_worker::testdir::TestDir;
use pam_worker::tmux::{Session, SessionSpec, SessionTag, Tmux, TmuxError};
use uuid::Uuid;

fn spec(name: &str, cwd: &std::path::Path, argv: &[&str]) -> SessionSpec {
    SessionSpec {
        name: name.into(),
        cwd: cwd.into(),
        env: BTreeMap::from([("PAM_TEST_VAR".to_string(), "from -e".to_string())]),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        tag: None,
    }
}

#[tokio::test]
async fn version_is_supported() {
    let v = Tmux::check_version()
        .await
        .expect("tmux >= 3.2 is installed");
    assert!(v.starts_with("tmux"), "{v}");
}

#[tokio::test]
async fn session_lifecycle_on_a_private_socket() {
    let t = PrivateTmux::new();
    let dir = TestDir::new("tmux");
    assert_eq!(
        t.tmux.list_sessions().await.unwrap(),
        Vec::<String>::new(),
        "no server yet = no sessions"
    );
    assert!(!t.tmux.has_session("pam-00000001").await.unwrap());

    // A shell that reads lines and echoes them with the env var and cwd.
    let script = r#"echo "env=$PAM_TEST_VAR cwd=$(pwd)"; while read l; do echo "got:$l"; done"#;
    t.tmux
        .new_session(&spec("pam-00000001", dir.path(), &["sh", "-c", script]))
        .await
        .unwrap();
    t.tmux
        .new_session(&spec("other-session", dir.path(), &["sleep", "30"]))
        .await
        .unwrap();
    assert!(t.tmux.has_session("pam-00000001").await.unwrap());
    assert!(
        !t.tmux.has_session("pam-0000000").await.unwrap(),
        "prefixes must not match"
    );
    assert_eq!(
        t.tmux.list_sessions().await.unwrap(),
        vec!["pam-00000001".to_string()]
    );

    let expected = format!("env=from -e cwd={}", dir.path().display());
    let mut last = String::new();
    for _ in 0..250 {
        last = t.tmux.capture_pane("pam-00000001", 10).await.unwrap();
        if last.contains(&expected) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(last.contains(&expected), "pane: {last:?}");

    t.tmux
        .send_keys("pam-00000001", "hello 'quoted' $HOME;")
        .await
        .unwrap();
    for _ in 0..250 {
        last = t.tmux.capture_pane("pam-00000001", 10).await.unwrap();
        if last.contains("got:hello 'quoted' $HOME;") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(last.contains("got:hello 'quoted' $HOME;"), "pane: {last:?}");
    let tail = t.tmux.capture_pane("pam-00000001", 1).await.unwrap();
    assert_eq!(tail.lines().count(), 1, "{tail:?}");

    let pid = t.tmux.pane_pid("pam-00000001").await.unwrap();
    assert!(pid > 1);
    assert!(t.tmux.kill_session("pam-00000001").await.unwrap());
    assert!(
        !t.tmux.kill_session("pam-00000001").await.unwrap(),
        "second kill: already gone"
    );
    assert!(!t.tmux.has_session("pam-00000001").await.unwrap());
    assert!(matches!(
        t.tmux.capture_pane("pam-00000001", 5).await,
        Err(TmuxError::NoSession(_))
    ));
}

#[tokio::test]
async fn single_argument_commands_are_not_shell_code() {
    let t = PrivateTmux::new();
    let dir = TestDir::new("tmux");
    let marker = dir.path().join("marker");
    // If tmux ran this through `sh -c` unquoted, the touch would happen.
    let argv = format!("true; touch {}", marker.display());
    // The "program" does not exist: the session dies at once (or tmux
    // reports it), and nothing ran either way.
    let _ = t
        .tmux
        .new_session(&spec("pam-00000002", dir.path(), &[&argv]))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !marker.exists(),
        "a single argv element was interpreted by a shell"
    );
}

#[tokio::test]
async fn send_signal_reaches_the_pane_process() {
    let t = PrivateTmux::new();
    let dir = TestDir::new("tmux");
    t.tmux
        .new_session(&spec("pam-00000003", dir.path(), &["sleep", "60"]))
        .await
        .unwrap();
    t.tmux
        .send_signal("pam-00000003", Signal::SIGTERM)
        .await
        .unwrap();
    let tmux = t.tmux.clone();
    let mut gone = false;
    for _ in 0..250 {
        if !tmux.has_session("pam-00000003").await.unwrap() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(gone, "session should end when its process dies");
}

#[tokio::test]
async fn sessions_carry_their_tag_and_a_taken_name_keeps_its_own() {
    let t = PrivateTmux::new();
    let dir = TestDir::new("tmux");
    let first = SessionTag {
        run_id: Uuid::new_v4(),
        attempt: 1,
    };
    let mut s = spec("pam-00000004", dir.path(), &["sleep", "60"]);
    s.tag = Some(first);
    t.tmux.new_session(&s).await.unwrap();
    t.tmux
        .new_session(&spec("pam-00000005", dir.path(), &["sleep", "60"]))
        .await
        .unwrap();
    assert_eq!(
        t.tmux.sessions().await.unwrap(),
        [
            Session {
                name: "pam-00000004".into(),
                tag: Some(first)
            },
            Session {
                name: "pam-00000005".into(),
                tag: None
            }
        ]
    );
    // The name is taken: tmux says so, and the failed command's tags do
    // not land on the existing session.
    s.tag = Some(SessionTag {
        run_id: Uuid::new_v4(),
        attempt: 2,
    });
    assert!(matches!(
        t.tmux.new_session(&s).await,
        Err(TmuxError::DuplicateSession(n)) if n == "pam-00000004"
    ));
    let held = t.tmux.session("pam-00000004").await.unwrap().unwrap();
    assert_eq!(held.tag, Some(first));
    assert_eq!(t.tmux.session("pam-00000009").await.unwrap(), None);
}
