package ioruntime

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strconv"
	"sync"
)

// Role is the kind of endpoint a socket serves; threads are assigned by it.
type Role int

const (
	// RoleServer is the broker's listening socket(s).
	RoleServer Role = iota
	// RoleClient is an outgoing connection's socket (SDK clients).
	RoleClient
	// RoleForwarder is a broker-to-broker forwarding socket.
	RoleForwarder
	numRoles
)

func (r Role) String() string {
	switch r {
	case RoleServer:
		return "server"
	case RoleClient:
		return "client"
	case RoleForwarder:
		return "forwarder"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// Config configures a Runtime. The zero value is the Linux default: no I/O
// threads (reads run inline on quic-go's read goroutine).
type Config struct {
	// Threads is the number of I/O threads (FELIX_IO_RUNTIME_THREADS).
	// 0 means none: Assign returns nil and callers read inline.
	Threads int
	// CPUs lists the CPUs to pin to (FELIX_IO_PIN_CPUS); thread i gets
	// CPUs[i % len(CPUs)]. Empty means no affinity (the thread is still
	// locked and named).
	CPUs []int
	// Name prefixes thread names; default "felix-io". Linux keeps 15 bytes.
	Name string
	// Logger receives the once-only affinity warning; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "felix-io"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Threads < 0 {
		return fmt.Errorf("%w: Threads %d < 0", ErrInvalidConfig, c.Threads)
	}
	for _, cpu := range c.CPUs {
		if cpu < 0 || cpu >= 1024 {
			return fmt.Errorf("%w: CPU %d out of range [0, 1024)", ErrInvalidConfig, cpu)
		}
	}
	if len(c.CPUs) > 0 && c.Threads == 0 {
		return fmt.Errorf("%w: CPUs given but Threads is 0", ErrInvalidConfig)
	}
	if len(c.CPUs) > 0 && !affinitySupported {
		return fmt.Errorf("%w: CPU affinity", ErrNotSupported)
	}
	return nil
}

// Runtime is a fixed set of I/O threads.
type Runtime struct {
	cfg     Config
	threads []*Thread
	wg      sync.WaitGroup
	mu      struct {
		sync.Mutex
		closed bool
		warned bool
	}
}

// Thread is one logical I/O thread: a name, an optional CPU, and the pinned
// goroutines started on it.
type Thread struct {
	rt    *Runtime
	index int
	name  string
	cpus  []int
}

// New builds the thread set. It starts no goroutine.
func New(cfg Config) (*Runtime, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg}
	for i := range cfg.Threads {
		t := &Thread{rt: r, index: i, name: cfg.Name + "-" + strconv.Itoa(i)}
		if len(cfg.CPUs) > 0 {
			t.cpus = []int{cfg.CPUs[i%len(cfg.CPUs)]}
		}
		r.threads = append(r.threads, t)
	}
	return r, nil
}

// Threads returns the thread set (empty when Threads is 0).
func (r *Runtime) Threads() []*Thread { return r.threads }

// Assign returns the thread for the ordinal-th endpoint of role, or nil when
// the runtime has no threads (read inline). It is a pure function of
// (Threads, role, ordinal); see ThreadIndex.
func (r *Runtime) Assign(role Role, ordinal int) *Thread {
	i := ThreadIndex(len(r.threads), role, ordinal)
	if i < 0 {
		return nil
	}
	return r.threads[i]
}

// ThreadIndex places endpoints: each role starts at its own share of the
// threads (server at 0, client at n/3, forwarder at 2n/3) and successive
// ordinals of a role go round-robin from there, so with enough threads the
// roles do not share, and with few they share predictably. It returns -1
// when n is 0.
func ThreadIndex(n int, role Role, ordinal int) int {
	if n <= 0 {
		return -1
	}
	if role < 0 || role >= numRoles {
		role = RoleServer
	}
	if ordinal < 0 {
		ordinal = -ordinal
	}
	base := int(role) * n / int(numRoles)
	return (base + ordinal) % n
}

// Close waits for every loop started with (*Thread).Go to return and refuses
// new ones. It does not stop the loops: their owners do.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.mu.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// Index is the thread's position in the set.
func (t *Thread) Index() int { return t.index }

// Name is the OS thread name its goroutines take, e.g. "felix-io-0".
func (t *Thread) Name() string { return t.name }

// CPUs is the affinity its goroutines take (nil: none).
func (t *Thread) CPUs() []int { return t.cpus }

// Go runs loop on a goroutine locked to an OS thread carrying t's name and
// affinity, labelled for pprof as felix-io=<name>. The returned channel is
// closed when loop has returned and the thread has been restored. Go fails
// with ErrClosed after the runtime's Close.
func (t *Thread) Go(loop func()) (<-chan struct{}, error) {
	r := t.rt
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.wg.Add(1)
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer r.wg.Done()
		defer close(done)
		pprof.Do(context.Background(), pprof.Labels("felix-io", t.name), func(context.Context) {
			t.run(loop)
		})
	}()
	return done, nil
}

// run pins the calling goroutine, runs loop, and restores.
func (t *Thread) run(loop func()) {
	p, err := pin(t.name, t.cpus)
	if err != nil {
		t.rt.warnOnce(t, err)
	}
	defer p.restore()
	loop()
}

func (r *Runtime) warnOnce(t *Thread, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.warned {
		return
	}
	r.mu.warned = true
	r.cfg.Logger.Warn("ioruntime: could not pin I/O thread; its loop runs unpinned",
		"thread", t.name, "cpus", t.cpus, "err", err)
}
