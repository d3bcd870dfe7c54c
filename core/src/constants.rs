// SPDX-License-Identifier: Apache-2.0
//! Numbers and paths every part of leasehook agrees on.

use std::time::Duration;

/// `ec2-net-utils` profile: table (and rule priority) of device 0 on card 0, as
/// amazon-ec2-net-utils' `rule_base`.
pub const DEFAULT_TABLE_BASE: u32 = 10_000;

/// Tables the kernel reserves: unspec, default, main, local.
pub const RESERVED_TABLES: [u32; 4] = [0, 253, 254, 255];

// --- EC2 instance metadata service (SPEC §4.1) ---------------------------------------

/// The IMDS base URLs, tried in this order: the IPv4 link-local address, then the
/// IPv6 one (served on Nitro instances with `HttpProtocolIpv6=enabled`).
pub const IMDS_ENDPOINTS: [&str; 2] = ["http://169.254.169.254", "http://[fd00:ec2::254]"];

/// IMDSv2: the path a session token is `PUT` to.
pub const IMDS_TOKEN_PATH: &str = "/latest/api/token";

/// The lifetime we ask for, in seconds: six hours, the most IMDS grants.
pub const IMDS_TOKEN_TTL_SECS: u64 = 21_600;

/// A cached token this close to its expiry is not used any more, so a token cannot
/// run out between being read from the cache and being sent.
pub const IMDS_TOKEN_EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// The root of the metadata tree.
pub const IMDS_META_DATA: &str = "/latest/meta-data";

/// Time to set up one TCP connection to IMDS.
pub const IMDS_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Time for one whole IMDS request (connect, send, answer, body).
pub const IMDS_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest IMDS answer body we read, in bytes. Metadata leaves and folder
/// listings are a few hundred bytes; anything far bigger is not IMDS talking.
pub const IMDS_MAX_BODY_BYTES: u64 = 64 * 1024;

/// The largest IMDSv2 token we accept, in bytes (IMDS hands out about 56).
pub const IMDS_MAX_TOKEN_BYTES: u64 = 1024;

/// The consistency wait's total budget (SPEC §3.5).
pub const IMDS_BUDGET: Duration = Duration::from_secs(30);

/// The part of the budget a hook spends before it lets the DHCP client go
/// (SPEC §3.5).
pub const IMDS_SYNC_BUDGET: Duration = Duration::from_secs(3);

/// How often a hook that finds its interface's lock busy looks again (and stops
/// the waiting worker the hand-over names, see `hook`).
pub const HOOK_LOCK_POLL: Duration = Duration::from_millis(10);

/// How long the links a lease event found its NIC in stay good for the
/// snapshot after the wait ([`crate::apply::Applier::snapshot_on`]): a wait
/// the metadata answered at once (a few milliseconds) reuses them, one that
/// paused even once ([`IMDS_BACKOFF_MIN`]) or waited for a lock reads them again.
pub const LINKS_FRESH: Duration = Duration::from_millis(50);

/// The first pause between two rounds of the consistency wait; each pause doubles
/// it, with jitter.
pub const IMDS_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest pause between two rounds of the consistency wait.
pub const IMDS_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// leasehook's run-time state folder, relative to the root (`/run/leasehook`).
pub const RUN_DIR: &str = "run/leasehook";

/// The IMDSv2 token cache, relative to the root; shared by every leasehook process.
pub const IMDS_TOKEN_CACHE: &str = "run/leasehook/imds-token";

/// The IMDSv2 token cache's file name in [`RUN_DIR`].
pub const IMDS_TOKEN_CACHE_NAME: &str = "imds-token";

// --- Datasources (SPEC §4, §5) --------------------------------------------------------
// Paths are relative to the root folder (`/` in production), like `RUN_DIR`.

/// IMDS: user-data.
pub const IMDS_USER_DATA: &str = "/latest/user-data";

/// IMDS: the instance identity document (JSON: `instanceId`, `region`,
/// `availabilityZone`, ...).
pub const IMDS_IDENTITY_DOCUMENT: &str = "/latest/dynamic/instance-identity/document";

/// The largest user-data we read from IMDS, in bytes (EC2 allows 16 KiB; other
/// clouds speaking the EC2 API may allow more).
pub const IMDS_MAX_USER_DATA_BYTES: u64 = 1024 * 1024;

