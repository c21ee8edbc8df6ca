//! Where dumps are kept: a bucket or a mounted volume. A dump goes in compressed, a
//! part at a time, and is only complete (visible under its key) once its producer
//! said it succeeded; a failed dump leaves nothing behind.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::{GzDecoder, GzEncoder};
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::s3::{self, Bucket};

/// Compressed bytes per part: the first parts are 16 MiB, and every thousand parts the
/// size grows by as much, so the 10,000 parts S3 allows hold about 880 GiB.
const PART_BYTES: usize = 16 << 20;
/// Bytes read from the producer at a time.
const READ_BYTES: usize = 1 << 20;
/// The gzip level: fast, since the dump's producer is usually the slower side.
const LEVEL: u32 = 3;

/// A destination's storage.
#[derive(Clone, Debug)]
pub enum Store {
    S3(Box<Bucket>),
    /// The directory a volume is mounted on.
    Volume(PathBuf),
}

/// What an upload wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes read from the producer.
    pub source_bytes: u64,
    /// Bytes stored (compressed).
    pub stored_bytes: u64,
}

/// Why a transfer failed, as a sentence.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    S3(#[from] s3::Error),
    #[error("{action} failed: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the dump failed, so nothing was kept: {0}")]
    Producer(String),
    #[error("the key {0} is not a relative path of plain names")]
    Key(String),
    #[error("there is no dump at {0}")]
    Missing(String),
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let action = action.into();
    move |source| Error::Io { action, source }
}

impl Store {
    /// Where `key` is, for people.
    pub fn location(&self, key: &str) -> String {
        match self {
            Self::S3(bucket) => bucket.location(key),
            Self::Volume(root) => root.join(key).display().to_string(),
        }
    }

    /// Reads `source` to its end, compressing it into `key`. Once it ends, `verdict`
    /// says whether the producer succeeded; only then is the dump kept.
    pub async fn upload<R, V>(&self, key: &str, source: R, verdict: V) -> Result<Written, Error>
    where
        R: Read + Send + 'static,
        V: Future<Output = Result<(), String>>,
    {
        let (parts, mut incoming) = mpsc::channel::<Bytes>(1);
        let compressing = tokio::task::spawn_blocking(move || compress(source, &parts));
        let sink = Sink::open(self, key).await?;
        let mut sink = sink;
        let mut stored_bytes = 0u64;
        let mut failure = None;
        while let Some(part) = incoming.recv().await {
            stored_bytes += part.len() as u64;
            if let Err(err) = sink.write(part).await {
                failure = Some(err);
                break;
            }
        }
        drop(incoming);
        let compressed = compressing
            .await
            .map_err(|err| Error::Producer(format!("compression stopped: {err}")))
            .and_then(|read| read.map_err(io("reading the dump")));
        let outcome = match (failure, compressed) {
            (Some(err), _) | (None, Err(err)) => Err(err),
            (None, Ok(source_bytes)) => match verdict.await {
                Ok(()) => Ok(Written {
                    source_bytes,
                    stored_bytes,
                }),
                Err(why) => Err(Error::Producer(why)),
            },
        };
        match outcome {
            Ok(written) => {
                sink.finish().await?;
                Ok(written)
            }
            Err(err) => {
                sink.discard().await;
                Err(err)
            }
        }
    }

    /// Writes the dump at `key`, decompressed, into `sink`; returns the bytes written.
    pub async fn download<W>(&self, key: &str, sink: W) -> Result<u64, Error>
    where
        W: Write + Send + 'static,
    {
        let (chunks, mut incoming) = mpsc::channel::<Bytes>(4);
        let writing = tokio::task::spawn_blocking(move || {
            let mut decoder = GzDecoder::new(Counted::new(sink));
            while let Some(chunk) = incoming.blocking_recv() {
                decoder.write_all(&chunk)?;
            }
            let mut counted = decoder.finish()?;
            counted.flush()?;
            Ok::<u64, std::io::Error>(counted.written)
        });
        let fed = self.feed(key, &chunks).await;
        drop(chunks);
        let written = writing
            .await
            .map_err(|err| Error::Producer(format!("decompression stopped: {err}")))
            .and_then(|w| w.map_err(io("decompressing the dump")));
        fed?;
        written
    }

