package broker

import (
	"fmt"
	"time"
)

// GroupConfig configures consumer groups. The zero value of each field
// means the documented default.
type GroupConfig struct {
	// MaxAttempts bounds the deliveries of a record before it becomes a
	// dead letter, for a group that set no bound of its own (max_attempts
	// on group_poll or queue_consume). 0 means no bound: a record is
	// delivered until it is acked.
	MaxAttempts uint32
	// MaxInFlight bounds the records a group has in play (claimed, or
	// nacked with a delay) on one shard; a poll at the bound is answered
	// empty. 0 means 10000.
	MaxInFlight int
	// Visibility is how long a poll's claims stand when it asks for no
	// visibility_ms. 0 means 30 s.
	Visibility time.Duration
	// MaxVisibility caps visibility_ms, extend_ms and delay_ms. 0 means 12 h.
	MaxVisibility time.Duration
	// MaxWait caps how long a poll may wait for records. 0 means 30 s.
	MaxWait time.Duration
}

const (
	defaultGroupInFlight   = 10000
	defaultGroupMaxWait    = 30 * time.Second
	maxPollRecords         = 1000
	maxPollBytes           = 4 << 20
	maxPollWaitersPerConn  = 256
	defaultGroupVisibility = defaultVisibility
)

func (c GroupConfig) withDefaults() GroupConfig {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = defaultGroupInFlight
	}
	if c.Visibility == 0 {
		c.Visibility = defaultGroupVisibility
	}
	if c.MaxVisibility == 0 {
		c.MaxVisibility = maxVisibility
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultGroupMaxWait
	}
	return c
}

func (c GroupConfig) validate() error {
	if c.MaxInFlight < 0 || c.Visibility < 0 || c.MaxVisibility < 0 || c.MaxWait < 0 {
		return fmt.Errorf("%w: negative consumer group limit", ErrInvalidConfig)
	}
	if c.Visibility > c.MaxVisibility {
		return fmt.Errorf("%w: group visibility %v over the cap %v", ErrInvalidConfig, c.Visibility, c.MaxVisibility)
	}
	return nil
}
