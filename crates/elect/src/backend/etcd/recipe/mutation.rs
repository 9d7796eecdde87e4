//! The recipes' rules, each of which a model check may switch off to
//! show that it finds what the rule prevents.

/// A rule of the recipes switched off, for the model check's teeth tests
/// only: they show the checker finds what each rule prevents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// No older key is our turn, marker or not: the wait for the lease of
    /// a predecessor whose key went without a release is skipped.
    NoLeaseWait,
    /// The predecessor's deletion is our turn, without a read: whatever
    /// is older still is not seen.
    LeadOnDeletion,
    /// Our turn is leadership at once: no tenure marker is claimed (a
    /// first candidate, or one after a predecessor's lease, reads its key
    /// back instead).
    NoTenure,
    /// The release is sent while the work still runs.
    ReleaseBeforeStop,
    /// The leader takes the youngest key as its next in line, not the
    /// oldest younger one.
    NextAnyYounger,
    /// The touch puts the next's key whatever its create revision and
    /// lease.
    TouchUnguarded,
    /// A renewal's deadline counts from the acknowledgement's arrival,
    /// not from the ping's send.
    DeadlineFromAnswer,
    /// A late acknowledgement is credited to whatever ping is out.
    LateAnswerCredited,
    /// Where tenure markers cannot be written, we lead without reading
    /// our key back.
    NoReadBack,
    /// The tenure claim writes our marker whatever our key: its
    /// transaction's guard (our key's create revision and lease) dropped.
    ClaimUnguarded,
    /// A follower's unproven acknowledgement is credited as a leader's
    /// deadline, as if it had been proven.
    FollowerAckCredited,
    /// A proven ping is credited whatever the term read after it: the
    /// term proof (etcd#15247) reads, but does not compare.
    TermUnchecked,
    /// A touch on our waiting stream decides our turn while our turn is
    /// read, even after the race ended (the stream reported our own key
    /// gone). Not a safety rule: see the safety page's second table.
    RaceUnended,
    /// The leader leads on past its deadline: nothing but the lease's
    /// end or our key's loss stops it.
    LeadPastDeadline,
    /// The leader leads on when its key is gone or a view names another
    /// leader. Not a safety rule: see the safety page's second table.
    KeyLossIgnored,
    /// The touch that carries out a switchover does not check that the
    /// switchover's record still lives: one aborted while the leader
    /// stopped its work still hands over.
    SwitchoverUnguarded,
    /// The leader gives way to a switchover's target whether or not the
    /// target is its next in line.
    GiveWayUnchecked,
}
