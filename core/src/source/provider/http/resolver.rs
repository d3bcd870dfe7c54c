// SPDX-License-Identifier: Apache-2.0
//! Pure: a ureq resolver that accepts IP literals only.
//!
//! IMDS lives at fixed addresses (`169.254.169.254`, `[fd00:ec2::254]`), so there is
//! nothing to look up. ureq's default resolver would still call `getaddrinfo`, and
//! once any timeout is configured it does so on a new thread per request. This one
//! parses the URL's host as an address and never blocks, never spawns.

use std::net::{IpAddr, SocketAddr};

use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The port of a URL without one (`http`).
const HTTP_PORT: u16 = 80;

/// Resolves `http://<IP literal>[:port]` URLs without DNS.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IpLiteral;

/// The address a URL's host and port name, when the host is an IP literal
/// (`[...]` for IPv6).
pub(crate) fn socket_addr(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip: IpAddr = bare.parse().ok()?;
    Some(SocketAddr::new(ip, uri.port_u16().unwrap_or(HTTP_PORT)))
}

impl Resolver for IpLiteral {
    fn resolve(
        &self,
        uri: &Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addr = socket_addr(uri).ok_or(ureq::Error::HostNotFound)?;
        let mut out = self.empty();
        out.push(addr);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_only() {
        let cases = [
            ("http://169.254.169.254/latest", Some("169.254.169.254:80")),
            ("http://[fd00:ec2::254]/latest", Some("[fd00:ec2::254]:80")),
            ("http://127.0.0.1:8080/", Some("127.0.0.1:8080")),
            ("http://[::1]:9/x", Some("[::1]:9")),
            ("http://instance-data/latest", None),
            ("http://localhost:80/", None),
        ];
        for (url, want) in cases {
            let uri: Uri = url.parse().unwrap();
            assert_eq!(
                socket_addr(&uri).map(|a| a.to_string()).as_deref(),
                want,
                "{url}"
            );
        }
    }
}
