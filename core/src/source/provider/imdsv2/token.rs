// SPDX-License-Identifier: Apache-2.0
//! Performs IO: the IMDSv2 session token and its cache file,
//! `<root>/run/leasehook/imds-token` (Alibaba's hardened-mode token, the same
//! shape, in `aliyun-token` beside it).
//!
//! Every hook run is a new process, and a DHCP client runs its hook for each lease
//! on each interface: without a shared cache, every event would pay one extra
//! request for a token. The file holds the token and the time it expires (JSON),
//! is mode 0600, and is replaced atomically (a temporary file in the same folder,
//! renamed over the name; not fsynced, like everything under `/run`, which a
//! reboot clears anyway), so a reader sees the old token or the new one, never
//! half of either. It is never read through a symlink (at the file or
//! at `run/leasehook`), never blocks on a FIFO, is read up to 4 KiB, and a file that
//! others could read or write is ignored: the same no-follow files as every other
//! run-time file ([`crate::fs::run_folder`]).
//!
//! The token is a credential: [`Token`]'s `Debug` does not show it, and no message
//! written here contains it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::constants::{IMDS_MAX_TOKEN_BYTES, IMDS_TOKEN_EXPIRY_MARGIN, RUN_DIR};
use crate::fs::{FileProblem, run_folder, run_folder_for_write};

/// The largest cache file we read, in bytes.
const MAX_CACHE_BYTES: u64 = 4096;

/// An IMDSv2 session token and the time it expires.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token {
    value: String,
    expires_at: SystemTime,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl Token {
    /// A token received now, valid for `ttl`. Refuses anything that could not be a
    /// token (and so could not be sent back as a header value): empty, too long, or
    /// holding anything but visible ASCII. The reason never shows the value.
    pub(crate) fn try_new(value: &str, ttl: Duration, now: SystemTime) -> Result<Self, BadToken> {
        let value = value.trim();
        if value.is_empty() {
            return Err(BadToken::Empty);
        }
        if value.len() as u64 > IMDS_MAX_TOKEN_BYTES {
            return Err(BadToken::TooLong(value.len()));
        }
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadToken::NotVisibleAscii);
        }
        let expires_at = now.checked_add(ttl).ok_or(BadToken::ExpiryOutOfRange)?;
        Ok(Self {
            value: value.to_owned(),
            expires_at,
        })
    }

    /// The token, to be sent in the request header and nowhere else.
    pub(crate) fn secret(&self) -> &str {
        &self.value
    }

    /// Whether this is the same token as `other` (by value: the cache file keeps
    /// the expiry in whole seconds only).
    pub(crate) fn is_same(&self, other: Option<&Token>) -> bool {
        other.is_some_and(|o| o.value == self.value)
    }

    /// Whether the token is still good for a while at `now`.
    pub(crate) fn is_fresh(&self, now: SystemTime) -> bool {
        now.checked_add(IMDS_TOKEN_EXPIRY_MARGIN)
            .is_some_and(|t| t < self.expires_at)
    }

    /// Seconds left until it expires at `now` (for logs).
    pub(crate) fn remaining_secs(&self, now: SystemTime) -> u64 {
        self.expires_at
            .duration_since(now)
            .map_or(0, |d| d.as_secs())
    }
}

/// The file format.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    /// Seconds since the epoch at which the token expires.
    expires_at: u64,
    token: String,
}

/// The token cache file under a root folder.
#[derive(Debug, Clone)]
pub(crate) struct TokenCache {
    path: PathBuf,
    root: PathBuf,
    /// The file's name in `run/leasehook`.
    name: &'static str,
}

impl TokenCache {
    /// The cache file `name` under `root` (`/` in production).
    pub(crate) fn new(root: &Path, name: &'static str) -> Self {
        Self {
            path: root.join(RUN_DIR).join(name),
            root: root.to_path_buf(),
            name,
        }
    }

    /// The file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The cached token, when there is one that is still fresh at `now`. A missing,
    /// unsafe, unreadable, corrupt or stale cache is logged and reads as `None`: the
    /// caller then asks IMDS for a new token.
    pub(crate) fn load(&self, now: SystemTime) -> Option<Token> {
        match self.read() {
            Ok(Some(token)) if token.is_fresh(now) => Some(token),
            Ok(Some(_)) => {
                log::debug!("IMDS token cache {:?}: token expired", self.path);
                None
            }
            Ok(None) => None,
            Err(why) => {
                log::warn!("IMDS token cache {:?}: {why}; ignoring it", self.path);
                None
            }
        }
    }