    /// Deletes the dump at `key`; a dump already gone is no error.
    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        match self {
            Self::S3(bucket) => Ok(bucket.delete(key).await?),
            Self::Volume(root) => {
                let path = file(root, key)?;
                match tokio::fs::remove_file(&path).await {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                        Err(io(format!("deleting {}", path.display()))(err))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Sends the stored bytes of `key` into `chunks`.
    async fn feed(&self, key: &str, chunks: &mpsc::Sender<Bytes>) -> Result<(), Error> {
        match self {
            Self::S3(bucket) => {
                if bucket.size(key).await?.is_none() {
                    return Err(Error::Missing(bucket.location(key)));
                }
                let mut body = bucket.get(key).await?;
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|err| Error::Io {
                        action: format!("reading {}", bucket.location(key)),
                        source: std::io::Error::other(err),
                    })?;
                    if let Ok(data) = frame.into_data()
                        && chunks.send(data).await.is_err()
                    {
                        // The writer stopped; its error says why.
                        return Ok(());
                    }
                }
                Ok(())
            }
            Self::Volume(root) => {
                let path = file(root, key)?;
                let action = format!("reading {}", path.display());
                let mut source = match std::fs::File::open(&path) {
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                        return Err(Error::Missing(path.display().to_string()));
                    }
                    other => other.map_err(io(action.clone()))?,
                };
                let chunks = chunks.clone();
                tokio::task::spawn_blocking(move || {
                    let mut buffer = vec![0; READ_BYTES];
                    loop {
                        let n = source.read(&mut buffer)?;
                        if n == 0
                            || chunks
                                .blocking_send(Bytes::copy_from_slice(&buffer[..n]))
                                .is_err()
                        {
                            return Ok(());
                        }
                    }
                })
                .await
                .map_err(|err| Error::Producer(format!("reading stopped: {err}")))?
                .map_err(io(action))
            }
        }
    }
}

/// Compresses `source` into parts sent on `parts`; returns the bytes read.
fn compress<R: Read>(mut source: R, parts: &mpsc::Sender<Bytes>) -> std::io::Result<u64> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(PART_BYTES), Compression::new(LEVEL));
    let mut buffer = vec![0; READ_BYTES];
    let mut read = 0u64;
    let mut sent = 0usize;
    loop {
        let n = match source.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        read += n as u64;
        encoder.write_all(&buffer[..n])?;
        if encoder.get_ref().len() >= part_bytes(sent) {
            let part = std::mem::replace(encoder.get_mut(), Vec::with_capacity(PART_BYTES));
            if parts.blocking_send(Bytes::from(part)).is_err() {
                return Err(std::io::Error::other("the storage side stopped"));
            }
            sent += 1;
        }
    }
    let last = encoder.finish()?;
    if parts.blocking_send(Bytes::from(last)).is_err() {
        return Err(std::io::Error::other("the storage side stopped"));
    }
    Ok(read)
}

/// The size part `index` (from 0) fills up to.
fn part_bytes(index: usize) -> usize {
    PART_BYTES * (1 + index / 1000)
}

/// `root/key`, refusing keys that would leave `root`.
fn file(root: &Path, key: &str) -> Result<PathBuf, Error> {
    let relative = Path::new(key);
    let plain = !key.is_empty()
        && relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if plain {
        Ok(root.join(relative))
    } else {
        Err(Error::Key(key.to_owned()))
    }
}

/// Where an upload's parts go until it is kept or discarded.
enum Sink {
    S3 {
        bucket: Box<Bucket>,
        key: String,
        upload: String,
        etags: Vec<String>,
    },
    Volume {
        partial: PathBuf,
        done: PathBuf,
        file: tokio::fs::File,
    },
}

impl Sink {
    async fn open(store: &Store, key: &str) -> Result<Self, Error> {
        match store {
            Store::S3(bucket) => {
                let upload = bucket.start_upload(key).await?;
                Ok(Self::S3 {
                    bucket: bucket.clone(),
                    key: key.to_owned(),
                    upload,
                    etags: Vec::new(),
                })
            }
            Store::Volume(root) => {
                let done = file(root, key)?;
                let partial = done.with_extension("partial");
                if let Some(dir) = done.parent() {
                    tokio::fs::create_dir_all(dir)
                        .await
                        .map_err(io(format!("creating {}", dir.display())))?;
                }
                let file = tokio::fs::File::create(&partial)
                    .await
                    .map_err(io(format!("creating {}", partial.display())))?;
                Ok(Self::Volume {
                    partial,
                    done,
                    file,
                })
            }
        }
    }

