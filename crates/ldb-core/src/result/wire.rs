//! Serde helpers that keep the written JSON exactly as the reference laid it
//! out: fixed decimals for some fields, and `""` for a word that is unknown.
//!
//! Rounding happens on write only. A value read back is already rounded, and
//! rounding it again gives the same number, so a file read and written again
//! keeps its bytes.

use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::round;

/// Writes `v` with 1 decimal.
pub fn round1<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round(*v, 1))
}

/// Writes `v` with 3 decimals.
pub fn round3<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round(*v, 3))
}

/// Writes `v` with 6 decimals.
pub fn round6<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round(*v, 6))
}

/// Writes every element with 4 decimals.
pub fn round4_all<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|x| round(*x, 4)))
}

/// `Option<T>` for a word field where the file has `""` for "not known":
/// `None` is written as `""`, and `""` (or `null`, or a missing key with
/// `#[serde(default)]`) reads as `None`.
pub mod empty_as_none {
    use super::*;

    /// Writes the word, or `""` for `None`.
    pub fn serialize<T: Serialize, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(t) => t.serialize(s),
            None => s.serialize_str(""),
        }
    }

    /// Reads the word; `""` and `null` are `None`.
    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        let word = Option::<String>::deserialize(d)?.unwrap_or_default();
        if word.is_empty() {
            return Ok(None);
        }
        let de: serde::de::value::StringDeserializer<D::Error> = word.into_deserializer();
        T::deserialize(de).map(Some)
    }
}

/// `Option<u64>` for a count where the file has `0` for "not known": `None`
/// is written as `0`, and `0` (or `null`, or a missing key with
/// `#[serde(default)]`) reads as `None`.
pub mod zero_as_none {
    use super::*;

    /// Writes the count, or `0` for `None`.
    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.unwrap_or(0))
    }

    /// Reads the count; `0` and `null` are `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.filter(|n| *n > 0))
    }
}

/// Reads a key that may hold `null` into `Option<Option<T>>`: a present key
/// (even `null`) is `Some`, an absent one keeps the field's default `None`.
/// It tells "not evaluated" (absent) from "evaluated, no value" (`null`).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}
