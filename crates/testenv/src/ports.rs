//! Free loopback ports.

use std::net::{Ipv4Addr, TcpListener};

/// Asks the kernel for a free port on 127.0.0.1. Another process may take it before the
/// component binds it; [`crate::ControlPlane::start`] retries the whole start for that.
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}