    fn read(&self) -> Result<Option<Token>, CacheError> {
        // No-follow, non-blocking, a regular file of at most 4 KiB: a symlink or a
        // FIFO planted here must neither make us read another file nor hang the hook.
        let Some(dir) = run_folder(&self.root, None, false)? else {
            return Ok(None);
        };
        let (bytes, mode) = match dir.read_with_mode(self.name, MAX_CACHE_BYTES) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(FileProblem::Wrong(_)) => return Err(CacheError::NotAFile),
            Err(p) => return Err(CacheError::Unreadable(p)),
        };
        if mode & 0o077 != 0 {
            return Err(CacheError::OpenToOthers(mode & 0o777));
        }
        let text = String::from_utf8(bytes).map_err(|_| CacheError::NotUtf8)?;
        // serde_json's messages quote no input beyond a character or two; still, say
        // only where the file broke.
        let parsed: CacheFile = serde_json::from_str(&text).map_err(|e| CacheError::NotACache {
            line: e.line(),
            column: e.column(),
        })?;
        let expires_at = UNIX_EPOCH
            .checked_add(Duration::from_secs(parsed.expires_at))
            .ok_or(BadToken::ExpiryOutOfRange)?;
        let token = Token::try_new(&parsed.token, Duration::ZERO, expires_at)?;
        Ok(Some(token))
    }

    /// Replaces the cache with `token`. Failing to write is logged, not returned: the
    /// token still works for this process.
    pub(crate) fn store(&self, token: &Token) {
        if let Err(why) = self.write(token) {
            log::warn!(
                "IMDS token cache {:?}: cannot write it ({why}); the next process will ask for a new token",
                self.path
            );
        }
    }

    fn write(&self, token: &Token) -> Result<(), CacheError> {
        let body = serde_json::to_string(&CacheFile {
            expires_at: token
                .expires_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            token: token.value.clone(),
        })
        .map_err(CacheError::Encode)?;
        // The shared atomic write: a 0600 temporary file in the same folder (which
        // must not be a symlink), renamed over the name (replacing a symlink
        // rather than following it); `/run` is not fsynced.
        run_folder_for_write(&self.root, None)
            .and_then(|dir| dir.write_atomic(self.name, body.as_bytes(), 0o600))?;
        Ok(())
    }
}

/// Why a token is refused. The reason never shows the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadToken {
    /// Nothing but blanks.
    #[error("empty token")]
    Empty,
    /// Longer than [`IMDS_MAX_TOKEN_BYTES`]; its length.
    #[error("token longer than {max} bytes ({0} bytes)", max = IMDS_MAX_TOKEN_BYTES)]
    TooLong(usize),
    /// Holding anything but visible ASCII (it could not be sent back as a header).
    #[error("token holds characters other than visible ASCII")]
    NotVisibleAscii,
    /// Its expiry cannot be a time.
    #[error("expiry out of range")]
    ExpiryOutOfRange,
}

