// SPDX-License-Identifier: Apache-2.0
//! Performs IO: a ureq connector whose sockets are bound to one interface and its
//! address, so each NIC's IMDS requests leave through that NIC, from that NIC's
//! address.
//!
//! IMDS throttles per ENI; asking for every NIC through the primary puts the whole
//! instance's requests on one budget. Bound to the device (`SO_BINDTODEVICE`), a
//! request to the link-local IMDS leaves through that NIC even before leasehook's
//! rules exist (with no route through the device the kernel treats the destination
//! as on-link), and with the NIC's own address as source it passes the ENI's
//! source/destination check. Binding needs `CAP_NET_RAW` and an address of the
//! endpoint's family on the NIC; without either the socket falls back to the routing
//! table (logged at debug level).

use std::io::{self, Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream};

use socket2::{Domain, Socket, Type};
use ureq::unversioned::transport::time::Duration;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
};

/// Where a NIC's requests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The interface name (`SO_BINDTODEVICE`).
    pub(crate) device: String,
    /// The NIC's address, used as source when its family matches the endpoint's.
    pub(crate) source: Option<IpAddr>,
}

/// Connects plain TCP sockets bound to a [`Binding`].
#[derive(Debug)]
pub(crate) struct BoundConnector(pub(crate) Binding);

fn timed_out(t: NextTimeout) -> ureq::Error {
    ureq::Error::Timeout(t.reason)
}

fn std_duration(d: Option<Duration>) -> Option<std::time::Duration> {
    d.map(|d| *d)
}

impl BoundConnector {
    fn open(&self, addr: SocketAddr, timeout: NextTimeout) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        // Only with an address of the endpoint's family on this NIC: through the NIC
        // without one, the packet would carry another NIC's address and fail the
        // source check (an IPv6-only NIC asking the IPv4 endpoint, say).
        if let Some(src) = self.0.source.filter(|s| s.is_ipv4() == addr.is_ipv4()) {
            let bound = socket
                .bind_device(Some(self.0.device.as_bytes()))
                .and_then(|()| socket.bind(&SocketAddr::new(src, 0).into()));
            if let Err(e) = bound {
                log::debug!(
                    "IMDS: cannot send through {} from {src} ({e}); using the routing table",
                    self.0.device
                );
            }
        }
        match std_duration(timeout.not_zero()) {
            Some(t) => socket.connect_timeout(&addr.into(), t)?,
            None => socket.connect(&addr.into())?,
        }
        let stream: TcpStream = socket.into();
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

impl<In: Transport> Connector<In> for BoundConnector {
    type Out = Either<In, BoundTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(c) = chained {
            return Ok(Some(Either::A(c)));
        }
        let mut last = None;
        for addr in &details.addrs {
            match self.open(*addr, details.timeout) {
                Ok(stream) => {
                    let buffers = LazyBuffers::new(
                        details.config.input_buffer_size(),
                        details.config.output_buffer_size(),
                    );
                    return Ok(Some(Either::B(BoundTransport { stream, buffers })));
                }
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    last = Some(timed_out(details.timeout));
                }
                Err(e) => last = Some(ureq::Error::Io(e)),
            }
        }
        Err(last.unwrap_or(ureq::Error::HostNotFound))
    }
}

/// A TCP connection made by [`BoundConnector`].
#[derive(Debug)]
pub(crate) struct BoundTransport {
    stream: TcpStream,
    buffers: LazyBuffers,
}

impl Transport for BoundTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        let t = std_duration(timeout.not_zero()).ok_or_else(|| timed_out(timeout))?;
        self.stream.set_write_timeout(Some(t))?;
        let output = self.buffers.output().get(..amount).unwrap_or_default();
        match self.stream.write_all(output) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                Err(timed_out(timeout))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        let t = std_duration(timeout.not_zero()).ok_or_else(|| timed_out(timeout))?;
        self.stream.set_read_timeout(Some(t))?;
        loop {
            match self.stream.read(self.buffers.input_append_buf()) {
                Ok(n) => {
                    self.buffers.input_appended(n);
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    ) =>
                {
                    return Err(timed_out(timeout));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn is_open(&mut self) -> bool {
        // Open when a non-blocking peek finds nothing to read yet; closed on EOF or
        // an error (an idle pooled connection has nothing to read).
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        let open =
            matches!(self.stream.peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        self.stream.set_nonblocking(false).is_ok() && open
    }
}
