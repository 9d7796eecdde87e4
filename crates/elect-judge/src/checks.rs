//! The checks, each a function of the history alone.
//!
//! What counts as leading is read from outside the candidates: a command's
//! processes alive and not stopped (the sampler), writes the fenced store
//! accepted, and the lines the candidates printed. Nothing here knows how
//! any backend decides.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::history::{
    ElectionMeta, FaultKind, FaultRecord, History, LineRecord, Micros, ProcRecord, StoreRecord,
};

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Two candidates' commands alive and runnable at once, beyond the
    /// sampler's resolution.
    Overlap,
    /// The store accepted a lower token after a higher one: two tokens'
    /// writes interleaved.
    TokenOrder,
    /// The store accepted a write whose token was below one a newer writer
    /// had already announced.
    StaleAccept,
    /// An older writer still wrote after a newer one had written (the store
    /// refused it: fencing held, but two commands ran at once).
    StaleWriter,
    /// A candidate said it led while another's writes were accepted.
    LineContradiction,
    /// No write accepted within the bound after every fault had healed.
    Liveness,
    /// A periodic job run again in a period after its completion had
    /// been recorded.
    PeriodicTwice,
    /// A key, znode, lease or process left after the end.
    Leftover,
    /// A switchover did not end in its reported outcome within its
    /// timeout: it hung, exited without a report, or reported done for
    /// a target that never said it led with that token.
    Switchover,
    /// A leader whose health check failed kept leading past the bound
    /// while its election's other candidates were healthy and nothing
    /// else was wrong.
    HealthHandOff,
}

impl Kind {
    /// Every kind, in the order reports list them.
    pub const ALL: [Kind; 10] = [
        Kind::Overlap,
        Kind::TokenOrder,
        Kind::StaleAccept,
        Kind::StaleWriter,
        Kind::LineContradiction,
        Kind::Liveness,
        Kind::PeriodicTwice,
        Kind::Leftover,
        Kind::Switchover,
        Kind::HealthHandOff,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Overlap => "overlap",
            Kind::TokenOrder => "token-order",
            Kind::StaleAccept => "stale-accept",
            Kind::StaleWriter => "stale-writer",
            Kind::LineContradiction => "line-contradiction",
            Kind::Liveness => "liveness",
            Kind::PeriodicTwice => "periodic-twice",
            Kind::Leftover => "leftover",
            Kind::Switchover => "switchover",
            Kind::HealthHandOff => "health-hand-off",
        }
    }
}

/// One violation, with what is needed to look into it.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub election: String,
    pub kind: Kind,
    /// When it happened.
    pub at: Micros,
    /// What exactly.
    pub detail: String,
    /// The faults in effect at that instant (or healed within a second).
    pub faults: Vec<String>,
    /// The election's history around the instant.
    pub around: Vec<String>,
}

/// A statistic over samples, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub n: usize,
    pub p50: Micros,
    pub p99: Micros,
    pub max: Micros,
}

impl Spread {
    /// Of `samples` (any order).
    pub fn of(samples: &[Micros]) -> Spread {
        let mut s = samples.to_vec();
        s.sort_unstable();
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        if s.is_empty() {
            return Spread::default();
        }
        Spread {
            n: s.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: *s.last().unwrap(),
        }
    }
}

/// What one election's history shows, beside its violations.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// New tokens that wrote, after the first.
    pub leader_changes: usize,
    /// Writes the store accepted.
    pub accepted: u64,
    /// Writes it refused (a lower token than the highest accepted).
    pub refused: usize,
    /// Of those, writes sent before the newer token's first write and
    /// read after it: in flight across the change, as the fence expects.
    pub refused_in_flight: usize,
    /// Overlaps that began while an operator's delete took leadership away
    /// by hand: the contract there is fencing, and the store refused the
    /// old writer.
    pub fenced_overlaps: usize,
    /// Time with no write accepted (gaps over 100 ms), in all and at most.
    pub without_write: Micros,
    pub longest_without_write: Micros,
    /// Gaps in accepted writes (over 100 ms) by the fault kind that caused
    /// them ("none" for a gap with no fault near: a handover).
    pub gaps_by_fault: BTreeMap<String, Spread>,
    /// Heal instants after which liveness was judged, and those after which
    /// the next fault came too soon to judge.
    pub liveness_judged: usize,
    pub liveness_unjudged: usize,
    /// Periodic elections: periods with a completed job, job runs, and
    /// runs started within the record's window after a completed one
    /// (at least once, as the contract says).
    pub periods_done: usize,
    pub periodic_runs: usize,
    pub periodic_reruns: usize,
    /// Znodes left at the end that only a member diverging from the
    /// ensemble kept (the service's findings name it): not a leftover of
    /// the election's.
    pub left_by_the_service: Vec<String>,
}

/// The judgement of one election.
#[derive(Debug, Clone, Serialize)]
pub struct ElectionVerdict {
    pub key: String,
    pub backend: String,
    pub contender: String,
    pub decides_exit: bool,
    pub violations: Vec<Violation>,
    pub figures: Figures,
}

