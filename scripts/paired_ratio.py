"""The ratio of two transports measured in paired rounds, with its 95% interval.

Shared by bench-report.py (wall-clock IOPS) and count-report.py (instructions per I/O).
Each round gives one pair (the same boot, adjacent runs, alternating order); the ratio
is the geometric mean of the pairs' ratios, and its interval Student's t over their
logarithms, so a factor and its inverse weigh the same.
"""

import math
import statistics

# t_{0.975, df} for small df (two-sided 95%); 1.96 beyond
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 14: 2.145, 19: 2.093, 29: 2.045}


def t975(df):
    """The two-sided 95% Student's t quantile for df degrees of freedom (rounded down in df)."""
    known = [k for k in T975 if k <= df]
    return T975[max(known)] if df < 30 else 1.96


def paired_ratio(pairs):
    """(ratio, lo, hi) of num/den over the pairs (num, den); lo and hi are None for one pair."""
    logs = [math.log(a / b) for a, b in pairs if a and b]
    if not logs:
        return None, None, None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