/// Why the token cache cannot be read or written.
#[derive(Debug, thiserror::Error)]
enum CacheError {
    /// The run folder cannot be opened, or the file cannot be written.
    #[error(transparent)]
    Folder(#[from] crate::Error),
    /// Something other than a regular file stands there.
    #[error("not a regular file")]
    NotAFile,
    /// A symlink, too large, or unreadable.
    #[error("{0}")]
    Unreadable(FileProblem),
    /// Its mode lets others read or write it.
    #[error("mode {0:o} lets others read or write it (want 600)")]
    OpenToOthers(u32),
    /// Not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// Not the cache's JSON: only where it broke (the parser's message is not
    /// kept, so no part of the file is shown).
    #[error("not a token cache (line {line}, column {column})")]
    NotACache {
        /// The line.
        line: usize,
        /// The column.
        column: usize,
    },
    /// The token in it is refused.
    #[error(transparent)]
    Token(#[from] BadToken),
    /// The token could not be encoded.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt as _;

    const SECRET: &str = "AQAEAExampleTokenValue-0123456789abcdefABCDEF==";

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn tokens_are_validated_and_never_shown() {
        let t = Token::try_new(SECRET, Duration::from_secs(21_600), now()).unwrap();
        assert!(!format!("{t:?}").contains(SECRET));
        assert!(t.is_fresh(now()));
        assert!(!t.is_fresh(now() + Duration::from_secs(21_600 - 30)));
        assert_eq!(t.remaining_secs(now()), 21_600);
        for bad in ["", "  ", "secret value", "secr\u{e9}t", "sec\nret"] {
            let err = Token::try_new(bad, Duration::ZERO, now())
                .unwrap_err()
                .to_string();
            assert!(!err.contains("sec"), "{err}");
        }
        assert!(Token::try_new(&"x".repeat(2000), Duration::ZERO, now()).is_err());
    }

    #[test]
    fn round_trip_with_mode_0600() {
        let root = tempfile::tempdir().unwrap();
        let cache = TokenCache::new(root.path(), crate::constants::IMDS_TOKEN_CACHE_NAME);
        assert_eq!(cache.load(now()), None);
        let t = Token::try_new(SECRET, Duration::from_secs(21_600), now()).unwrap();
        cache.store(&t);
        let mode = fs::metadata(cache.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(cache.load(now()), Some(t.clone()));
        // Stale by the time of reading.
        assert_eq!(cache.load(now() + Duration::from_secs(21_600)), None);
        // Only the final file is left: no temporary files lying around.
        let names: Vec<_> = fs::read_dir(cache.path().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("imds-token")]);
    }

    #[test]
    fn unsafe_or_corrupt_caches_are_ignored() {
        let root = tempfile::tempdir().unwrap();
        let cache = TokenCache::new(root.path(), crate::constants::IMDS_TOKEN_CACHE_NAME);
        let dir = cache.path().parent().unwrap().to_path_buf();
        fs::create_dir_all(&dir).unwrap();
        let good = format!(r#"{{"expires_at": 1700021600, "token": "{SECRET}"}}"#);

        // A symlink to a well-formed cache elsewhere is not followed.
        let elsewhere = root.path().join("planted");
        fs::write(&elsewhere, &good).unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, cache.path()).unwrap();
        assert_eq!(cache.load(now()), None);
        // Writing replaces the symlink itself and leaves its target alone.
        let t = Token::try_new("new-token", Duration::from_secs(600), now()).unwrap();
        cache.store(&t);
        assert!(fs::symlink_metadata(cache.path()).unwrap().is_file());
        assert_eq!(fs::read_to_string(&elsewhere).unwrap(), good);
        assert_eq!(cache.load(now()), Some(t));

        // World-readable: ignored.
        fs::write(cache.path(), &good).unwrap();
        fs::set_permissions(cache.path(), fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(cache.load(now()), None);
        fs::set_permissions(cache.path(), fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache.load(now()).is_some());

        // Corrupt content, and a token that is not one.
        for body in [
            "{".to_owned(),
            "null".to_owned(),
            r#"{"expires_at": 1700021600, "token": "two words"}"#.to_owned(),
            r#"{"expires_at": 18446744073709551615, "token": "t"}"#.to_owned(),
            "\u{0}\u{ff}".to_owned(),
        ] {
            fs::write(cache.path(), body).unwrap();
            assert_eq!(cache.load(now()), None);
        }
        // A FIFO planted there neither hangs the reader nor is read.
        fs::remove_file(cache.path()).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(cache.path())
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(cache.load(now()), None);
        // A folder where the file should be.
        fs::remove_file(cache.path()).unwrap();
        fs::create_dir(cache.path()).unwrap();
        assert_eq!(cache.load(now()), None);
    }

    #[test]
    fn a_symlinked_state_folder_is_not_written_through() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("elsewhere");
        fs::create_dir_all(&target).unwrap();
        fs::create_dir_all(root.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&target, root.path().join("run/leasehook")).unwrap();
        let cache = TokenCache::new(root.path(), crate::constants::IMDS_TOKEN_CACHE_NAME);
        let t = Token::try_new(SECRET, Duration::from_secs(600), now()).unwrap();
        cache.store(&t);
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    }
}