/// LXD's dev-lxd socket (SPEC §4.2).
pub const LXD_SOCKET: &str = "dev/lxd/sock";

/// Incus's guest API socket, the same API as [`LXD_SOCKET`] (`security.guestapi`;
/// SPEC §4.5). Older Incus versions serve `dev/lxd/sock` instead.
pub const INCUS_SOCKET: &str = "dev/incus/sock";

/// The dev-lxd API version leasehook speaks.
pub const LXD_API_VERSION: &str = "1.0";

/// How often a dev-lxd request answered with HTTP 500 is sent in all (LXD answers
/// 500 while the instance is still starting).
pub const LXD_500_ATTEMPTS: u32 = 30;

/// The pause after a dev-lxd HTTP 500, before the request is sent again.
pub const LXD_500_PAUSE: Duration = Duration::from_millis(100);

/// Time for one whole dev-lxd request.
pub const LXD_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest dev-lxd answer we read, in bytes (user-data lives in config keys).
pub const LXD_MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The NoCloud seed folders, in the order they are read (SPEC §4.3).
pub const NOCLOUD_SEED_DIRS: [&str; 2] = [
    "var/lib/cloud/seed/nocloud",
    "var/lib/cloud/seed/nocloud-net",
];

/// Ubuntu Core keeps `/var/lib/cloud` below this folder until it is bind-mounted.
pub const UBUNTU_CORE_WRITABLE: &str = "writable/system-data";

/// The largest NoCloud seed file we read, in bytes.
pub const SEED_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// cloud-init's "do not run" marker.
pub const CLOUD_INIT_DISABLED_MARKER: &str = "etc/cloud/cloud-init.disabled";

/// cloud-init's main configuration file.
pub const CLOUD_CFG: &str = "etc/cloud/cloud.cfg";

/// cloud-init's configuration folder (`*.cfg`, read in lexical order).
pub const CLOUD_CFG_D: &str = "etc/cloud/cloud.cfg.d";

/// ds-identify's own configuration file (`datasource:`, `policy:`).
pub const DS_IDENTIFY_CFG: &str = "etc/cloud/ds-identify.cfg";

/// leasehook's configuration file (SPEC §7).
pub const LEASEHOOK_CONFIG: &str = "etc/leasehook/config.yaml";

/// leasehook's configuration drop-ins, `*.yaml` read in lexical order after
/// [`LEASEHOOK_CONFIG`].
pub const LEASEHOOK_CONFIG_D: &str = "etc/leasehook/config.d";

/// The largest configuration file we read, in bytes.
pub const CONFIG_MAX_BYTES: u64 = 1024 * 1024;

// --- The boot stage (SPEC §5) -------------------------------------------------------
// Relative to the root folder, like `RUN_DIR`.

/// The folder holding leasehook's cache folder. Everything up to it is trusted
/// (symlinks there are followed, as on any system); below it, nothing is.
pub const CACHE_PARENT: &str = "var/lib";

/// leasehook's cache folder, below [`CACHE_PARENT`] (`/var/lib/leasehook`).
pub const CACHE_NAME: &str = "leasehook";

/// The folder holding leasehook's run-time folder (`RUN_DIR` is `run/leasehook`).
pub const RUN_PARENT: &str = "run";

/// The run-time folder's name below [`RUN_PARENT`].
pub const RUN_NAME: &str = "leasehook";

/// The boot stages' verdict, in the run-time folder.
pub const BOOT_STATE: &str = "boot.json";

/// World-readable instance data (sensitive values redacted), in the run-time folder.
pub const INSTANCE_DATA: &str = "instance-data.json";

/// Root-only instance data, in the run-time folder.
pub const INSTANCE_DATA_SENSITIVE: &str = "instance-data-sensitive.json";

/// The kernel's id of the running boot: a verdict of another boot is stale.
pub const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";

/// What `data/previous-instance-id` holds on an instance's first boot
/// (cloud-init's spelling).
pub const NO_PREVIOUS_INSTANCE_ID: &str = "NO_PREVIOUS_INSTANCE_ID";

/// The largest cache record read, in bytes (user-data lives in it).
pub const CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;