/// The whole judgement.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub seed: u64,
    pub ended: Micros,
    pub interrupted: bool,
    /// The sampler's resolution: the largest gap between two reads of
    /// /proc, and the 99th percentile of each second's largest gap.
    pub sampler_max_gap: Micros,
    pub sampler_p99_gap: Micros,
    pub line_slack: Micros,
    pub elections: Vec<ElectionVerdict>,
    /// Faults dealt, by backend and kind.
    pub faults: BTreeMap<String, BTreeMap<String, usize>>,
    /// Faults that deliberately took a quorum away.
    pub quorum_breaks: usize,
    /// Whether every election that decides the exit code held every check.
    pub held: bool,
    /// Whether the end was recorded (leftovers judged).
    pub end_recorded: bool,
    /// What the service itself got wrong ([`crate::service`]).
    pub service: Vec<crate::service::Finding>,
}

/// The time a soak's first leader has to write, from the start.
const STARTUP: Micros = 30_000_000;

/// Gaps in accepted writes shorter than this are a writer's own rhythm.
const GAP: Micros = 100_000;

/// Judges `history`.
pub fn judge(history: &History) -> Judgement {
    let resolution = Resolution::of(&history.procs, history.meta.sampler_period);
    let service = crate::service::findings(history);
    let elections: Vec<ElectionVerdict> = history
        .meta
        .elections
        .iter()
        .map(|e| judge_election(history, e, &resolution, &service))
        .collect();
    let mut faults: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for f in &history.faults {
        *faults
            .entry(f.backend.clone())
            .or_default()
            .entry(f.kind.name().to_owned())
            .or_default() += 1;
    }
    Judgement {
        seed: history.meta.seed,
        ended: history.meta.ended,
        interrupted: history.meta.interrupted,
        sampler_max_gap: resolution.max,
        sampler_p99_gap: resolution.p99,
        line_slack: history.meta.line_slack,
        held: elections
            .iter()
            .all(|e| !e.decides_exit || e.violations.is_empty()),
        elections,
        faults,
        quorum_breaks: history.faults.iter().filter(|f| f.breaks_quorum).count(),
        end_recorded: history.end.is_some(),
        service,
    }
}

/// The sampler's resolution over time, from its ticks.
struct Resolution {
    /// (tick instant, largest gap in the second before it).
    ticks: Vec<(Micros, Micros)>,
    period: Micros,
    max: Micros,
    p99: Micros,
}

impl Resolution {
    fn of(procs: &[ProcRecord], period: Micros) -> Resolution {
        let ticks: Vec<(Micros, Micros)> = procs
            .iter()
            .filter_map(|p| match p {
                ProcRecord::Tick { t, max_gap, .. } => Some((*t, *max_gap)),
                _ => None,
            })
            .collect();
        let gaps: Vec<Micros> = ticks.iter().map(|(_, g)| *g).collect();
        let spread = Spread::of(&gaps);
        Resolution {
            ticks,
            period,
            max: spread.max.max(period),
            p99: spread.p99.max(period),
        }
    }

    /// How far apart two reads of /proc may have been around `t`: the
    /// largest gap of the seconds just before and after it.
    fn at(&self, t: Micros) -> Micros {
        let i = self.ticks.partition_point(|(at, _)| *at < t);
        let near = self.ticks[i.saturating_sub(1)..(i + 2).min(self.ticks.len())]
            .iter()
            .map(|(_, g)| *g)
            .max()
            .unwrap_or(self.max);
        near.max(self.period)
    }
}

/// An interval of time, `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    from: Micros,
    to: Micros,
}

impl Span {
    fn overlap(self, other: Span) -> Option<Span> {
        let from = self.from.max(other.from);
        let to = self.to.min(other.to);
        (from < to).then_some(Span { from, to })
    }
}

fn judge_election(
    h: &History,
    e: &ElectionMeta,
    resolution: &Resolution,
    service: &[crate::service::Finding],
) -> ElectionVerdict {
    let mut judging = Judging {
        h,
        e,
        faults: h.faults.iter().filter(|f| relevant(f, e)).collect(),
        store: Store::of(h, &e.key),
        ttl: e.ttl_ms * 1000,
        v: Vec::new(),
        figures: Figures::default(),
    };
    judging.overlaps(resolution);
    judging.store_order();
    judging.stale_writers();
    judging.line_contradictions();
    judging.writes_and_liveness(service);
    judging.leftovers(service);
    judging.switchovers();
    judging.health_hand_offs();
    let Judging { mut v, figures, .. } = judging;
    v.sort_by_key(|x| x.at);
    ElectionVerdict {
        key: e.key.clone(),
        backend: e.backend.clone(),
        contender: e.contender.clone(),
        decides_exit: e.decides_exit,
        violations: v,
        figures,
    }
}

/// One election being judged: what the checks read, and what they find.
struct Judging<'a> {
    h: &'a History,
    e: &'a ElectionMeta,
    /// The faults that bear on this election.
    faults: Vec<&'a FaultRecord>,
    store: Store,
    /// The election's TTL, in microseconds.
    ttl: Micros,
    v: Vec<Violation>,
    figures: Figures,
}

/// How much longer than its timeout a switchover may take: its
/// connection's setup and the report's way out (its own clock starts
/// once it has read the line).
const SWITCHOVER_SLACK: Micros = 1_500_000;

