// SPDX-License-Identifier: GPL-2.0

//! Tests of `histogram.rs`: bucket edges, percentiles against known distributions, and
//! the arithmetic of snapshots (sums of queues, differences from a reset).

extern crate std;

use super::histogram::*;

#[test]
fn bucket_edges() {
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(1), 0);
    assert_eq!(bucket(255), 0);
    assert_eq!(bucket(256), 1);
    assert_eq!(bucket(511), 1);
    assert_eq!(bucket(512), 2);
    for b in 1..BUCKETS - 1 {
        assert_eq!(bucket(lower_bound(b)), b, "lower bound of {b}");
        assert_eq!(bucket(upper_bound(b) - 1), b, "last duration of {b}");
        assert_eq!(bucket(upper_bound(b)), b + 1, "upper bound of {b}");
    }
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    assert_eq!(bucket(1 << 40), BUCKETS - 1);
}

#[test]
fn records_count_and_sum() {
    let h = Histogram::new();
    for cycles in [10, 300, 300, 5000, 1 << 50] {
        h.record(cycles);
    }
    let s = h.snapshot();
    assert_eq!(s.count(), 5);
    assert_eq!(s.sum, 10 + 300 + 300 + 5000 + (1 << 50));
    assert_eq!(s.counts[0], 1);
    assert_eq!(s.counts[bucket(300)], 2);
    assert_eq!(s.counts[BUCKETS - 1], 1);
}

#[test]
fn percentiles_of_one_bucket_interpolate_inside_it() {
    let h = Histogram::new();
    // 100 durations, all in [1024, 2048).
    for _ in 0..100 {
        h.record(1500);
    }
    let s = h.snapshot();
    assert_eq!(s.percentile(5000), 1024 + 1024 * 50 / 100);
    assert_eq!(s.percentile(9900), 1024 + 1024 * 99 / 100);
    assert_eq!(s.percentile(10_000), 2048);
    assert_eq!(s.mean(), 1500);
}

#[test]
fn percentiles_find_the_tail() {
    let h = Histogram::new();
    // 990 fast (bucket of 300), 9 slow (bucket of 100_000), 1 very slow (bucket of 10^7).
    for _ in 0..990 {
        h.record(300);
    }
    for _ in 0..9 {
        h.record(100_000);
    }
    h.record(10_000_000);
    let s = h.snapshot();
    let p50 = s.percentile(5000);
    assert!((lower_bound(bucket(300))..upper_bound(bucket(300))).contains(&p50));
    // p99 is the 990th duration: still a fast one.
    assert!(s.percentile(9900) <= upper_bound(bucket(300)));
    // p99.9 is the 999th: a slow one.
    let p999 = s.percentile(9990);
    assert!((lower_bound(bucket(100_000))..=upper_bound(bucket(100_000))).contains(&p999));
    assert!(s.percentile(10_000) >= lower_bound(bucket(10_000_000)));
}

#[test]
fn empty_histogram_reads_zero() {
    let s = Histogram::new().snapshot();
    assert_eq!(s, Snapshot::ZERO);
    assert_eq!(s.percentile(5000), 0);
    assert_eq!(s.mean(), 0);
}

#[test]
fn sums_and_differences() {
    let (a, b) = (Histogram::new(), Histogram::new());
    a.record(300);
    let base = a.snapshot();
    a.record(300);
    a.record(70_000);
    b.record(70_000);
    let since = a.snapshot().since(&base);
    assert_eq!(since.count(), 2);
    assert_eq!(since.sum, 70_300);
    let mut total = since;
    total.add(&b.snapshot());
    assert_eq!(total.count(), 3);
    assert_eq!(total.counts[bucket(70_000)], 2);
}

#[test]
fn huge_counts_do_not_overflow_the_interpolation() {
    let mut s = Snapshot::ZERO;
    s.counts[BUCKETS - 2] = u64::MAX / 4;
    let p = s.percentile(5000);
    assert!((lower_bound(BUCKETS - 2)..=upper_bound(BUCKETS - 2)).contains(&p));
}

#[test]
fn cycles_to_nanoseconds() {
    // 3 GHz: 333,333 ps per thousand cycles.
    assert_eq!(to_ns(3000, 333_333), 999);
    assert_eq!(to_ns(3_000_000_000, 333_333), 999_999_000);
    // The sum of days of latency does not overflow.
    // (exactly u64::MAX * 333,333 / 10^6, which u128 arithmetic gives)
    assert_eq!(to_ns(u64::MAX, 333_333), 6_148_908_542_321_825_968);
    assert_eq!(to_ns(u64::MAX, 1_000_000), u64::MAX);
}
