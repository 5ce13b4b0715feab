package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/internal/linux"
)

// ErrTenantQuota: a tenant's durable streams and caches would hold more
// disk than Config.TenantDurableBytes. The publish that needed it is
// refused (not acked); the log stays usable.
var ErrTenantQuota = errors.New("tenant_quota")

// ErrDiskReserve: preallocating would leave the data directory's file
// system with less free space than Config.DataMinFreeBytes.
var ErrDiskReserve = errors.New("disk_reserve")

// diskSpace accounts the disk the durable logs of each tenant hold, so
// that one tenant cannot take the shared disk: segments are preallocated a
// step at a time (segment.Config.InitialAllocBytes, doubling), and every
// step is asked here first, against the tenant's quota and against the
// free space the file system has left.
type diskSpace struct {
	dir       string
	perTenant int64 // 0: no quota
	minFree   int64
	free      func(dir string) (int64, error)

	mu struct {
		sync.Mutex
		used map[string]int64
	}
}

func newDiskSpace(cfg Config) *diskSpace {
	d := &diskSpace{dir: cfg.DataDir, perTenant: cfg.TenantDurableBytes, minFree: cfg.DataMinFreeBytes, free: linux.FreeBytes}
	d.mu.used = map[string]int64{}
	return d
}

// used is what tenant's open logs hold.
func (d *diskSpace) used(tenant string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.used[tenant]
}

func (d *diskSpace) reserve(tenant string, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if used := d.mu.used[tenant]; d.perTenant > 0 && used+n > d.perTenant {
		return fmt.Errorf("%w: tenant %s holds %d bytes of durable logs; %d more would pass its %d (FELIX_TENANT_DURABLE_BYTES)",
			ErrTenantQuota, tenant, used, n, d.perTenant)
	}
	// A file system that cannot say (no statfs) is left to say no itself.
	if free, err := d.free(d.dir); err == nil && free-n < d.minFree {
		return fmt.Errorf("%w: %s has %d bytes free; preallocating %d would leave less than %d (FELIX_DATA_MIN_FREE_BYTES)",
			ErrDiskReserve, d.dir, free, n, d.minFree)
	}
	d.mu.used[tenant] += n
	return nil
}

func (d *diskSpace) release(tenant string, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.used[tenant] -= n; d.mu.used[tenant] <= 0 {
		delete(d.mu.used, tenant)
	}
}

// logSpace is one log's segment.Space: it charges the log's tenant and
// counts what the log holds, to give it all back when the log closes.
type logSpace struct {
	d      *diskSpace
	tenant string
	held   atomic.Int64
}

func (d *diskSpace) forLog(tenant string) *logSpace { return &logSpace{d: d, tenant: tenant} }

// Reserve implements segment.Space.
func (s *logSpace) Reserve(n int64) error {
	if err := s.d.reserve(s.tenant, n); err != nil {
		return err
	}
	s.held.Add(n)
	return nil
}

// Release implements segment.Space.
func (s *logSpace) Release(n int64) {
	s.held.Add(-n)
	s.d.release(s.tenant, n)
}

// charge counts n bytes the log already held when it opened, whatever the
// quota: they are on disk.
func (s *logSpace) charge(n int64) {
	s.d.mu.Lock()
	s.d.mu.used[s.tenant] += n
	s.d.mu.Unlock()
	s.held.Add(n)
}

// releaseAll gives back everything the log held (it closed).
func (s *logSpace) releaseAll() { s.Release(s.held.Load()) }
