//! A webhook receiver's answer: the actions its handler took, resolved into one decision per message
//! with Cloudflare's precedence. The first call that reaches a message wins; a batch-level call settles
//! every message not yet called; messages left without any call are acked.

use std::collections::HashMap;

use serde::Deserialize;

use super::message::check_delay;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Ack,
    /// Retry after this many seconds, or after the consumer's retry delay when `None`.
    Retry(Option<i64>),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    Ack { id: String },
    Retry { id: String, delay_seconds: Option<i64> },
    AckAll,
    RetryAll { delay_seconds: Option<i64> },
}

#[derive(Deserialize)]
struct Body {
    actions: Option<serde_json::Value>,
}

/// The actions of a 2xx answer's body. `Ok(None)`: no body, not JSON, or no `actions`, which acks
/// every message (Cloudflare's `ackAll` on a handler that returns). `Err`: an `actions` the receiver
/// meant but got wrong, which fails the delivery rather than guess.
pub fn parse(body: &[u8]) -> Result<Option<Vec<Action>>, String> {
    let Ok(Body { actions: Some(actions) }) = serde_json::from_slice::<Body>(body) else { return Ok(None) };
    let actions: Vec<Action> = serde_json::from_value(actions).map_err(|e| format!("invalid actions: {e}"))?;
    for action in &actions {
        if let Action::Retry { delay_seconds: Some(d), .. } | Action::RetryAll { delay_seconds: Some(d) } = action {
            check_delay("delay_seconds", *d).map_err(|e| e.message)?;
        }
    }
    Ok(Some(actions))
}

/// One decision for each of `batch` (message ids as delivered). Calls naming other ids are ignored.
pub fn resolve<'a>(actions: &[Action], batch: &[&'a str]) -> HashMap<&'a str, Decision> {
    let mut decided: HashMap<&'a str, Decision> = HashMap::with_capacity(batch.len());
    let settle_all = |decided: &mut HashMap<&'a str, Decision>, decision: Decision| {
        for id in batch {
            decided.entry(id).or_insert(decision);
        }
    };
    for action in actions {
        match action {
            Action::Ack { id } => decide(&mut decided, batch, id, Decision::Ack),
            Action::Retry { id, delay_seconds } => decide(&mut decided, batch, id, Decision::Retry(*delay_seconds)),
            Action::AckAll => settle_all(&mut decided, Decision::Ack),
            Action::RetryAll { delay_seconds } => settle_all(&mut decided, Decision::Retry(*delay_seconds)),
        }
    }
    for id in batch {
        decided.entry(id).or_insert(Decision::Ack);
    }
    decided
}

fn decide<'a>(decided: &mut HashMap<&'a str, Decision>, batch: &[&'a str], id: &str, decision: Decision) {
    if let Some(known) = batch.iter().find(|b| **b == id) {
        decided.entry(known).or_insert(decision);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(json: &str) -> Vec<Action> {
        parse(json.as_bytes()).unwrap().unwrap()
    }

    const BATCH: [&str; 3] = ["a", "b", "c"];

    #[test]
    fn no_actions_acks_everything() {
        for body in ["", "{}", "not json", r#"{"ok": true}"#] {
            assert_eq!(parse(body.as_bytes()).unwrap(), None, "{body}");
        }
        let decided = resolve(&[], &BATCH);
        assert!(BATCH.iter().all(|id| decided[id] == Decision::Ack));
    }

    #[test]
    fn the_first_call_on_a_message_wins() {
        let a = actions(
            r#"{"actions": [{"type": "retry", "id": "a"}, {"type": "ack", "id": "a"}, {"type": "ack", "id": "b"}, {"type": "retry", "id": "b", "delay_seconds": 5}]}"#,
        );
        let decided = resolve(&a, &BATCH);
        assert_eq!(decided["a"], Decision::Retry(None));
        assert_eq!(decided["b"], Decision::Ack);
        assert_eq!(decided["c"], Decision::Ack, "no call: acked");
    }

    #[test]
    fn a_message_call_before_a_batch_call_beats_it_and_later_calls_change_nothing() {
        let a = actions(
            r#"{"actions": [{"type": "ack", "id": "a"}, {"type": "retry_all", "delay_seconds": 30}, {"type": "ack", "id": "b"}, {"type": "ack_all"}]}"#,
        );
        let decided = resolve(&a, &BATCH);
        assert_eq!(decided["a"], Decision::Ack);
        assert_eq!(decided["b"], Decision::Retry(Some(30)));
        assert_eq!(decided["c"], Decision::Retry(Some(30)));
    }

    #[test]
    fn unknown_ids_are_ignored() {
        let decided = resolve(&actions(r#"{"actions": [{"type": "retry", "id": "zzz"}]}"#), &BATCH);
        assert!(BATCH.iter().all(|id| decided[id] == Decision::Ack));
    }

    #[test]
    fn retry_delays_of_up_to_24_hours_are_accepted() {
        let accepted = r#"{"actions": [{"type": "retry", "id": "a", "delay_seconds": 86400}, {"type": "retry_all", "delay_seconds": 86400}]}"#;
        let decided = resolve(&actions(accepted), &BATCH);
        assert!(BATCH.iter().all(|id| decided[id] == Decision::Retry(Some(86_400))));
        for refused in [
            r#"{"actions": [{"type": "retry", "id": "a", "delay_seconds": 86401}]}"#,
            r#"{"actions": [{"type": "retry_all", "delay_seconds": 86401}]}"#,
        ] {
            let why = parse(refused.as_bytes()).unwrap_err();
            assert!(why.contains("delay_seconds") && why.contains("86400"), "{why}");
        }
    }

    #[test]
    fn malformed_actions_fail_the_delivery() {
        for body in [
            r#"{"actions": "ack"}"#,
            r#"{"actions": [{"type": "nack", "id": "a"}]}"#,
            r#"{"actions": [{"type": "ack"}]}"#,
            r#"{"actions": [{"type": "retry_all", "delay_seconds": 99999}]}"#,
            r#"{"actions": [{"type": "retry", "id": "a", "delay_seconds": -1}]}"#,
        ] {
            assert!(parse(body.as_bytes()).is_err(), "{body}");
        }
    }
}
