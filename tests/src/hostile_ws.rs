// SPDX-License-Identifier: Apache-2.0
//! Hostile `/1.0/events` servers (issue 30, item 7): a unix socket whose every
//! connection tungstenite upgrades to a WebSocket, then drops, sends one bad
//! frame, or floods with pings while reading nothing. For the watch's tests.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the server does once the upgrade is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// Drops the stream at once.
    Drop,
    /// Sends one frame that is not WebSocket (a reserved opcode), then waits.
    BadFrame,
    /// Sends pings as fast as it can and reads nothing.
    PingFlood,
}

/// Serves `how` on a new unix socket at `path` (from a thread, for the rest of
/// the process); returns the count of connections so far. Panics when it cannot
/// bind. Only upgrades count (the watch's plain HTTP requests, its resync,
/// are refused: not a WebSocket).
pub fn serve(path: &Path, how: Hostile) -> Arc<AtomicUsize> {
    let listener = std::os::unix::net::UnixListener::bind(path)
        .unwrap_or_else(|e| panic!("bind {}: {e}", path.display()));
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(20)));
                let Ok(mut ws) = tungstenite::accept(stream) else {
                    return;
                };
                c.fetch_add(1, Ordering::SeqCst);
                match how {
                    Hostile::Drop => drop(ws),
                    Hostile::BadFrame => {
                        // FIN, opcode 0x3 (reserved), no mask, length 0.
                        let _ = ws.get_mut().write_all(&[0x83, 0x00]);
                        std::thread::sleep(Duration::from_secs(20));
                    }
                    Hostile::PingFlood => {
                        let end = Instant::now() + Duration::from_secs(20);
                        while Instant::now() < end {
                            let ping = tungstenite::Message::Ping(vec![7; 100].into());
                            if ws.send(ping).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    count
}
