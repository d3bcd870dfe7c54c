// SPDX-License-Identifier: Apache-2.0
//! Performs IO: reading small local files the way the sources need to — without
//! blocking on a FIFO planted in place of a file, regular files only, up to a size
//! limit — so a hostile or broken root cannot hang or flood the boot.

use std::fs::{self, File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::error::ReadError;

/// The most bytes read from a sysfs or proc value.
const VALUE_MAX_BYTES: u64 = 4096;

/// Opens a file without blocking on a FIFO; an error unless it is a regular file.
pub(crate) fn open_file(path: &Path) -> std::result::Result<File, ReadError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if f.metadata()?.is_file() {
        Ok(f)
    } else {
        Err(ReadError::NotAFile)
    }
}

/// Up to `limit` bytes of a regular file.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let f = open_file(path).ok()?;
    let mut buf = Vec::new();
    f.take(limit).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// A text file of at most `limit` bytes.
pub(crate) fn read_text(path: &Path, limit: u64) -> std::result::Result<String, ReadError> {
    let buf = read_capped(open_file(path)?, limit)?;
    String::from_utf8(buf).map_err(|e| ReadError::NotUtf8(e.utf8_error().valid_up_to()))
}

/// All of `f`, refused when it holds more than `limit` bytes.
fn read_capped(f: File, limit: u64) -> std::result::Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    f.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(buf)
}

/// The first line of a small file, blanks around it removed, bytes that are not
/// UTF-8 replaced (as ds-identify's `read` sees a sysfs value).
pub(crate) fn first_line(path: &Path) -> Option<String> {
    let bytes = read_limited(path, VALUE_MAX_BYTES)?;
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    Some(
        String::from_utf8_lossy(line)
            .trim_matches([' ', '\t', '\r'])
            .to_owned(),
    )
}

/// Whether `path` is (or links to) a regular file, as the shell's `[ -f ]`.
pub(crate) fn is_file(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// A whole file of at most `limit` bytes; `Ok(None)` when nothing is at `path`.
pub(crate) fn read_optional(
    path: &Path,
    limit: u64,
) -> std::result::Result<Option<Vec<u8>>, ReadError> {
    if fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(None);
    }
    read_capped(open_file(path)?, limit).map(Some)
}
