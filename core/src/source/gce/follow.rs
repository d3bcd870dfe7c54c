// SPDX-License-Identifier: Apache-2.0
//! Performs IO: GCE's NIC list as `leasehook watch` follows it (SPEC §3.10,
//! docs/refresh.md): the row's [`crate::source::provider::live::Live`].
//!
//! One long poll on the NIC list at a time ([`super::live`]: `wait_for_change=true`
//! with the last `ETag`, held by the server up to [`LONG_POLL_TIMEOUT`]); each
//! answer parsed strictly ([`Snapshot::parse`]) and each NIC rendered as its
//! routing view ([`super::change`]), which the watcher compares by MAC.

use super::change::Snapshot;
use super::live::LONG_POLL_TIMEOUT;
use super::{GCE_ENDPOINT, Gce};
use crate::error::Result;
use crate::source::provider::live::{Live, LiveFeed, LiveList};

/// The row's live follower.
pub(super) const LIVE: Live = Live {
    label: "GCE metadata",
    feed: |s| {
        let endpoint = s.endpoint.unwrap_or(GCE_ENDPOINT);
        Ok(Box::new(Feed(Gce::new().with_endpoint(endpoint)?)))
    },
};

/// The metadata server's long poll on the NIC list.
struct Feed(Gce);

impl LiveFeed for Feed {
    fn describe(&self) -> String {
        format!(
            "the NIC list at {} (long poll, {} s)",
            self.0.endpoint(),
            LONG_POLL_TIMEOUT.as_secs()
        )
    }

    fn poll(&self, last: Option<&str>) -> Result<LiveList> {
        let polled = self.0.poll_interfaces(last, LONG_POLL_TIMEOUT)?;
        let snapshot = Snapshot::parse(&polled.body)?;
        Ok(LiveList {
            version: polled.etag,
            // The parsed view (index, addresses, gateway, aliases) and the
            // routing keys as written: equal renderings, equal views.
            nics: snapshot
                .nics
                .into_iter()
                .map(|(mac, view)| (mac, format!("{view:?}")))
                .collect(),
        })
    }
}
