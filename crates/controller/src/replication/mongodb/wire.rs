//! Asking a mongodb member what it answers before any login (`hello`, `buildInfo`) over
//! the wire protocol, from bash in its container as the readiness probe asks `hello`:
//! a few milliseconds of CPU, where starting mongosh costs about a second. The script
//! prints each answer in hex on a line of its own; this module reads them.

use std::fmt::Write as _;

use super::bson::{self, Document};

/// OP_MSG's opcode: a message with sections, the one format every supported server
/// speaks.
const OP_MSG: i32 = 2013;

/// The message for `{ <command>: 1, $db: "admin" }`: an OP_MSG with one body section.
pub fn command_message(command: &str) -> Vec<u8> {
    let mut fields = vec![0x10];
    fields.extend_from_slice(command.as_bytes());
    fields.push(0);
    fields.extend_from_slice(&1_i32.to_le_bytes());
    fields.push(0x02);
    fields.extend_from_slice(b"$db\0");
    fields.extend_from_slice(&6_i32.to_le_bytes());
    fields.extend_from_slice(b"admin\0");
    let mut document = length_of(fields.len() + 5).to_vec();
    document.extend(fields);
    document.push(0);
    // Header (length, request id, the request answered, opcode), flags, section kind.
    let mut message = length_of(16 + 4 + 1 + document.len()).to_vec();
    message.extend_from_slice(&1_i32.to_le_bytes());
    message.extend_from_slice(&0_i32.to_le_bytes());
    message.extend_from_slice(&OP_MSG.to_le_bytes());
    message.extend_from_slice(&0_u32.to_le_bytes());
    message.push(0);
    message.extend(document);
    message
}

/// A length field: commands are named by the controller, so they are short.
fn length_of(length: usize) -> [u8; 4] {
    i32::try_from(length).unwrap_or(i32::MAX).to_le_bytes()
}

/// Bash that sends each command to the server on 127.0.0.1:27017 over one connection
/// and prints each answer, without its length, in hex on a line of its own; it fails
/// when the server does not answer within two seconds.
pub fn ask_script(commands: &[&str]) -> String {
    let mut script = String::from(
        r#"exec 3<>/dev/tcp/127.0.0.1/27017 || exit 1
ask() {
  printf "$1" >&3 || exit 1
  length=$(timeout 2 dd bs=4 count=1 iflag=fullblock <&3 2>/dev/null | od -An -tu4 | tr -d ' \n')
  case "$length" in '' | *[!0-9]*) exit 1 ;; esac
  [ "$length" -gt 4 ] && [ "$length" -lt 16777216 ] || exit 1
  timeout 2 dd bs=$((length - 4)) count=1 iflag=fullblock <&3 2>/dev/null | od -An -v -tx1 | tr -d ' \n'
  echo
}
"#,
    );
    for command in commands {
        script.push_str("ask '");
        for byte in command_message(command) {
            let _ = write!(script, "\\x{byte:02x}");
        }
        script.push_str("'\n");
    }
    script
}

/// The body of one answer line [`ask_script`] printed; `None` unless it is an OP_MSG
/// whose document reads and says `ok`.
pub fn read_answer(line: &str) -> Option<Document> {
    let bytes = from_hex(line.trim())?;
    // Request id, the request answered, opcode; then flags and the section kind.
    let opcode = i32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?);
    if opcode != OP_MSG || *bytes.get(16)? != 0 {
        return None;
    }
    let (document, _) = bson::read_document(bytes.get(17..)?)?;
    let ok = match document.get("ok")? {
        bson::Value::Double(ok) => (*ok - 1.0).abs() < f64::EPSILON,
        bson::Value::Int32(ok) => *ok == 1,
        _ => false,
    };
    ok.then_some(document)
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests;
