//! Who sent a request: the TCP peer and the listener's own protocol, or, only when the peer
//! is a configured trusted proxy, the client and protocol that proxy reports in
//! `X-Forwarded-For`/`X-Forwarded-Proto` or `Forwarded` (RFC 7239). From any other peer those
//! headers are ignored: anyone can send them.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use ipnet::IpNet;

/// The client of one request, as the request line in the log reports it. The server puts one
/// in every request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientInfo {
    pub addr: IpAddr,
    /// Whether the client's own connection was HTTPS (to us, or to the proxy in front).
    pub https: bool,
}

impl ClientInfo {
    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }
}

/// `[server] trusted_proxies`, parsed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(networks: Vec<IpNet>) -> Self {
        Self(networks)
    }

    fn contains(&self, ip: IpAddr) -> bool {
        // A dual-stack listener sees IPv4 peers as `::ffff:a.b.c.d`.
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request that came from `peer` on a listener that is HTTPS or not.
    ///
    /// Each proxy appends the address it received the request from, so the list is read
    /// right to left: a hop that is itself a trusted proxy vouches for the one before it, and
    /// the first hop that is not is the client. Whatever lies further left was written by the
    /// client and is never believed. A hop that cannot be read (`unknown`, an obfuscated
    /// name, garbage) stops the walk at the last hop that could.
    pub fn client(&self, peer: IpAddr, https: bool, headers: &HeaderMap) -> ClientInfo {
        let own = ClientInfo {
            addr: peer.to_canonical(),
            https,
        };
        if self.0.is_empty() || !self.contains(peer) {
            return own;
        }
        let hops = forwarded_hops(headers);
        let mut chosen = None;
        for hop in hops.iter().rev() {
            let Some(addr) = hop.addr else { break };
            chosen = Some(hop);
            if !self.contains(addr) {
                break;
            }
        }
        match chosen {
            Some(hop) => ClientInfo {
                addr: hop.addr.map_or(own.addr, |a| a.to_canonical()),
                https: hop.https.unwrap_or(https),
            },
            None => own,
        }
    }
}

/// One hop a proxy reported: the address it received from, and that connection's protocol
/// when known.
#[derive(Debug, PartialEq)]
struct Hop {
    addr: Option<IpAddr>,
    https: Option<bool>,
}

/// The hops, client side first: from `X-Forwarded-For` (most proxies set it) when present,
/// else from `Forwarded`. A proxy must set or clear the one it uses (README: the proxy
/// section of docs/operations.md).
fn forwarded_hops(headers: &HeaderMap) -> Vec<Hop> {
    if headers.contains_key("x-forwarded-for") {
        let Some(addrs) = joined_values(headers, "x-forwarded-for") else {
            return Vec::new();
        };
        let protos = joined_values(headers, "x-forwarded-proto").unwrap_or_default();
        // Lined up with the addresses when a proxy appends one per hop; otherwise the
        // right-most value is what the nearest proxy set, and it describes the client's hop.
        let nearest = protos.last().map(|p| parse_proto(p));
        let aligned = protos.len() == addrs.len();
        return addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| Hop {
                addr: parse_node(addr),
                https: if aligned {
                    parse_proto(protos[i])
                } else {
                    nearest.flatten()
                },
            })
            .collect();
    }
    let Some(elements) = joined_values(headers, "forwarded") else {
        return Vec::new();
    };
    elements
        .iter()
        .map(|element| {
            let mut hop = Hop {
                addr: None,
                https: None,
            };
            for pair in split_outside_quotes(element, ';') {
                let Some((name, value)) = pair.split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match name.trim().to_ascii_lowercase().as_str() {
                    "for" => hop.addr = parse_node(value),
                    "proto" => hop.https = parse_proto(value),
                    _ => {}
                }
            }
            hop
        })
        .collect()
}

/// Every value of `name`, in order, split into its comma-separated entries; `None` when one
/// is not text (then none of it can be believed).
fn joined_values<'a>(headers: &'a HeaderMap, name: &str) -> Option<Vec<&'a str>> {
    let mut out = Vec::new();
    for value in headers.get_all(name) {
        out.extend(
            split_outside_quotes(value.to_str().ok()?, ',')
                .into_iter()
                .map(str::trim)
                .filter(|e| !e.is_empty()),
        );
    }
    Some(out)
}

