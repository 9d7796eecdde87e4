//! What a backend's faults are drawn from: every kind that applies once,
//! in a shuffled deck, before kinds are drawn freely, so a short soak
//! still covers them all; a kind the moment refuses (no leader to hit,
//! every election busy) goes back to the bottom of the deck, a few times
//! at most ([`Stream::put_back`]). How long each lasts is drawn too.

use std::collections::BTreeMap;
use std::time::Duration;

use elect_judge::history::{FaultKind, Micros};

use super::ledger::{Budget, budget};
use crate::options::Backend;
use crate::rng::Rng;

/// Whether a fault of `kind` can be dealt to `backend` (the machine's
/// load is dealt on its own; cutting members needs containers).
pub fn applies(kind: FaultKind, backend: Backend, containers: bool) -> bool {
    let service = backend != Backend::Raft;
    match kind {
        FaultKind::MemberKill
        | FaultKind::MemberPause
        | FaultKind::MemberStall
        | FaultKind::MemberStallLog
        | FaultKind::QuorumLoss
        | FaultKind::RollingRestart
        | FaultKind::OperatorDelete => service,
        FaultKind::MemberCut => service && containers,
        FaultKind::Compaction => backend == Backend::Etcd,
        FaultKind::ParentDelete => backend == Backend::Zk,
        FaultKind::Load => false,
        FaultKind::CandidateStall => backend == Backend::Raft,
        FaultKind::CandidateFreeze
        | FaultKind::CandidateKill
        | FaultKind::CandidateResign
        | FaultKind::WatchdogKill
        | FaultKind::GroupKill
        | FaultKind::CandidateCut
        | FaultKind::Switchover
        | FaultKind::PriorityChange
        | FaultKind::HealthFlap
        | FaultKind::HealthHang
        | FaultKind::HealthAll => true,
    }
}

/// How long a fault of `kind` lasts, drawn: member faults up to three
/// TTLs, a quorum loss up to two, health faults 0.5 to 8 s, other
/// candidate faults up to three TTLs, load 5 to 30 s.
pub fn duration(kind: FaultKind, ttl: Duration, rng: &mut Rng) -> Duration {
    let ttl = ttl.as_millis() as u64;
    let ms = match budget(kind) {
        // Long enough, often, for the leader's hand-off to be judged
        // (4.5 s), whatever the TTL.
        _ if matches!(
            kind,
            FaultKind::HealthFlap | FaultKind::HealthHang | FaultKind::HealthAll
        ) =>
        {
            rng.between(500, 8_000)
        }
        Budget::Instant => 0,
        Budget::Machine => rng.between(5_000, 30_000),
        _ if kind == FaultKind::QuorumLoss => rng.between(500, 2 * ttl),
        Budget::Member => rng.between(500, 3 * ttl),
        Budget::Candidate => rng.between(200, 3 * ttl),
    };
    Duration::from_millis(ms)
}

/// How often a kind refused when drawn from the deck goes back into it.
const DECK_RETRIES: u8 = 3;

/// A backend's stream of draws.
pub struct Stream {
    pub backend: Backend,
    pub rng: Rng,
    containers: bool,
    deck: Vec<FaultKind>,
    /// How often each kind was put back into the deck (see
    /// [`Stream::put_back`]).
    put_back: BTreeMap<FaultKind, u8>,
    /// When it draws next.
    pub next_at: Micros,
}

/// A draw: the kind, and whether it came from the deck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    pub kind: FaultKind,
    pub from_deck: bool,
}

