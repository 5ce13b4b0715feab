package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/udp"
	"github.com/felixmq/felix/wire"
)

// BrokerError maps the broker's typed codes (never its message text) onto
// the sentinels, through any wrapping.
func TestBrokerErrorMapsCodes(t *testing.T) {
	for _, tc := range []struct {
		message string
		code    wire.ErrorCode
		want    error
	}{
		{"not_owner: shard t/ns/s#1 is owned by b2 (b2:5000)", wire.CodeNotLeader, ErrNotOwner},
		{"owner_unavailable: shard t/ns/s#0: owner b1 (b1:5000) is not live", wire.CodeShardUnavailable, ErrOwnerUnavailable},
		{"forbidden: stream.publish on t/ns/s", wire.CodeForbidden, ErrForbidden},
		{"stream not found: t/ns/s", wire.CodeNotFound, ErrNotFound},
		{"shard 3 not in [0, 2) for t/ns/s", wire.CodeInvalidRequest, ErrInvalidRequest},
		{"not_owner: the text alone does not make it one", 0, nil},
		{"", 0, nil},
	} {
		t.Run(tc.message, func(t *testing.T) {
			be := &BrokerError{Message: tc.message}
			if tc.code != 0 {
				be.Err = wire.NewTypedError(tc.code)
			}
			err := fmt.Errorf("publish: %w", be)
			for _, sentinel := range []error{ErrNotOwner, ErrOwnerUnavailable, ErrForbidden, ErrNotFound, ErrInvalidRequest} {
				require.Equal(t, sentinel == tc.want, errors.Is(err, sentinel), "%v", sentinel)
			}
			require.ErrorAs(t, err, &be)
			require.Equal(t, "broker: "+tc.message, be.Error())
		})
	}
}

// A cache refusal matches the sentinel of the typed code it stands for.
func TestCacheErrorMatchesTypedSentinels(t *testing.T) {
	err := fmt.Errorf("get: %w", &CacheError{Code: wire.CacheErrNotFound, Message: "no cache t/ns/c"})
	require.ErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, ErrForbidden)
	require.ErrorIs(t, &CacheError{Code: wire.CacheErrNotCounter}, ErrInvalidRequest)
}

// A subscribe start the broker refuses says why and what is available.
func TestCursorErrorSaysWhy(t *testing.T) {
	err := error(&CursorError{Reason: "too_old", Requested: 3, Available: 100})
	require.Equal(t, "broker: subscribe cursor too_old: requested 3, available 100", err.Error())
	var ce *CursorError
	require.ErrorAs(t, fmt.Errorf("subscribe: %w", err), &ce)
	require.Equal(t, uint64(100), ce.Available)
}

// The zero Config is the documented defaults; one without TLS or a tenant,
// or with a negative stats interval, is refused with ErrInvalidConfig.
func TestConfigDefaultsAndValidation(t *testing.T) {
	c := Config{}.withDefaults()
	require.Equal(t, DefaultFlags, c.Flags)
	require.False(t, wire.Supports(c.Flags, wire.FlagEventTimestamps), "per-event times only on request")
	require.Equal(t, uint32(wire.DefaultMaxFrameBytes), c.MaxFrameBytes)
	require.Equal(t, uint64(16<<20), c.StreamReceiveWindow)
	require.Equal(t, uint64(64<<20), c.ConnectionReceiveWindow)
	require.Equal(t, int64(4096), c.MaxSubscriptions)
	require.Equal(t, 64, c.SubscriptionBuffer)
	require.Equal(t, udp.DefaultBlackHoleCooldown, c.BlackHoleCooldown)
	require.NotNil(t, c.Logger)
	require.Equal(t, time.Duration(-1), Config{BlackHoleCooldown: -1}.withDefaults().BlackHoleCooldown, "negative: stall redials off")

	ok := Config{Tenant: "t", TLS: &tls.Config{}}
	require.NoError(t, ok.validate())
	for name, bad := range map[string]Config{
		"no TLS":            {Tenant: "t"},
		"no tenant":         {TLS: &tls.Config{}},
		"negative interval": {Tenant: "t", TLS: &tls.Config{}, ConnStatsInterval: -time.Second},
	} {
		require.ErrorIs(t, bad.validate(), ErrInvalidConfig, name)
	}
}

// TokenFunc, when set, is asked at each auth frame instead of Token, so a
// renewed credential is used from then on.
func TestConfigToken(t *testing.T) {
	c := Config{Token: "static"}
	require.Equal(t, "static", c.token())
	n := 0
	c.TokenFunc = func() string { n++; return fmt.Sprint("renewed-", n) }
	require.Equal(t, "renewed-1", c.token())
	require.Equal(t, "renewed-2", c.token())
}

// A reply of the wrong kind names what came and what it answered.
func TestUnexpectedReplyIsAProtocolError(t *testing.T) {
	err := unexpected(&wire.RosterOK{}, "cache")
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "roster_ok in reply to a cache request")
}