/// `text` split at `separator`, except inside double quotes (RFC 7239 quoted strings).
fn split_outside_quotes(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:4711`.
fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    text.parse::<IpAddr>()
        .or_else(|_| text.parse::<SocketAddr>().map(|s| s.ip()))
        .or_else(|_| {
            text.strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or_default()
                .parse::<IpAddr>()
        })
        .ok()
}

fn parse_proto(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "https" => Some(true),
        "http" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(list: &[&str]) -> TrustedProxies {
        let net = |n: &&str| {
            n.parse::<IpNet>()
                .unwrap_or_else(|_| IpNet::from(n.parse::<IpAddr>().unwrap()))
        };
        TrustedProxies::new(list.iter().map(net).collect())
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    fn client(trusted: &[&str], peer: &str, https: bool, pairs: &[(&str, &str)]) -> (String, bool) {
        let info = proxies(trusted).client(peer.parse().unwrap(), https, &headers(pairs));
        (info.addr.to_string(), info.https)
    }

    #[test]
    fn headers_from_an_untrusted_peer_are_ignored() {
        let spoof = [
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=203.0.113.9;proto=https"),
        ];
        assert_eq!(
            client(&[], "192.0.2.7", false, &spoof),
            ("192.0.2.7".into(), false)
        );
        assert_eq!(
            client(&["10.0.0.0/8"], "192.0.2.7", false, &spoof),
            ("192.0.2.7".into(), false)
        );
    }

    #[test]
    fn the_right_most_hop_that_is_not_a_trusted_proxy_is_the_client() {
        let trusted = ["10.0.0.0/8", "127.0.0.1/32"];
        // A client-written entry on the left is never believed.
        let xff = [("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.2")];
        assert_eq!(client(&trusted, "127.0.0.1", false, &xff).0, "203.0.113.9");
        // Several header lines are one list, in order.
        let split = [
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "203.0.113.9, 10.0.0.2"),
        ];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &split).0,
            "203.0.113.9"
        );
        // Every hop a trusted proxy: the left-most is as far as the chain goes.
        let internal = [("x-forwarded-for", "10.0.0.3, 10.0.0.2")];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &internal).0,
            "10.0.0.3"
        );
        // An unreadable hop stops the walk at the last readable one.
        let garbage = [("x-forwarded-for", "203.0.113.9, nonsense, 10.0.0.2")];
        assert_eq!(client(&trusted, "127.0.0.1", false, &garbage).0, "10.0.0.2");
        let nearest_garbage = [("x-forwarded-for", "203.0.113.9, nonsense")];
        assert_eq!(
            client(&trusted, "127.0.0.1", true, &nearest_garbage),
            ("127.0.0.1".into(), true)
        );
        // IPv4 peers of a dual-stack listener are matched as IPv4.
        assert_eq!(
            client(&trusted, "::ffff:127.0.0.1", false, &xff).0,
            "203.0.113.9"
        );
    }

    #[test]
    fn the_protocol_is_the_clients_hop() {
        let trusted = ["127.0.0.1"];
        let one = [
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-proto", "https"),
        ];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &one),
            ("203.0.113.9".into(), true)
        );
        // Appended per hop: lined up with the addresses.
        let chain = [
            ("x-forwarded-for", "203.0.113.9, 127.0.0.1"),
            ("x-forwarded-proto", "https, http"),
        ];
        assert!(client(&trusted, "127.0.0.1", false, &chain).1);
        // Set once by the nearest proxy, after a client-written address: the nearest wins.
        let set = [
            ("x-forwarded-for", "6.6.6.6, 203.0.113.9"),
            ("x-forwarded-proto", "https"),
        ];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &set),
            ("203.0.113.9".into(), true)
        );
        // No protocol reported: the listener's own.
        let bare = [("x-forwarded-for", "203.0.113.9")];
        assert!(client(&trusted, "127.0.0.1", true, &bare).1);
        assert!(!client(&trusted, "127.0.0.1", false, &bare).1);
    }

    #[test]
    fn forwarded_is_read_when_x_forwarded_for_is_absent() {
        let trusted = ["127.0.0.1", "2001:db8::1"];
        // A client-written element, the client as the first proxy saw it, that proxy.
        let standard = [(
            "forwarded",
            "for=6.6.6.6;proto=http, For=\"[2001:db8:cafe::17]:4711\";proto=https, \
             for=\"[2001:db8::1]\";by=x",
        )];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &standard),
            ("2001:db8:cafe::17".into(), true)
        );
        let v4 = [("forwarded", "for=\"203.0.113.9:47011\";proto=HTTPS")];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &v4),
            ("203.0.113.9".into(), true)
        );
        let hidden = [("forwarded", "for=_hidden;proto=https")];
        assert_eq!(
            client(&trusted, "127.0.0.1", false, &hidden),
            ("127.0.0.1".into(), false)
        );
        // X-Forwarded-For, when present, is the one read.
        let both = [
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=6.6.6.6"),
        ];
        assert_eq!(client(&trusted, "127.0.0.1", false, &both).0, "203.0.113.9");
    }

    #[test]
    fn node_forms() {
        for (text, ip) in [
            ("192.0.2.1", "192.0.2.1"),
            ("192.0.2.1:4711", "192.0.2.1"),
            ("2001:db8::1", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("[2001:db8::1]:4711", "2001:db8::1"),
        ] {
            assert_eq!(parse_node(text), Some(ip.parse().unwrap()), "{text}");
        }
        for text in ["unknown", "_hidden", "", "[::1", "1.2.3"] {
            assert_eq!(parse_node(text), None, "{text}");
        }
    }
}
