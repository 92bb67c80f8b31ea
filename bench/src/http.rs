//! A minimal HTTP/1.1 keep-alive client for load generation. A request is prepared once, as the bytes
//! that go on the wire, and written as it is; an answer is read by its Content-Length. A general client
//! (reqwest) spends about as much CPU per request as the server does, and on a small machine that CPU is
//! taken from the system under test; pgbench, the load generator of the SQL peers, is as lean as this.

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request ready to send: its whole text.
#[derive(Clone)]
pub struct Request(Vec<u8>);

impl Request {
    /// A POST of a JSON body to `path` on `host` (host:port), with a bearer token.
    pub fn post(host: &str, path: &str, token: &str, body: &[u8]) -> Request {
        let mut bytes = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        Request(bytes)
    }

    /// Writes `bytes` over the body's bytes at each offset of `at` (fields of fixed width), so that
    /// requests differing only in a few digits are one request rewritten rather than built anew.
    pub fn overwrite_body(&mut self, at: &[usize], bytes: &[u8]) {
        let start = find(&self.0, b"\r\n\r\n").expect("a request has a head") + 4;
        for at in at {
            self.0[start + at..start + at + bytes.len()].copy_from_slice(bytes);
        }
    }
}

/// One kept-alive connection.
pub struct Connection {
    stream: TcpStream,
    /// Bytes read past the previous answer's end (none, as requests are not pipelined).
    buffer: Vec<u8>,
}

/// An answer: its status and its body.
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Connection {
    pub async fn open(host: &str) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(host).await.with_context(|| format!("connecting to {host}"))?;
        stream.set_nodelay(true)?;
        Ok(Connection { stream, buffer: Vec::with_capacity(64 * 1024) })
    }

    pub async fn send(&mut self, request: &Request) -> anyhow::Result<Response> {
        self.stream.write_all(&request.0).await?;
        // Read until the head is complete.
        let head_end = loop {
            if let Some(at) = find(&self.buffer, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buffer[..head_end]).context("a response head that is not text")?;
        let status = head.get(9..12).and_then(|s| s.parse().ok()).context("a response without a status")?;
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
            })
            .context("a response without content-length (chunked answers are not read here)")?;
        while self.buffer.len() < head_end + length {
            self.fill().await?;
        }
        let body = self.buffer[head_end..head_end + length].to_vec();
        self.buffer.drain(..head_end + length);
        Ok(Response { status, body })
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        self.buffer.reserve(64 * 1024);
        if self.stream.read_buf(&mut self.buffer).await? == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
