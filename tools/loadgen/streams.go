package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// streamInfo is a stream the run uses, as the broker reports it.
type streamInfo struct {
	Name    string `json:"name"`
	Shards  int    `json:"shards"`
	Durable bool   `json:"durable"`
	Fsync   string `json:"fsync,omitempty"`
	Created bool   `json:"created"` // this run created it
}

// streamSpec is the admin API's body of POST /v1/streams and an entry of
// GET /v1/streams (broker.StreamSpec).
type streamSpec struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Shards    int    `json:"shards"`
	Durable   bool   `json:"durable,omitempty"`
	Fsync     string `json:"fsync,omitempty"`
}

// admin talks to the broker's admin HTTP API.
type admin struct {
	base string
	hc   *http.Client
}

func newAdmin(cfg *Config) *admin {
	if cfg.Admin == "" {
		return nil
	}
	return &admin{base: "http://" + cfg.Admin, hc: &http.Client{Timeout: cfg.DialTimeout}}
}

// prepareStreams creates the streams (when cfg.Create) or looks them up,
// and returns what the broker has. Notes say where that differs from what
// the flags asked for, or what had to be assumed.
func prepareStreams(ctx context.Context, cfg *Config) ([]streamInfo, []string, error) {
	a := newAdmin(cfg)
	var notes []string
	if a == nil {
		if cfg.Create {
			return nil, nil, errors.New("--create needs the admin API: pass --admin HOST:PORT or --create=false")
		}
		notes = append(notes, fmt.Sprintf("no --admin: assuming every stream has %d shard(s)", cfg.Shards))
	}
	var out []streamInfo
	for _, name := range cfg.streamNames() {
		want := streamSpec{Tenant: cfg.Tenant, Namespace: cfg.Namespace, Stream: name, Shards: cfg.Shards, Durable: cfg.Durable, Fsync: cfg.Fsync}
		info := streamInfo{Name: name, Shards: cfg.Shards, Durable: cfg.Durable, Fsync: cfg.Fsync}
		if a == nil {
			out = append(out, info)
			continue
		}
		if cfg.Create {
			created, err := a.create(ctx, want)
			if err != nil {
				return nil, nil, err
			}
			if created {
				info.Created = true
				out = append(out, info)
				continue
			}
		}
		have, err := a.lookup(ctx, want)
		if err != nil {
			if cfg.Create || errors.Is(err, errNoStream) {
				return nil, nil, err
			}
			notes = append(notes, fmt.Sprintf("admin API: %v; assuming %s has %d shard(s)", err, name, cfg.Shards))
			out = append(out, info)
			continue
		}
		info.Shards, info.Durable, info.Fsync = have.Shards, have.Durable, have.Fsync
		if have.Shards != want.Shards || have.Durable != want.Durable || have.Durable && have.Fsync != want.Fsync {
			notes = append(notes, fmt.Sprintf("stream %s exists with %d shard(s), %s; using it as it is", name, have.Shards, durability(have.Durable, have.Fsync)))
		}
		out = append(out, info)
	}
	return out, notes, nil
}

func durability(durable bool, fsync string) string {
	if !durable {
		return "ephemeral"
	}
	if fsync == "" {
		fsync = "periodic"
	}
	return "durable " + fsync
}

// create posts the spec: true when created, false when it existed.
func (a *admin) create(ctx context.Context, spec streamSpec) (bool, error) {
	return a.post(ctx, "/v1/streams", "stream", spec.Stream, spec)
}

// post creates one object of kind (stream, cache) named name through the
// admin API: true when created, false when it existed.
func (a *admin) post(ctx context.Context, path, kind, name string, spec any) (bool, error) {
	body, _ := json.Marshal(spec)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("create %s %s through the admin API: %w (pass --admin, or --create=false for an existing %s)", kind, name, err, kind)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusCreated:
		return true, nil
	case http.StatusConflict:
		return false, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(msg, &e) == nil && e.Error != "" {
		return false, fmt.Errorf("create %s %s: broker says: %s", kind, name, e.Error)
	}
	return false, fmt.Errorf("create %s %s: %s: %s", kind, name, resp.Status, bytes.TrimSpace(msg))
}

// lookup finds the stream in GET /v1/streams.
func (a *admin) lookup(ctx context.Context, want streamSpec) (streamSpec, error) {
	var list struct {
		Streams []streamSpec `json:"streams"`
	}
	if err := a.get(ctx, "/v1/streams", &list); err != nil {
		return streamSpec{}, err
	}
	for _, s := range list.Streams {
		if s.Tenant == want.Tenant && s.Namespace == want.Namespace && s.Stream == want.Stream {
			return s, nil
		}
	}
	return streamSpec{}, fmt.Errorf("%w: %s/%s/%s (drop --create=false to create it)", errNoStream, want.Tenant, want.Namespace, want.Stream)
}

var errNoStream = errors.New("no such stream")

func (a *admin) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// shardOffsets returns each stream's shards' next offsets from
// /debug/felix/stats, keyed by stream name; nil when unavailable.
func (a *admin) shardOffsets(ctx context.Context, cfg *Config) map[string][]uint64 {
	if a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	var stats struct {
		Streams []struct {
			Tenant     string `json:"tenant"`
			Namespace  string `json:"namespace"`
			Stream     string `json:"stream"`
			ShardStats []struct {
				Shard      int    `json:"shard"`
				NextOffset uint64 `json:"next_offset"`
			} `json:"shard_stats"`
		} `json:"streams"`
	}
	if err := a.get(ctx, "/debug/felix/stats", &stats); err != nil {
		return nil
	}
	out := map[string][]uint64{}
	for _, s := range stats.Streams {
		if s.Tenant != cfg.Tenant || s.Namespace != cfg.Namespace {
			continue
		}
		offs := make([]uint64, len(s.ShardStats))
		for _, sh := range s.ShardStats {
			if sh.Shard >= 0 && sh.Shard < len(offs) {
				offs[sh.Shard] = sh.NextOffset
			}
		}
		out[s.Stream] = offs
	}
	return out
}

// shardDelta is after − before per shard of each of the run's streams.
func shardDelta(before, after map[string][]uint64, streams []streamInfo) map[string][]uint64 {
	if before == nil || after == nil {
		return nil
	}
	out := map[string][]uint64{}
	for _, s := range streams {
		b, a := before[s.Name], after[s.Name]
		if len(a) == 0 || len(a) != len(b) {
			continue
		}
		d := make([]uint64, len(a))
		for i := range a {
			d[i] = a[i] - b[i]
		}
		out[s.Name] = d
	}
	return out
}

// sampleRSS records into max, every 250 ms until stop is called, the
// broker's anonymous resident memory from /debug/felix/stats (what the
// broker holds; its durable logs' mapped pages are page cache and left
// out).
func (a *admin) sampleRSS(max *atomic.Uint64) (stop func()) {
	if a == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if v, ok := a.rssAnon(); ok && v > max.Load() {
				max.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// rssAnon is the broker's anonymous resident memory.
func (a *admin) rssAnon() (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var stats struct {
		Memory *struct {
			RSSAnonBytes uint64 `json:"rss_anon_bytes"`
		} `json:"memory"`
	}
	if err := a.get(ctx, "/debug/felix/stats", &stats); err != nil || stats.Memory == nil {
		return 0, false
	}
	return stats.Memory.RSSAnonBytes, true
}
