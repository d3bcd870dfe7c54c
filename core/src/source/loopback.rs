// SPDX-License-Identifier: Apache-2.0
//! Test support: a scripted HTTP server on loopback for the clouds' clients'
//! unit tests (one copy instead of one per cloud).

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::thread::JoinHandle;

/// A server on loopback: answers each connection with the next of `answers`
/// (raw HTTP responses, see [`answer`]) and hands back the requests it read.
/// Its base URL (`http://127.0.0.1:PORT`) and the thread to join.
pub(crate) fn serve(answers: Vec<Vec<u8>>) -> (String, JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for a in answers {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = s.write_all(&a);
        }
        seen
    });
    (url, h)
}

/// A raw HTTP/1.1 response: `status` (`200 OK`), `headers` (each ending in
/// `\r\n`), then `body` with its length.
pub(crate) fn answer(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}
