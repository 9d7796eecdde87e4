//! Priorities in etcd (see [`crate::steer`]): each lease's candidacies
//! publish theirs beside the election (`<election>\0priority/<lease hex>`,
//! bound to the lease, none for the default: Go's candidates have none
//! and count as default), and the reads that the failback and a priority
//! 0 candidate's turn decide on.

use etcd_client::{
    Client, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;

use super::errors::etcd_error;
use super::layout::{self, CandidateKey};
use super::transaction::read_only;
use crate::backend::backoff::Backoff;
use crate::error::Result;
use crate::steer::Standing;

/// Keeps the priority key of `lease` (its value the standing: the
/// priority, and whether the health check fails) as `wished` says, for as long as the
/// task runs (abort it when the lease ends; the key goes with the lease).
pub fn publish(
    client: std::sync::Arc<Client>,
    election: &str,
    lease: i64,
    mut wished: watch::Receiver<Standing>,
) -> JoinHandle<()> {
    let key = layout::priority_key(election, lease);
    tokio::spawn(async move {
        let mut published = Standing::DEFAULT;
        loop {
            let want = *wished.borrow_and_update();
            let mut backoff = Backoff::new();
            while want != published {
                let mut kv = client.kv_client();
                let done = match want == Standing::DEFAULT {
                    true => Box::pin(kv.delete(key.as_str(), None)).await.map(|_| ()),
                    false => {
                        let options = PutOptions::new().with_lease(lease);
                        let value = want.encode();
                        Box::pin(kv.put(key.as_str(), value, Some(options)))
                            .await
                            .map(|_| ())
                    }
                };
                match done {
                    Ok(()) => {
                        debug!(standing = want.encode(), "priority published");
                        published = want;
                    }
                    Err(e) => {
                        debug!("publishing our priority: {e}");
                        backoff.wait().await;
                    }
                }
            }
            if wished.changed().await.is_err() {
                return;
            }
        }
    })
}

/// The candidates younger than `own` (behind it in line), each with its
/// standing, and the pin's value, from one read.
pub async fn behind(
    client: &Client,
    election: &str,
    own: i64,
) -> Result<(Vec<(CandidateKey, Standing)>, Option<Vec<u8>>)> {
    let younger = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_min_create_revision(own + 1);
    let txn = Txn::new().and_then([
        TxnOp::get(layout::prefix(election), Some(younger)),
        TxnOp::get(
            layout::priority_prefix(election),
            Some(GetOptions::new().with_prefix()),
        ),
        TxnOp::get(layout::pin_key(election), None),
    ]);
    let what = "reading the line's priorities";
    let resp = read_only(client, txn)
        .await
        .map_err(|e| etcd_error(what, e))?;
    let mut gets = resp.op_responses().into_iter().filter_map(|op| match op {
        TxnOpResponse::Get(get) => Some(get),
        _ => None,
    });
    let (Some(keys), Some(priorities), Some(pin)) = (gets.next(), gets.next(), gets.next()) else {
        return Err(etcd_error(what, "a transaction without its reads"));
    };
    let priority_prefix = layout::priority_prefix(election);
    let priority_of = |lease: i64| {
        let key = format!("{priority_prefix}{lease:x}");
        priorities
            .kvs()
            .iter()
            .find(|kv| kv.key() == key.as_bytes())
            .and_then(|kv| Standing::decode(std::str::from_utf8(kv.value()).ok()?))
            .unwrap_or(Standing::DEFAULT)
    };
    let line = keys
        .kvs()
        .iter()
        .map(|kv| {
            let key = CandidateKey::from(kv);
            let priority = priority_of(key.lease);
            (key, priority)
        })
        .collect();
    Ok((line, pin.kvs().first().map(|kv| kv.value().to_vec())))
}
