// SPDX-License-Identifier: Apache-2.0
//! Pure: the cache record, `instances/<instance-id>/datasource.json` — versioned
//! JSON (never a pickle: nothing in it is executed, and a reader of another version
//! refuses it rather than guessing) — and the folder name an instance-id gets.
//!
//! ```json
//! {"version": 1, "datasource": "Ec2", "instance_id": "i-0abc",
//!  "fetched_at_ms": 1764504000000, "instance_data": {...}}
//! ```
//!
//! `instance_data` is the [`InstanceData`] the datasource returned — meta-data,
//! user-data and vendor-data (bytes that are not UTF-8 as `ci-b64:`), network
//! config and the raw `ds` — so a fallback boot has everything a fetch would have
//! given.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::source::{InstanceData, SourceKind};

/// The version this leasehook writes and reads.
pub const CACHE_VERSION: u32 = 1;

/// One cached datasource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheRecord {
    /// [`CACHE_VERSION`].
    pub version: u32,
    /// The datasource that answered.
    pub datasource: SourceKind,
    /// Its instance-id.
    pub instance_id: String,
    /// When it answered, in milliseconds since the epoch.
    pub fetched_at_ms: u64,
    /// What it answered.
    pub instance_data: InstanceData,
}

impl CacheRecord {
    /// A record of `data`, fetched at `now_ms`.
    pub fn new(data: InstanceData, now_ms: u64) -> Self {
        Self {
            version: CACHE_VERSION,
            datasource: data.datasource,
            instance_id: data.instance_id.clone(),
            fetched_at_ms: now_ms,
            instance_data: data,
        }
    }

    /// The record as written: pretty JSON with a final newline.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(self).unwrap_or_default();
        b.push(b'\n');
        b
    }
}

/// Why a record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordProblem {
    /// Not JSON, cut short, or not shaped as a record.
    Corrupt(String),
    /// Written by another version of leasehook.
    Version(String),
    /// Its parts disagree (the datasource or instance-id inside and outside, or the
    /// folder it lies in).
    Inconsistent(String),
}

impl std::fmt::Display for RecordProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Corrupt(why) => write!(f, "corrupt ({why})"),
            Self::Version(why) => write!(f, "unknown cache version ({why})"),
            Self::Inconsistent(why) => write!(f, "inconsistent ({why})"),
        }
    }
}

/// Parses a record found in the folder `dir_name` (see [`instance_dir_name`]).
pub fn parse(bytes: &[u8], dir_name: &str) -> Result<CacheRecord, RecordProblem> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        RecordProblem::Corrupt(if e.is_eof() {
            format!(
                "truncated: ends at line {}, column {}",
                e.line(),
                e.column()
            )
        } else {
            format!("not JSON: line {}, column {}", e.line(), e.column())
        })
    })?;
    let Value::Object(map) = &v else {
        return Err(RecordProblem::Corrupt("not a JSON object".to_owned()));
    };
    match map.get("version") {
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(CACHE_VERSION)) => {}
        Some(Value::Number(n)) => {
            let newer = n.as_u64().is_some_and(|n| n > u64::from(CACHE_VERSION));
            return Err(RecordProblem::Version(format!(
                "version {n}, {}; this leasehook reads version {CACHE_VERSION}",
                if newer {
                    "written by a newer leasehook"
                } else {
                    "not one leasehook writes"
                }
            )));
        }
        Some(other) => {
            return Err(RecordProblem::Corrupt(format!(
                "version is {other}, not a number"
            )));
        }
        None => return Err(RecordProblem::Corrupt("no version".to_owned())),
    }
    let r: CacheRecord = serde_json::from_value(v)
        .map_err(|e| RecordProblem::Corrupt(format!("not a cache record: {e}")))?;
    if r.datasource == SourceKind::None {
        return Err(RecordProblem::Inconsistent(
            "the None datasource is never cached".to_owned(),
        ));
    }
    if r.datasource != r.instance_data.datasource || r.instance_id != r.instance_data.instance_id {
        return Err(RecordProblem::Inconsistent(format!(
            "the record names {} {:?}, its data {} {:?}",
            r.datasource, r.instance_id, r.instance_data.datasource, r.instance_data.instance_id
        )));
    }
    match instance_dir_name(&r.instance_id) {
        Ok(name) if name == dir_name => Ok(r),
        Ok(name) => Err(RecordProblem::Inconsistent(format!(
            "instance-id {:?} belongs in instances/{name}, not instances/{dir_name}",
            r.instance_id
        ))),
        Err(why) => Err(RecordProblem::Inconsistent(why.to_string())),
    }
}

