//! Prints the Database CustomResourceDefinition as YAML on stdout.

use std::io::Write;

fn main() -> anyhow::Result<()> {
    let yaml = crdgen::render()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}
