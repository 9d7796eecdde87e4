//! One line per change: sentences for people or JSON snapshots for programs.

use std::time::SystemTime;

use serde::Serialize;

use super::view::{Context, Format};
use crate::leadership::{Event, Leadership};

/// The JSON line of the output contract; every line is a full snapshot.
#[derive(Debug, Serialize)]
pub struct JsonLine<'a> {
    /// When the change was seen, RFC 3339.
    pub at: String,
    /// `etcd`, `zk` or `raft`.
    pub backend: crate::backend_kind::Backend,
    /// The election's name.
    pub election: &'a str,
    /// Under `run`: how the command's tree is held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contain: Option<&'a str>,
    /// The leader's id, if one is known.
    pub leader: Option<&'a str>,
    /// The leader's fencing token.
    pub token: Option<u64>,
    /// Whether we lead.
    pub is_self: bool,
    /// What changed.
    pub event: Event,
    /// With a health check: whether it passes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// The line that reports `snapshot`, reached through `event`, at `at`.
pub fn render(
    format: Format,
    ctx: &Context,
    snapshot: &Leadership,
    event: Event,
    healthy: Option<bool>,
    at: SystemTime,
) -> String {
    let at = humantime::format_rfc3339_millis(at).to_string();
    match format {
        Format::Json => {
            let line = JsonLine {
                at,
                backend: ctx.backend,
                election: &ctx.election,
                contain: ctx.containment,
                leader: snapshot.leader.as_deref(),
                token: snapshot.token,
                is_self: snapshot.is_self,
                event,
                healthy,
            };
            serde_json::to_string(&line).expect("plain data serializes")
        }
        Format::Text => format!("{at} {}", sentence(ctx, snapshot, event, healthy)),
    }
}

fn sentence(ctx: &Context, s: &Leadership, event: Event, healthy: Option<bool>) -> String {
    let election = &ctx.election;
    let who = s.leader.as_deref().unwrap_or("?");
    let token = s.token.map_or(String::new(), |t| format!(", token {t}"));
    match event {
        Event::Elected => format!("elected: this process ({who}) now leads {election}{token}"),
        Event::Demoted => format!("demoted: this process no longer leads {election}"),
        Event::Leader => format!("leader: {who} leads {election}{token}"),
        Event::None => format!("none: nobody leads {election}"),
        Event::Health => match healthy {
            Some(false) => format!(
                "health: this process fails its health check; it does not lead {election} while a healthy candidate is live"
            ),
            _ => "health: this process passes its health check again".to_owned(),
        },
        Event::Unknown => format!(
            "unknown: lost contact with {}; the leader of {election} is not known",
            ctx.backend
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn ctx() -> Context {
        Context {
            containment: None,
            backend: crate::Backend::Etcd,
            election: "jobs".into(),
        }
    }

    #[test]
    fn json_has_every_contract_field() {
        let at = UNIX_EPOCH + Duration::from_millis(1_500);
        let s = Leadership::observed(Some(("node-b".into(), 42)));
        let line = render(Format::Json, &ctx(), &s, Event::Leader, None, at);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["at"], "1970-01-01T00:00:01.500Z");
        assert_eq!(v["backend"], "etcd");
        assert_eq!(v["election"], "jobs");
        assert_eq!(v["leader"], "node-b");
        assert_eq!(v["token"], 42);
        assert_eq!(v["is_self"], false);
        assert_eq!(v["event"], "leader");
    }

    #[test]
    fn json_nulls_when_nobody_leads() {
        let line = render(
            Format::Json,
            &ctx(),
            &Leadership::unknown(),
            Event::Unknown,
            None,
            UNIX_EPOCH,
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(v["leader"].is_null() && v["token"].is_null());
        assert_eq!(v["event"], "unknown");
    }

    #[test]
    fn text_reads_as_a_sentence() {
        let s = Leadership::observed(Some(("node-b".into(), 42)));
        let line = render(Format::Text, &ctx(), &s, Event::Leader, None, UNIX_EPOCH);
        assert!(
            line.ends_with("leader: node-b leads jobs, token 42"),
            "{line}"
        );
    }
}
