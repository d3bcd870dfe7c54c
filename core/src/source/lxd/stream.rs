// SPDX-License-Identifier: Apache-2.0
//! Performs IO: follows dev-lxd's `/1.0/events?type=config,device` WebSocket over
//! the unix socket (tungstenite's client handshake and framing over a
//! `UnixStream`; SPEC §4.5) and hands coalesced [`Work`] to a [`Handler`].
//!
//! * Reads wait at most one tick (100 ms), so a stop request (SIGTERM) is seen
//!   within a tick, and work that waits (a NIC whose link is not there yet) is
//!   looked at every tick ([`Handler::tick`]).
//! * Events are coalesced ([`Pending`]) and handed over when the stream has been
//!   quiet for a tick, or at the latest [`FLUSH_EVERY`] after the first one of a
//!   burst: a flood costs bounded memory and at most a few rewrites a second.
//! * Every (re)connection asks for one resync (events may have been missed while
//!   nobody listened).
//! * A socket that is missing, refuses, or ends the stream (`security.devlxd`
//!   switched off, the host restarting) is logged once as a warning until it
//!   answers again; attempts follow [`Backoff`] (100 ms doubling to 30 s), sleeping
//!   in ticks, never spinning.
//! * A handshake alone is not an answer: the backoff starts over, and "answers
//!   again" is logged, only once a connection has proved healthy (it delivered a
//!   valid event, or stayed up [`HEALTHY_AFTER`]). A server that accepts the
//!   upgrade and then drops the stream or sends one bad frame is retried with the
//!   doubling pauses and warned about once, not every 100 ms (issue 30, item 7).
//! * Writes (the pongs tungstenite sends for pings) wait at most a tick, so a ping
//!   flood from a server that reads nothing cannot delay a stop request.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tungstenite::handshake::HandshakeError;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use super::events::{
    BACKOFF_MAX, BACKOFF_MIN, Backoff, EVENTS_ROUTE, MAX_EVENT_BYTES, Pending, Work, parse,
};

/// How long one read waits: the longest a stop request goes unseen.
pub const TICK: Duration = Duration::from_millis(100);

/// The longest events wait, coalescing, before they are handed over.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// The longest the WebSocket handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection must stay up (without a valid event) to count as
/// healthy: the backoff then starts over.
pub const HEALTHY_AFTER: Duration = Duration::from_secs(10);

/// What `leasehook watch` does with events.
pub trait Handler {
    /// Coalesced work from a burst of events, or a resync after connecting.
    fn work(&mut self, work: Work);

    /// Called about once a tick, connected or not: for work that waits.
    fn tick(&mut self) {}
}

/// What a run saw, for tests and the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections made (the WebSocket handshake succeeded).
    pub connections: u64,
    /// Outages logged: a warning each time the socket stopped answering.
    pub outages: u64,
    /// Event messages read.
    pub events: u64,
    /// Messages that were not events (logged, skipped).
    pub bad_messages: u64,
    /// Times work was handed to the handler.
    pub batches: u64,
}

/// Follows one socket's events.
#[derive(Debug, Clone)]
pub struct Watcher {
    socket: PathBuf,
    min: Duration,
    max: Duration,
}

type Socket = WebSocket<UnixStream>;

impl Watcher {
    /// Follows the events of this socket (`dev/lxd/sock` or `dev/incus/sock`).
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            min: BACKOFF_MIN,
            max: BACKOFF_MAX,
        }
    }

    /// Other reconnection pauses (tests).
    #[must_use]
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// The socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Follows the events until `stop` is set; then closes the stream and returns
    /// what it saw.
    pub fn run(&self, stop: &AtomicBool, handler: &mut dyn Handler) -> Stats {
        let shown = self.socket.display().to_string();
        let mut backoff = Backoff::new(self.min, self.max);
        let mut stats = Stats::default();
        let mut down = false;
        let mut pending = Pending::default();
        while !stop.load(Ordering::SeqCst) {
            match self.connect() {
                Ok(mut ws) => {
                    stats.connections += 1;
                    if down {
                        log::debug!(
                            "LXD events: {shown}: connected; following once it proves healthy"
                        );
                    } else if stats.connections == 1 {
                        log::info!("LXD events: following {shown}{EVENTS_ROUTE}");
                    }
                    pending.add_resync();
                    let (why, healthy) = follow(
                        &mut ws,
                        stop,
                        handler,
                        &mut pending,
                        &mut stats,
                        &mut down,
                        &shown,
                    );
                    if stop.load(Ordering::SeqCst) {
                        let _ = ws.close(None);
                        let _ = ws.flush();
                        break;
                    }
                    if healthy {
                        backoff.succeeded();
                    }
                    if down {
                        log::debug!("LXD events: the stream from {shown} ended ({why})");
                    } else {
                        stats.outages += 1;
                        down = true;
                        log::warn!(
                            "LXD events: the stream from {shown} ended ({why}); reconnecting with backoff (logged once until it answers)"
                        );
                    }
                }
                Err(e) => {
                    if down {
                        log::debug!("LXD events: {shown}: {e}");
                    } else {
                        stats.outages += 1;
                        down = true;
                        log::warn!(
                            "LXD events: cannot follow {shown}: {e}; trying again with backoff (logged once until it answers)"
                        );
                    }
                }
            }
            let wait = backoff.failed();
            pause(wait, stop, handler);
        }
        stats
    }

    /// Connects and upgrades to the events WebSocket.
    fn connect(&self) -> Result<Socket, ConnectError> {
        let stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_EVENT_BYTES))
            .max_frame_size(Some(MAX_EVENT_BYTES));
        let url = format!("ws://lxd{EVENTS_ROUTE}");
        let (ws, _response) =
            tungstenite::client::client_with_config(url.as_str(), stream, Some(config)).map_err(
                |e| match e {
                    HandshakeError::Failure(tungstenite::Error::Http(r)) => {
                        ConnectError::NotWebSocket(r.status().as_u16())
                    }
                    HandshakeError::Failure(e) => ConnectError::Handshake(e),
                    HandshakeError::Interrupted(_) => ConnectError::NoHandshake,
                },
            )?;
        ws.get_ref().set_read_timeout(Some(TICK))?;
        ws.get_ref().set_write_timeout(Some(TICK))?;
        Ok(ws)
    }
}

