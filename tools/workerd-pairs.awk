# The workerd bench's per-round table (in workerd.md) -> the ratio of each pair
# of targets given in `pairs` ("A;B;C;D": A / B, C / D): the median (min-max)
# over the rounds of A's req/s / B's in the same round. tools/bench runs it.
function median(a, n,    i, j, t) {
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
BEGIN { FS = "|" }
/^\| round \|/ {
  for (i = 3; i < NF; i++) { name = $i; gsub(/^ +| +$/, "", name); col[name] = i }
  in_table = 1; next
}
in_table && /^\|[-:|]+$/ { next }
in_table && /^\| [0-9]+ \|/ { rounds++; for (name in col) v[name, rounds] = $(col[name]) + 0; next }
in_table { in_table = 0 }
END {
  n = split(pairs, p, ";")
  print "| pair (A / B) | median of rounds | min-max |"
  print "|---|---:|---:|"
  for (k = 1; k + 1 <= n; k += 2) {
    a = p[k]; b = p[k + 1]
    if (!(a in col) || !(b in col)) continue
    lo = 1e9; hi = 0
    for (r = 1; r <= rounds; r++) { x[r] = v[a, r] / v[b, r]; if (x[r] < lo) lo = x[r]; if (x[r] > hi) hi = x[r] }
    printf "| %s / %s | **%.3f** | %.3f-%.3f |\n", a, b, median(x, rounds), lo, hi
  }
}
