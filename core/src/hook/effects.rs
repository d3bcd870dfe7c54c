// SPDX-License-Identifier: Apache-2.0
//! The effects the lease path is handed: the [`Kernel`] (netlink in production,
//! the recording fake in tests), the cloud and the clock, bundled as
//! [`Effects`]. The production set is built in one place, by the entry points
//! of [`super`].

use std::path::Path;

use crate::apply::Applier;
use crate::apply::netlink::NetlinkApplier;
use crate::error::Result;
use crate::source::provider::{Clock, Provider};

/// The kernel the lease path is handed: the [`Applier`], and the reads and
/// writes only the hooks make (what the Kubernetes gate reads, bringing a link
/// up). [`NetlinkApplier`] in production; the recording fake in tests.
pub trait Kernel: Applier + crate::apply::links::LinkKernel {
    /// What the Kubernetes gate decides on ([`crate::kubernetes::observe::detect`]).
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)>;

    /// `ip link set IF up` for link `index` when it is down: a NIC the cloud
    /// serves no DHCP has no client to bring it up, and the kernel takes no route
    /// through a link that is down. `true` when it was down. Nothing is written
    /// for a link that is up, and nothing ever takes a link down.
    fn bring_up(&mut self, index: u32) -> Result<bool>;
}

impl Kernel for NetlinkApplier {
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)> {
        crate::kubernetes::observe::detect(mode, root, self)
    }

    fn bring_up(&mut self, index: u32) -> Result<bool> {
        NetlinkApplier::bring_up(self, index)
    }
}

/// The recording fake holds no CNI's rules: the gate reads only the CNI files
/// below `root`.
impl Kernel for crate::apply::record::RecordingApplier {
    fn node_view(
        &mut self,
        mode: crate::kubernetes::Mode,
        root: &Path,
    ) -> Result<(crate::kubernetes::Decision, crate::kubernetes::NodeView)> {
        let view = crate::kubernetes::NodeView {
            cni_confs: if mode == crate::kubernetes::Mode::Off {
                Vec::new()
            } else {
                crate::kubernetes::observe::cni_confs(root)?
            },
            ..crate::kubernetes::NodeView::default()
        };
        Ok((crate::kubernetes::decide(mode, &view), view))
    }

    fn bring_up(&mut self, index: u32) -> Result<bool> {
        Ok(self.down.remove(&index))
    }
}

/// What the event path, the worker and `refresh` are handed: the kernel, the
/// cloud and the clock. Built once, at the entry points ([`super::handle`],
/// [`super::run_worker`], [`super::refresh`]).
pub struct Effects<'a> {
    /// The kernel (netlink in production).
    pub kernel: &'a mut dyn Kernel,
    /// The cloud asked about a NIC.
    pub provider: &'a dyn Provider,
    /// The clock the waits read and sleep on.
    pub clock: &'a dyn Clock,
}

impl std::fmt::Debug for Effects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}
