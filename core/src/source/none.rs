// SPDX-License-Identifier: Apache-2.0
//! Pure: the `None` datasource, cloud-init's `DataSourceNone`: what an instance is
//! when no datasource answered and there is nothing to fall back to. It is never
//! detected (it only ends `datasource_list`), always fetches, and its data says
//! nothing but its fixed instance-id.

use serde_json::{Map, Value, json};

use super::{Datasource, InstanceData, SourceKind};
use crate::error::Result;

/// cloud-init's instance-id for "no datasource".
pub const NONE_INSTANCE_ID: &str = "iid-datasource-none";

/// The `None` datasource.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoneSource;

impl Datasource for NoneSource {
    fn kind(&self) -> SourceKind {
        SourceKind::None
    }

    fn fetch(&self) -> Result<InstanceData> {
        let mut meta = Map::new();
        meta.insert("instance-id".to_owned(), Value::from(NONE_INSTANCE_ID));
        Ok(InstanceData {
            datasource: SourceKind::None,
            instance_id: NONE_INSTANCE_ID.to_owned(),
            local_hostname: None,
            cloud_name: "unknown".to_owned(),
            platform: "none".to_owned(),
            subplatform: "config".to_owned(),
            region: None,
            availability_zone: None,
            ds: json!({"meta_data": meta}),
            meta_data: meta,
            user_data: None,
            vendor_data: None,
            network_config: None,
        })
    }

    fn check_instance_id(&self, cached: &InstanceData) -> Result<bool> {
        Ok(cached.datasource == SourceKind::None && cached.instance_id == NONE_INSTANCE_ID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Check;
    use crate::source::detect::{Snapshot, check};

    #[test]
    fn none_is_never_detected_and_always_fetches() {
        let n = NoneSource;
        assert_eq!(n.kind(), SourceKind::None);
        assert_eq!(
            check(SourceKind::None, &Snapshot::default()).check,
            Check::NotFound
        );
        let d = n.fetch().unwrap();
        assert_eq!(d.instance_id, NONE_INSTANCE_ID);
        assert!(n.check_instance_id(&d).unwrap());
        let mut other = d.clone();
        other.datasource = SourceKind::NoCloud;
        assert!(!n.check_instance_id(&other).unwrap());
    }
}
