use super::*;
use proptest::prelude::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (LabelKey::parse(k).unwrap(), LabelValue::parse(v).unwrap()))
        .collect()
}

#[test]
fn names_follow_dns_label_rules() {
    for ok in ["a", "web", "build-api", "0", "a1-b2", &"x".repeat(63)] {
        assert_eq!(Name::parse(ok).unwrap().as_str(), ok);
    }
    for bad in ["", "-a", "a-", "Web", "a_b", "a.b", "ä", &"x".repeat(64)] {
        assert!(Name::parse(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(
        Name::parse("Build_API").unwrap_err().to_string(),
        "invalid name \"Build_API\", expected a DNS label: 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"
    );
}

#[test]
fn label_keys_and_values_follow_kubernetes_rules() {
    for ok in ["app", "pam.dev/role", "a.b-c/X_y.z", "GPU"] {
        LabelKey::parse(ok).unwrap();
    }
    for bad in ["", "/a", "a/", "Pam.dev/x", "a/b/c", "-a", "a b"] {
        assert!(LabelKey::parse(bad).is_err(), "{bad:?} accepted");
    }
    for ok in ["", "v1", "a.b_c-d"] {
        LabelValue::parse(ok).unwrap();
    }
    for bad in ["-a", "a b", "x/y", &"v".repeat(64)] {
        assert!(LabelValue::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn selector_parses_kubectl_syntax() {
    let s = LabelSelector::parse("env=prod, tier != db,zone in (a, b),gpu,!spot,os notin (win)")
        .unwrap();
    assert_eq!(
        s.to_string(),
        "env=prod,tier!=db,zone in (a,b),gpu,!spot,os notin (win)"
    );
    assert_eq!(LabelSelector::parse("a==b").unwrap().to_string(), "a=b");
    assert!(LabelSelector::parse("").unwrap().is_empty());
    assert!(LabelSelector::parse("  ").unwrap().matches(&labels(&[])));
}

#[test]
fn selector_matches_like_kubernetes() {
    let l = labels(&[("env", "prod"), ("zone", "a"), ("gpu", "")]);
    let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&l);
    assert!(m("env=prod"));
    assert!(!m("env=dev"));
    assert!(m("env!=dev"));
    assert!(m("missing!=x"), "!= matches a missing key");
    assert!(m("zone in (a,b)"));
    assert!(!m("zone in (b)"));
    assert!(m("zone notin (b)"));
    assert!(m("missing notin (b)"), "notin matches a missing key");
    assert!(!m("missing in (b)"));
    assert!(m("gpu"));
    assert!(!m("!gpu"));
    assert!(m("!spot"));
    assert!(!m("env=prod,!gpu"));
}

#[test]
fn selector_errors_say_where_and_what() {
    assert_eq!(
        LabelSelector::parse("env=prod,,x").unwrap_err().to_string(),
        "invalid label selector \"env=prod,,x\" at character 10: expected a label key (invalid label key \"\", expected an optional DNS-subdomain prefix and '/', then 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit)"
    );
    assert_eq!(
        LabelSelector::parse("zone in a,b").unwrap_err().to_string(),
        "invalid label selector \"zone in a,b\" at character 9: expected '(' opening a set of values"
    );
    assert_eq!(
        LabelSelector::parse("zone in ()").unwrap_err().to_string(),
        "invalid label selector \"zone in ()\" at character 10: expected a value in the set"
    );
    assert!(LabelSelector::parse("zone inn (a)").is_err());
    assert!(LabelSelector::parse("a=b c").is_err());
}

fn arb_name() -> impl Strategy<Value = String> {
    "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
}
fn arb_key() -> impl Strategy<Value = String> + Clone {
    (
        proptest::option::of("[a-z0-9]{1,5}(\\.[a-z0-9]{1,5}){0,2}"),
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?",
    )
        .prop_map(|(p, n)| match p {
            Some(p) => format!("{p}/{n}"),
            None => n,
        })
}
fn arb_value() -> impl Strategy<Value = String> + Clone {
    "([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?"
}
fn arb_requirement() -> impl Strategy<Value = Requirement> {
    let key = arb_key().prop_map(|k| LabelKey::parse(&k).unwrap());
    let value = arb_value().prop_map(|v| LabelValue::parse(&v).unwrap());
    let set = proptest::collection::btree_set(
        "[A-Za-z0-9]{1,6}".prop_map(|v| LabelValue::parse(&v).unwrap()),
        1..4,
    );
    prop_oneof![
        (key.clone(), value.clone()).prop_map(|(k, v)| Requirement::Equals(k, v)),
        (key.clone(), value).prop_map(|(k, v)| Requirement::NotEquals(k, v)),
        (key.clone(), set.clone()).prop_map(|(k, s)| Requirement::In(k, s)),
        (key.clone(), set).prop_map(|(k, s)| Requirement::NotIn(k, s)),
        key.clone().prop_map(Requirement::Exists),
        key.prop_map(Requirement::DoesNotExist),
    ]
}

proptest! {
    #[test]
    fn name_display_parse_round_trip(s in arb_name()) {
        let name = Name::parse(&s).unwrap();
        prop_assert_eq!(name.to_string(), s.clone());
        prop_assert_eq!(Name::parse(&name.to_string()).unwrap(), name);
    }

    #[test]
    fn name_parse_accepts_exactly_the_pattern(s in "[-a-zA-Z0-9_.]{0,70}") {
        let b = s.as_bytes();
        let expected = !b.is_empty() && b.len() <= 63
            && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-' && b[b.len() - 1] != b'-';
        prop_assert_eq!(Name::parse(&s).is_ok(), expected);
    }

    #[test]
    fn selector_display_parse_round_trip(reqs in proptest::collection::vec(arb_requirement(), 0..5)) {
        let sel = LabelSelector { requirements: reqs };
        let text = sel.to_string();
        let parsed = LabelSelector::parse(&text).unwrap();
        prop_assert_eq!(&parsed, &sel);
        prop_assert_eq!(parsed.to_string(), text);
    }

    #[test]
    fn selector_parse_never_panics(s in "[ -~]{0,40}") {
        let _ = LabelSelector::parse(&s);
    }
}

#[test]
fn worker_reported_keys_live_in_their_own_namespace() {
    let k = LabelKey::worker_reported("secure").unwrap();
    assert_eq!(k.as_str(), "worker.pam.dev/secure");
    assert!(k.is_worker_reported());
    // Already namespaced: kept as is (a worker may spell it out).
    assert_eq!(
        LabelKey::worker_reported("worker.pam.dev/gpu")
            .unwrap()
            .as_str(),
        "worker.pam.dev/gpu"
    );
    // Another prefix, or no valid key at all: refused.
    for bad in ["pam.dev/secure", "example.com/gpu", "Bad Key!", ""] {
        assert!(LabelKey::worker_reported(bad).is_err(), "{bad:?} accepted");
    }
    assert!(!LabelKey::parse("secure").unwrap().is_worker_reported());
    assert!(!LabelKey::parse("pam.dev/secure")
        .unwrap()
        .is_worker_reported());
}
