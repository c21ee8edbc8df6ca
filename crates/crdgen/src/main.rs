//! Prints the CustomResourceDefinitions as YAML documents on stdout.

use std::io::Write;

fn main() -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for (index, crd) in crdgen::crds().iter().enumerate() {
        if index > 0 {
            out.write_all(b"---\n")?;
        }
        out.write_all(crdgen::render(crd)?.as_bytes())?;
    }
    Ok(())
}
