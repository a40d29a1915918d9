use super::*;

fn run() -> Uuid {
    Uuid::parse_str("1234abcd-0000-4000-8000-000000000001").unwrap()
}

#[test]
fn session_name_is_pam_and_8_hex() {
    assert_eq!(session_name(run()), "pam-1234abcd");
    assert!(parse_session_name(&session_name(run())).is_ok());
    for bad in [
        "pam-1234ABCD",
        "pam-1234abc",
        "pam-1234abcde",
        "evil name 2 ; <script>",
        "pam-",
        "",
        "xam-1234abcd",
        "pam-1234abcg",
    ] {
        assert!(parse_session_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn signal_json_omits_empty_fields_and_round_trips() {
    let mut s = Signal::new(
        run(),
        2,
        SignalKind::Progress,
        "2025-01-01T00:00:00Z".into(),
    );
    s.seq = Some(3);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "run_id": "1234abcd-0000-4000-8000-000000000001",
            "attempt": 2, "kind": "progress", "seq": 3,
            "at": "2025-01-01T00:00:00Z"
        })
    );
    let back: Signal = serde_json::from_value(json).unwrap();
    assert_eq!(back, s);
    assert!(back.validate().is_ok());
}

#[test]
fn validate_enforces_shape_rules() {
    let at = || "2025-01-01T00:00:00Z".to_string();
    let p = Signal::new(run(), 1, SignalKind::Progress, at());
    assert_eq!(p.validate().unwrap_err().problem, "progress needs seq >= 1");
    let f = Signal::new(run(), 1, SignalKind::Finished, at());
    assert_eq!(
        f.validate().unwrap_err().problem,
        "finished needs exit_code"
    );
    let mut s = Signal::new(run(), 1, SignalKind::Started, at());
    s.seq = Some(1);
    assert_eq!(
        s.validate().unwrap_err().problem,
        "only progress carries a seq"
    );
    let z = Signal::new(run(), 0, SignalKind::Started, at());
    assert_eq!(z.validate().unwrap_err().problem, "attempt must be >= 1");
    let mut failed = Signal::new(run(), 1, SignalKind::Failed, at());
    assert!(failed.validate().is_err());
    failed.reason = Some(REASON_SPAWN_FAILED.into());
    assert!(failed.validate().is_ok());
}

#[test]
fn only_rejected_keeps_an_outbox_entry() {
    assert!(SignalOutcome::Applied.settles());
    assert!(SignalOutcome::Duplicate.settles());
    assert!(SignalOutcome::Stale.settles());
    assert!(!SignalOutcome::Rejected.settles());
    assert!(SignalKind::Started.is_one_shot());
    assert!(!SignalKind::Progress.is_one_shot());
}

#[test]
fn signal_names_parse_any_case_with_or_without_sig() {
    for (text, want) in [
        ("INT", SignalName::Int),
        ("int", SignalName::Int),
        ("SIGINT", SignalName::Int),
        ("sigterm", SignalName::Term),
        ("Kill", SignalName::Kill),
        ("HUP", SignalName::Hup),
        ("QUIT", SignalName::Quit),
        ("usr1", SignalName::Usr1),
        ("SIGUSR2", SignalName::Usr2),
    ] {
        assert_eq!(text.parse::<SignalName>(), Ok(want), "{text}");
    }
    for s in SignalName::ALL {
        assert_eq!(s.as_str().parse::<SignalName>(), Ok(s));
        assert_eq!(s.to_string(), s.as_str());
    }
    assert_eq!(
        "STOP".parse::<SignalName>().unwrap_err().to_string(),
        "unknown signal \"STOP\"; expected one of INT, TERM, KILL, HUP, QUIT, USR1, USR2"
    );
    assert!("SIG".parse::<SignalName>().is_err());
    assert!("".parse::<SignalName>().is_err());
}

#[test]
fn signal_names_are_the_bare_name_on_the_wire() {
    assert_eq!(
        serde_json::to_value(SignalName::Usr1).unwrap(),
        serde_json::json!("USR1")
    );
    let s: SignalName = serde_json::from_value(serde_json::json!("SIGHUP")).unwrap();
    assert_eq!(s, SignalName::Hup);
    assert!(serde_json::from_value::<SignalName>(serde_json::json!("NOPE")).is_err());
    // OperatorSignal keeps the text: an unknown name is one bad entry,
    // not an unreadable desired set.
    let o: OperatorSignal =
        serde_json::from_value(serde_json::json!({"id": 7, "signal": "WINCH"})).unwrap();
    assert!(o.name().is_err());
    let o = OperatorSignal {
        id: 8,
        signal: SignalName::Quit.to_string(),
    };
    assert_eq!(
        serde_json::to_value(&o).unwrap(),
        serde_json::json!({"id": 8, "signal": "QUIT"})
    );
    assert_eq!(o.name(), Ok(SignalName::Quit));
}

#[test]
fn desired_run_defaults_optional_fields() {
    let r: DesiredRun = serde_json::from_value(serde_json::json!({
        "run_id": run(), "attempt": 1, "session_name": "pam-1234abcd",
        "provider": "claude", "prompt": "hi", "cwd": "/tmp"
    }))
    .unwrap();
    assert!(!r.stop);
    assert!(r.env.is_empty());
    assert_eq!(r.command, None);
    let ack: SignalAck = serde_json::from_value(serde_json::json!({
        "results": [{"index": 0, "outcome": "stale"}]
    }))
    .unwrap();
    assert_eq!(ack.results[0].outcome, SignalOutcome::Stale);
}
