//! Topics: an account's named routes from routing keys to its queues. A publish to a topic reads the
//! topic's bindings, keeps those whose pattern matches its routing key and whose filter its attributes,
//! and stores each message once in every queue they name, in one commit (`Engine::store_in`).

use std::time::Duration;

use super::Engine;
use crate::error::{ApiError, ApiResult, Kind};
use crate::ids::{AccountId, BindingId, QueueId, TopicId};
use crate::queue::message::NewMessage;
use crate::queue::settings::QueueName;
use crate::queue::topic::{Attributes, Filter, Pattern, RoutingKey, MAX_BINDINGS_PER_TOPIC, MAX_TOPICS_PER_ACCOUNT};
use crate::store;
use crate::store::owned::OwnedQueue;
use crate::store::topics::{Binding, Route, Topic};

/// A queue a publish reached, or would reach, and for a publish its duplicates.
#[derive(Debug, Clone)]
pub struct Reached {
    pub queue: OwnedQueue,
    pub queue_name: String,
    pub duplicates: usize,
}

/// What a topic publish did.
pub struct TopicPublished {
    pub reached: Vec<Reached>,
    pub held_back: Duration,
}

fn topic_not_found() -> ApiError {
    ApiError::not_found("topic")
}

impl Engine {
    /// Makes a topic; a 409 when the account has one of that name, a 403 past the quota.
    pub async fn create_topic(&self, account: AccountId, name: &str) -> ApiResult<Topic> {
        let name = QueueName::parse("name", name)?;
        if store::topics::count(&self.pool, account).await? >= MAX_TOPICS_PER_ACCOUNT {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!(
                    "this account has reached its quota of {MAX_TOPICS_PER_ACCOUNT} topics; delete one before \
                     creating another"
                ),
            ));
        }
        store::topics::create(&self.pool, account, name.as_str()).await?.ok_or_else(|| {
            ApiError::new(Kind::Conflict, format!("this account has a topic named {:?} already", name.as_str()))
        })
    }

    pub async fn topic(&self, account: AccountId, id: TopicId) -> ApiResult<Topic> {
        store::topics::get(&self.pool, account, id).await?.ok_or_else(topic_not_found)
    }

    /// A page of the account's topics by name, and how many it has.
    pub async fn topics(&self, account: AccountId, limit: i64, offset: i64) -> ApiResult<(Vec<Topic>, i64)> {
        let page = store::topics::page(&self.pool, account, limit, offset).await?;
        Ok((page, store::topics::count(&self.pool, account).await?))
    }

    /// The topic with its bindings; a 404 when the account has no such topic.
    pub async fn topic_with_bindings(&self, account: AccountId, id: TopicId) -> ApiResult<(Topic, Vec<Binding>)> {
        let topic = self.topic(account, id).await?;
        Ok((topic, store::topics::bindings(&self.pool, account, id).await?))
    }

    /// Deletes the topic with its bindings, answering it as it was.
    pub async fn delete_topic(&self, account: AccountId, id: TopicId) -> ApiResult<(Topic, Vec<Binding>)> {
        let (topic, bindings) = self.topic_with_bindings(account, id).await?;
        if !store::topics::delete(&self.pool, account, id).await? {
            return Err(topic_not_found());
        }
        Ok((topic, bindings))
    }

    /// Binds the account's queue to its topic by a pattern and an optional filter, checked before either
    /// is looked up.
    pub async fn bind(
        &self,
        (account, topic): (AccountId, TopicId),
        queue: QueueId,
        pattern: &str,
        filter: Option<&serde_json::Value>,
    ) -> ApiResult<Binding> {
        let pattern = Pattern::parse(pattern)?;
        let filter = filter.map(Filter::parse).transpose()?.map(|f| f.to_json());
        // The topic first: a topic of another account is a 404 whatever the queue.
        self.topic(account, topic).await?;
        let queue = self.owned_queue(account, queue).await?.ok_or_else(ApiError::queue_not_found)?;
        if store::topics::count_bindings(&self.pool, account, topic).await? >= MAX_BINDINGS_PER_TOPIC {
            return Err(ApiError::new(
                Kind::QueueQuota,
                format!("a topic holds at most {MAX_BINDINGS_PER_TOPIC} bindings; remove one before adding another"),
            ));
        }
        let bound = store::topics::bind(&self.pool, topic, queue, pattern.as_str(), filter.as_ref()).await?;
        bound.ok_or_else(|| {
            ApiError::new(
                Kind::Conflict,
                format!("the topic binds this queue by the pattern {:?} already", pattern.as_str()),
            )
        })
    }

    pub async fn unbind(&self, account: AccountId, topic: TopicId, id: BindingId) -> ApiResult<Binding> {
        self.topic(account, topic).await?;
        store::topics::unbind(&self.pool, account, topic, id).await?.ok_or_else(|| ApiError::not_found("binding"))
    }

    /// The queues a publish with this key and these attributes reaches, each once, by name.
    pub async fn route(
        &self,
        account: AccountId,
        topic: TopicId,
        key: &RoutingKey,
        attributes: &Attributes,
    ) -> ApiResult<Vec<Reached>> {
        let routes = store::topics::routes(&self.pool, account, topic).await?.ok_or_else(topic_not_found)?;
        let mut reached: Vec<Reached> = routes
            .into_iter()
            .filter(|route| route_matches(route, key, attributes))
            .map(|route| Reached { queue: route.queue, queue_name: route.queue_name, duplicates: 0 })
            .collect();
        reached.sort_by(|a, b| a.queue_name.cmp(&b.queue_name));
        reached.dedup_by_key(|r| r.queue.id());
        Ok(reached)
    }

    /// Stores each message once in every queue the key and attributes reach, in one commit; a key that
    /// reaches none stores nothing and says so.
    pub async fn publish_to_topic(
        &self,
        account: AccountId,
        topic: TopicId,
        (key, attributes): (&RoutingKey, &Attributes),
        messages: Vec<NewMessage>,
    ) -> ApiResult<TopicPublished> {
        let reached = self.route(account, topic, key, attributes).await?;
        if reached.is_empty() {
            return Ok(TopicPublished { reached, held_back: Duration::ZERO });
        }
        let targets = reached.iter().map(|r| r.queue).collect();
        let (stored, held_back) = self.store_in(targets, messages).await?;
        // A queue deleted since the bindings were read took nothing.
        let reached = reached
            .into_iter()
            .zip(stored)
            .filter_map(|(r, duplicates)| Some(Reached { duplicates: duplicates?, ..r }))
            .collect();
        Ok(TopicPublished { reached, held_back })
    }
}

/// A binding's pattern and filter were checked when it was made.
fn route_matches(route: &Route, key: &RoutingKey, attributes: &Attributes) -> bool {
    let pattern = Pattern::stored(route.pattern.clone());
    let filter_matches = match &route.filter {
        None => true,
        Some(raw) => Filter::parse(raw).is_ok_and(|f| f.matches(attributes)),
    };
    filter_matches && pattern.matches(key)
}
