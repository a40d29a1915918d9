//! The worker protocol's number, checked by both sides at registration.

/// The worker protocol this build speaks: the requests and
/// answers of `/api/v1/workers/*`. pamd and the worker tell each other at
/// registration, and each refuses a peer outside what it serves with an
/// error that says which side to upgrade — instead of failing later on a
/// field one of them does not know. Raised when a change is not readable
/// by the previous release's peer.
pub const PROTOCOL_VERSION: u32 = 1;

/// The oldest worker protocol this build still serves.
pub const PROTOCOL_MIN: u32 = 1;

/// A peer's protocol: absent means 1 (every worker and pamd before the
/// field was sent).
pub fn protocol_of(said: Option<u32>) -> u32 {
    said.unwrap_or(1)
}

/// Which side of the worker protocol sent a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// pamd checking a registration.
    Worker,
    /// A worker checking pamd's answer.
    Pamd,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Worker => "the worker",
            Peer::Pamd => "pamd",
        }
    }

    fn other(self) -> Peer {
        match self {
            Peer::Worker => Peer::Pamd,
            Peer::Pamd => Peer::Worker,
        }
    }
}

/// Why `peer`'s protocol is refused, naming who must upgrade; `None` when
/// this build serves it.
pub fn protocol_mismatch(peer: Peer, theirs: u32) -> Option<String> {
    let (they, me) = (peer.name(), peer.other().name());
    let this = match peer {
        Peer::Worker => "this pamd",
        Peer::Pamd => "this worker",
    };
    let ours = format!("{this} speaks worker protocol {PROTOCOL_MIN} to {PROTOCOL_VERSION}");
    if theirs > PROTOCOL_VERSION {
        Some(format!(
            "{they} speaks worker protocol {theirs} and {ours}: upgrade {me} to {they}'s release"
        ))
    } else if theirs < PROTOCOL_MIN {
        Some(format!(
            "{they} speaks worker protocol {theirs} and {ours}: upgrade {they} to {me}'s release"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_outside_the_range_is_told_who_must_upgrade() {
        assert_eq!(protocol_mismatch(Peer::Worker, PROTOCOL_VERSION), None);
        assert_eq!(protocol_of(None), 1);
        let newer = protocol_mismatch(Peer::Worker, PROTOCOL_VERSION + 1).unwrap();
        assert!(
            newer.ends_with("upgrade pamd to the worker's release"),
            "{newer}"
        );
        let newer = protocol_mismatch(Peer::Pamd, PROTOCOL_VERSION + 1).unwrap();
        assert!(
            newer.ends_with("upgrade the worker to pamd's release"),
            "{newer}"
        );
        let older = protocol_mismatch(Peer::Worker, 0).unwrap();
        assert!(
            older.ends_with("upgrade the worker to pamd's release"),
            "{older}"
        );
    }
}
