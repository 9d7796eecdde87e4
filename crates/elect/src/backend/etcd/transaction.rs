//! Sends a [`Transaction`] the recipes built (`recipe/transaction.rs`) and
//! brings back etcd's [`Answer`]: a translation one field for one field,
//! so what the handover model evaluates is what etcd is sent. Also sends
//! the transactions of reads alone the drivers build ([`read_only`]).

use etcd_client::{
    Client, Compare as EtcdCompare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};

use super::errors::etcd_error;
use super::recipe::{Answer, Compare, Op, OpResult, Transaction};
use crate::error::Result;

/// Sends `txn`; `what` names it in an error.
pub async fn send(client: &Client, txn: &Transaction, what: &'static str) -> Result<Answer> {
    let resp = Box::pin(client.kv_client().txn(to_etcd(txn)))
        .await
        .map_err(|e| etcd_error(what, e))?;
    Ok(answer(resp.header().map_or(0, |h| h.revision()), &resp))
}

/// Sends `txn`, a transaction of reads alone, in a task of its own, so
/// that nothing on our side cancels it once sent: a timeout, a `select!`
/// whose other branch won, or a campaign that ended only stop waiting,
/// and the read finishes on the server as asked.
///
/// Members of etcd 3.5.0 to 3.5.4 crash (a panic, "unexpected error during
/// txn") when a read-only transaction's client goes away while the member
/// applies it (etcd#14110, fixed in 3.5.5 by etcd#14178); 3.4 does not.
/// On 3.5.1 a read given 200 ms and then dropped crashed a member within
/// 200 handovers, and twelve times in an hour's soak. A client killed
/// mid-read can still do it; we never abandon one ourselves.
pub async fn read_only(client: &Client, txn: Txn) -> Result<TxnResponse, etcd_client::Error> {
    let mut kv = client.kv_client();
    tokio::spawn(async move { Box::pin(kv.txn(txn)).await })
        .await
        .unwrap_or_else(|e| {
            Err(etcd_client::Error::Internal(format!(
                "the read's task: {e}"
            )))
        })
}

fn to_etcd(txn: &Transaction) -> Txn {
    let compare = |c: &Compare| match c {
        Compare::CreateRevision { key, is } => {
            EtcdCompare::create_revision(key.as_slice(), CompareOp::Equal, *is)
        }
        Compare::Lease { key, is } => EtcdCompare::lease(key.as_slice(), CompareOp::Equal, *is),
    };
    let ops = |ops: &[Op]| ops.iter().map(to_etcd_op).collect::<Vec<_>>();
    Txn::new()
        .when(txn.when.iter().map(compare).collect::<Vec<_>>())
        .and_then(ops(&txn.then))
        .or_else(ops(&txn.otherwise))
}

fn to_etcd_op(op: &Op) -> TxnOp {
    match op {
        Op::Put { key, lease } => TxnOp::put(
            key.as_slice(),
            "",
            Some(PutOptions::new().with_lease(*lease)),
        ),
        Op::Refresh { key } => TxnOp::put(
            key.as_slice(),
            "",
            Some(PutOptions::new().with_ignore_value().with_ignore_lease()),
        ),
        Op::Delete { key } => TxnOp::delete(key.as_slice(), None),
        Op::ListKeys { prefix } => TxnOp::get(
            prefix.as_slice(),
            Some(GetOptions::new().with_prefix().with_keys_only()),
        ),
        Op::Txn(nested) => TxnOp::txn(to_etcd(nested)),
    }
}

/// etcd's response as an [`Answer`]; a nested transaction's answer has
/// its parent's revision (etcd gives it no header).
fn answer(revision: i64, resp: &TxnResponse) -> Answer {
    Answer {
        revision,
        succeeded: resp.succeeded(),
        results: resp
            .op_responses()
            .into_iter()
            .map(|op| match op {
                TxnOpResponse::Get(get) => {
                    OpResult::Keys(get.kvs().iter().map(|kv| kv.key().to_vec()).collect())
                }
                TxnOpResponse::Txn(nested) => OpResult::Txn(answer(revision, &nested)),
                TxnOpResponse::Put(_) | TxnOpResponse::Delete(_) => OpResult::Written,
            })
            .collect(),
    }
}
