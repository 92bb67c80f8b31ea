//! The outbound HTTP client for webhook deliveries: reqwest inside tower layers (a timeout and a
//! per-node concurrency limit), redirects never followed, no proxies, answers read up to a bound, and
//! the address guard applied to every address it would connect to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

use super::guard::AddressGuard;

/// The most of a receiver's answer that is read; the rest is ignored.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What a delivery attempt got back.
#[derive(Debug)]
pub enum Reply {
    /// `truncated`: the answer was longer than `MAX_ANSWER_BYTES` and only that much was read.
    Answered { status: u16, retry_after: Option<u64>, body: Vec<u8>, truncated: bool },
    /// No usable answer. `kind` is the metrics outcome: refused (the address guard), timeout or
    /// connect_error.
    Failed { kind: Failure, reason: String },
}

/// Why no answer came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Timeout,
    /// Any other failure to connect or send.
    ConnectError,
    /// The address guard refused the destination.
    Refused,
    /// The name did not resolve.
    Dns,
    /// The TLS handshake failed (a certificate, a protocol).
    Tls,
    /// The receiver refused or reset the connection.
    ConnectionRefused,
    /// The connection was lost while the answer was read.
    Unreadable,
}

impl Failure {
    /// The kind of a failure to connect or send, from reqwest's description of it and its causes.
    fn of(reason: &str) -> Self {
        let lower = reason.to_ascii_lowercase();
        if reason.contains("may not reach") {
            Self::Refused
        } else if lower.contains("dns error") || lower.contains("failed to lookup") {
            Self::Dns
        } else if lower.contains("connection refused") || lower.contains("connection reset") {
            Self::ConnectionRefused
        } else if lower.contains("tls") || lower.contains("certificate") || lower.contains("ssl") {
            Self::Tls
        } else {
            Self::ConnectError
        }
    }
}

fn failed(kind: Failure, reason: String) -> Reply {
    Reply::Failed { kind, reason }
}

#[derive(Clone)]
pub struct WebhookClient {
    service: BoxCloneSyncService<reqwest::Request, reqwest::Response, BoxError>,
    guard: Arc<AddressGuard>,
    timeout: Duration,
}

/// Resolves hostnames and keeps only the addresses the guard permits, so a name that points inside
/// fails to resolve rather than connecting.
struct GuardedResolver {
    guard: Arc<AddressGuard>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let permitted: Vec<SocketAddr> = found.into_iter().filter(|a| guard.permits(a.ip())).collect();
            if permitted.is_empty() {
                return Err(format!("{} resolves only to addresses webhooks may not reach", name.as_str()).into());
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

impl WebhookClient {
    pub fn new(guard: AddressGuard, timeout: Duration, max_in_flight: usize) -> Self {
        let guard = Arc::new(guard);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver { guard: guard.clone() }))
            .connect_timeout(timeout)
            .user_agent(concat!("skiplock/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the webhook client builds");
        let service = ServiceBuilder::new().concurrency_limit(max_in_flight).timeout(timeout).service(client);
        Self { service: BoxCloneSyncService::new(service), guard, timeout }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// POSTs `body` with `headers` to `url` and reads the answer (bounded in size and time).
    pub async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Reply {
        let url = match reqwest::Url::parse(url) {
            Ok(url) => url,
            Err(e) => return failed(Failure::ConnectError, format!("invalid url: {e}")),
        };
        // IP literals never reach the resolver; check them here.
        let literal: Option<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(ip.into()),
            Some(url::Host::Ipv6(ip)) => Some(ip.into()),
            _ => None,
        };
        if let Some(ip) = literal {
            if !self.guard.permits(ip) {
                return failed(Failure::Refused, format!("{ip} is an address webhooks may not reach"));
            }
        }
        let mut request = reqwest::Request::new(reqwest::Method::POST, url);
        *request.body_mut() = Some(body.into());
        let map = request.headers_mut();
        map.insert(reqwest::header::CONTENT_TYPE, "application/json".parse().expect("a valid header"));
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (name.parse::<reqwest::header::HeaderName>(), value.parse()) {
                map.insert(name, value);
            }
        }
        let mut service = self.service.clone();
        let response = match service.ready().await {
            Ok(ready) => ready.call(request).await,
            Err(e) => Err(e),
        };
        let mut response = match response {
            Ok(r) => r,
            Err(e) => {
                let reason = describe(&*e);
                let kind =
                    if e.is::<tower::timeout::error::Elapsed>() { Failure::Timeout } else { Failure::of(&reason) };
                return failed(kind, reason);
            }
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let mut body = Vec::new();
        let mut truncated = false;
        let read = tokio::time::timeout(self.timeout, async {
            while let Some(chunk) = response.chunk().await? {
                let room = MAX_ANSWER_BYTES - body.len();
                truncated = chunk.len() > room;
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if truncated {
                    break;
                }
            }
            Ok::<_, reqwest::Error>(())
        })
        .await;
        match read {
            Ok(Ok(())) => Reply::Answered { status, retry_after, body, truncated },
            Ok(Err(e)) => failed(Failure::Unreadable, format!("reading the answer failed: {}", describe(&e))),
            Err(_) => failed(Failure::Timeout, "reading the answer timed out".into()),
        }
    }
}

/// The error and its causes, which is where reqwest puts the reason (refused, reset, guard...).
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
