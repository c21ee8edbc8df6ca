//! Commands run on the host for the real node (ip, iptables, mount, losetup, ...).

use std::process::Command;

/// A host command failed.
#[derive(Debug, thiserror::Error)]
#[error("`{command}` failed: {message}")]
pub struct CommandFailed {
    pub command: String,
    pub message: String,
}

/// Runs `program args...` and returns its standard output.
pub fn run(program: &str, args: &[&str]) -> Result<String, CommandFailed> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| CommandFailed {
            command: command.clone(),
            message: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(CommandFailed {
            command,
            message: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs a clean-up command whose failure (usually: nothing to clean) only gets logged.
pub fn run_quietly(program: &str, args: &[&str]) {
    if let Err(err) = run(program, args) {
        tracing::debug!(error = %err, "clean-up command failed");
    }
}

/// Writes a sysctl and returns the value it had.
pub fn set_sysctl(name: &str, value: &str) -> std::io::Result<String> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    let old = std::fs::read_to_string(&path)?.trim().to_owned();
    if old != value {
        std::fs::write(&path, value)?;
    }
    Ok(old)
}