/// How long a leader whose check started failing may go on leading while
/// the others are healthy: the soak's check fails twice, a second apart
/// (2 s), one may have begun just before the marker (1 s), then the
/// leader's read of the line and the hand-over (1.5 s, generous).
const HEALTH_HAND_OFF: Micros = 4_500_000;

/// How long before a health fault nothing else may have happened for its
/// hand-off to be judged: an earlier health fault's backoff (2 s) and a
/// restarted candidate's first check.
const HEALTH_QUIET_BEFORE: Micros = 5_000_000;

impl Judging<'_> {
    /// Every health flap that outlasted the hand-off bound, with nothing
    /// else in effect on its election from a while before it to that
    /// bound (so every other candidate was running and healthy), left its
    /// target not leading by the bound.
    fn health_hand_offs(&mut self) {
        let flaps: Vec<FaultRecord> = self
            .faults
            .iter()
            .filter(|f| {
                f.kind == FaultKind::HealthFlap
                    && f.election.as_deref() == Some(&self.e.key)
                    && f.end.saturating_sub(f.start) > HEALTH_HAND_OFF
            })
            .map(|f| (*f).clone())
            .collect();
        for f in flaps {
            let (from, to) = (
                f.start.saturating_sub(HEALTH_QUIET_BEFORE),
                f.start + HEALTH_HAND_OFF,
            );
            let quiet = !self.faults.iter().any(|g| {
                (g.kind, &g.target, g.start) != (f.kind, &f.target, f.start)
                    && g.start <= to
                    && g.end >= from
            });
            if quiet && self.leads_at(&f.target, to) {
                let detail = format!(
                    "{}'s health check failed from {} on, the others healthy, and it still led at {}",
                    f.target,
                    ms(f.start),
                    ms(to)
                );
                let v = violation(self.h, self.e, Kind::HealthHandOff, to, detail);
                self.v.push(v);
            }
        }
    }

    /// Whether candidate `cand`'s last line at or before `t` said it led.
    fn leads_at(&self, cand: &str, t: Micros) -> bool {
        let mut leads = false;
        for l in &self.h.lines {
            if let LineRecord::Line {
                e,
                cand: c,
                text,
                t: at,
            } = l
                && *e == self.e.key
                && c == cand
                && *at <= t
                && let Ok(j) = serde_json::from_str::<serde_json::Value>(text)
            {
                leads = j["is_self"] == true;
            }
        }
        leads
    }

    /// Every switchover dealt to this election ended by its timeout in
    /// the outcome it reported: exit 0 with `done`, 6 with `not_done`, 5
    /// refused, 1 when the service could not be reached (the fault's own
    /// doing); and a `done` that moved leadership names a target that
    /// said `elected` with that token.
    fn switchovers(&mut self) {
        let switchovers: Vec<FaultRecord> = self
            .faults
            .iter()
            .filter(|f| {
                f.kind == FaultKind::Switchover && f.election.as_deref() == Some(&self.e.key)
            })
            .map(|f| (*f).clone())
            .collect();
        for f in switchovers {
            if let Some(wrong) = self.switchover_wrong(&f) {
                let detail = format!("switchover to {} at {}: {wrong}", f.target, ms(f.start));
                let v = violation(self.h, self.e, Kind::Switchover, f.start, detail);
                self.v.push(v);
            }
        }
    }

    /// What is wrong with switchover `f`, if anything.
    fn switchover_wrong(&self, f: &FaultRecord) -> Option<String> {
        let note: serde_json::Value = serde_json::from_str(&f.note).ok()?;
        let exit = note["exit"].as_i64().unwrap_or(-1);
        let timeout = note["timeout_ms"].as_u64().unwrap_or(0) * 1000;
        let report = &note["report"];
        let outcome = report["outcome"].as_str();
        let took = f.end.saturating_sub(f.start);
        match (exit, outcome) {
            (0, Some("done")) | (6, Some("not_done")) | (5, None) | (1, None) => {}
            (-1, _) => {
                return Some(format!(
                    "it hung past its timeout and was killed ({})",
                    note["said"]
                ));
            }
            (code, outcome) => {
                return Some(format!(
                    "exit {code} with outcome {outcome:?}: not what it reported ({})",
                    note["said"]
                ));
            }
        }
        let reported = (report["took"].as_f64().unwrap_or(0.0) * 1000.0) as Micros;
        if exit != 1 && reported > timeout + SWITCHOVER_SLACK {
            return Some(format!(
                "it took {} against a timeout of {} ({} from the nemesis's view)",
                ms(reported),
                ms(timeout),
                ms(took)
            ));
        }
        if outcome == Some("done") && report["changed"] == true {
            let (leader, token) = (report["leader"].as_str()?, report["token"].as_u64()?);
            let said = self.h.lines.iter().any(|l| match l {
                LineRecord::Line { e, cand, text, t } => {
                    *e == self.e.key
                        && cand == leader
                        && *t <= f.end + SWITCHOVER_SLACK
                        && serde_json::from_str::<serde_json::Value>(text).is_ok_and(|j| {
                            j["event"] == "elected" && j["token"].as_u64() == Some(token)
                        })
                }
                _ => false,
            });
            if !said {
                return Some(format!(
                    "reported done, {leader} leading with token {token}, but {leader} never said it was elected with it"
                ));
            }
        }
        None
    }

    /// An operator's delete takes leadership away by hand; for a TTL and
    /// a second after it, two commands may run, and fencing is the
    /// contract.
    fn operator_window(&self, t: Micros) -> bool {
        self.faults.iter().any(|f| {
            matches!(f.kind, FaultKind::OperatorDelete | FaultKind::ParentDelete)
                && f.start <= t
                && t <= f.end + self.ttl + 1_000_000
        })
    }

    /// Commands alive and runnable at once, longer than the sampler can
    /// tell apart.
    fn overlaps(&mut self, resolution: &Resolution) {
        // Commands alive and runnable at once.
        let alive = alive_intervals(&self.h.procs, &self.e.key);
        let mut pairs: Vec<(Micros, String, String, Span)> = Vec::new();
        let cands: Vec<&String> = alive.keys().collect();
        for (i, a) in cands.iter().enumerate() {
            for b in &cands[i + 1..] {
                for x in &alive[*a] {
                    for y in &alive[*b] {
                        if let Some(o) = x.overlap(*y) {
                            pairs.push((o.from, (*a).clone(), (*b).clone(), o));
                        }
                    }
                }
            }
        }
        pairs.sort_by_key(|p| p.0);
        for (_, a, b, o) in pairs {
            let length = o.to - o.from;
            let allowed = resolution.at(o.from);
            if length <= allowed {
                continue;
            }
            if self.operator_window(o.from) {
                self.figures.fenced_overlaps += 1;
                continue;
            }
            self.v.push(violation(
            self.h,
            self.e,
            Kind::Overlap,
            o.from,
            format!(
                "the commands of {a} and {b} were alive and runnable together for {} (the sampler's resolution here: {})",
                ms(length),
                ms(allowed)
            ),
        ));
        }
    }

    /// The store's own order (tokens never go back), and writes accepted
    /// after a newer writer announced itself.
    fn store_order(&mut self) {
        // The store's own order, and stale writes.
        let mut highest: Option<(u64, Micros)> = None;
        for s in &self.store.spans {
            self.figures.accepted += s.n;
            if let Some((top, at)) = highest
                && s.token < top
            {
                self.v.push(violation(
                    self.h,
                    self.e,
                    Kind::TokenOrder,
                    s.from,
                    format!(
                        "token {} accepted after token {top} (accepted at {})",
                        s.token,
                        ms(at)
                    ),
                ));
            }
            if highest.is_none_or(|(top, _)| s.token >= top) {
                highest = Some((s.token, s.from));
            }
            // A newer writer had announced itself before this span's last write
            // (but for an operator's delete: there the fence is the contract,
            // and the store accepts the old writer until the new one writes).
            if let Some(newer) = self
                .store
                .hellos
                .iter()
                .find(|n| n.token > s.token && n.t < s.to)
                .filter(|n| !self.operator_window(n.t.max(s.from)))
            {
                let at = newer.t.max(s.from);
                self.v.push(violation(
                self.h,
                self.e,
                Kind::StaleAccept,
                at,
                format!(
                    "a write with token {} was accepted at {} after {} announced token {} at {}",
                    s.token,
                    ms(s.to),
                    newer.cand,
                    newer.token,
                    ms(newer.t)
                ),
            ));
            }
        }
    }

    /// Writes the fence refused from a token a newer one had outwritten
    /// (those in flight at the change aside); and the leader changes.
    fn stale_writers(&mut self) {
        self.figures.refused = self.store.refused.len();
        // When each token's first accepted write was sent (or, where the
        // writer did not say, read).
        let mut first_sent: BTreeMap<u64, Micros> = BTreeMap::new();
        for a in &self.store.spans {
            let sent = a.sent_from.unwrap_or(a.from);
            first_sent
                .entry(a.token)
                .and_modify(|t| *t = (*t).min(sent))
                .or_insert(sent);
        }
        // One violation per stale token and the token it outlived.
        let mut stale: BTreeMap<(u64, u64), (Micros, Micros, usize)> = BTreeMap::new();
        for r in &self.store.refused {
            if self.operator_window(r.t) {
                continue;
            }
            // Sent before the newer token's first write, read after it: in
            // flight when the leadership changed, refused by the fence as it
            // should be; the writer did not write beside its successor.
            if r.sent
                .zip(first_sent.get(&r.highest))
                .is_some_and(|(sent, &newer)| sent < newer)
            {
                self.figures.refused_in_flight += 1;
                continue;
            }
            let entry = stale.entry((r.token, r.highest)).or_insert((r.t, r.t, 0));
            entry.1 = r.t;
            entry.2 += 1;
        }
        for ((token, top), (first, last, n)) in stale {
            self.v.push(violation(
            self.h,
            self.e,
            Kind::StaleWriter,
            first,
            format!(
                "a command with token {token} still wrote after token {top} had written: {n} writes refused from {} to {}",
                ms(first),
                ms(last)
            ),
        ));
        }
        let tokens: BTreeSet<u64> = self.store.spans.iter().map(|s| s.token).collect();
        self.figures.leader_changes = tokens.len().saturating_sub(1);
    }

    /// Lines that say "I lead" while another's writes are accepted.
    fn line_contradictions(&mut self) {
        // Lines that say "I lead" while another's writes are accepted.
        let slack = self.h.meta.line_slack;
        for (cand, claims) in claims(self.h, &self.e.key) {
            let frozen: Vec<Span> = self
                .faults
                .iter()
                .filter(|f| f.kind == FaultKind::CandidateFreeze && f.target == cand)
                .map(|f| Span {
                    from: f.start,
                    to: f.end + slack,
                })
                .collect();
            for claim in claims {
                let Some(inner) =
                    (claim.from + slack < claim.to.saturating_sub(slack)).then(|| Span {
                        from: claim.from + slack,
                        to: claim.to - slack,
                    })
                else {
                    continue;
                };
                let foreign = self
                    .store
                    .spans
                    .iter()
                    .filter(|s| self.store.cand_of(s.c) != Some(cand.as_str()))
                    .find_map(|s| {
                        let o = inner.overlap(Span {
                            from: s.from,
                            to: s.to + 1,
                        })?;
                        let free = frozen.iter().all(|f| f.overlap(o) != Some(o));
                        (free && !self.operator_window(o.from)).then_some((o, s))
                    });
                if let Some((o, s)) = foreign {
                    self.v.push(violation(
                    self.h,
                    self.e,
                    Kind::LineContradiction,
                    o.from,
                    format!(
                        "{cand} said it led from {} to {}, while {}'s writes (token {}) were accepted at {}",
                        ms(claim.from),
                        ms(claim.to),
                        self.store.cand_of(s.c).unwrap_or("?"),
                        s.token,
                        ms(o.from)
                    ),
                ));
                }
            }
        }
    }

    /// Accepted writes over time: gaps, and liveness after healing (the
    /// service's own faults in this election count as faults here); or,
    /// for a periodic job, its periods.
    fn writes_and_liveness(&mut self, service: &[crate::service::Finding]) {
        // Accepted writes over time: gaps, and liveness after healing.
        let writes = merged(self.store.spans.iter().map(|s| Span {
            from: s.from,
            to: s.to + 1,
        }));
        let mut last = 0;
        for w in &writes {
            if w.from > last + GAP {
                let gap = w.from - last;
                self.figures.without_write += gap;
                self.figures.longest_without_write = self.figures.longest_without_write.max(gap);
            }
            last = last.max(w.to);
        }
        self.figures.gaps_by_fault = gaps_by_fault(&self.faults, &writes, self.ttl);
        if self.e.period_ms.is_none() {
            // The service's own faults in this election count as faults here.
            let broken: Vec<Span> = service
                .iter()
                .filter(|f| f.e == self.e.key || (f.e.is_empty() && f.backend == self.e.backend))
                .map(|f| Span {
                    from: f.from,
                    to: f.to,
                })
                .collect();
            liveness(
                self.h,
                self.e,
                &self.faults,
                &broken,
                &writes,
                &mut self.figures,
                &mut self.v,
            );
        } else {
            periodic(
                self.h,
                self.e,
                &self.store,
                service,
                &mut self.figures,
                &mut self.v,
            );
        }
    }

    /// What this election left behind after the end. A znode the
    /// service's own records show a member keeping against the ensemble
    /// to the end (a zombie, or a divergence: see [`crate::service`]) is
    /// the service's, not the election's: no candidate holds its session,
    /// and a candidate that reads through that member waits behind it.
    fn leftovers(&mut self, service: &[crate::service::Finding]) {
        if let Some(end) = &self.h.end {
            for l in end.leftovers.iter().filter(|l| l.e == self.e.key) {
                let kept_by_the_service = l.what == "znode"
                    && service.iter().any(|f| {
                        f.path == l.name
                            && matches!(f.kind.as_str(), "zombie" | "divergence")
                            && f.to >= self.h.meta.ended
                    });
                if kept_by_the_service {
                    self.figures.left_by_the_service.push(l.name.clone());
                    continue;
                }
                self.v.push(violation(
                    self.h,
                    self.e,
                    Kind::Leftover,
                    self.h.meta.ended,
                    format!("{} {} was left behind", l.what, l.name),
                ));
            }
        }
    }
}

