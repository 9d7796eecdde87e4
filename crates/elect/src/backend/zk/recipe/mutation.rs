//! The recipes' rules, each of which a model check may switch off to
//! show that it finds what the rule prevents.

/// A rule of the recipes switched off, for the model checks' teeth tests
/// only: they show the checker finds what each rule prevents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Any waiter whose predecessor was deleted leads at once, not only
    /// the next in line.
    LeadOnAnyDeletion,
    /// The next in line does not watch its own znode.
    NoOwnWatch,
    /// A disconnected leader leads on past its deadline until the session
    /// is back or known lost (Curator's rule while SUSPENDED).
    LeadThroughDisconnection,
    /// The leader goes on when its znode's watch reports a deletion.
    IgnoreOwnDeletion,
    /// The leader counts its znode's watch as armed across a
    /// reconnection, so it neither arms it again nor reads the znode back
    /// (the driver drops the watch on a reconnection).
    TrustWatchAcrossReconnection,
    /// After a lapse the leader leads again once the lease allows, without
    /// reading its znode back.
    NoReadAfterLapse,
    /// The session's lease counts from the handshake's answer instead of
    /// the moment it was sent.
    LeaseFromHandshakeAnswer,
    /// The session's lease assumes the timeout we asked for instead of
    /// the one the server granted.
    LeaseForRequestedTimeout,
    /// The leader gives way to a switchover's target whether or not the
    /// target is its next in line.
    GiveWayUnchecked,
}
