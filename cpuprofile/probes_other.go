//go:build !linux || !(amd64 || arm64)

package cpuprofile

import "fmt"

// Probes is only available on Linux on amd64 and arm64.
type Probes struct{}

// OpenProbes fails: the eBPF objects are built for Linux on amd64 and arm64.
func OpenProbes() (*Probes, error) {
	return nil, fmt.Errorf("%w: eBPF probes need Linux on amd64 or arm64", ErrNotSupported)
}

// Softirq is never reached: OpenProbes returns no Probes here.
func (p *Probes) Softirq() ([]SoftirqCPU, error) { return nil, ErrNotSupported }

// BlockIO is never reached: OpenProbes returns no Probes here.
func (p *Probes) BlockIO() (BlockIOHist, error) { return BlockIOHist{}, ErrNotSupported }

// Close does nothing.
func (p *Probes) Close() error { return nil }
