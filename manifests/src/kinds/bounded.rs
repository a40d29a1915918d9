//! Integers that the database keeps as PostgreSQL `integer` (i32): a spec
//! value above 2147483647 is refused where it is written, with
//! the allowed range, instead of being stored clamped — a clamped value
//! made `diff` show the manifest's number as live and re-apply say
//! `unchanged`. Used with `#[serde(deserialize_with = …)]`; the JSON
//! Schemas carry the same bounds (`#[schemars(range(…))]`).

use std::fmt;
use std::num::NonZeroU32;

use serde::de::{Error, Unexpected, Visitor};
use serde::Deserializer;

/// The largest value of a PostgreSQL `integer`.
pub const I32_MAX: u32 = i32::MAX as u32;

/// An integer in `min..=2147483647`; the error names the range.
struct Ranged {
    min: u32,
}

impl Visitor<'_> for Ranged {
    type Value = u32;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an integer from {} to {I32_MAX}", self.min)
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<u32, E> {
        if v < u64::from(self.min) || v > u64::from(I32_MAX) {
            return Err(E::invalid_value(Unexpected::Unsigned(v), &self));
        }
        Ok(v as u32)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<u32, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }
}

/// Absent (null) or an integer in range.
struct OptRanged {
    min: u32,
}

impl<'de> Visitor<'de> for OptRanged {
    type Value = Option<u32>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an integer from {} to {I32_MAX}", self.min)
    }

    fn visit_none<E: Error>(self) -> Result<Option<u32>, E> {
        Ok(None)
    }

    fn visit_unit<E: Error>(self) -> Result<Option<u32>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_u64(Ranged { min: self.min }).map(Some)
    }
}

/// `0..=2147483647`.
pub fn u32_i32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    d.deserialize_u64(Ranged { min: 0 })
}

/// `1..=2147483647`.
pub fn nonzero_i32<'de, D: Deserializer<'de>>(d: D) -> Result<NonZeroU32, D::Error> {
    let v = d.deserialize_u64(Ranged { min: 1 })?;
    Ok(NonZeroU32::new(v).expect("the range starts at 1"))
}

/// Absent, or `1..=2147483647`.
pub fn opt_nonzero_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NonZeroU32>, D::Error> {
    Ok(d.deserialize_option(OptRanged { min: 1 })?
        .and_then(NonZeroU32::new))
}

/// Absent, or `0..=2147483647`.
pub fn opt_u32_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    d.deserialize_option(OptRanged { min: 0 })
}