/// Why the events WebSocket could not be opened.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// Connecting to the socket, or setting its timeouts.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The server answered the upgrade with an HTTP status.
    #[error("GET {route}: HTTP {0} (not a WebSocket)", route = EVENTS_ROUTE)]
    NotWebSocket(u16),
    /// The WebSocket handshake failed.
    #[error("GET {route}: {0}", route = EVENTS_ROUTE)]
    Handshake(#[source] tungstenite::Error),
    /// No handshake in time.
    #[error(
        "GET {route}: no WebSocket handshake within {timeout:?}",
        route = EVENTS_ROUTE,
        timeout = HANDSHAKE_TIMEOUT
    )]
    NoHandshake,
}

/// Sleeps `wait` in ticks, returning early on a stop request.
fn pause(wait: Duration, stop: &AtomicBool, handler: &mut dyn Handler) {
    let end = Instant::now() + wait;
    loop {
        handler.tick();
        let now = Instant::now();
        if stop.load(Ordering::SeqCst) || now >= end {
            return;
        }
        std::thread::sleep((end - now).min(TICK));
    }
}

/// Hands pending work over (if any).
fn flush(pending: &mut Pending, handler: &mut dyn Handler, stats: &mut Stats) {
    let work = pending.take();
    if work.events > 0 {
        log::debug!(
            "LXD events: {} event(s), {} of them asking for nothing",
            work.events,
            work.ignored
        );
    }
    if !work.is_empty() {
        stats.batches += 1;
        handler.work(work);
    }
}

/// Reads events until the stream ends (returns why, and whether the connection
/// proved healthy) or `stop` is set. When it proves healthy while `down`, logs
/// that the socket answers again and clears `down`.
fn follow(
    ws: &mut Socket,
    stop: &AtomicBool,
    handler: &mut dyn Handler,
    pending: &mut Pending,
    stats: &mut Stats,
    down: &mut bool,
    shown: &str,
) -> (String, bool) {
    // The resync asked for on connecting goes first.
    flush(pending, handler, stats);
    let mut first_pending: Option<Instant> = None;
    let mut last_tick = Instant::now();
    let start = Instant::now();
    let mut healthy = false;
    let proved = |down: &mut bool| {
        if *down {
            log::warn!("LXD events: {shown} answers again; following its events");
            *down = false;
        }
    };
    loop {
        if stop.load(Ordering::SeqCst) {
            return ("stopped".to_owned(), healthy);
        }
        if !healthy && start.elapsed() >= HEALTHY_AFTER {
            healthy = true;
            proved(down);
        }
        if last_tick.elapsed() >= TICK {
            handler.tick();
            last_tick = Instant::now();
        }
        let text = match ws.read() {
            Ok(Message::Text(t)) => Some(t.as_str().to_owned()),
            Ok(Message::Binary(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            Ok(Message::Close(frame)) => {
                let why = frame.map_or_else(
                    || "closed by the server".to_owned(),
                    |f| format!("closed by the server: {} {}", f.code, f.reason),
                );
                return (why, healthy);
            }
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => None,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                // Quiet for a tick: hand over what piled up.
                flush(pending, handler, stats);
                first_pending = None;
                handler.tick();
                last_tick = Instant::now();
                continue;
            }
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                return ("connection closed".to_owned(), healthy);
            }
            Err(e) => return (e.to_string(), healthy),
        };
        if let Some(text) = text {
            stats.events += 1;
            match parse(&text) {
                Ok(event) => {
                    pending.add(event);
                    if !healthy {
                        healthy = true;
                        proved(down);
                    }
                }
                Err(why) => {
                    stats.bad_messages += 1;
                    if stats.bad_messages == 1 {
                        log::warn!("LXD events: {why}; skipped (further ones logged at debug)");
                    } else {
                        log::debug!("LXD events: {why}; skipped");
                    }
                }
            }
            let since = *first_pending.get_or_insert_with(Instant::now);
            if since.elapsed() >= FLUSH_EVERY {
                flush(pending, handler, stats);
                first_pending = None;
            }
        }
    }
}