/// Whether fault `f` bears on election `e`: it hit e's backend as a whole,
/// or e itself, or the whole machine.
fn relevant(f: &FaultRecord, e: &ElectionMeta) -> bool {
    f.backend == "machine"
        || (f.backend == e.backend && f.election.as_ref().is_none_or(|x| *x == e.key))
}

/// In each stretch with no fault in effect, the service's own included
/// (from the start, or from the
/// instant the last fault healed, to the next fault), writes must be
/// accepted: from the stretch's start, and after every accepted write, the
/// next comes within the bound. A stretch shorter than the bound cannot be
/// judged.
fn liveness(
    h: &History,
    e: &ElectionMeta,
    faults: &[&FaultRecord],
    broken: &[Span],
    writes: &[Span],
    figures: &mut Figures,
    v: &mut Vec<Violation>,
) {
    let troubled = merged(
        faults
            .iter()
            .map(|f| Span {
                from: f.start,
                to: f.end.max(f.start + 1),
            })
            .chain(broken.iter().copied()),
    );
    let mut heals = vec![0];
    heals.extend(troubled.iter().map(|s| s.to));
    for heal in heals {
        // The start: candidates (and the peers' JVMs) start and elect a
        // first leader; it gets more time.
        let bound = if heal == 0 {
            e.liveness_bound.max(STARTUP)
        } else {
            e.liveness_bound
        };
        let next = troubled
            .iter()
            .map(|s| s.from)
            .find(|from| *from > heal)
            .unwrap_or(h.meta.ended)
            .min(h.meta.ended);
        if next < heal + bound {
            figures.liveness_unjudged += 1;
            continue;
        }
        figures.liveness_judged += 1;
        // Walk the stretch: `since` is the last instant a write was seen.
        let mut since = heal;
        let mut stalled = None;
        for w in writes.iter().filter(|w| w.to > heal && w.from < next) {
            let allowed = if since == heal {
                bound
            } else {
                e.liveness_bound
            };
            if w.from > since + allowed {
                stalled = Some(since);
                break;
            }
            since = since.max(w.to);
        }
        let allowed = if since == heal {
            bound
        } else {
            e.liveness_bound
        };
        if stalled.is_none() && next > since + allowed {
            stalled = Some(since);
        }
        if let Some(at) = stalled {
            v.push(violation(
                h,
                e,
                Kind::Liveness,
                at,
                format!(
                    "no write was accepted for {} from {}, with no fault in effect since {}",
                    ms(if at == heal { bound } else { e.liveness_bound }),
                    ms(at),
                    ms(heal)
                ),
            ));
        }
    }
}