/// The folder below `instances/` for an instance-id: cloud-init's (`/` becomes
/// `_`), refusing what cannot be a single safe name (empty, `.`, `..`, control
/// characters, longer than 200 bytes).
pub fn instance_dir_name(instance_id: &str) -> Result<String, Unnameable> {
    let name = instance_id.replace('/', "_");
    if name.is_empty() || name == "." || name == ".." {
        return Err(Unnameable::NotAName(instance_id.to_owned()));
    }
    if name.chars().any(char::is_control) {
        return Err(Unnameable::Control(instance_id.to_owned()));
    }
    if name.len() > 200 {
        return Err(Unnameable::TooLong(name.len()));
    }
    Ok(name)
}

/// Why an instance-id cannot name its cache folder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unnameable {
    /// Empty, `.` or `..` (after `/` became `_`).
    #[error("instance-id {0:?} cannot name a cache folder")]
    NotAName(String),
    /// It holds control characters.
    #[error("instance-id {0:?} holds control characters")]
    Control(String),
    /// Longer than 200 bytes.
    #[error("instance-id is {0} bytes long (at most 200)")]
    TooLong(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Datasource as _, NoneSource};
    use serde_json::{Map, json};

    fn data(kind: SourceKind, id: &str) -> InstanceData {
        InstanceData {
            datasource: kind,
            instance_id: id.into(),
            local_hostname: None,
            cloud_name: "aws".into(),
            platform: "ec2".into(),
            subplatform: "metadata (http://169.254.169.254)".into(),
            region: None,
            availability_zone: None,
            meta_data: Map::new(),
            user_data: Some(vec![0x1f, 0x8b, 0, 1]),
            vendor_data: None,
            network_config: None,
            ds: json!({"meta-data": {"instance-id": id}}),
        }
    }

    #[test]
    fn round_trip() {
        let r = CacheRecord::new(data(SourceKind::Ec2, "i-1"), 42);
        let back = parse(&r.encode(), "i-1").unwrap();
        assert_eq!(back, r);
        assert_eq!(back.instance_data.user_data, Some(vec![0x1f, 0x8b, 0, 1]));
    }

    #[test]
    fn problems_are_named() {
        let good =
            String::from_utf8(CacheRecord::new(data(SourceKind::Ec2, "i-1"), 42).encode()).unwrap();
        let half = good.get(..good.len() / 2).unwrap().to_owned();
        let with = |from: &str, to: &str| good.replacen(from, to, 1);
        let none = CacheRecord::new(NoneSource.fetch().unwrap(), 1);
        let cases = [
            (half, "i-1", "corrupt (truncated: ends at line"),
            (String::new(), "i-1", "corrupt (truncated"),
            (
                "\u{0}\u{1}garbage".to_owned(),
                "i-1",
                "corrupt (not JSON: line 1",
            ),
            ("[1]".to_owned(), "i-1", "corrupt (not a JSON object)"),
            ("{}".to_owned(), "i-1", "corrupt (no version)"),
            (
                with("\"version\": 1", "\"version\": 2"),
                "i-1",
                "unknown cache version (version 2, written by a newer leasehook; this leasehook reads version 1)",
            ),
            (
                with("\"version\": 1", "\"version\": 0"),
                "i-1",
                "not one leasehook writes",
            ),
            (
                with("\"version\": 1", "\"version\": \"1\""),
                "i-1",
                "version is \"1\", not a number",
            ),
            (
                with("\"version\": 1", "\"version\": 1, \"extra\": 1"),
                "i-1",
                "unknown field `extra`",
            ),
            (
                with("\"datasource\": \"Ec2\"", "\"datasource\": \"LXD\""),
                "i-1",
                "inconsistent (the record names LXD \"i-1\", its data Ec2 \"i-1\")",
            ),
            (
                good.clone(),
                "i-2",
                "belongs in instances/i-1, not instances/i-2",
            ),
            (
                String::from_utf8(none.encode()).unwrap(),
                "iid-datasource-none",
                "None datasource is never cached",
            ),
        ];
        for (text, dir, want) in cases {
            let e = parse(text.as_bytes(), dir).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn instance_folder_names() {
        assert_eq!(instance_dir_name("i-0abc").unwrap(), "i-0abc");
        assert_eq!(instance_dir_name("a/b").unwrap(), "a_b");
        assert_eq!(instance_dir_name("../..").unwrap(), ".._..");
        for bad in ["", ".", "..", "a\nb", &"x".repeat(201)] {
            assert!(instance_dir_name(bad).is_err(), "{bad:?}");
        }
    }
}
