package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/controlplane"
)

// parseStreamList parses FELIX_STREAMS: "t/ns/s[:shards],...".
func parseStreamList(s string) ([]broker.StreamSpec, error) {
	var out []broker.StreamSpec
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, opts, hasShards := strings.Cut(item, ":")
		shards, fsync, durable := strings.Cut(opts, ":")
		parts := strings.Split(name, "/")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q is not tenant/namespace/stream", item)
		}
		if err := validNames(item, parts, "stream"); err != nil {
			return nil, err
		}
		spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: parts[0], Namespace: parts[1], Stream: parts[2]}, Shards: 1}
		if hasShards {
			n, err := strconv.Atoi(shards)
			if err != nil || n < 1 || n > broker.MaxShards {
				return nil, fmt.Errorf("%q: shards must be in [1, %d]", item, broker.MaxShards)
			}
			spec.Shards = n
		}
		if durable {
			if _, err := commit.ParseMode(fsync); err != nil {
				return nil, fmt.Errorf("%q: fsync mode must be on_commit, periodic or never", item)
			}
			spec.Durable, spec.Fsync = true, fsync
		}
		out = append(out, spec)
	}
	return out, nil
}

func checkStreamList(s string) error {
	_, err := parseStreamList(s)
	if err != nil {
		return errors.New(err.Error())
	}
	return nil
}

// validNames checks tenant, namespace and name by the control plane's
// rule, so that the embedded one takes what FELIX_STREAMS and FELIX_CACHES
// name, and a bad name is a configuration error found before anything
// starts.
func validNames(item string, parts []string, kind string) error {
	for i, what := range []string{"tenant", "namespace", kind} {
		if err := controlplane.ValidName(what, parts[i]); err != nil {
			return fmt.Errorf("%q: %v", item, err)
		}
	}
	return nil
}

// parseStreamKeys parses a comma list of tenant/namespace/stream.
func parseStreamKeys(s string) ([]broker.StreamKey, error) {
	var out []broker.StreamKey
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "/")
		if len(parts) != 3 || slices.Contains(parts, "") {
			return nil, fmt.Errorf("%q is not tenant/namespace/stream", item)
		}
		out = append(out, broker.StreamKey{Tenant: parts[0], Namespace: parts[1], Stream: parts[2]})
	}
	return out, nil
}

func checkStreamKeys(s string) error {
	_, err := parseStreamKeys(s)
	return err
}

// parseCacheList parses FELIX_CACHES: "t/ns/c[:fsync],...".
func parseCacheList(s string) ([]broker.CacheSpec, error) {
	var out []broker.CacheSpec
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, fsync, durable := strings.Cut(item, ":")
		parts := strings.Split(name, "/")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q is not tenant/namespace/cache", item)
		}
		if err := validNames(item, parts, "cache"); err != nil {
			return nil, err
		}
		spec := broker.CacheSpec{CacheKey: broker.CacheKey{Tenant: parts[0], Namespace: parts[1], Cache: parts[2]}}
		if durable {
			if _, err := commit.ParseMode(fsync); err != nil {
				return nil, fmt.Errorf("%q: fsync mode must be on_commit, periodic or never", item)
			}
			spec.Durable, spec.Fsync = true, fsync
		}
		out = append(out, spec)
	}
	return out, nil
}

func checkCacheList(s string) error {
	_, err := parseCacheList(s)
	return err
}

// parseCPUList parses FELIX_IO_PIN_CPUS: "0,1,3".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 4095 {
			return nil, fmt.Errorf("%q is not a CPU number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func checkCPUList(s string) error {
	_, err := parseCPUList(s)
	return err
}

// checkURL accepts empty or an absolute http(s) URL.
func checkURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// checkZone accepts empty or a name the control plane accepts as a zone.
func checkZone(s string) error {
	if s == "" {
		return nil
	}
	return controlplane.ValidName("zone", s)
}

// checkNodeID accepts empty or a member id that is safe in URLs and logs.
func checkNodeID(s string) error {
	if len(s) > 64 {
		return fmt.Errorf("%d bytes, at most 64", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("character %q: use [A-Za-z0-9._-]", r)
		}
	}
	return nil
}

func checkHostPortOrEmpty(s string) error {
	if s == "" {
		return nil
	}
	_, _, err := net.SplitHostPort(s)
	return err
}