/// A periodic job is run at least once per period, and not again once its
/// completion is recorded: a leader whose job completed writes the record
/// within its connect timeout (5 s) unless it loses leadership first, so a
/// second run that started more than [`RECORD_WINDOW`] after a completed
/// one ignored a record that was there. One that started sooner is the
/// contract's at-least-once (the completing leader lost leadership before
/// its record landed): counted, not a violation. So is one after a
/// completion whose record window saw the service's quorum broken on
/// purpose, or one at whose completion no member of the service served
/// (the probe's **unavailable**, whatever caused it: seed 41's leader
/// member paused under fsync load): no record could land until the
/// service was back (the leader says so and exits; the next leader runs
/// the job again).
fn periodic(
    h: &History,
    e: &ElectionMeta,
    store: &Store,
    service: &[crate::service::Finding],
    figures: &mut Figures,
    v: &mut Vec<Violation>,
) {
    let mut runs: BTreeMap<u64, Vec<(Micros, Option<Micros>, String)>> = BTreeMap::new();
    for hello in store.hellos.iter().filter(|x| x.role == "once") {
        figures.periodic_runs += 1;
        if let Some(period) = hello.period {
            runs.entry(period).or_default().push((
                hello.t,
                store.done.get(&hello.c).copied(),
                hello.cand.clone(),
            ));
        }
    }
    figures.periods_done = runs
        .values()
        .filter(|r| r.iter().any(|(_, done, _)| done.is_some()))
        .count();
    for (period, runs) in runs {
        let Some((first_done, who)) = runs
            .iter()
            .filter_map(|(_, done, c)| done.map(|d| (d, c.clone())))
            .min_by_key(|(d, _)| *d)
        else {
            continue;
        };
        let record_window = Span {
            from: first_done,
            to: first_done + RECORD_WINDOW,
        };
        let quorum_lost =
            h.faults.iter().any(|f| {
                f.breaks_quorum
                    && f.backend == e.backend
                    && (Span {
                        from: f.start,
                        to: f.end,
                    })
                    .overlap(record_window)
                    .is_some()
            }) || unavailable_at(service, &e.backend, first_done, h.meta.probe_period);
        for (start, _, cand) in runs.iter().filter(|(start, _, _)| *start > first_done) {
            if *start > first_done + RECORD_WINDOW && !quorum_lost {
                v.push(violation(
                    h,
                    e,
                    Kind::PeriodicTwice,
                    *start,
                    format!(
                        "the period starting at {period} (Unix seconds) was run again by {cand} at {}, {} after {who} completed it",
                        ms(*start),
                        ms(*start - first_done)
                    ),
                ));
            } else {
                figures.periodic_reruns += 1;
            }
        }
    }
}

