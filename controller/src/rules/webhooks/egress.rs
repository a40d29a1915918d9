//! Where webhook deliveries may go. A Webhook's URL comes from
//! a manifest, so by default pamd does not POST signed bodies into its own
//! network: loopback, private (RFC 1918), shared (CGNAT, 100.64/10),
//! link-local (cloud metadata at 169.254.169.254), unique-local (fc00::/7),
//! unspecified, multicast and broadcast addresses are refused, IPv4 also
//! in its IPv6 forms (`::ffff:127.0.0.1`, `::127.0.0.1`,
//! `64:ff9b::127.0.0.1`). `[webhooks] allow_networks` lists the networks
//! that may be reached anyway.
//!
//! The address checked is the address connected to: the sender resolves
//! names through [`Egress::check`] at connect time (reconcile::webhooks),
//! so a name that resolves elsewhere the next time (DNS rebinding) is
//! checked again; an IP literal, which is never resolved, is checked
//! before the request is made.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The config key named by refusals.
pub const ALLOW_KEY: &str = "[webhooks] allow_networks";

/// Which addresses deliveries may connect to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Egress {
    /// Networks allowed although they are private, loopback, …
    pub allow: Vec<IpNet>,
}

impl Egress {
    /// An egress rule allowing these networks (CIDRs or single addresses,
    /// as [`parse_network`] takes them).
    pub fn allowing(networks: &[&str]) -> Result<Egress, String> {
        let allow = networks
            .iter()
            .map(|n| parse_network(n))
            .collect::<Result<_, _>>()?;
        Ok(Egress { allow })
    }

    /// Ok when a delivery may connect to `ip`; otherwise why not, naming
    /// the address, what it is, and the key that would allow it.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        let canonical = canonical(ip);
        if self
            .allow
            .iter()
            .any(|n| n.contains(&canonical) || n.contains(&ip))
        {
            return Ok(());
        }
        match restricted(canonical) {
            None => Ok(()),
            Some(what) => Err(format!(
                "address {ip} is not allowed: {what}; see {ALLOW_KEY}"
            )),
        }
    }
}

/// A network as the config writes it: a CIDR (`10.0.0.0/8`, `::1/128`) or
/// one address (`127.0.0.1`).
pub fn parse_network(text: &str) -> Result<IpNet, String> {
    let t = text.trim();
    t.parse::<IpNet>()
        .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("{text:?} is not a network, expected a CIDR such as \"10.0.0.0/8\" or \"::1/128\", or an address")
        })
}

/// IPv4 addresses written as IPv6 (mapped, compatible, NAT64) as the IPv4
/// address they reach; others as they are.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    let s = v6.segments();
    let v4 = || Ipv4Addr::from((u128::from(v6) & 0xffff_ffff) as u32);
    match s {
        // ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, _, _] => IpAddr::V4(v4()),
        // ::a.b.c.d (deprecated "compatible"), but not :: and ::1.
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => IpAddr::V4(v4()),
        // 64:ff9b::a.b.c.d (NAT64 well-known prefix)
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => IpAddr::V4(v4()),
        _ => ip,
    }
}

/// What a non-public address is, or None for a public one.
fn restricted(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => restricted_v4(v4),
        IpAddr::V6(v6) => restricted_v6(v6),
    }
}

fn restricted_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("unspecified (0.0.0.0/8)")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private (10/8, 172.16/12, 192.168/16)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared address space (CGNAT, 100.64/10)")
    } else if ip.is_link_local() {
        Some("link-local (169.254/16)")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

fn restricted_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some("unspecified (::)")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique-local (fc00::/7)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(e: &Egress, ip: &str) -> bool {
        e.check(ip.parse().unwrap()).is_err()
    }

    #[test]
    fn private_addresses_are_refused_unless_allowed() {
        let none = Egress::default();
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "255.255.255.255",
            "224.0.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "ff02::1",
        ] {
            assert!(refused(&none, ip), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
        ] {
            assert!(!refused(&none, ip), "{ip}");
        }
        let e = none.check("::ffff:127.0.0.1".parse().unwrap()).unwrap_err();
        assert_eq!(
            e,
            "address ::ffff:127.0.0.1 is not allowed: loopback; see [webhooks] allow_networks"
        );

        let some = Egress::allowing(&["127.0.0.0/8", "::1/128", "10.1.2.3"]).unwrap();
        for ip in ["127.0.0.1", "::ffff:127.0.0.1", "::1", "10.1.2.3"] {
            assert!(!refused(&some, ip), "{ip}");
        }
        for ip in ["10.1.2.4", "192.168.0.1", "169.254.169.254"] {
            assert!(refused(&some, ip), "{ip}");
        }
        let bad = Egress::allowing(&["127.0.0.0/33"]).unwrap_err();
        assert!(bad.contains("\"127.0.0.0/33\" is not a network"), "{bad}");
        assert!(Egress::allowing(&["localhost"]).is_err());
    }
}
