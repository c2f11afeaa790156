# Judges nccl-tests output (all_gather_perf, all_reduce_perf, ...): one verdict line, exit 0 when
# the average bus bandwidth reaches `min` GB/s, exit 1 otherwise or when the output holds no result.
#   awk -v min=25 -f nccl_busbw.awk nccl-tests.log
# POSIX awk (mawk, the one in the nccl-tests images, included).
#
# A result row starts with the message size and the element count, and ends with the in-place
# "time algbw busbw #wrong" columns after the out-of-place ones, so busbw is field NF-5 (out of
# place) and NF-1 (in place), whether or not the redop/root columns are printed.

BEGIN {
    if (min !~ /^[0-9]+(\.[0-9]+)?$/) {
        print "NCCL check FAILED: threshold min=\"" min "\" is not a number of GB/s"
        failed = 1
        exit 1
    }
    rows = 0
    avg = ""
}

$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 11 {
    rows++
    for (i = NF - 5; i <= NF - 1; i += 4) {
        if ($i + 0 > peak) { peak = $i + 0; peak_size = $1 }
    }
    next
}

/^# Avg bus bandwidth/ { avg = $NF }

/^# Out of bounds values/ && /FAILED/ { wrong = $0 }

END {
    if (failed) exit 1
    if (rows == 0 || avg == "") {
        print "NCCL check FAILED: no nccl-tests result in the output (" rows " result rows, " \
              (avg == "" ? "no" : "an") " average line): the benchmark did not run to the end, see the log above"
        exit 1
    }
    if (wrong != "") {
        print "NCCL check FAILED: nccl-tests found wrong values (" wrong ")"
        exit 1
    }
    summary = "average bus bandwidth " avg " GB/s (peak " peak " GB/s at " peak_size " B, " rows " sizes)"
    if (avg + 0 < min + 0) {
        print "NCCL check FAILED: " summary " is below the required " min " GB/s: GPUDirect is not carrying the traffic (plugin, RxDM or GPU networks)"
        exit 1
    }
    print "NCCL check PASSED: " summary " >= " min " GB/s"
}
