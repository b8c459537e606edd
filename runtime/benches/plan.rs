//! How long a Worker takes to build its gate's limiter: from the plan its
//! build step wrote (`GatePlan::from_text`, then `Limiter::from_plan`: what
//! a Worker runs), beside from the application description (parse and
//! validate the TOML, plan, `Limiter::new`: what it ran before plans), for
//! the corpus's `scenarios/apps/cloudflare.toml`, deployable `edge`.
//! Natively; in workerd the same code runs as wasm (BENCHMARKS-log.md, "Build-time
//! plans", counts the whole first request there).
//!
//! Run: `cargo bench -p runtime --bench plan -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use runtime::config::Application;
use runtime::gate_plan::GatePlan;
use runtime::limiter::Limiter;

const APPLICATION: &str = include_str!("../../scenarios/apps/cloudflare.toml");

fn gate_build(c: &mut Criterion) {
    let app = Application::from_toml(APPLICATION).expect("valid");
    let plan = GatePlan::new(&app, "edge")
        .expect("edge")
        .to_text()
        .expect("a Workers plan");
    let mut group = c.benchmark_group("gate_build");
    group.bench_function("from_plan", |b| {
        b.iter(|| {
            let plan = GatePlan::from_text(black_box(&plan)).expect("a plan");
            Limiter::from_plan(plan, 7)
        })
    });
    group.bench_function("from_description", |b| {
        b.iter(|| {
            let app = Application::from_toml(black_box(APPLICATION)).expect("valid");
            Limiter::new(&app, "edge", 7).expect("edge")
        })
    });
    group.finish();
}

criterion_group!(benches, gate_build);
criterion_main!(benches);
