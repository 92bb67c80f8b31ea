//! Publishing: the statements that store the messages of many publishes at once (the group commit's),
//! with their idempotency keys and ordering keys, and the sweep of expired idempotency keys.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};

use crate::ids::{AccountId, ConsumerId, MessageId, QueueId};
use crate::queue::message::NewMessage;
use crate::store::messages::StoredMessage;
use crate::store::owned::OwnedQueue;

/// A queue that took its messages, and who needs waking for them.
#[derive(Debug, Clone, Copy)]
pub struct Stored {
    pub queue: QueueId,
    /// A webhook consumer reads the queue: a dispatcher worker, on this node or another, claims them.
    pub pushed: bool,
    /// Long-polling pulls wait on the queue, on some node (see `wait_on`).
    pub waited: bool,
    /// Every message the queue took was leased by the publish itself (`LeaseOffer`): no worker needs waking.
    pub all_leased: bool,
    /// The queue fans out to lanes (or is one of them): its next publish may as well read them at once.
    pub lanes: bool,
}

/// Whether a publish expects its queues to have lanes, which picks the form of its statement. Most
/// queues have one consumer and no lanes: `Absent` runs the statements of before lanes, which cost
/// PostgreSQL less per message, with a guard that stores nothing at all when a queue turns out to have
/// lanes, and the `Read` form runs then, in its place (all or nothing, so a topic's publish stays one
/// commit). `Read` stores into any queues, reading each one's lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lanes {
    Absent,
    Read,
}

/// A dispatcher worker's offer to take its queue's next messages leased by the statement that stores
/// them, on the terms its own claim would use, in a dispatch slot it holds and has set aside for them.
#[derive(Debug, Clone, Copy)]
pub struct LeaseOffer {
    pub queue: QueueId,
    pub consumer: ConsumerId,
    pub slot: i32,
    pub lease_ms: i64,
    pub batch_size: i64,
}

/// Messages a publish stored leased to an offering worker, in the dispatch slot its offer set aside.
#[derive(Debug)]
pub struct LeasedAtPublish {
    pub queue: OwnedQueue,
    pub consumer: ConsumerId,
    pub slot: i32,
    pub messages: Vec<StoredMessage>,
    /// The consumer's signing secrets as the statement read them.
    pub secrets: Vec<String>,
}

/// What one statement of publishes did: the queues that took their messages, and for each publish (in
/// the order given) how many of its messages were not stored because their idempotency key was seen.
#[derive(Debug, Default)]
pub struct Published {
    pub stored: Vec<Stored>,
    pub duplicates: Vec<usize>,
    pub leased: Vec<LeasedAtPublish>,
}

/// A publish of one or more messages to one queue, as the group-commit writer collects them.
pub struct Publish<'a> {
    pub queue: OwnedQueue,
    pub messages: &'a [NewMessage],
}

#[derive(sqlx::FromRow)]
struct PublishRow {
    queue: Option<QueueId>,
    pushed: bool,
    waited: bool,
    duplicate: Option<MessageId>,
    lanes: bool,
    /// Only `PUBLISH_LEASING`'s rows of leased messages have these.
    #[sqlx(default)]
    leased: Option<MessageId>,
    #[sqlx(default)]
    slot: Option<i32>,
    #[sqlx(default)]
    published_at: Option<DateTime<Utc>>,
    #[sqlx(default)]
    signing_secret: Option<String>,
    #[sqlx(default)]
    previous_signing_secret: Option<String>,
}

