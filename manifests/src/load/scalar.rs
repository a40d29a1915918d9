//! Scalars: YAML 1.2 core-schema resolution of a scalar's text to a JSON
//! value, the one rule both reads use.

use std::borrow::Cow;

use serde_json::Value;

/// Whether a plain scalar's text is null.
pub(super) fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// The value of a scalar: a plain scalar without a `!!str` tag resolves
/// like YAML 1.2's core schema; any other is a string. The parser's text
/// becomes the string as it is, without a copy.
pub(super) fn scalar_value(text: Cow<'_, str>, plain: bool, str_tag: bool) -> Value {
    let resolved = if plain && !str_tag {
        resolve_plain(&text)
    } else {
        None
    };
    resolved.unwrap_or_else(|| {
        // The parser's scalar buffers have spare capacity; the typed
        // manifest keeps these strings for the whole apply.
        let mut s = text.into_owned();
        s.shrink_to_fit();
        Value::String(s)
    })
}

/// YAML 1.2 core schema resolution of a plain scalar: null, a boolean or
/// a number; `None` when it is a string.
fn resolve_plain(text: &str) -> Option<Value> {
    if is_null(text) {
        return Some(Value::Null);
    }
    match text {
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Some(Value::from(i));
        }
        if let Ok(u) = text.trim_start_matches('+').parse::<u64>() {
            return Some(Value::from(u));
        }
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Some(Value::from(i));
        }
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Some(Value::from(i));
        }
    }
    if is_float(digits) {
        if let Some(n) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Some(Value::Number(n));
        }
    }
    None
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (sign already removed).
fn is_float(s: &str) -> bool {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
                && !(int.is_empty() && frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_plain(text: &str) -> Value {
        scalar_value(text.into(), true, false)
    }

    #[test]
    fn plain_scalars_resolve_like_yaml_1_2() {
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("true"), Value::Bool(true));
        assert_eq!(resolve_plain("yes"), Value::String("yes".into()));
        assert_eq!(resolve_plain("42"), Value::from(42));
        assert_eq!(resolve_plain("-7"), Value::from(-7));
        assert_eq!(resolve_plain("0x1f"), Value::from(31));
        assert_eq!(resolve_plain("1.5"), serde_json::json!(1.5));
        assert_eq!(resolve_plain("1e3"), serde_json::json!(1000.0));
        assert_eq!(resolve_plain("1.2.3"), Value::String("1.2.3".into()));
        assert_eq!(resolve_plain("v1"), Value::String("v1".into()));
        assert_eq!(
            scalar_value("42".into(), false, false),
            Value::String("42".into())
        );
        assert_eq!(
            scalar_value("true".into(), true, true),
            Value::String("true".into())
        );
    }
}
