//! Decoding a top-level object without holding its `items` all at once: each item is
//! handed over as soon as it is read (a `kubectl get -o json` List of 100,000 pods never
//! becomes one tree), and the rest of the object is returned.

use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Decodes one top-level value: a mapping's `items` go to `on_item` one by one (the key
/// is left out of the returned mapping); anything else is returned whole.
pub(crate) struct TopLevel<'f, F: FnMut(Value)> {
    /// Called with each item of `items`, in order.
    pub on_item: &'f mut F,
}

impl<'de, F: FnMut(Value)> DeserializeSeed<'de> for TopLevel<'_, F> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, F: FnMut(Value)> Visitor<'de> for TopLevel<'_, F> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !out.contains_key("items") {
                map.next_value_seed(Items {
                    on_item: &mut *self.on_item,
                })?;
            } else {
                let value: Value = map.next_value()?;
                out.insert(key, value);
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<Value>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// `items`: a sequence handed over element by element (a null or another value is read
/// and dropped: the List then simply has no items).
struct Items<'f, F: FnMut(Value)> {
    on_item: &'f mut F,
}

impl<'de, F: FnMut(Value)> DeserializeSeed<'de> for Items<'_, F> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, F: FnMut(Value)> Visitor<'de> for Items<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            (self.on_item)(item);
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_handed_over_one_by_one() {
        let text =
            r#"{"apiVersion": "v1", "items": [{"kind": "Pod"}, {"kind": "Node"}], "kind": "List"}"#;
        let mut seen = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        let header = TopLevel {
            on_item: &mut |v: Value| seen.push(v),
        }
        .deserialize(&mut de)
        .expect("valid");
        assert_eq!(
            header,
            serde_json::json!({"apiVersion": "v1", "kind": "List"})
        );
        assert_eq!(
            seen,
            vec![
                serde_json::json!({"kind": "Pod"}),
                serde_json::json!({"kind": "Node"})
            ]
        );
    }
}
