//! Hearing other hosts' changes: a PostgreSQL connection of its own that `LISTEN`s on
//! `airlock_changes`, where the registry's change triggers announce every write as
//! `"<schema> <topic>"`. A `grants` or `tokens` announcement of this registry's schema
//! makes the [`GrantMemo`] forget its answers; a ping every second proves the database is still
//! heard. A lost connection makes the memo deaf (every check asks the database) until a
//! new one listens, tried again after 100 ms, doubling to 2 s.
//!
//! The task runs on the storage runtime and ends when the registry is dropped.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::task::AbortHandle;
use tokio_postgres::{AsyncMessage, Config};

use super::grant_memo::{GrantMemo, LIVENESS};
use super::postgres::tls;
use crate::storage;

/// The channel the change triggers notify.
pub(super) const CHANNEL: &str = "airlock_changes";
/// How often the listener asks the database whether it is still there.
const PING: Duration = Duration::from_secs(1);
/// The first pause before listening again after a loss.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between tries while the database cannot be reached.
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// The `application_name` of the connection listening for `schema`'s changes, as
/// `pg_stat_activity` shows it.
pub fn application_name(schema: &str) -> String {
    format!("airlock listen {schema}")
}

/// Starts listening for `schema`'s changes on the storage runtime; abort the returned
/// handle to stop.
pub(super) fn spawn(
    mut config: Config,
    schema: &str,
    timeout: Duration,
    memo: Arc<GrantMemo>,
) -> AbortHandle {
    config.application_name(application_name(schema));
    let grants = [format!("{schema} grants"), format!("{schema} tokens")];
    let location = format!("registry schema {schema}");
    storage::handle()
        .spawn(async move {
            let mut pause = FIRST_PAUSE;
            loop {
                let lost = listen(&config, &grants, timeout, &memo).await;
                let was_hearing = memo.live();
                memo.deaf();
                if was_hearing {
                    tracing::warn!(
                        "{location}: stopped hearing other hosts' changes ({lost}); grant \
                         checks ask the database until it listens again"
                    );
                    pause = FIRST_PAUSE;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
        })
        .abort_handle()
}

/// Listens on one connection until it is lost; returns why.
async fn listen(
    config: &Config,
    grants: &[String; 2],
    timeout: Duration,
    memo: &Arc<GrantMemo>,
) -> String {
    let connected = tokio::time::timeout(timeout, config.connect(tls())).await;
    let (client, mut connection) = match connected {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => return format!("connecting: {e}"),
        Err(_) => return format!("connecting: no answer within {} s", timeout.as_secs_f64()),
    };
    // The connection's messages: a notification of this schema's grants makes the memo
    // forget at once; the end of the messages says why the connection was lost.
    let (ended, mut lost) = tokio::sync::oneshot::channel::<String>();
    let (forget, heard) = (grants.clone(), memo.clone());
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        let why = loop {
            match messages.next().await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if forget.iter().any(|topic| n.payload() == topic) {
                        heard.forget();
                    }
                    heard.heard();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break format!("the connection failed: {e}"),
                None => break "the connection closed".to_string(),
            }
        };
        let _ = ended.send(why);
    });
    let listening =
        tokio::time::timeout(timeout, client.batch_execute(&format!("LISTEN {CHANNEL}"))).await;
    match listening {
        Ok(Ok(())) => memo.hearing(),
        Ok(Err(e)) => return format!("LISTEN failed: {e}"),
        Err(_) => return format!("LISTEN: no answer within {} s", timeout.as_secs_f64()),
    }
    let mut ping = tokio::time::interval(PING);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            why = &mut lost => return why.unwrap_or_else(|_| "the connection ended".into()),
            _ = ping.tick() => {
                let bound = LIVENESS.min(timeout);
                match tokio::time::timeout(bound, client.simple_query("SELECT 1")).await {
                    Ok(Ok(_)) => memo.heard(),
                    Ok(Err(e)) => return format!("a ping failed: {e}"),
                    Err(_) => {
                        return format!("no answer to a ping within {} s", bound.as_secs_f64());
                    }
                }
            }
        }
    }
}
