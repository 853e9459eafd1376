//! `cargo run --release -p bench --example insert_under_traffic -- [ESTABLISHED] [RULES] [BUNDLE]`
//! (the same as `ferrovs-bench insert`).

fn main() -> anyhow::Result<()> {
    datapath::mem::retain_freed_memory();
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut o = bench::insert::InsertOptions::default();
    if let Some(v) = a.first() {
        o.established = v.parse()?;
    }
    if let Some(v) = a.get(1) {
        o.rules = v.parse()?;
    }
    if let Some(v) = a.get(2) {
        o.bundle = v.parse()?;
    }
    let r = bench::insert::run_insert(&o)?;
    println!("{}", serde_json::to_string_pretty(&r)?);
    Ok(())
}
