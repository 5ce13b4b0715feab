# benchlib.sh — shared by bench-broker.sh and bench-durable.sh (source it).
# Callers set $root (the repository) and $out (raw output directory).

# busiest prints the three busiest processes over the last second.
busiest() {
	top -b -n2 -d1 -o %CPU -w 160 | awk '/^top -/ { i++ } i == 2' | sed -n '8,10p' |
		awk '{ printf "#   %5s%% %s\n", $9, $12 }'
}

# header prints the commit (FELIX_BENCH_COMMIT when running from an exported
# tree), CPU, kernel and Go version.
header() {
	if [[ -n ${FELIX_BENCH_COMMIT:-} ]]; then
		echo "# commit $FELIX_BENCH_COMMIT"
	else
		# untracked files count as dirty: a new benchmark file is part of what ran
		echo "# commit $(git rev-parse --short HEAD)$([[ -z $(git status --porcelain -- .) ]] || echo ' (dirty tree)')"
	fi
	echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
	echo "# kernel $(uname -r), $(go version | cut -d' ' -f3-)"
}

# run ROUND BINARY PATTERN BENCHTIME: one fresh process of $out/BINARY (run in
# the package directory it was built from); result lines go to $out/results
# as "round name unit value".
run() {
	local res
	if ! res=$(cd "$root/${2%.test}" && "$out/$2" -test.run='^$' -test.bench="$3" -test.count=1 \
		-test.benchtime="$4" 2>&1); then
		printf '%s\n' "$res" >>"$out/round$1.txt"
		echo "FAILED: round $1 $3" >&2
		printf '%s\n' "$res" | tail -20 >&2
		return 1
	fi
	printf '%s\n' "$res" >>"$out/round$1.txt"
	printf '%s\n' "$res" | grep -i warning >&2 || true
	printf '%s\n' "$res" | awk -v r="$1" '/^Benchmark/ && NF > 3 {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 3; i + 1 <= NF; i += 2) print r, name, $(i + 1), $i
	}' >>"$out/results"
}

# summarize WIDTH: min/median/max/n of every (benchmark, metric) in results.
summarize() {
	printf "%-${1}s %-16s %12s %12s %12s %3s\n" benchmark metric min median max n
	sort -k2,2 -k3,3 -k4,4g "$out/results" | awk -v w="$1" '
		function flush() {
			if (n == 0) return
			med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			printf "%-" w "s %-16s %12.4g %12.4g %12.4g %3d\n", key1, key2, v[1], med, v[n], n
			n = 0
		}
		{ if ($2 != key1 || $3 != key2) { flush(); key1 = $2; key2 = $3 } v[++n] = $4 }
		END { flush() }'
}
