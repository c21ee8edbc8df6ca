//! A `Write` that collects into memory and can be read while another owner writes,
//! for code that takes its writer by value (a download, a log sink).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Bytes written through any clone, readable through any other.
#[derive(Clone, Debug, Default)]
pub struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl SharedBuffer {
    /// Everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.0.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("the buffer's lock is poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_one_clone_writes_another_reads() {
        let buffer = SharedBuffer::default();
        let mut writer = buffer.clone();
        writer.write_all(b"dump").expect("written");
        assert_eq!(buffer.contents(), b"dump");
    }
}
