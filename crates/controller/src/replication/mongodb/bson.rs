//! A reader for the little BSON the controller reads: the documents mongod answers over
//! the wire protocol before any login (`hello`, `buildInfo`). It only reads; values of
//! the kinds those answers use are kept, the others are stepped over. Malformed or too
//! deeply nested input reads as nothing, never a panic.

/// A value, as far as the controller needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Double(f64),
    String(String),
    Document(Document),
    Array(Vec<Value>),
    Bool(bool),
    /// Milliseconds since the Unix epoch.
    DateTime(i64),
    Int32(i32),
    Int64(i64),
    /// A kind the controller does not read (binary, object id, timestamp, ...).
    Other,
}

/// A document: its fields in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document(Vec<(String, Value)>);

impl Document {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn document(&self, key: &str) -> Option<&Document> {
        match self.get(key)? {
            Value::Document(d) => Some(d),
            _ => None,
        }
    }

    pub fn date_time(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::DateTime(ms) => Some(*ms),
            _ => None,
        }
    }
}

/// Documents nested deeper than this read as malformed.
const MOST_DEPTH: usize = 32;

/// The document at the start of `bytes`, and how many bytes it took.
pub fn read_document(bytes: &[u8]) -> Option<(Document, usize)> {
    let mut reader = Reader { bytes, at: 0 };
    let fields = reader.document(0)?;
    Some((Document(fields), reader.at))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    fn length(&mut self) -> Option<usize> {
        usize::try_from(i32::from_le_bytes(self.array()?)).ok()
    }

    fn cstring(&mut self) -> Option<String> {
        let rest = self.bytes.get(self.at..)?;
        let nul = rest.iter().position(|b| *b == 0)?;
        let text = std::str::from_utf8(&rest[..nul]).ok()?.to_owned();
        self.at += nul + 1;
        Some(text)
    }

    /// A length-prefixed string, its NUL included in the length.
    fn string(&mut self) -> Option<String> {
        let length = self.length()?;
        let (nul, text) = self.take(length)?.split_last()?;
        if *nul != 0 {
            return None;
        }
        String::from_utf8(text.to_vec()).ok()
    }

    fn document(&mut self, depth: usize) -> Option<Vec<(String, Value)>> {
        if depth > MOST_DEPTH {
            return None;
        }
        let start = self.at;
        let end = start.checked_add(self.length()?)?;
        if end > self.bytes.len() || end < start + 5 {
            return None;
        }
        let mut fields = Vec::new();
        while self.at < end - 1 {
            let kind = self.byte()?;
            let key = self.cstring()?;
            let value = self.value(kind, depth)?;
            fields.push((key, value));
        }
        (self.byte()? == 0 && self.at == end).then_some(fields)
    }

    fn value(&mut self, kind: u8, depth: usize) -> Option<Value> {
        Some(match kind {
            0x01 => Value::Double(f64::from_le_bytes(self.array()?)),
            0x02 => Value::String(self.string()?),
            0x03 => Value::Document(Document(self.document(depth + 1)?)),
            0x04 => Value::Array(
                self.document(depth + 1)?
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect(),
            ),
            0x08 => match self.byte()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return None,
            },
            0x09 => Value::DateTime(i64::from_le_bytes(self.array()?)),
            0x10 => Value::Int32(i32::from_le_bytes(self.array()?)),
            0x12 => Value::Int64(i64::from_le_bytes(self.array()?)),
            _ => {
                self.step_over(kind)?;
                Value::Other
            }
        })
    }

    /// Moves past a value of a kind the controller does not read.
    fn step_over(&mut self, kind: u8) -> Option<()> {
        match kind {
            // undefined, null, max key, min key
            0x06 | 0x0A | 0x7F | 0xFF => {}
            // binary: length, subtype, bytes
            0x05 => {
                let length = self.length()?;
                self.take(length.checked_add(1)?)?;
            }
            0x07 => {
                self.take(12)?;
            }
            // regular expression: pattern and options
            0x0B => {
                self.cstring()?;
                self.cstring()?;
            }
            // DB pointer: a string and an object id
            0x0C => {
                self.string()?;
                self.take(12)?;
            }
            // JavaScript, symbol
            0x0D | 0x0E => {
                self.string()?;
            }
            // JavaScript with scope: its whole length comes first
            0x0F => {
                let length = self.length()?;
                self.take(length.checked_sub(4)?)?;
            }
            0x11 => {
                self.take(8)?;
            }
            0x13 => {
                self.take(16)?;
            }
            _ => return None,
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
