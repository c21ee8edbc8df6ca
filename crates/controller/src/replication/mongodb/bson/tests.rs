use super::{Document, Value, read_document};

/// A document of `(kind, key, value bytes)` fields, as BSON lays it out.
fn document(fields: &[(u8, &str, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (kind, key, value) in fields {
        body.push(*kind);
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value);
    }
    let length = i32::try_from(body.len() + 5).expect("small");
    let mut bytes = length.to_le_bytes().to_vec();
    bytes.extend(body);
    bytes.push(0);
    bytes
}

fn string(text: &str) -> Vec<u8> {
    let length = i32::try_from(text.len() + 1).expect("small");
    let mut bytes = length.to_le_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(0);
    bytes
}

#[test]
fn the_kinds_a_hello_answer_uses_are_read() {
    let last_write = document(&[(
        0x09,
        "lastWriteDate",
        1_700_000_000_123_i64.to_le_bytes().to_vec(),
    )]);
    let hosts = document(&[
        (0x02, "0", string("orders-0:27017")),
        (0x02, "1", string("orders-1:27017")),
    ]);
    let bytes = document(&[
        (0x08, "isWritablePrimary", vec![1]),
        (0x08, "secondary", vec![0]),
        (0x02, "setName", string("rs0")),
        (0x04, "hosts", hosts),
        (0x03, "lastWrite", last_write),
        (0x10, "maxWireVersion", 17_i32.to_le_bytes().to_vec()),
        (0x12, "connectionId", 42_i64.to_le_bytes().to_vec()),
        (0x01, "ok", 1.0_f64.to_le_bytes().to_vec()),
    ]);
    let (hello, read) = read_document(&bytes).expect("read");
    assert_eq!(read, bytes.len());
    assert_eq!(hello.bool("isWritablePrimary"), Some(true));
    assert_eq!(hello.bool("secondary"), Some(false));
    assert_eq!(hello.str("setName"), Some("rs0"));
    assert_eq!(
        hello.get("hosts"),
        Some(&Value::Array(vec![
            Value::String("orders-0:27017".into()),
            Value::String("orders-1:27017".into())
        ]))
    );
    let last_write = hello.document("lastWrite").expect("a document");
    assert_eq!(
        last_write.date_time("lastWriteDate"),
        Some(1_700_000_000_123)
    );
    assert_eq!(hello.get("maxWireVersion"), Some(&Value::Int32(17)));
    assert_eq!(hello.get("connectionId"), Some(&Value::Int64(42)));
    assert_eq!(hello.get("ok"), Some(&Value::Double(1.0)));
    assert_eq!(hello.str("isWritablePrimary"), None, "a bool is no string");
    assert_eq!(hello.get("missing"), None);
}

#[test]
fn kinds_it_does_not_keep_are_stepped_over() {
    let mut binary = 3_i32.to_le_bytes().to_vec();
    binary.extend([0, 1, 2, 3]);
    let bytes = document(&[
        (0x07, "electionId", vec![7; 12]),
        (0x11, "opTime", vec![1; 8]),
        (0x05, "hash", binary),
        (0x0A, "nothing", vec![]),
        (0x13, "decimal", vec![0; 16]),
        (0x0B, "pattern", b"^a\0i\0".to_vec()),
        (0x02, "after", string("read")),
    ]);
    let (read, _) = read_document(&bytes).expect("read");
    assert_eq!(read.get("electionId"), Some(&Value::Other));
    assert_eq!(read.get("opTime"), Some(&Value::Other));
    assert_eq!(read.get("hash"), Some(&Value::Other));
    assert_eq!(read.str("after"), Some("read"));
}

#[test]
fn malformed_input_reads_as_nothing() {
    let good = document(&[(0x02, "setName", string("rs0"))]);
    for cut in 0..good.len() {
        assert_eq!(read_document(&good[..cut]), None, "cut at {cut}");
    }
    // A length past the end, a bool that is neither 0 nor 1, an unknown kind, a string
    // without its NUL.
    let mut too_long = good.clone();
    too_long[0] += 1;
    assert_eq!(read_document(&too_long), None);
    assert_eq!(read_document(&document(&[(0x08, "b", vec![2])])), None);
    assert_eq!(read_document(&document(&[(0x42, "x", vec![])])), None);
    let mut unterminated = string("rs0");
    *unterminated.last_mut().expect("a byte") = b'!';
    assert_eq!(read_document(&document(&[(0x02, "s", unterminated)])), None);
    assert_eq!(read_document(&[]), None);
    assert_eq!(read_document(&(-5_i32).to_le_bytes()), None);
}

#[test]
fn nesting_deeper_than_the_limit_reads_as_nothing() {
    let nested = |depth: usize| {
        let mut bytes = document(&[]);
        for _ in 0..depth {
            bytes = document(&[(0x03, "d", bytes)]);
        }
        bytes
    };
    assert!(read_document(&nested(super::MOST_DEPTH)).is_some());
    assert_eq!(read_document(&nested(super::MOST_DEPTH + 1)), None);
    assert_eq!(
        read_document(&document(&[])),
        Some((Document::default(), 5))
    );
}
