//! One component process: started with its output in a log file, stopped on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

/// A running component. Dropping it kills the process and reaps it.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `binary` with `args`, writing stdout and stderr to `<log_dir>/<name>.log`.
    ///
    /// Where `setpriv` exists the process is started through it with
    /// `--pdeathsig KILL`, so the kernel kills it if the thread that started it dies: a
    /// SIGKILLed test or a crashed `cargo xtask` leaves nothing behind. The caller must
    /// therefore start components from a thread that lives as long as the control plane
    /// (the test's own thread, or the main thread), never from a short-lived pool thread.
    pub fn spawn(
        name: &str,
        binary: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> std::io::Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let err = out.try_clone()?;
        let mut command = match setpriv() {
            Some(setpriv) => {
                let mut c = Command::new(setpriv);
                c.args(["--pdeathsig", "KILL", "--"]).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("starting {}: {e}", binary.display()))
            })?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
        })
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exit status if the process has already ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The process id (for reading its resource use, or signalling it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `lines` lines of the component's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills the process and waits for it.
    pub fn stop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

fn setpriv() -> Option<&'static Path> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
}