/// How long after a periodic job completes its leader may still be
/// writing the period's record (its connect timeout, 5 s, and two TTLs).
const RECORD_WINDOW: Micros = 10_000_000;

/// Whether no member of `backend`'s service served at `at`, by the
/// probe's unavailable findings. Their edges are as late as the probe's
/// `period`: an outage that began up to then after `at` counts.
fn unavailable_at(
    service: &[crate::service::Finding],
    backend: &str,
    at: Micros,
    period: Micros,
) -> bool {
    service.iter().any(|f| {
        f.kind == "unavailable" && f.backend == backend && f.from <= at + period && f.to >= at
    })
}

/// For each gap in accepted writes, the kind of the fault that caused it:
/// the latest relevant fault begun before the gap and in effect (or healed
/// within a TTL) when it began; "none" when there is none (a handover).
fn gaps_by_fault(
    faults: &[&FaultRecord],
    writes: &[Span],
    ttl: Micros,
) -> BTreeMap<String, Spread> {
    let mut samples: BTreeMap<String, Vec<Micros>> = BTreeMap::new();
    let mut last = 0;
    for w in writes {
        if w.from > last + GAP && last > 0 {
            samples
                .entry(cause_of(faults, last, ttl))
                .or_default()
                .push(w.from - last);
        }
        last = last.max(w.to);
    }
    samples
        .into_iter()
        .map(|(k, s)| (k, Spread::of(&s)))
        .collect()
}