impl Stream {
    /// `backend`'s stream from `seed`: its deck shuffled, its first draw
    /// at `first_at`.
    pub fn new(seed: u64, backend: Backend, containers: bool, first_at: Micros) -> Stream {
        let mut rng = Rng::new(seed, backend as u64 + 1);
        let mut deck: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| applies(*k, backend, containers))
            .collect();
        rng.shuffle(&mut deck);
        Stream {
            backend,
            rng,
            containers,
            deck,
            put_back: BTreeMap::new(),
            next_at: first_at,
        }
    }

    /// Whether every kind of the deck has been dealt.
    pub fn deck_dealt(&self) -> bool {
        self.deck.is_empty()
    }

    /// The next kind whose budget `free` says is free: from the deck
    /// while it lasts (none while only busy kinds are left in it), then
    /// drawn among the kinds that apply.
    pub fn draw(&mut self, free: impl Fn(Budget) -> bool) -> Option<Draw> {
        if let Some(pos) = self.deck.iter().position(|k| free(budget(*k))) {
            let kind = self.deck.remove(pos);
            return Some(Draw {
                kind,
                from_deck: true,
            });
        }
        if !self.deck.is_empty() {
            return None;
        }
        let kinds: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| applies(*k, self.backend, self.containers))
            .filter(|k| free(budget(*k)))
            .collect();
        (!kinds.is_empty()).then(|| Draw {
            kind: *self.rng.pick(&kinds),
            from_deck: false,
        })
    }

    /// A kind drawn from the deck and refused (no leader to hit at that
    /// moment, every election's candidates busy) goes back in at the
    /// bottom, at most [`DECK_RETRIES`] times: a short soak still deals
    /// every kind, and a kind that cannot be dealt at all does not hold
    /// the deck, and so the quiet stretches after it, for ever.
    pub fn put_back(&mut self, kind: FaultKind) {
        let tries = self.put_back.entry(kind).or_default();
        if *tries < DECK_RETRIES {
            *tries += 1;
            self.deck.push(kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn applying(backend: Backend, containers: bool) -> BTreeSet<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| applies(*k, backend, containers))
            .collect()
    }

    #[test]
    fn every_kind_that_applies_is_dealt_once_before_any_is_drawn_freely() {
        for backend in [Backend::Etcd, Backend::Zk, Backend::Raft] {
            let mut stream = Stream::new(7, backend, true, 0);
            let kinds = applying(backend, true);
            let mut dealt = BTreeSet::new();
            for _ in 0..kinds.len() {
                let draw = stream.draw(|_| true).expect("the deck deals");
                assert!(draw.from_deck);
                assert!(
                    dealt.insert(draw.kind),
                    "{:?} twice from the deck",
                    draw.kind
                );
            }
            assert_eq!(dealt, kinds, "{backend}");
            assert!(stream.deck_dealt());
            let free = stream.draw(|_| true).expect("free draws after the deck");
            assert!(!free.from_deck && kinds.contains(&free.kind));
        }
    }

    #[test]
    fn what_applies_follows_the_backend_and_the_mode() {
        let etcd = applying(Backend::Etcd, false);
        assert!(etcd.contains(&FaultKind::Compaction));
        assert!(!etcd.contains(&FaultKind::ParentDelete));
        assert!(
            !etcd.contains(&FaultKind::MemberCut),
            "cuts need containers"
        );
        assert!(applying(Backend::Etcd, true).contains(&FaultKind::MemberCut));
        let raft = applying(Backend::Raft, true);
        assert!(raft.contains(&FaultKind::CandidateStall));
        assert!(!raft.contains(&FaultKind::MemberKill), "no service to hit");
        assert!(!applying(Backend::Zk, true).contains(&FaultKind::Load));
    }

    #[test]
    fn a_busy_budget_is_passed_over_and_holds_the_deck_only_while_busy() {
        let mut stream = Stream::new(3, Backend::Zk, true, 0);
        let members_busy = |b: Budget| b != Budget::Member;
        while let Some(draw) = stream.draw(members_busy) {
            assert_ne!(budget(draw.kind), Budget::Member);
            if stream.deck.iter().all(|k| budget(*k) == Budget::Member) {
                break;
            }
        }
        assert!(!stream.deck_dealt(), "member kinds are still in the deck");
        assert_eq!(
            stream.draw(members_busy),
            None,
            "no free draw while the deck lasts"
        );
        let draw = stream.draw(|_| true).expect("members free again");
        assert_eq!(budget(draw.kind), Budget::Member);
    }

    #[test]
    fn a_refused_kind_goes_back_three_times_at_most() {
        let mut stream = Stream::new(5, Backend::Raft, true, 0);
        let first = stream.draw(|_| true).unwrap().kind;
        for _ in 0..5 {
            stream.put_back(first);
        }
        let again = stream.deck.iter().filter(|k| **k == first).count();
        assert_eq!(again, 3);
    }

    #[test]
    fn durations_stay_within_their_kinds_bounds() {
        let ttl = Duration::from_secs(2);
        let mut rng = Rng::new(11, 1);
        for _ in 0..1000 {
            let member = duration(FaultKind::MemberPause, ttl, &mut rng);
            assert!((Duration::from_millis(500)..=3 * ttl).contains(&member));
            let quorum = duration(FaultKind::QuorumLoss, ttl, &mut rng);
            assert!(quorum <= 2 * ttl);
            let load = duration(FaultKind::Load, ttl, &mut rng);
            assert!((Duration::from_secs(5)..=Duration::from_secs(30)).contains(&load));
            assert_eq!(
                duration(FaultKind::Compaction, ttl, &mut rng),
                Duration::ZERO
            );
        }
    }
}
