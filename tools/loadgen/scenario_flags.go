package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// Defaults of the scenarios that count rather than run for a time: a
// roster sample and a queue record are both cheap, so these are
// seconds-long runs on a laptop.
const (
	defaultRosterSamples = 20
	defaultQueueRecords  = 10000
	defaultWatchRate     = 1000
	maxValueSize         = 1 << 20 // the broker's cache value limit
)

var scenarioNames = []string{"pubsub", "cache", "counter", "watch", "roster", "queue"}

// defineScenarioFlags registers the flags of the non-pubsub scenarios.
func defineScenarioFlags(set *flag.FlagSet, cfg *Config) {
	set.StringVar(&cfg.Scenario, "scenario", "pubsub", "`name`: pubsub, cache, counter, watch, roster or queue (see above)")
	set.StringVar(&cfg.Cache, "cache", "", "cache `NAME` of the cache, counter and watch scenarios; empty: loadgen-cache-<ephemeral|fsync>")
	set.StringVar(&cfg.Op, "op", "putget", "cache scenario: `op` putget (a put, then a get of the same key), get, put or mixed (half puts, half gets, at random)")
	set.IntVar(&cfg.ValueSize, "value-size", 256, "cache and watch scenarios: value `bytes` (at least 16: ids, a sequence and, for watch, the send time)")
	set.IntVar(&cfg.Keys, "keys", 16, "cache: keys per worker (each worker owns its keys); counter: keys shared by all workers")
	set.IntVar(&cfg.Workers, "workers", 1, "cache and counter scenarios: workers, each on its own connection, one request outstanding")
	set.IntVar(&cfg.Watchers, "watchers", 1, "watch scenario: watchers, each on its own connection")
	set.IntVar(&cfg.Members, "members", 100, "roster scenario: members joined before the late joiner watches")
	set.IntVar(&cfg.Consumers, "consumers", 1, "queue scenario: members of the consumer group, each on its own connection")
}

// scenarioFlags says which scenarios read each scenario flag: a flag given
// to another scenario would be silently ignored, so it is a usage error.
var scenarioFlags = map[string][]string{
	"cache": {"cache", "counter", "watch"}, "op": {"cache"}, "value-size": {"cache", "watch"},
	"keys": {"cache", "counter"}, "workers": {"cache", "counter"}, "watchers": {"watch"},
	"members": {"roster"}, "consumers": {"queue"},
}

// applyScenario fills in what a scenario implies and the flags left unset.
func applyScenario(cfg *Config, given map[string]bool) error {
	for name, users := range scenarioFlags {
		if given[name] && !slices.Contains(users, cfg.Scenario) {
			return fmt.Errorf("--%s applies to --scenario %s, not %s", name, strings.Join(users, ", "), cfg.Scenario)
		}
	}
	switch cfg.Scenario {
	case "roster", "queue":
		if !given["count"] && !given["duration"] {
			cfg.Count, cfg.Duration = defaultRosterSamples, 0
			if cfg.Scenario == "queue" {
				cfg.Count = defaultQueueRecords
			}
		}
	case "watch":
		if !given["rate"] {
			cfg.Rate = defaultWatchRate
		}
	}
	if cfg.Scenario == "queue" {
		// Queues read a durable stream's log; on_commit is what the issue
		// measures, so it is the default here (not periodic).
		cfg.Durable = true
		if cfg.Fsync == "" {
			cfg.Fsync = "on_commit"
		}
	}
	return nil
}

// validateScenario checks the scenario flags; validate has checked the rest.
func (c *Config) validateScenario() error {
	known := false
	for _, n := range scenarioNames {
		known = known || n == c.Scenario
	}
	usesCache := c.Scenario == "cache" || c.Scenario == "counter" || c.Scenario == "watch"
	checks := []struct {
		bad bool
		msg string
	}{
		{!known, fmt.Sprintf("--scenario %q: want %s", c.Scenario, strings.Join(scenarioNames, ", "))},
		{strings.Contains(c.Cache, "/"), "--cache must not contain '/'"},
		{c.Op != "putget" && c.Op != "get" && c.Op != "put" && c.Op != "mixed", fmt.Sprintf("--op %q: want putget, get, put or mixed", c.Op)},
		{usesCache && (c.ValueSize < headerBytes || c.ValueSize > maxValueSize),
			fmt.Sprintf("--value-size %d: want %d to %d (the value carries ids, a sequence and a send time)", c.ValueSize, headerBytes, maxValueSize)},
		{c.Keys < 1, fmt.Sprintf("--keys %d: want at least 1", c.Keys)},
		{c.Workers < 1 || c.Workers > maxPublishers, fmt.Sprintf("--workers %d: want 1 to %d", c.Workers, maxPublishers)},
		{c.Watchers < 1, fmt.Sprintf("--watchers %d: want at least 1", c.Watchers)},
		{c.Members < 1, fmt.Sprintf("--members %d: want at least 1", c.Members)},
		{c.Consumers < 1, fmt.Sprintf("--consumers %d: want at least 1", c.Consumers)},
		{(c.Scenario == "roster" || c.Scenario == "queue") && c.Count == 0,
			fmt.Sprintf("--scenario %s counts (samples or records): pass --count, not --duration", c.Scenario)},
		{c.Scenario == "watch" && c.Rate <= 0, "--scenario watch needs a --rate (puts/s of the one writer)"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// cacheName is the cache the cache, counter and watch scenarios use, named
// for its durability so differently shaped runs never share one.
func (c *Config) cacheName() string {
	if c.Cache != "" {
		return c.Cache
	}
	mode := "ephemeral"
	if c.Durable {
		mode = c.Fsync
	}
	return "loadgen-cache-" + mode
}
