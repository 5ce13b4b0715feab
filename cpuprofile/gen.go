package cpuprofile

// The eBPF objects are generated and committed so that building Felix needs no
// C toolchain; `make generate` rebuilds them (clang and llvm-strip on PATH) and
// `make generate-check` proves the committed ones match the C sources.
//
// bpfel covers amd64 and arm64; the tags keep the bindings to Linux on those
// two, the platforms probes_linux.go is built for.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -tags "linux,amd64 linux,arm64" -type softirq_stat softirq bpf/softirq.bpf.c -- -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -tags "linux,amd64 linux,arm64" -type blockio_hist blockio bpf/blockio.bpf.c -- -Wall -Werror
