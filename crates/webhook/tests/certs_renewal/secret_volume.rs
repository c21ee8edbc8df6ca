//! A folder kept in sync with a Secret the way kubelet updates a Secret volume: each
//! version is written into a folder of its own, `..data` is switched to it by renaming a
//! symlink (one atomic step for all files), and each file is a symlink through `..data`.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A Secret volume's folder.
pub struct SecretVolume {
    dir: tempfile::TempDir,
    version: usize,
}

impl SecretVolume {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            version: 0,
        }
    }

    /// The folder to mount, e.g. as the webhook's --cert-dir.
    pub fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// Makes `files` the volume's contents in one step, then removes the old version.
    pub fn publish(&mut self, files: &BTreeMap<String, Vec<u8>>) {
        let dir = self.dir.path();
        let previous = format!("..version-{}", self.version);
        self.version += 1;
        let current = format!("..version-{}", self.version);
        std::fs::create_dir(dir.join(&current)).expect("version folder");
        for (name, contents) in files {
            std::fs::write(dir.join(&current).join(name), contents).expect("write");
        }
        let staged = dir.join("..data_tmp");
        let _ = std::fs::remove_file(&staged);
        symlink(&current, &staged).expect("symlink");
        std::fs::rename(&staged, dir.join("..data")).expect("switch ..data");
        for name in files.keys() {
            let link = dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(name), &link).expect("symlink");
            }
        }
        let _ = std::fs::remove_dir_all(dir.join(previous));
    }
}