/// The queues a publish stores to, as the CTE `live`: the account's queues named (`$1`, `$2`), with
/// the columns `$columns` picks from each (`q.`), and in the `read` form the lanes of their further
/// consumers (the `consumer_lanes` migration). Each row names the queue its messages were published to
/// (`parent`, its own id for a queue), whether that queue fans out, when every copy names the body it
/// shares, and whether the row takes a copy (`stores`): a queue that fans out keeps none for itself once
/// its own consumer is deleted, so that nothing piles up for no one. The `absent` form is the statement of
/// before lanes, and takes no queue at all when one of them has lanes (see `Lanes`).
macro_rules! live_queues {
    (absent, $columns:literal, $inherited:literal) => {
        concat!(
            "live as (
         select q.id, q.id as parent, false as fans_out, true as stores, ",
            $columns,
            " from queues q
         where (q.id, q.account_id) in (select * from unnest($1::uuid[], $2::uuid[]))
           and not exists (select 1 from queues c
                           where c.parent_queue_id = any($1::uuid[]) and c.account_id = any($2::uuid[])))"
        )
    };
    (read, $columns:literal, $inherited:literal) => {
        concat!(
            "targets as (
         select q.id, ",
            $columns,
            " from queues q
         where (q.id, q.account_id) in (select * from unnest($1::uuid[], $2::uuid[]))),
     live as (
         select t.id, t.id as parent, f.fans_out,
                not f.fans_out or exists (select 1 from consumers c where c.queue_id = t.id) as stores, ",
            $inherited,
            " from targets t
         cross join lateral (select exists (select 1 from queues c where c.parent_queue_id = t.id) as fans_out) f
         union all
         select c.id, t.id, true, true, ",
            $inherited,
            " from targets t join queues c on c.parent_queue_id = t.id)"
        )
    };
}

/// The id of message `m`'s copy in queue or lane `l`: the message's own in its queue.
macro_rules! copy_id {
    (absent) => {
        "m.id"
    };
    (read) => {
        "case when l.id = m.queue_id then m.id else fan_out_id(m.id, l.id) end"
    };
}

/// Message `m`'s queue and, in the `read` form, its lanes, as `l`, from the CTE `$queues`. The lanes are
/// taken in a lateral subquery that cannot be flattened (`offset 0`), so that the messages are stored in
/// the order given: each one's `available_at` is read from the clock as it is stored, and a join the
/// planner turned around (its queues coming from a `union all`) stored a batch's messages out of order.
macro_rules! each_copy {
    (absent, $queues:literal) => {
        concat!("join ", $queues, " l on l.id = m.queue_id")
    };
    (read, $queues:literal) => {
        concat!(
            "cross join lateral (select * from ",
            $queues,
            " x where x.parent = m.queue_id and x.stores offset 0) l"
        )
    };
}

