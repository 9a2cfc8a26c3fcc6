//! The §6.4.3 benchmark as a standalone program (the same code as `tessera query bench`):
//! `cargo run --release -p tessera-query --example query_bench [SIZES] [REPS]`, e.g. `1024,4096 21`.
fn main() {
    let mut args = std::env::args().skip(1);
    let sizes = args
        .next()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1024, 4096]);
    let reps = args.next().and_then(|s| s.parse().ok()).unwrap_or(21);
    let opts = tessera_query::bench::BenchOptions {
        sizes,
        reps,
        gpu: true,
    };
    match tessera_query::bench::run(&opts) {
        Ok(r) => print!("{r}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
