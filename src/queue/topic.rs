//! Topics' rules: routing keys, binding patterns and filters, publish attributes, and which bindings a
//! publish matches. A routing key is dot-separated words; in a pattern `*` stands for one word and `#` for
//! zero or more, as in AMQP's topic exchanges and pgmq's topics.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{invalid, Invalid};

/// The longest routing key and pattern.
pub const MAX_KEY: usize = 255;
/// The most attributes a filter names or a publish carries, and values a filter lists for one.
pub const MAX_ATTRIBUTES: usize = 16;
pub const MAX_VALUES: usize = 16;
/// The longest attribute name and value.
pub const MAX_ATTRIBUTE_NAME: usize = 64;
pub const MAX_ATTRIBUTE_VALUE: usize = 256;
/// The most topics an account holds, and bindings a topic holds.
pub const MAX_TOPICS_PER_ACCOUNT: i64 = 100;
pub const MAX_BINDINGS_PER_TOPIC: i64 = 50;

fn is_word(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A publish's routing key, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingKey(String);

impl RoutingKey {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() || raw.len() > MAX_KEY || !raw.split('.').all(is_word) {
            return Err(invalid(format!(
                "routing_key must be 1-{MAX_KEY} characters of words (letters, digits, '_' and '-') separated by \
                 single dots, such as \"orders.eu.created\"; got {raw:?}"
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A binding's pattern, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let word_or_wildcard = |w: &str| w == "*" || w == "#" || is_word(w);
        if raw.is_empty() || raw.len() > MAX_KEY || !raw.split('.').all(word_or_wildcard) {
            return Err(invalid(format!(
                "pattern must be 1-{MAX_KEY} characters of dot-separated words, each letters, digits, '_' and '-', \
                 or '*' (one word) or '#' (zero or more words), such as \"orders.*.created\" or \"orders.#\"; \
                 got {raw:?}"
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    /// A pattern read back from the database, which holds only checked ones.
    pub fn stored(raw: String) -> Self {
        Self(raw)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the routing key matches: `*` takes exactly one word, `#` any number, the rest themselves.
    pub fn matches(&self, key: &RoutingKey) -> bool {
        let pattern: Vec<&str> = self.0.split('.').collect();
        let key: Vec<&str> = key.0.split('.').collect();
        // reached[j]: the pattern's words so far can take exactly the key's first j words.
        let mut reached = vec![false; key.len() + 1];
        reached[0] = true;
        for word in pattern {
            let mut next = vec![false; key.len() + 1];
            for j in 0..=key.len() {
                next[j] = match word {
                    // Zero words, or one more word than a reach of `#` itself.
                    "#" => reached[j] || (j > 0 && next[j - 1]),
                    "*" => j > 0 && reached[j - 1],
                    word => j > 0 && reached[j - 1] && key[j - 1] == word,
                };
            }
            reached = next;
        }
        reached[key.len()]
    }
}

fn check_attribute_name(field: &str, name: &str) -> Result<(), Invalid> {
    let valid = name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if name.is_empty() || name.len() > MAX_ATTRIBUTE_NAME || !valid {
        return Err(invalid(format!(
            "{field} names attributes of 1-{MAX_ATTRIBUTE_NAME} letters, digits, '_', '-' and '.'; got {name:?}"
        )));
    }
    Ok(())
}

fn attribute_value<'a>(field: &str, value: &'a Value) -> Result<&'a str, Invalid> {
    match value.as_str() {
        Some(s) if s.chars().count() <= MAX_ATTRIBUTE_VALUE && !s.contains('\0') => Ok(s),
        _ => Err(invalid(format!("{field} must be a string of at most {MAX_ATTRIBUTE_VALUE} characters, without NUL"))),
    }
}

fn object<'a>(field: &str, raw: &'a Value) -> Result<&'a serde_json::Map<String, Value>, Invalid> {
    let map = raw.as_object().ok_or_else(|| invalid(format!("{field} must be a JSON object")))?;
    if map.len() > MAX_ATTRIBUTES {
        return Err(invalid(format!("{field} may name at most {MAX_ATTRIBUTES} attributes, got {}", map.len())));
    }
    Ok(map)
}

/// A publish's attributes: names to values. They choose bindings; they are not stored with the messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes(BTreeMap<String, String>);

impl Attributes {
    pub fn parse(raw: &Value) -> Result<Self, Invalid> {
        let mut attributes = BTreeMap::new();
        for (name, value) in object("attributes", raw)? {
            check_attribute_name("attributes", name)?;
            attributes.insert(name.clone(), attribute_value(&format!("attributes.{name}"), value)?.to_owned());
        }
        Ok(Self(attributes))
    }
}

/// A binding's filter: each attribute it names must be among the publish's, with one of its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter(BTreeMap<String, Vec<String>>);

impl Filter {
    /// Each attribute's values as a string or an array of strings.
    pub fn parse(raw: &Value) -> Result<Self, Invalid> {
        let mut filter = BTreeMap::new();
        for (name, values) in object("filter", raw)? {
            check_attribute_name("filter", name)?;
            let field = format!("filter.{name}");
            let values = match values {
                Value::Array(values) if !values.is_empty() && values.len() <= MAX_VALUES => {
                    values.iter().map(|v| attribute_value(&field, v).map(str::to_owned)).collect::<Result<_, _>>()?
                }
                Value::Array(_) => {
                    return Err(invalid(format!("{field} must list 1 to {MAX_VALUES} values")));
                }
                value => vec![attribute_value(&field, value)?.to_owned()],
            };
            filter.insert(name.clone(), values);
        }
        Ok(Self(filter))
    }

    /// The filter as stored and answered: every value list an array.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.0).expect("a map of strings serialises")
    }

    pub fn matches(&self, attributes: &Attributes) -> bool {
        self.0.iter().all(|(name, values)| attributes.0.get(name).is_some_and(|v| values.contains(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, key: &str) -> bool {
        Pattern::parse(pattern).unwrap().matches(&RoutingKey::parse(key).unwrap())
    }

    #[test]
    fn a_star_takes_one_word_and_a_hash_any_number() {
        assert!(matches("orders.*.created", "orders.eu.created"));
        assert!(!matches("orders.*.created", "orders.created"));
        assert!(!matches("orders.*.created", "orders.eu.west.created"));
        assert!(matches("orders.#", "orders"));
        assert!(matches("orders.#", "orders.eu.created"));
        assert!(!matches("orders.#", "order.eu"));
        assert!(matches("#", "anything.at.all"));
        assert!(matches("#.created", "created"));
        assert!(matches("#.created", "orders.eu.created"));
        assert!(!matches("#.created", "orders.created.late"));
        assert!(matches("orders.#.created", "orders.created"));
        assert!(matches("orders.#.created", "orders.eu.west.created"));
        assert!(matches("*.#.*", "a.b"));
        assert!(!matches("*.#.*", "a"));
        assert!(matches("orders.eu.created", "orders.eu.created"));
        assert!(!matches("orders.eu.created", "orders.us.created"));
        assert!(matches("#.#", "a"));
    }

    #[test]
    fn keys_and_patterns_are_words_between_single_dots() {
        for bad in ["", "a..b", ".a", "a.", "a b", "a.*", "a.#", &"a".repeat(256)] {
            assert!(RoutingKey::parse(bad).is_err(), "{bad:?}");
        }
        for bad in ["", "a..b", "a.**", "a.#b", "a b"] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?}");
        }
        assert!(RoutingKey::parse("Orders_1.eu-west").is_ok());
        assert!(Pattern::parse("*").is_ok());
    }

    #[test]
    fn a_filter_needs_every_attribute_it_names_with_a_listed_value() {
        let filter = Filter::parse(&serde_json::json!({"region": ["eu", "us"], "tier": "gold"})).unwrap();
        assert_eq!(filter.to_json(), serde_json::json!({"region": ["eu", "us"], "tier": ["gold"]}));
        let attributes = |v| Attributes::parse(&v).unwrap();
        assert!(filter.matches(&attributes(serde_json::json!({"region": "eu", "tier": "gold", "x": "y"}))));
        assert!(!filter.matches(&attributes(serde_json::json!({"region": "ap", "tier": "gold"}))));
        assert!(!filter.matches(&attributes(serde_json::json!({"region": "eu"}))));
        assert!(Filter::parse(&serde_json::json!({})).unwrap().matches(&Attributes::default()));
    }

    #[test]
    fn filters_and_attributes_refuse_what_they_cannot_match() {
        assert!(Filter::parse(&serde_json::json!({"region": []})).is_err());
        assert!(Filter::parse(&serde_json::json!({"region": 1})).is_err());
        assert!(Filter::parse(&serde_json::json!(["region"])).is_err());
        assert!(Filter::parse(&serde_json::json!({"bad name": "x"})).is_err());
        assert!(Attributes::parse(&serde_json::json!({"region": ["eu"]})).is_err());
        let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("a{i}"), Value::from("x"))).collect();
        assert!(Attributes::parse(&Value::Object(many)).is_err());
    }
}
