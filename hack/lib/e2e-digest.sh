# e2e_digest LOG: what each failed spec of the Ginkgo suite's -v output LOG printed (its GinkgoWriter
# lines: the figures the specs log) and its failure message, without colours, timelines or steps,
# at most 25 lines a spec. test-e2e.sh prints it last when the suite fails, so that the end of the
# log, which is what a CI excerpt shows, says what happened and not only where.
e2e_digest() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '
    function flush() { if (failed) { n = split(block, l, "\n"); s = (n > 26) ? n - 25 : 1; for (i = s; i < n; i++) print l[i] } block = ""; failed = 0 }
    /^------------------------------/ { flush(); next }
    /^• \[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]/ { failed = 1; next }
    /^[[:space:]]*$/ || /STEP: / || /^\// || /\[FAILED\] in \[/ || /<< Timeline|Timeline >>/ { next }
    { block = block $0 "\n" }
    END { flush() }'
}
