//! JavaScript number semantics. The reference implementation is JavaScript, so its `Math.round`
//! decides the rounded aggregates and its `Number#toString` writes the numbers inside `reason`;
//! matching both is what lets a checker compare those byte for byte.

/// `Math.round`: nearest integer, ties toward +∞ (Rust's `f64::round` goes away from zero).
pub fn js_round(x: f64) -> f64 {
    if !x.is_finite() || x.fract() == 0.0 {
        return x;
    }
    let floor = x.floor();
    // `x - floor` is exact for every fractional double, so the tie test is exact too.
    let r = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    if r == 0.0 && x < 0.0 {
        -0.0
    } else {
        r
    }
}

/// `round2(x) = Math.round(x * 100) / 100`.
pub fn round2(x: f64) -> f64 {
    js_round(x * 100.0) / 100.0
}

/// `round6(x) = Math.round(x * 1e6) / 1e6`.
pub fn round6(x: f64) -> f64 {
    js_round(x * 1_000_000.0) / 1_000_000.0
}

/// `ratio(total, count)`: 0 for no count, else `round6(total / count)`.
pub fn ratio(total: f64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        round6(total / count as f64)
    }
}

/// `Number#toString` for finite numbers: shortest round-trip digits (Rust's `Display` picks the
/// same digits), decimal notation for 1e-6 ≤ |x| < 1e21, exponent notation (`1e+21`) otherwise.
pub fn js_num(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return "0".into(); // also -0, which JavaScript prints as "0"
    }
    let a = x.abs();
    if (1e-6..1e21).contains(&a) {
        return format!("{x}");
    }
    let e = format!("{x:e}");
    match e.split_once('e') {
        Some((m, exp)) if !exp.starts_with('-') => format!("{m}e+{exp}"),
        _ => e,
    }
}

/// `Number#toFixed(0)` for |x| < 1e21: the nearest integer, ties to the larger magnitude
/// (the sign is applied afterwards, so -0.4 gives "-0" as in JavaScript).
pub fn to_fixed0(x: f64) -> String {
    if x < 0.0 {
        return format!("-{}", to_fixed0(-x));
    }
    format!("{}", x.round())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn math_round_ties_go_up() {
        assert_eq!(js_round(2.5), 3.0);
        assert_eq!(js_round(-2.5), -2.0);
        assert_eq!(js_round(0.49999999999999994), 0.0);
        assert_eq!(js_round(-0.4).to_bits(), (-0.0f64).to_bits());
        assert_eq!(js_round(-0.6), -1.0);
        assert_eq!(js_round(1e300), 1e300);
    }

    #[test]
    fn rounding_helpers() {
        assert_eq!(round2(1.005), 1.0); // 1.005 * 100 is 100.49999999999999
        assert_eq!(round2(-0.125), -0.12);
        assert_eq!(round6(0.011), 0.011);
        assert_eq!(ratio(0.011, 2), 0.0055);
        assert_eq!(ratio(1.0, 0), 0.0);
        assert_eq!(ratio(1.0, 3), 0.333333);
    }

    #[test]
    fn number_to_string_matches_javascript() {
        for (x, s) in [
            (48.0, "48"),
            (-0.0, "0"),
            (1.3, "1.3"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.000001, "0.000001"),
            (0.0000001, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (1e21, "1e+21"),
            (1.25e22, "1.25e+22"),
            (1e20, "100000000000000000000"),
            (-33.33, "-33.33"),
        ] {
            assert_eq!(js_num(x), s, "{x:?}");
        }
    }

    #[test]
    fn to_fixed_zero() {
        assert_eq!(to_fixed0(20.0), "20");
        assert_eq!(to_fixed0(0.2 * 100.0), "20");
        assert_eq!(to_fixed0(12.5), "13");
        assert_eq!(to_fixed0(0.0), "0");
        assert_eq!(to_fixed0(-0.4), "-0");
    }
}