fn cause_of(faults: &[&FaultRecord], at: Micros, ttl: Micros) -> String {
    faults
        .iter()
        .filter(|f| f.start <= at + 1_000 && at <= f.end + ttl)
        .max_by_key(|f| f.start)
        .map_or_else(|| "none".to_owned(), |f| f.kind.name().to_owned())
}

/// Overlapping or touching spans joined, in order.
fn merged(spans: impl Iterator<Item = Span>) -> Vec<Span> {
    let mut all: Vec<Span> = spans.collect();
    all.sort_by_key(|s| s.from);
    let mut out: Vec<Span> = Vec::new();
    for s in all {
        match out.last_mut() {
            Some(last) if s.from <= last.to => last.to = last.to.max(s.to),
            _ => out.push(s),
        }
    }
    out
}

/// Per candidate of election `key`: when at least one of its command's
/// processes was alive and not stopped.
fn alive_intervals(procs: &[ProcRecord], key: &str) -> BTreeMap<String, Vec<Span>> {
    let mut states: BTreeMap<String, BTreeMap<i32, bool>> = BTreeMap::new();
    let mut since: BTreeMap<String, Micros> = BTreeMap::new();
    let mut out: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    let mut last_t = 0;
    for p in procs {
        let ProcRecord::Proc {
            t,
            pid,
            e,
            cand,
            role,
            state,
        } = p
        else {
            continue;
        };
        last_t = last_t.max(*t);
        // Commands only: their writers, daemons and periodic jobs.
        if e != key || !matches!(role.as_str(), "writer" | "daemon" | "once") {
            continue;
        }
        let pids = states.entry(cand.clone()).or_default();
        let was = pids.values().any(|r| *r);
        match state.as_str() {
            "gone" => {
                pids.remove(pid);
            }
            s => {
                pids.insert(*pid, s == "run");
            }
        }
        let is = pids.values().any(|r| *r);
        if !was && is {
            since.insert(cand.clone(), *t);
        } else if was
            && !is
            && let Some(from) = since.remove(cand)
        {
            out.entry(cand.clone())
                .or_default()
                .push(Span { from, to: *t });
        }
    }
    for (cand, from) in since {
        out.entry(cand).or_default().push(Span {
            from,
            to: last_t.max(from + 1),
        });
    }
    out
}

/// Per candidate of election `key`: the spans in which it said it led,
/// from an `elected` (or a leader line naming itself) to the line that
/// says otherwise, its exit or a new start.
fn claims(h: &History, key: &str) -> BTreeMap<String, Vec<Span>> {
    let mut open: BTreeMap<String, Micros> = BTreeMap::new();
    let mut out: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    let mut close = |open: &mut BTreeMap<String, Micros>, cand: &str, t: Micros| {
        if let Some(from) = open.remove(cand) {
            out.entry(cand.to_owned())
                .or_default()
                .push(Span { from, to: t });
        }
    };
    for l in &h.lines {
        match l {
            LineRecord::Start { t, e, cand, .. } | LineRecord::Exit { t, e, cand, .. }
                if e == key =>
            {
                close(&mut open, cand, *t);
            }
            LineRecord::Line { t, e, cand, text } if e == key => match says(text) {
                Some(true) => {
                    open.entry(cand.clone()).or_insert(*t);
                }
                Some(false) => close(&mut open, cand, *t),
                None => {}
            },
            _ => {}
        }
    }
    let end = h.meta.ended;
    for cand in open.keys().cloned().collect::<Vec<_>>() {
        close(&mut open, &cand, end);
    }
    out
}

/// Whether a candidate's line says it leads (`Some(true)`), says it does
/// not (`Some(false)`), or neither. elect prints JSON snapshots; the peers'
/// drivers print words.
fn says(text: &str) -> Option<bool> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
        && let Some(event) = v.get("event").and_then(|e| e.as_str())
    {
        let is_self = v.get("is_self").and_then(|s| s.as_bool()) == Some(true);
        return match event {
            "elected" => Some(true),
            "demoted" | "unknown" | "none" => Some(false),
            "leader" => Some(is_self),
            _ => None,
        };
    }
    let word = text.split_whitespace().next()?;
    match word {
        "LEADER" | "ELECTED" => Some(true),
        "NOT_LEADER" | "LOST" | "DEMOTED" | "SUSPENDED" => Some(false),
        _ => None,
    }
}

/// The store's records of one election, in order.
struct Store {
    hellos: Vec<Hello>,
    spans: Vec<Accepted>,
    refused: Vec<Refused>,
    /// Connection -> when its job said it was done.
    done: BTreeMap<u64, Micros>,
    cands: BTreeMap<u64, String>,
}

struct Hello {
    t: Micros,
    c: u64,
    cand: String,
    token: u64,
    role: String,
    period: Option<u64>,
}

struct Accepted {
    c: u64,
    token: u64,
    from: Micros,
    to: Micros,
    n: u64,
    /// When its first write was sent, where the writer said.
    sent_from: Option<Micros>,
}

/// A write the store refused.
struct Refused {
    /// When the store read it.
    t: Micros,
    token: u64,
    /// The highest token accepted then.
    highest: u64,
    /// When the writer sent it, where it said.
    sent: Option<Micros>,
}

