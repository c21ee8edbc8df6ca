use std::fmt::Write as _;

use super::{ask_script, command_message, from_hex, read_answer};

/// The readiness probe's test checks `hello` against the probe's own bytes.
#[test]
fn a_longer_command_makes_a_longer_message() {
    let build_info = command_message("buildInfo");
    assert_eq!(build_info.len(), 56);
    assert_eq!(build_info[..4], [56, 0, 0, 0]);
}

#[test]
fn the_script_asks_each_command_in_turn() {
    let script = ask_script(&["hello", "buildInfo"]);
    let asks: Vec<&str> = script.lines().filter(|l| l.starts_with("ask '")).collect();
    assert_eq!(asks.len(), 2);
    assert!(asks[0].starts_with("ask '\\x34\\x00\\x00\\x00"));
    assert!(asks[1].starts_with("ask '\\x38\\x00\\x00\\x00"));
    assert!(
        !script.contains('%'),
        "printf reads no format directive from a message"
    );
}

/// An answer line as the script prints it: `document` as the body of an OP_MSG.
fn answer_line(opcode: i32, document: &[u8]) -> String {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&7_i32.to_le_bytes());
    bytes.extend_from_slice(&1_i32.to_le_bytes());
    bytes.extend_from_slice(&opcode.to_le_bytes());
    bytes.extend_from_slice(&0_u32.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(document);
    bytes.iter().fold(String::new(), |mut line, b| {
        let _ = write!(line, "{b:02x}");
        line
    })
}

/// `{ ok: <ok> }` as BSON.
fn ok_document(ok: f64) -> Vec<u8> {
    let mut document = 17_i32.to_le_bytes().to_vec();
    document.extend_from_slice(b"\x01ok\0");
    document.extend_from_slice(&ok.to_le_bytes());
    document.push(0);
    document
}

#[test]
fn an_answer_reads_only_when_it_is_an_op_msg_that_says_ok() {
    let answer = read_answer(&answer_line(2013, &ok_document(1.0))).expect("an answer");
    assert_eq!(answer.get("ok"), Some(&super::bson::Value::Double(1.0)));
    assert_eq!(read_answer(&answer_line(2013, &ok_document(0.0))), None);
    assert_eq!(read_answer(&answer_line(1, &ok_document(1.0))), None);
    assert_eq!(read_answer(""), None);
    assert_eq!(read_answer("0"), None);
    assert_eq!(read_answer("zz"), None);
    assert_eq!(from_hex("00ff10"), Some(vec![0, 255, 16]));
}
