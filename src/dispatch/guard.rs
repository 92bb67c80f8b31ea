//! The address guard: webhook deliveries may not reach loopback, private, link-local, multicast,
//! cloud-metadata or other special-purpose addresses, unless the operator allows those networks.
//! It is applied to every address a delivery would connect to (after DNS resolution), so a hostname
//! that resolves inside cannot be used to get there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

#[derive(Debug, Clone, Default)]
pub struct AddressGuard {
    allowed: Vec<IpNet>,
}

impl AddressGuard {
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self { allowed }
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allowed.iter().any(|net| net.contains(&ip)) || !is_special(ip)
    }
}

fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_special_v4(v4),
        IpAddr::V6(v6) => is_special_v6(v6),
    }
}

fn is_special_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16, cloud metadata included
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_special_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_special_v4(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local, fd00:ec2::254 (metadata) included
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
        || ip.segments()[..6] == [0; 6] // IPv4-compatible
        || ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] // NAT64 can reach any IPv4 address
        || first == 0x2001 && ip.segments()[1] == 0xdb8 // documentation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn inside_addresses_are_refused() {
        let guard = AddressGuard::default();
        for addr in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "224.0.0.1",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "ff02::1",
        ] {
            assert!(!guard.permits(ip(addr)), "{addr} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        let guard = AddressGuard::default();
        for addr in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:1.1.1.1"] {
            assert!(guard.permits(ip(addr)), "{addr} must pass");
        }
    }

    #[test]
    fn allowed_networks_are_exempt() {
        let guard = AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(guard.permits(ip("127.0.0.1")));
        assert!(!guard.permits(ip("10.0.0.1")));
    }
}