impl Store {
    fn of(h: &History, key: &str) -> Store {
        let mut s = Store {
            hellos: Vec::new(),
            spans: Vec::new(),
            refused: Vec::new(),
            done: BTreeMap::new(),
            cands: BTreeMap::new(),
        };
        for r in &h.store {
            match r {
                StoreRecord::Hello {
                    t,
                    e,
                    c,
                    cand,
                    token,
                    role,
                    period,
                } if e == key => {
                    s.cands.insert(*c, cand.clone());
                    s.hellos.push(Hello {
                        t: *t,
                        c: *c,
                        cand: cand.clone(),
                        token: *token,
                        role: role.clone(),
                        period: *period,
                    });
                }
                StoreRecord::Span {
                    e,
                    c,
                    token,
                    from,
                    to,
                    n,
                    sent_from,
                } if e == key => s.spans.push(Accepted {
                    sent_from: *sent_from,
                    c: *c,
                    token: *token,
                    from: *from,
                    to: *to,
                    n: *n,
                }),
                StoreRecord::Refused {
                    t,
                    e,
                    token,
                    highest,
                    sent,
                    ..
                } if e == key => s.refused.push(Refused {
                    t: *t,
                    token: *token,
                    highest: *highest,
                    sent: *sent,
                }),
                StoreRecord::Done { t, e, c } if e == key => {
                    s.done.insert(*c, *t);
                }
                _ => {}
            }
        }
        s.hellos.sort_by_key(|x| x.t);
        s.spans.sort_by_key(|x| x.from);
        s.refused.sort_by_key(|x| x.t);
        s
    }

    fn cand_of(&self, c: u64) -> Option<&str> {
        self.cands.get(&c).map(String::as_str)
    }
}

/// A violation with the faults in effect and the history around it.
fn violation(h: &History, e: &ElectionMeta, kind: Kind, at: Micros, detail: String) -> Violation {
    let faults = h
        .faults
        .iter()
        .filter(|f| relevant(f, e) && f.start <= at && at <= f.end + 1_000_000)
        .map(describe_fault)
        .collect();
    Violation {
        election: e.key.clone(),
        kind,
        at,
        detail,
        faults,
        around: around(h, &e.key, at),
    }
}

/// A fault in a line.
pub fn describe_fault(f: &FaultRecord) -> String {
    let mut s = format!(
        "{} {} on {} from {} to {}",
        f.backend,
        f.kind,
        f.target,
        ms(f.start),
        ms(f.end)
    );
    if f.breaks_quorum {
        s.push_str(" (breaks quorum)");
    }
    if !f.note.is_empty() {
        s.push_str(&format!(" ({})", f.note));
    }
    s
}

/// The election's records within a second of `at`, in order, at most 40.
fn around(h: &History, key: &str, at: Micros) -> Vec<String> {
    let near = |t: Micros| t + 1_000_000 >= at && t <= at + 1_000_000;
    let mut out: Vec<(Micros, String)> = Vec::new();
    for r in &h.store {
        let (t, text) = match r {
            StoreRecord::Hello {
                t,
                e,
                cand,
                token,
                role,
                ..
            } if e == key => (
                *t,
                format!("store: {cand} ({role}) connects with token {token}"),
            ),
            StoreRecord::Span {
                e,
                token,
                from,
                to,
                n,
                ..
            } if e == key => (
                *from,
                format!(
                    "store: {n} writes of token {token} accepted until {}",
                    ms(*to)
                ),
            ),
            StoreRecord::Refused { t, e, token, .. } if e == key => {
                (*t, format!("store: a write of token {token} refused"))
            }
            StoreRecord::Close { t, e, c } if e == key => {
                (*t, format!("store: connection {c} closed"))
            }
            _ => continue,
        };
        if near(t) {
            out.push((t, text));
        }
    }
    for r in &h.procs {
        if let ProcRecord::Proc {
            t,
            pid,
            e,
            cand,
            role,
            state,
        } = r
            && e == key
            && near(*t)
        {
            out.push((*t, format!("proc: {cand}'s {role} {pid} {state}")));
        }
    }
    for r in &h.lines {
        let (t, text) = match r {
            LineRecord::Line { t, e, cand, text } if e == key => {
                (*t, format!("{cand} says {text}"))
            }
            LineRecord::Start { t, e, cand, pid } if e == key => {
                (*t, format!("{cand} starts as {pid}"))
            }
            LineRecord::Exit { t, e, cand, code } if e == key => {
                (*t, format!("{cand} exits {code}"))
            }
            _ => continue,
        };
        if near(t) {
            out.push((t, text));
        }
    }
    out.sort_by_key(|(t, _)| *t);
    let from = out.partition_point(|(t, _)| *t < at).saturating_sub(20);
    out.into_iter()
        .skip(from)
        .take(40)
        .map(|(t, text)| format!("{}: {text}", ms(t)))
        .collect()
}

/// Microseconds as milliseconds, for people.
pub fn ms(us: Micros) -> String {
    if us >= 10_000_000 {
        format!("{:.1} s", us as f64 / 1e6)
    } else {
        format!("{:.1} ms", us as f64 / 1e3)
    }
}
