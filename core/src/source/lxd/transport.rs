// SPDX-License-Identifier: Apache-2.0
//! Performs IO: ureq's transport over a unix socket, so the dev-lxd API is spoken
//! with the same HTTP/1.1 client as IMDS (no hand-written HTTP).
//!
//! ureq's `unversioned::transport` API is outside semver (the workspace pins ureq
//! with `~3.5`); everything that touches it is in this file, and the devlxd emulator
//! tests catch a break.

use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// Connects every request to one unix socket, whatever the URL's host says.
#[derive(Debug)]
pub(super) struct UnixConnector {
    path: PathBuf,
}

impl UnixConnector {
    pub(super) fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

impl Connector<()> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let stream = UnixStream::connect(&self.path)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(UnixTransport { stream, buffers }))
    }
}

/// One connection to the socket.
#[derive(Debug)]
pub(super) struct UnixTransport {
    stream: UnixStream,
    buffers: LazyBuffers,
}

/// ureq's own duration type, as a std duration (`None`: no timeout).
fn limit(timeout: NextTimeout) -> Option<Duration> {
    timeout.not_zero().map(|d| *d)
}

/// A socket timeout is a ureq timeout, naming which one ran out.
fn io_error(e: io::Error, timeout: NextTimeout) -> ureq::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ureq::Error::Timeout(timeout.reason),
        _ => ureq::Error::Io(e),
    }
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        self.stream.set_write_timeout(limit(timeout))?;
        let output = self.buffers.output().get(..amount).unwrap_or_default();
        self.stream
            .write_all(output)
            .map_err(|e| io_error(e, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        self.stream.set_read_timeout(limit(timeout))?;
        let n = loop {
            match self.stream.read(self.buffers.input_append_buf()) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other.map_err(|e| io_error(e, timeout))?,
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        // Open means: nothing to read yet and no end of stream. A byte the server
        // sent unasked, or an error, closes it for reuse.
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        let open =
            matches!(self.stream.read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        open && self.stream.set_nonblocking(false).is_ok()
    }
}

/// Resolves nothing: the connector ignores the URL's host (`http://lxd/...`), so
/// no name is ever looked up. ureq wants one address; it is never dialled.
#[derive(Debug, Clone, Copy)]
pub(super) struct NoLookup;

impl Resolver for NoLookup {
    fn resolve(
        &self,
        _uri: &Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut out = self.empty();
        out.push(SocketAddr::from((Ipv4Addr::LOCALHOST, 80)));
        Ok(out)
    }
}
