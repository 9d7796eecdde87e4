//! Znode names of the election recipes `elect` takes part in or reads.
//!
//! - ours and Curator `LeaderLatch`: `_c_<uuid>-latch-<seq>`;
//! - Curator `LeaderSelector`: `_c_<uuid>-lock-<seq>`;
//! - kazoo `Election`: `<uuid hex>__lock__<seq>`.
//!
//! ZooKeeper appends a 10-digit sequence number, counted per parent, so
//! participants of any of these recipes order by it; the lowest leads.

/// The lock name of Curator's `LeaderLatch`, which `elect` candidates use.
pub const LATCH: &str = "latch-";

/// Markers that make a child of the election path a participant.
const MARKERS: [&str; 3] = ["-latch-", "-lock-", "__lock__"];

/// Width of the sequence ZooKeeper appends.
const SEQUENCE_DIGITS: usize = 10;

/// One participant's znode, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    pub name: String,
    pub sequence: u64,
}

/// Parses a child name; `None` if it is not a participant.
pub fn participant(name: &str) -> Option<Participant> {
    if name.len() <= SEQUENCE_DIGITS || !name.is_char_boundary(name.len() - SEQUENCE_DIGITS) {
        return None;
    }
    let (head, digits) = name.split_at(name.len() - SEQUENCE_DIGITS);
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !MARKERS.iter().any(|m| head.ends_with(m)) {
        return None;
    }
    Some(Participant {
        name: name.to_owned(),
        sequence: digits.parse().ok()?,
    })
}

/// The participants among `children`, leader first.
pub fn queue(children: &[String]) -> Vec<Participant> {
    let mut queue: Vec<Participant> = children.iter().filter_map(|c| participant(c)).collect();
    queue.sort_by_key(|p| p.sequence);
    queue
}

/// The last four hex digits of every uuid `elect` puts in its znodes'
/// names ("e1ec"), which tell its candidates from Curator's (whose names
/// are alike): only elect's follow a switchover. One Curator uuid in
/// 65,536 carries it by chance; a switchover past such a candidate ends
/// by its timeout, as one past a paused candidate does.
pub const ELECT_UUID_TAG: &str = "e1ec";

/// Which tool's candidate a participant's name says it is: `elect`,
/// `curator` (LeaderLatch or LeaderSelector) or `kazoo`.
pub fn made_by(name: &str) -> &'static str {
    let Some(head) = name.get(..name.len().saturating_sub(SEQUENCE_DIGITS)) else {
        return "curator";
    };
    if head.ends_with("__lock__") {
        "kazoo"
    } else if head.ends_with(&format!("{ELECT_UUID_TAG}-{LATCH}")) {
        "elect"
    } else {
        "curator"
    }
}

/// A random RFC 4122 version-4 UUID, as text: the protection Curator puts in
/// names so a candidate can find its own znode after a lost create reply.
/// Its last four digits are [`ELECT_UUID_TAG`].
pub fn fresh_uuid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let (hi, lo) = (random(), random());
    let hi = (hi & !0xf000) | 0x4000; // version 4
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62); // variant 1
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        (lo & 0xffff_ffff_0000) | 0xe1ec
    )
}

/// The prefix of the priority znodes: `priority-<sequence>`, one per
/// participant that published one (ephemeral, its data the priority; none
/// for the default). No recipe's marker, so no participant.
const PRIORITY: &str = "priority-";

/// The priority znode of the participant with `sequence`.
pub fn priority_node(election: &str, sequence: u64) -> String {
    format!("{election}/{PRIORITY}{sequence:010}")
}

/// The participant's sequence a child named as a priority znode is for.
pub fn priority_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PRIORITY)?;
    (digits.len() == SEQUENCE_DIGITS && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The last part of a znode's path (`own_key` is the path's bytes).
pub fn candidate_sequence_name(path: &[u8]) -> String {
    let path = String::from_utf8_lossy(path);
    path.rsplit('/').next().unwrap_or_default().to_owned()
}

/// The znode a leader that a manual switchover chose creates (ephemeral,
/// its data the leader's znode name): priorities do not undo that choice
/// while it leads.
pub fn pin_node(election: &str) -> String {
    format!("{election}/pinned")
}

/// The znode of the switchover under way (see [`crate::steer`]): a child
/// of the election that is no participant (it has no recipe's marker), so
/// that creating it takes what joining does, the election's CREATE.
pub fn switchover_record(election: &str) -> String {
    format!("{election}/switchover")
}

/// The path prefix our candidate creates under `election`.
pub fn candidate_prefix(election: &str, uuid: &str) -> String {
    format!("{election}/_c_{uuid}-{LATCH}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn understands_curator_and_kazoo() {
        let names: Vec<String> = [
            "_c_0f8e0b8a-4c1a-4b5e-9a8e-3d1f2b6c7a9e-latch-0000000007",
            "_c_0f8e0b8a-4c1a-4b5e-9a8e-3d1f2b6c7a9e-lock-0000000003",
            "8a1c9f6e2b7d4e0f9a3b5c7d1e2f4a6b__lock__0000000005",
            "leader",
            "x-latch-123",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let q = queue(&names);
        assert_eq!(
            q.iter().map(|p| p.sequence).collect::<Vec<_>>(),
            vec![3, 5, 7]
        );
    }

    #[test]
    fn uuids_look_like_curators() {
        let u = fresh_uuid();
        assert_eq!(u.len(), 36, "{u}");
        assert_eq!(&u[14..15], "4");
        assert_ne!(fresh_uuid(), u);
        let prefix = candidate_prefix("/e", &u);
        let name = format!("{}0000000001", &prefix["/e/".len()..]);
        assert_eq!(participant(&name).unwrap().sequence, 1);
        assert_eq!(made_by(&name), "elect");
        assert_eq!(
            made_by("_c_0f8e0b8a-4c1a-4b5e-9a8e-3d1f2b6c7a9e-latch-0000000007"),
            "curator"
        );
        assert_eq!(
            made_by("8a1c9f6e2b7d4e0f9a3b5c7d1e2f4a6b__lock__0000000005"),
            "kazoo"
        );
        assert!(participant("switchover").is_none());
        assert_eq!(priority_node("/e", 12), "/e/priority-0000000012");
        assert_eq!(priority_of("priority-0000000012"), Some(12));
        assert!(participant("priority-0000000012").is_none());
        assert!(participant("pinned").is_none());
    }
}