    async fn write(&mut self, part: Bytes) -> Result<(), Error> {
        match self {
            Self::S3 {
                bucket,
                key,
                upload,
                etags,
            } => {
                let number = u32::try_from(etags.len() + 1).unwrap_or(u32::MAX);
                etags.push(bucket.upload_part(key, upload, number, part).await?);
                Ok(())
            }
            Self::Volume { partial, file, .. } => file
                .write_all(&part)
                .await
                .map_err(io(format!("writing {}", partial.display()))),
        }
    }

    async fn finish(self) -> Result<(), Error> {
        match self {
            Self::S3 {
                bucket,
                key,
                upload,
                etags,
            } => Ok(bucket.complete_upload(&key, &upload, &etags).await?),
            Self::Volume {
                partial,
                done,
                mut file,
            } => {
                let action = format!("keeping {}", done.display());
                file.flush().await.map_err(io(action.clone()))?;
                file.sync_all().await.map_err(io(action.clone()))?;
                drop(file);
                tokio::fs::rename(&partial, &done).await.map_err(io(action))
            }
        }
    }

    async fn discard(self) {
        match self {
            Self::S3 {
                bucket,
                key,
                upload,
                ..
            } => {
                // An upload never completed holds no object; aborting frees its parts.
                let _ = bucket.abort_upload(&key, &upload).await;
            }
            Self::Volume { partial, file, .. } => {
                drop(file);
                let _ = tokio::fs::remove_file(&partial).await;
            }
        }
    }
}

/// A writer that counts what passes through.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W> Counted<W> {
    fn new(inner: W) -> Self {
        Self { inner, written: 0 }
    }
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testenv::toolkit::buffer::SharedBuffer;

    /// Text that compresses about as well as a SQL dump does.
    fn dump_like(bytes: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes);
        let mut n = 0u64;
        while out.len() < bytes {
            n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            out.extend_from_slice(
                format!("INSERT INTO orders VALUES ({n}, 'item-{}');\n", n % 977).as_bytes(),
            );
        }
        out.truncate(bytes);
        out
    }

    #[tokio::test]
    async fn a_volume_keeps_a_dump_only_once_it_succeeded() {
        let dir = tempfile::tempdir().expect("a directory");
        let store = Store::Volume(dir.path().to_owned());
        let data = dump_like(3 << 20);
        let written = store
            .upload(
                "shop/orders/1.sql.gz",
                std::io::Cursor::new(data.clone()),
                async { Ok(()) },
            )
            .await
            .expect("uploaded");
        assert_eq!(written.source_bytes, data.len() as u64);
        assert!(
            written.stored_bytes < written.source_bytes / 2,
            "{written:?}"
        );
        let out = SharedBuffer::default();
        let read = store
            .download("shop/orders/1.sql.gz", out.clone())
            .await
            .expect("downloaded");
        assert_eq!(read, data.len() as u64);
        assert!(out.contents() == data, "the dump came back altered");

        let failed = store
            .upload("shop/orders/2.sql.gz", std::io::Cursor::new(data), async {
                Err("pg_dump exited with 1".to_owned())
            })
            .await
            .expect_err("the producer failed");
        assert!(
            failed.to_string().contains("pg_dump exited with 1"),
            "{failed}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path().join("shop/orders"))
            .expect("listed")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["1.sql.gz"], "a failed dump leaves nothing");
    }

    #[tokio::test]
    async fn keys_cannot_leave_the_volume() {
        let dir = tempfile::tempdir().expect("a directory");
        let store = Store::Volume(dir.path().to_owned());
        for key in ["../escape.sql.gz", "/etc/passwd", "a/../../b", ""] {
            let err = store.delete(key).await.expect_err(key);
            assert!(matches!(err, Error::Key(_)), "{key}: {err}");
        }
        let missing = store
            .download("shop/none.sql.gz", std::io::sink())
            .await
            .expect_err("no such dump");
        assert!(matches!(missing, Error::Missing(_)), "{missing}");
    }

    #[test]
    fn parts_grow_every_thousand() {
        assert_eq!(part_bytes(0), 16 << 20);
        assert_eq!(part_bytes(999), 16 << 20);
        assert_eq!(part_bytes(1000), 32 << 20);
    }
}
