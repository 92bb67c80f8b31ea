//! The client's address: the connection's peer, unless the peer is one of the operator's proxies
//! (`SKIPLOCK_TRUSTED_PROXIES`), in which case the address it says it forwarded for. `X-Forwarded-For`
//! is read from the right, past the trusted proxies, so a client cannot name an address by sending the
//! header itself: whatever it sent stands left of what the proxies appended.

use std::net::IpAddr;

use actix_web::HttpRequest;
use ipnet::IpNet;

/// The networks whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(pub Vec<IpNet>);

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address as the request shows it; None only for a request with no peer (a test's).
    pub fn client_of(&self, req: &HttpRequest) -> Option<IpAddr> {
        let peer = req.peer_addr()?.ip();
        let forwarded = req.headers().get_all("x-forwarded-for").filter_map(|v| v.to_str().ok());
        Some(self.client_behind(peer, forwarded))
    }

    /// The first address from the right that is not a trusted proxy, starting from the peer; an
    /// unreadable entry ends the walk at the last address known.
    fn client_behind<'a>(&self, peer: IpAddr, forwarded: impl Iterator<Item = &'a str>) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let hops: Vec<&str> = forwarded.flat_map(|v| v.split(',')).map(str::trim).collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Ok(ip) = hop.parse::<IpAddr>() else { return client };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_for_is_believed_from_trusted_proxies_only_and_read_from_the_right() {
        let proxies = TrustedProxies(vec!["10.0.0.0/8".parse().unwrap()]);
        let none = std::iter::empty();
        assert_eq!(proxies.client_behind(ip("203.0.113.9"), ["1.2.3.4"].into_iter()), ip("203.0.113.9"));
        assert_eq!(proxies.client_behind(ip("10.0.0.2"), none), ip("10.0.0.2"));
        // A client that sends its own header: the proxy appends the address it saw, which is what counts.
        assert_eq!(proxies.client_behind(ip("10.0.0.2"), ["1.2.3.4, 198.51.100.7"].into_iter()), ip("198.51.100.7"));
        // Two proxies of the operator's in a row.
        assert_eq!(proxies.client_behind(ip("10.0.0.2"), ["198.51.100.7", "10.1.1.1"].into_iter()), ip("198.51.100.7"));
        assert_eq!(proxies.client_behind(ip("10.0.0.2"), ["garbage, 10.1.1.1"].into_iter()), ip("10.1.1.1"));
    }
}