/// The messages of a publish to the queues of the CTE `$queues` (id, delivery_delay) for which `$keep`
/// holds. `plain`: none has an ordering or a flow key, and the insert is what it was before there were
/// keys. `ordered`: with their ordering keys (`$9`, one per message), each key's row in `ordering_keys`
/// is inserted, or locked when the key has messages already (an upsert whose update is `where false`
/// locks the row, even one committed after the statement began, and writes no row version, which a
/// snapshot held open elsewhere would keep); a message is its key's head when it opened the key's row,
/// else it is parked until the messages before it have gone (see the `ordering_keys` migration). With their
/// flow keys (`$10`), each key with limits has its row in `flow_keys` made or locked (`flow_track`) before
/// any message is stored, and the insert's trigger admits each message to its key or holds it back (see
/// the `flow_control` migration and the one that counts limited keys only). Keys are taken in key order,
/// so concurrent publishes never deadlock.
macro_rules! insert_messages {
    (plain, $form:ident, $queues:literal, $keep:expr) => {
        concat!(
            "inserted as (
         insert into messages (id, queue_id, available_at, size, published_at, gen, body_id)
         select ",
            copy_id!($form),
            ", l.id, clock_timestamp() + make_interval(secs => coalesce(m.delay, l.delivery_delay)), m.size, now(),
                (select gen from message_generations where state = 'current'), case when l.fans_out then m.id end
         from unnest($3::uuid[], $4::uuid[], $7::int8[], $8::int4[]) as m(id, queue_id, delay, size)
         ",
            each_copy!($form, $queues),
            "
         where ",
            $keep,
            ")"
        )
    };
    (ordered, $form:ident, $queues:literal, $keep:expr) => {
        concat!(
            "heads as (
         insert into ordering_keys as h (queue_id, ordering_key, opened_by)
         select distinct on (l.id, m.key) l.id, m.key, ",
            copy_id!($form),
            "
         from unnest($3::uuid[], $4::uuid[], $9::text[]) with ordinality as m(id, queue_id, key, i)
         join ",
            $queues,
            " l on l.parent = m.queue_id and l.stores
         where m.key is not null and ",
            $keep,
            "
         order by l.id, m.key, m.i
         on conflict (queue_id, ordering_key) do update set opened_by = h.opened_by where false
         returning h.opened_by),
     flows as materialized (
         select flow_track(k.queue_id, k.key) as tracked
         from (select distinct l.id as queue_id, m.key from unnest($4::uuid[], $10::text[]) as m(queue_id, key)
               join ",
            $queues,
            " l on l.parent = m.queue_id and l.stores
               where m.key is not null) k
         order by k.queue_id, k.key collate \"C\"),
     inserted as (
         insert into messages (id, queue_id, available_at, due_at, size, published_at, ordering_key, flow_key, gen,
                               body_id)
         select d.id, l.id, case when parked then 'infinity' else d.due end, case when parked then d.due end,
                m.size, now(), m.key, m.flow_key, (select gen from message_generations where state = 'current'),
                case when l.fans_out then m.id end
         from unnest($3::uuid[], $4::uuid[], $7::int8[], $8::int4[], $9::text[], $10::text[])
             as m(id, queue_id, delay, size, key, flow_key)
         ",
            each_copy!($form, $queues),
            "
         cross join lateral (select ",
            copy_id!($form),
            " as id) c
         cross join lateral (
             select c.id, clock_timestamp() + make_interval(secs => coalesce(m.delay, l.delivery_delay)) as due,
                    m.key is not null and c.id not in (select opened_by from heads) as parked) d
         where (select count(tracked) from flows) >= 0 and ",
            $keep,
            ")"
        )
    };
}

/// The end of a publish without held keys: the bodies and messages of the publishes to the queues of
/// the CTE `$queues` (id, delivery_delay), and per queue whether to wake its consumers.
macro_rules! store_messages {
    ($mode:ident, $form:ident, $queues:literal) => {
        concat!(
            "bodies as (
         insert into message_bodies (id, content_type, body, gen)
         select m.id, m.content_type, m.body, (select gen from message_generations where state = 'current')
         from unnest($3::uuid[], $4::uuid[], $5::int2[], $6::bytea[]) as m(id, queue_id, content_type, body)
         where m.queue_id in (select id from ",
            $queues,
            ")),
     ",
            insert_messages!($mode, $form, $queues, "true"),
            "
     select l.id as queue,
            exists (select 1 from consumers c where c.queue_id = l.id and c.kind = 'webhook') as pushed,
            exists (select 1 from queue_waiters w where w.queue_id = l.id and w.until > now()) as waited,
            null::uuid as duplicate, l.fans_out as lanes
     from ",
            $queues,
            " l"
        )
    };
}

/// Publishes without idempotency keys. Each insert reads the arrays itself, joined to the few queues:
/// no 1 KiB body is copied into an intermediate result on the way.
macro_rules! publish {
    ($mode:ident, $form:ident) => {
        concat!(
            "with ",
            live_queues!($form, "q.delivery_delay", "t.delivery_delay"),
            ",
     ",
            store_messages!($mode, $form, "live")
        )
    };
}

/// The start of a publish with idempotency keys (`$11` queues, `$12` keys, one entry per key): the live
/// queues with their windows, and the insert of the keys in the order given, to be ended by the caller.
macro_rules! keyed_publish_start {
    ($form:ident) => {
        concat!(
            "with ",
            live_queues!(
                $form,
                "q.delivery_delay, q.idempotency_window,
                now() + make_interval(secs => q.idempotency_window) as keys_expire_at",
                "t.delivery_delay, t.idempotency_window, t.keys_expire_at"
            ),
            ",
     keys as (
         insert into idempotency_keys (queue_id, key, expires_at)
         select k.queue_id, k.key, l.keys_expire_at
         from unnest($11::uuid[], $12::text[]) with ordinality as k(queue_id, key, i)
         join live l on l.id = k.queue_id
         where l.idempotency_window > 0
         order by k.i"
        )
    };
}

/// Publishes whose keys are all new to their queues, the common case: each key is a plain insert, and a
/// key the queue already holds (or one a concurrent statement is inserting and then commits) fails the
/// statement with a unique violation, for `PUBLISH_ANY_KEYS` to redo. `stored` reads `keys` to the end
/// before any message is written, so that failure comes before the bodies, not after.
macro_rules! publish_new_keys {
    ($mode:ident, $form:ident) => {
        concat!(
            keyed_publish_start!($form),
            "
         returning 1),
     stored as (select id, parent, fans_out, stores, delivery_delay from live where (select count(*) from keys) is not null),
     ",
            store_messages!($mode, $form, "stored")
        )
    };
}

/// Publishes where a key may be held already: each key (`$11`, `$12` as above) is inserted or, if the
/// queue's copy has expired, refreshed; a key the queue holds unexpired stores nothing. A message is
/// stored when its key (`$13`) is absent, or when it is the key's first use in the statement (`$14`)
/// and the key was inserted. Concurrent statements with one key serialize on its primary key, so
/// exactly one of them stores the message.
macro_rules! publish_any_keys {
    ($mode:ident, $form:ident) => {
        concat!(
            keyed_publish_start!($form),
            "
         on conflict (queue_id, key) do update set expires_at = excluded.expires_at
             where idempotency_keys.expires_at <= now()
         returning idempotency_keys.queue_id, idempotency_keys.key),
     kept as (
         select m.id from unnest($3::uuid[], $4::uuid[], $13::text[], $14::bool[]) as m(id, queue_id, key, first)
         join live l on l.id = m.queue_id
         where m.key is null or l.idempotency_window = 0
            or m.first and (m.queue_id, m.key) in (select queue_id, key from keys)),
     bodies as (
         insert into message_bodies (id, content_type, body, gen)
         select m.id, m.content_type, m.body, (select gen from message_generations where state = 'current')
         from unnest($3::uuid[], $5::int2[], $6::bytea[]) as m(id, content_type, body)
         where m.id in (select id from kept)),
     ",
            insert_messages!($mode, $form, "live", "m.id in (select id from kept)"),
            "
     select l.id as queue,
            exists (select 1 from consumers c where c.queue_id = l.id and c.kind = 'webhook') as pushed,
            exists (select 1 from queue_waiters w where w.queue_id = l.id and w.until > now()) as waited,
            null::uuid as duplicate, l.fans_out as lanes
     from live l
     union all
     select null, false, false, m.id, false from unnest($3::uuid[], $4::uuid[]) as m(id, queue_id)
     where m.queue_id in (select id from live) and m.id not in (select id from kept)"
        )
    };
}

/// Publishes without keys to queues some of whose dispatcher workers on this node offer to take their
/// messages (`$11`-`$15`, one entry per `LeaseOffer`). A claim of such a queue right after the commit
/// would find just these messages; so, as that claim would, the statement stores the queue's first
/// messages that are due now, up to a batch, leased to the worker (a first delivery under way) in the
/// dispatch slot its offer set aside. A queue that is paused or delays its messages stores them as any
/// publish does. The consumer's secrets are read as a claim reads them, so that a batch stored after a
/// rotation answered is signed with the new secret.
macro_rules! publish_leasing {
    ($form:ident) => {
        concat!(
            "with ",
            live_queues!($form, "q.delivery_delay, q.delivery_paused", "t.delivery_delay, t.delivery_paused"),
            ",
     slots as materialized (
         select o.queue_id, o.slot, o.lease_ms, o.batch_size, c.signing_secret,
                case when c.previous_secret_expires_at > now() then c.previous_signing_secret end
                    as previous_signing_secret
         from unnest($11::uuid[], $12::uuid[], $13::int4[], $14::float8[], $15::int8[])
             as o(queue_id, consumer_id, slot, lease_ms, batch_size)
         join live l on l.id = o.queue_id and not l.delivery_paused and l.delivery_delay = 0
         join consumers c on c.id = o.consumer_id
         where exists (select 1 from unnest($4::uuid[], $7::int8[]) as m(queue_id, delay)
                       where m.queue_id = o.queue_id and coalesce(m.delay, 0) = 0)),
     bodies as (
         insert into message_bodies (id, content_type, body, gen)
         select m.id, m.content_type, m.body, (select gen from message_generations where state = 'current')
         from unnest($3::uuid[], $4::uuid[], $5::int2[], $6::bytea[]) as m(id, queue_id, content_type, body)
         where m.queue_id in (select id from live)),
     inserted as (
         insert into messages (id, queue_id, available_at, attempts, leased, running, size, published_at, gen,
                               body_id)
         select ",
            copy_id!($form),
            ", l.id,
                case when a.leased then clock_timestamp() + make_interval(secs => s.lease_ms / 1000)
                     else clock_timestamp() + make_interval(secs => coalesce(m.delay, l.delivery_delay)) end,
                a.leased::int4, a.leased, a.leased, m.size, now(), (select gen from message_generations where state = 'current'),
                case when l.fans_out then m.id end
         from (select u.*, row_number() over (partition by u.queue_id order by coalesce(u.delay, 0) <> 0, u.i) as n
               from unnest($3::uuid[], $4::uuid[], $7::int8[], $8::int4[]) with ordinality
                   as u(id, queue_id, delay, size, i)) m
         ",
            each_copy!($form, "live"),
            "
         left join slots s on s.queue_id = l.id and l.id = m.queue_id
         cross join lateral (
             select s.slot is not null and coalesce(m.delay, 0) = 0 and m.n <= s.batch_size as leased) a
         returning id, queue_id, leased)
     select l.id as queue,
            exists (select 1 from consumers c where c.queue_id = l.id and c.kind = 'webhook') as pushed,
            exists (select 1 from queue_waiters w where w.queue_id = l.id and w.until > now()) as waited,
            null::uuid as duplicate, null::uuid as leased, null::int4 as slot, null::timestamptz as published_at,
            null::text as signing_secret, null::text as previous_signing_secret, l.fans_out as lanes
     from live l
     union all
     select i.queue_id, false, false, null, i.id, s.slot, now(), s.signing_secret, s.previous_signing_secret, false
     from inserted i join slots s on s.queue_id = i.queue_id
     where i.leased"
        )
    };
}

/// Each statement in the `Lanes::Absent` form (index 0) and the `Lanes::Read` one (index 1); then, where
/// it has them, without ordering keys (index 0) and with them (index 1).
const PUBLISH: [[&str; 2]; 2] =
    [[publish!(plain, absent), publish!(ordered, absent)], [publish!(plain, read), publish!(ordered, read)]];
const PUBLISH_NEW_KEYS: [[&str; 2]; 2] = [
    [publish_new_keys!(plain, absent), publish_new_keys!(ordered, absent)],
    [publish_new_keys!(plain, read), publish_new_keys!(ordered, read)],
];
const PUBLISH_ANY_KEYS: [[&str; 2]; 2] = [
    [publish_any_keys!(plain, absent), publish_any_keys!(ordered, absent)],
    [publish_any_keys!(plain, read), publish_any_keys!(ordered, read)],
];
const PUBLISH_LEASING: [&str; 2] = [publish_leasing!(absent), publish_leasing!(read)];

/// Stores the messages of many publishes, to any queues of any accounts, in one statement, so that
/// concurrent publishes share one commit. A publish whose queue does not exist in its account (it was
/// deleted meanwhile, or never was) stores nothing; the queues that did take their messages are returned.
/// The commit (synchronous) is what makes a 2xx durable. Dispatchers are woken by `wake` afterwards,
/// not here: PostgreSQL holds a lock from a notifying transaction's commit until its WAL is flushed, so
/// a NOTIFY inside would make concurrent publishes commit one after another.
///
/// Keyed publishes first try `PUBLISH_NEW_KEYS`, which costs a plain insert per key; only when a key
/// turns out to be held does the statement run again as `PUBLISH_ANY_KEYS`, whose `on conflict` costs
/// more per key (nothing of the failed statement was committed). Both insert the keys in the order
/// given, sorted here, so concurrent statements sharing keys wait on each other but never deadlock.
///
/// Publishes without keys to queues in `offers` run as `PUBLISH_LEASING`, and return what it leased.
///
/// `lanes` picks the statements' form; an `Absent` one that took no queue (one of them has lanes, or
/// none exists) is followed by the `Read` one, which stores or finds nothing just the same.
pub async fn publish(
    conn: &mut PgConnection,
    publishes: &[Publish<'_>],
    offers: &[LeaseOffer],
    lanes: Lanes,
) -> Result<Published, sqlx::Error> {
    let mut targets: Vec<(QueueId, AccountId)> = publishes.iter().map(|p| (p.queue.id(), p.queue.account())).collect();
    targets.sort_by_key(|(q, a)| (q.0, a.0));
    targets.dedup();
    let (target_queues, target_accounts): (Vec<QueueId>, Vec<AccountId>) = targets.into_iter().unzip();
    let total: usize = publishes.iter().map(|p| p.messages.len()).sum();
    let keyed = publishes.iter().any(|p| p.messages.iter().any(|m| m.idempotency_key.is_some()));
    let ordered = usize::from(
        publishes.iter().any(|p| p.messages.iter().any(|m| m.ordering_key.is_some() || m.flow_key.is_some())),
    );
    let (mut ids, mut queues) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let (mut types, mut bodies, mut delays, mut sizes) =
        (Vec::with_capacity(total), Vec::with_capacity(total), Vec::with_capacity(total), Vec::with_capacity(total));
    let (mut ordering_keys, mut flow_keys) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let (mut message_keys, mut firsts) = (Vec::new(), Vec::new());
    let mut keys = Vec::new();
    for p in publishes {
        for m in p.messages {
            ids.push(MessageId::new());
            queues.push(p.queue.id());
            types.push(m.content_type.code());
            bodies.push(m.body.as_ref());
            delays.push(m.delay_seconds);
            sizes.push(m.body.len() as i32);
            ordering_keys.push(m.ordering_key.as_ref().map(|k| k.as_str()));
            flow_keys.push(m.flow_key.as_ref().map(|k| k.as_str()));
            if keyed {
                let key = m.idempotency_key.as_ref().map(|k| k.as_str());
                message_keys.push(key);
                keys.extend(key.map(|key| (p.queue.id(), key, firsts.len())));
                firsts.push(true);
            }
        }
    }
    // A key used twice in one statement is inserted once: the first message keeps it. Sorting finds
    // the repeats as a hash set would, and the keys are sorted anyway.
    keys.sort_unstable_by_key(|(q, k, i)| (q.0, *k, *i));
    keys.dedup_by(|later, first| {
        let repeat = (later.0, later.1) == (first.0, first.1);
        if repeat {
            firsts[later.2] = false;
        }
        repeat
    });
    let (key_queues, keys): (Vec<QueueId>, Vec<&str>) = keys.into_iter().map(|(q, k, _)| (q, k)).unzip();
    let query = |statement| {
        sqlx::query_as::<_, PublishRow>(statement)
            .bind(&target_queues)
            .bind(&target_accounts)
            .bind(&ids)
            .bind(&queues)
            .bind(&types)
            .bind(&bodies)
            .bind(&delays)
            .bind(&sizes)
            .bind(&ordering_keys)
            .bind(&flow_keys)
    };
    let leasing = !keyed && ordered == 0 && !offers.is_empty();
    let forms: &[usize] = match lanes {
        Lanes::Absent => &[0, 1],
        Lanes::Read => &[1],
    };
    let mut rows = Vec::new();
    for &form in forms {
        rows = if leasing {
            query(PUBLISH_LEASING[form])
                .bind(offers.iter().map(|o| o.queue).collect::<Vec<_>>())
                .bind(offers.iter().map(|o| o.consumer).collect::<Vec<_>>())
                .bind(offers.iter().map(|o| o.slot).collect::<Vec<_>>())
                .bind(offers.iter().map(|o| o.lease_ms as f64).collect::<Vec<_>>())
                .bind(offers.iter().map(|o| o.batch_size).collect::<Vec<_>>())
                .fetch_all(&mut *conn)
                .await?
        } else if !keyed {
            query(PUBLISH[form][ordered]).fetch_all(&mut *conn).await?
        } else {
            // A statement that repeats a key must not store the repeats, which only `PUBLISH_ANY_KEYS` sorts out.
            let new_keys = if firsts.iter().all(|first| *first) {
                match query(PUBLISH_NEW_KEYS[form][ordered]).bind(&key_queues).bind(&keys).fetch_all(&mut *conn).await {
                    Err(sqlx::Error::Database(err)) if err.constraint() == Some("idempotency_keys_pkey") => None,
                    outcome => Some(outcome?),
                }
            } else {
                None
            };
            match new_keys {
                Some(rows) => rows,
                None => {
                    query(PUBLISH_ANY_KEYS[form][ordered])
                        .bind(&key_queues)
                        .bind(&keys)
                        .bind(&message_keys)
                        .bind(&firsts)
                        .fetch_all(&mut *conn)
                        .await?
                }
            }
        };
        if rows.iter().any(|row| row.queue.is_some()) {
            break;
        }
    }
    let mut published = Published::default();
    let mut duplicate_ids = std::collections::HashSet::new();
    let mut leased = std::collections::HashMap::new();
    let mut secrets = std::collections::HashMap::new();
    for row in rows {
        match (row.queue, row.duplicate, row.leased) {
            (Some(queue), _, Some(id)) => {
                secrets.entry(queue).or_insert_with(|| {
                    row.signing_secret.into_iter().chain(row.previous_signing_secret).collect::<Vec<_>>()
                });
                leased.extend(row.slot.zip(row.published_at).map(|found| (id, found)));
            }
            (Some(queue), _, None) => {
                let (pushed, waited, lanes) = (row.pushed, row.waited, row.lanes);
                published.stored.push(Stored { queue, pushed, waited, all_leased: false, lanes })
            }
            (None, Some(id), _) => {
                duplicate_ids.insert(id);
            }
            (None, None, _) => {}
        }
    }
    if !leased.is_empty() {
        published.leased = leased_batches(publishes, &ids, offers, &leased, &mut secrets);
        for stored in &mut published.stored {
            let taken: usize =
                publishes.iter().filter(|p| p.queue.id() == stored.queue).map(|p| p.messages.len()).sum();
            let leased: usize =
                published.leased.iter().filter(|b| b.queue.id() == stored.queue).map(|b| b.messages.len()).sum();
            // A lane took copies of messages published to its queue, none leased.
            stored.all_leased = taken > 0 && leased == taken;
        }
    }
    let mut next = ids.iter();
    published.duplicates = publishes
        .iter()
        .map(|p| next.by_ref().take(p.messages.len()).filter(|id| duplicate_ids.contains(id)).count())
        .collect();
    Ok(published)
}

/// The messages `PUBLISH_LEASING` leased (their slot and publication time), as one batch per queue in
/// publish order, with the bodies the publishes brought and the secrets the statement read.
fn leased_batches(
    publishes: &[Publish<'_>],
    ids: &[MessageId],
    offers: &[LeaseOffer],
    leased: &std::collections::HashMap<MessageId, (i32, DateTime<Utc>)>,
    secrets: &mut std::collections::HashMap<QueueId, Vec<String>>,
) -> Vec<LeasedAtPublish> {
    let mut batches: Vec<LeasedAtPublish> = Vec::new();
    let mut id = ids.iter();
    for p in publishes {
        for (m, id) in p.messages.iter().zip(id.by_ref()) {
            let Some(&(slot, published_at)) = leased.get(id) else { continue };
            let Some(offer) = offers.iter().find(|o| o.queue == p.queue.id()) else { continue };
            let message = StoredMessage {
                id: *id,
                published_id: *id,
                attempts: 1,
                published_at,
                content_type: m.content_type.code(),
                body: m.body.to_vec(),
                dead_letter_source: None,
                dead_letter_consumer: None,
                dead_lettered_at: None,
                ordering_key: None,
                flow_key: None,
            };
            match batches.iter_mut().find(|b| b.queue == p.queue) {
                Some(batch) => batch.messages.push(message),
                None => batches.push(LeasedAtPublish {
                    queue: p.queue,
                    consumer: offer.consumer,
                    slot,
                    messages: vec![message],
                    secrets: secrets.remove(&p.queue.id()).unwrap_or_default(),
                }),
            }
        }
    }
    batches
}

/// Forgets up to `limit` keys past their window; returns how many. Bounded so that it never holds
/// many row locks at once, and SKIP LOCKED so that it never waits on a publish.
pub async fn forget_expired_keys(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query(
        "delete from idempotency_keys where (queue_id, key) in (
             select queue_id, key from idempotency_keys where expires_at <= now()
             limit $1 for update skip locked)",
    )
    .bind(limit)
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}
