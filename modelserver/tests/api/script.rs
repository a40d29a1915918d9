use std::time::Duration;

use pam_model_server::{Action, Hold, Script, Turn, Usage};
use serde_json::json;

#[test]
fn script_round_trips_through_json() {
    let script = Script::new([
        Turn::write_file("a.txt", "x\n")
            .with_usage(1, 2, 3)
            .with_preamble("p"),
        Turn::run_command("ls"),
        Turn::text("done").with_usage(4, 5, 6),
        Turn::error(500).times(3),
        Turn::error(429).with_body(json!({"error": "slow"})),
        Turn::text("wait").held().paced(Duration::from_millis(250)),
        Turn::run_command("ls").held_after_headers(),
    ])
    .with_side_reply("side", Usage::new(7, 8, 9));
    let text = serde_json::to_string(&script).unwrap();
    assert_eq!(serde_json::from_str::<Script>(&text).unwrap(), script);
}

#[test]
fn documented_json_form_parses() {
    let script: Script = serde_json::from_value(json!({
        "turns": [
            {"write_file": {"path": "hello.txt", "content": "hi\n"},
             "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 40},
             "preamble": "Writing."},
            {"run_command": {"command": "cargo test"}},
            {"error": {"status": 500, "times": 3}},
            {"text": {"text": "Finished."}, "usage": {"output_tokens": 8}},
        ],
    }))
    .unwrap();
    assert_eq!(script.turns.len(), 4);
    assert_eq!(script.turns[0].usage, Usage::new(1200, 0, 40));
    assert_eq!(script.turns[0].preamble.as_deref(), Some("Writing."));
    assert_eq!(
        script.turns[2].action,
        Action::Error {
            status: 500,
            body: None,
            times: 3
        }
    );
    assert_eq!(script.turns[3].usage, Usage::new(0, 0, 8));
    assert_eq!(script.side_reply.text, "Scripted side reply");
}

#[test]
fn times_and_body_only_touch_error_turns() {
    let turn = Turn::text("t").times(4).with_body(json!(1));
    assert_eq!(turn.action, Action::Text { text: "t".into() });
    assert_eq!(
        Turn::error(500).times(0).action,
        Action::Error {
            status: 500,
            body: None,
            times: 1
        }
    );
}

#[test]
fn hold_and_pace_in_json() {
    let script: Script = serde_json::from_value(json!({
        "turns": [
            {"text": {"text": "a"}, "hold": "before_headers"},
            {"text": {"text": "b"}, "hold": "after_headers", "pace_ms": 50},
            {"text": {"text": "c"}},
        ],
    }))
    .unwrap();
    assert_eq!(script.turns[0], Turn::text("a").held());
    assert_eq!(script.turns[1].hold, Some(Hold::AfterHeaders));
    assert_eq!(script.turns[1].pace(), Some(Duration::from_millis(50)));
    assert_eq!(script.turns[2].hold, None);
    assert_eq!(script.turns[2].pace(), None);
    let plain = serde_json::to_value(&script.turns[2]).unwrap();
    assert_eq!(
        plain,
        json!({"text": {"text": "c"}, "usage": {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}})
    );
}
