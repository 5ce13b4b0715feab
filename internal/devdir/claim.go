package devdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/felixmq/felix/internal/linux"
)

// BrokerFile is where a serving broker says where it listens.
const BrokerFile = "broker.json"

// lockFile is held locked by the broker that owns the directory.
const lockFile = "broker.lock"

// Broker is what a broker writes into the directory once its listeners are
// bound, so that local tools find it without flags.
type Broker struct {
	PID  int    `json:"pid"`
	QUIC string `json:"quic"` // host:port of the QUIC listener
	// Admin is host:port of the admin HTTP listener.
	Admin string `json:"admin"`
	// ControlPlane is the embedded control plane's URL, if one runs.
	ControlPlane string `json:"controlplane,omitempty"`
}

// ErrInUse: another running broker owns the directory. Two brokers
// sharing one would overwrite each other's certificate and token, and the
// clients of the first would stop trusting it.
var ErrInUse = errors.New("devdir: in use by another running broker")

// Claim is a broker's hold on its directory: nothing in it is written
// before the broker takes it, and no other broker can take it while held.
type Claim struct {
	dir  string
	lock *os.File
}

// Take makes dir private (Ensure) and locks it for this process. It fails
// with ErrInUse, naming the holder when it said where it listens, while
// another process holds it. Where the platform cannot lock files a second
// broker is not detected.
func Take(dir string) (*Claim, error) {
	if err := Ensure(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	ok, err := linux.TryLock(f.Fd())
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("devdir: lock %s: %w", dir, err)
		}
		holder := ""
		if b, found := readBroker(dir); found {
			holder = fmt.Sprintf(": the broker listening on %s (admin %s, pid %d)", b.QUIC, b.Admin, b.PID)
		}
		return nil, fmt.Errorf("%w: %s%s", ErrInUse, dir, holder)
	}
	return &Claim{dir: dir, lock: f}, nil
}

// Dir is the claimed directory.
func (c *Claim) Dir() string { return c.dir }

// WriteFile replaces the file name of the directory with data, so a reader
// sees the old or the new content and never a partial one.
func (c *Claim) WriteFile(name, data string, perm os.FileMode) error {
	return writeFileAtomic(filepath.Join(c.dir, name), data, perm)
}

// WriteBroker records where the broker listens (BrokerFile).
func (c *Claim) WriteBroker(b Broker) error {
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return c.WriteFile(BrokerFile, string(raw)+"\n", 0o644)
}

// Release forgets where the broker listened and lets another broker take
// the directory. The certificate and token stay: they are of no use
// without a broker, and the next one replaces them.
func (c *Claim) Release() {
	os.Remove(filepath.Join(c.dir, BrokerFile))
	c.lock.Close()
}

// ReadBroker is what the broker owning Dir(lookup) wrote about itself; false
// when there is none, or the directory is not private (Check).
func ReadBroker(lookup Lookup) (Broker, bool) {
	dir := Dir(lookup)
	if Check(dir) != nil {
		return Broker{}, false
	}
	return readBroker(dir)
}

func readBroker(dir string) (Broker, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, BrokerFile))
	if err != nil {
		return Broker{}, false
	}
	var b Broker
	if json.Unmarshal(raw, &b) != nil || b.QUIC == "" {
		return Broker{}, false
	}
	return b, true
}

// writeFileAtomic replaces path with data through a temporary file renamed
// over it; the file has perm whatever an earlier one had.
func writeFileAtomic(path, data string, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
