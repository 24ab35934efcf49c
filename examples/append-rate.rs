//! The journal's write path, for `bench/append.sh`: appends N task records
//! to one journal through `runwire::runs::journal::append` (what every
//! writer calls, its run's mark held), timing each, and prints the median cost of the 100
//! records ending at #100 and of the 100 ending at #N, and the rate.
//!
//!     append-rate JOURNAL N   # prints: records=N first_us=A last_us=B last_over_first=R ms=T per_s=P cpu_us=C
//!
//! `cpu_us` is the process's CPU time (user and system) per record: equal
//! for one writer and for eight at once when they contend for nothing.

use runwire::runs::journal::{append, Record};

fn median_us(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(journal), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse::<usize>().ok())) else {
        println!("usage: append-rate JOURNAL N");
        return;
    };
    let n = n.max(200);
    // The run whose journal it is (`$HARNESS_HOME`'s registry), its mark held
    // as every writer holds it; a journal no run names is written as one.
    let home = runwire::runs::harness_home();
    let id = runwire::runs::registry::Registry::at(&home).run_of_journal(std::path::Path::new(journal));
    let run = runwire::runs::marks::Run::new(&home, id.as_deref().unwrap_or("unregistered"));
    let states = ["leased", "implemented", "gated", "reviewed"];
    let mut cost = Vec::with_capacity(n);
    let t = std::time::Instant::now();
    for i in 0..n {
        let rec = Record::task("bench", &format!("t{}", i % 50), states[i % states.len()], None);
        let one = std::time::Instant::now();
        if let Err(e) = append(&run, std::path::Path::new(journal), &rec) {
            eprintln!("append-rate: {journal}: {e}");
            std::process::exit(1);
        }
        cost.push(one.elapsed().as_secs_f64() * 1e6);
    }
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let cpu_us = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let us = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
        (us(u.user_time()) + us(u.system_time())) / n as f64
    });
    let first = median_us(cost[..100].to_vec());
    let last = median_us(cost[n - 100..].to_vec());
    println!(
        "records={n} first_us={first:.2} last_us={last:.2} last_over_first={:.2} ms={ms:.1} per_s={:.0} cpu_us={cpu_us:.2}",
        last / first,
        n as f64 / (ms / 1000.0)
    );
}
