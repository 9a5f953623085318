//! The commands on strings, hashes, lists and sorted sets that the scripts
//! call, each refusing a key of another type with WRONGTYPE.

use super::{Cmd, Entry, HashValue, Keyspace, Str, Value, NOT_AN_INTEGER, WRONGTYPE};
use crate::names::{Field, Key, Member};

impl Keyspace {
    /// `GET key`.
    pub fn get(&self, key: Key) -> Cmd<Option<Str>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(*s)),
            Some(_) => Err(WRONGTYPE),
        }
    }

    /// `SET key value [PX ms]`: a SET without PX clears the TTL.
    pub fn set(&mut self, key: Key, value: Str, px: Option<i64>) {
        let expires_at = px.map(|ms| self.now + ms);
        self.keys.insert(
            key,
            Entry {
                value: Value::Str(value),
                expires_at,
            },
        );
    }

    /// `INCRBY key by` (and `DECRBY`, `INCR`, `DECR`): an absent key counts 0.
    pub fn incrby(&mut self, key: Key, by: i64) -> Cmd<i64> {
        let now = match self.get(key)? {
            None => 0,
            Some(Str::Int(n)) => n,
            Some(_) => return Err(NOT_AN_INTEGER),
        };
        let next = now.checked_add(by).ok_or(NOT_AN_INTEGER)?;
        self.write(key, Value::Str(Str::Int(next)));
        Ok(next)
    }

    fn hash(&self, key: Key) -> Cmd<&[(Field, HashValue)]> {
        match self.value(key) {
            None => Ok(&[]),
            Some(Value::Hash(fields)) => Ok(fields),
            Some(_) => Err(WRONGTYPE),
        }
    }

    /// `HGET key field`.
    pub fn hget(&self, key: Key, field: Field) -> Cmd<Option<HashValue>> {
        Ok(self
            .hash(key)?
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| *v))
    }

    /// `HEXISTS key field`.
    pub fn hexists(&self, key: Key, field: Field) -> Cmd<bool> {
        Ok(self.hget(key, field)?.is_some())
    }

    /// `HLEN key`.
    pub fn hlen(&self, key: Key) -> Cmd<i64> {
        Ok(self.hash(key)?.len() as i64)
    }

    /// `HKEYS key`, in the hash's order.
    pub fn hkeys(&self, key: Key) -> Cmd<Vec<Field>> {
        Ok(self.hash(key)?.iter().map(|(f, _)| *f).collect())
    }

    /// `HSET key field value`: 1 when the field is new (appended).
    pub fn hset(&mut self, key: Key, field: Field, value: HashValue) -> Cmd<i64> {
        let mut fields = self.hash(key)?.to_vec();
        let added = match fields.iter_mut().find(|(f, _)| *f == field) {
            Some(slot) => {
                slot.1 = value;
                0
            }
            None => {
                fields.push((field, value));
                1
            }
        };
        self.write(key, Value::Hash(fields));
        Ok(added)
    }

    /// `HINCRBY key field by`.
    pub fn hincrby(&mut self, key: Key, field: Field, by: i64) -> Cmd<i64> {
        let next = match self.hget(key, field)? {
            None => by,
            Some(HashValue::Int(n)) => n + by,
            Some(_) => {
                return Err(super::CommandError {
                    code: "ERR",
                    message: "hash value is not an integer",
                })
            }
        };
        self.hset(key, field, HashValue::Int(next))?;
        Ok(next)
    }

    /// `HDEL key field`: the key goes with its last field.
    pub fn hdel(&mut self, key: Key, field: Field) -> Cmd<i64> {
        let mut fields = self.hash(key)?.to_vec();
        let before = fields.len();
        fields.retain(|(f, _)| *f != field);
        let removed = (before - fields.len()) as i64;
        if fields.is_empty() {
            self.keys.remove(&key);
        } else if removed > 0 {
            self.write(key, Value::Hash(fields));
        }
        Ok(removed)
    }

    /// `LRANGE key 0 -1`.
    pub fn lrange(&self, key: Key) -> Cmd<Vec<Field>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(Value::List(items)) => Ok(items.clone()),
            Some(_) => Err(WRONGTYPE),
        }
    }

    /// `LINDEX key 0` (`first`) or `LINDEX key -1`.
    pub fn lindex(&self, key: Key, first: bool) -> Cmd<Option<Field>> {
        let items = self.lrange(key)?;
        Ok(if first {
            items.first().copied()
        } else {
            items.last().copied()
        })
    }

    fn write_list(&mut self, key: Key, items: Vec<Field>) {
        if items.is_empty() {
            self.keys.remove(&key);
        } else {
            self.write(key, Value::List(items));
        }
    }

    /// `LPOP key`.
    pub fn lpop(&mut self, key: Key) -> Cmd<Option<Field>> {
        let mut items = self.lrange(key)?;
        if items.is_empty() {
            return Ok(None);
        }
        let head = items.remove(0);
        self.write_list(key, items);
        Ok(Some(head))
    }

    /// `RPUSH key item`.
    pub fn rpush(&mut self, key: Key, item: Field) -> Cmd<i64> {
        let mut items = self.lrange(key)?;
        items.push(item);
        let len = items.len() as i64;
        self.write_list(key, items);
        Ok(len)
    }

    /// `LREM key 0 item`: every occurrence.
    pub fn lrem(&mut self, key: Key, item: Field) -> Cmd<i64> {
        let mut items = self.lrange(key)?;
        let before = items.len();
        items.retain(|f| *f != item);
        let removed = (before - items.len()) as i64;
        self.write_list(key, items);
        Ok(removed)
    }

    /// `ZRANGE key 0 -1 WITHSCORES`: by score, then member.
    pub fn zrange(&self, key: Key) -> Cmd<Vec<(Member, i64)>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(Value::ZSet(items)) => Ok(items.clone()),
            Some(_) => Err(WRONGTYPE),
        }
    }

    /// `ZSCORE key member`.
    pub fn zscore(&self, key: Key, member: Member) -> Cmd<Option<i64>> {
        Ok(self
            .zrange(key)?
            .into_iter()
            .find(|(m, _)| *m == member)
            .map(|(_, s)| s))
    }

    fn write_zset(&mut self, key: Key, mut items: Vec<(Member, i64)>) {
        items.sort_by_key(|&(m, s)| (s, m));
        if items.is_empty() {
            self.keys.remove(&key);
        } else {
            self.write(key, Value::ZSet(items));
        }
    }

    /// `ZADD key score member`: 1 when the member is new.
    pub fn zadd(&mut self, key: Key, score: i64, member: Member) -> Cmd<i64> {
        let mut items = self.zrange(key)?;
        let before = items.len();
        items.retain(|(m, _)| *m != member);
        let added = i64::from(items.len() == before);
        items.push((member, score));
        self.write_zset(key, items);
        Ok(added)
    }

    /// `ZINCRBY key by member`: the new score.
    pub fn zincrby(&mut self, key: Key, by: i64, member: Member) -> Cmd<i64> {
        let score = self.zscore(key, member)?.unwrap_or(0) + by;
        self.zadd(key, score, member)?;
        Ok(score)
    }

    /// `ZREM key member...`: how many were there.
    pub fn zrem(&mut self, key: Key, members: &[Member]) -> Cmd<i64> {
        let mut items = self.zrange(key)?;
        let before = items.len();
        items.retain(|(m, _)| !members.contains(m));
        let removed = (before - items.len()) as i64;
        if removed > 0 {
            self.write_zset(key, items);
        }
        Ok(removed)
    }

    /// `ZRANGEBYSCORE key min max`: the members scored within, in order.
    pub fn zrangebyscore(&self, key: Key, min: i64, max: i64) -> Cmd<Vec<Member>> {
        Ok(self
            .zrange(key)?
            .into_iter()
            .filter(|&(_, s)| min <= s && s <= max)
            .map(|(m, _)| m)
            .collect())
    }
}
