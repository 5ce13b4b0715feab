package broker

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGroupStateRoundTrip(t *testing.T) {
	for _, s := range []groupState{
		{},
		{Committed: 5, Delivered: 5},
		{Committed: 10, Delivered: 20, Acked: []uint64{11, 15, 19}},
	} {
		got, err := decodeGroupState(s.encode())
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	path := filepath.Join(t.TempDir(), "q", "g.qstate")
	s, err := loadGroupState(path)
	require.NoError(t, err, "a missing file is a new group")
	require.Equal(t, groupState{}, s)
	want := groupState{Committed: 3, Delivered: 9, Acked: []uint64{4, 8}}
	require.NoError(t, saveGroupState(nil, path, want))
	s, err = loadGroupState(path)
	require.NoError(t, err)
	require.Equal(t, want, s)
}

func TestGroupStateRejectsCorruption(t *testing.T) {
	good := groupState{Committed: 10, Delivered: 20, Acked: []uint64{11, 15}}.encode()
	for name, b := range map[string][]byte{
		"short":        good[:10],
		"bad magic":    append([]byte("XXXX"), good[4:]...),
		"flipped bit":  func() []byte { c := append([]byte(nil), good...); c[9] ^= 1; return c }(),
		"unordered":    groupState{Committed: 10, Delivered: 20, Acked: []uint64{15, 11}}.encode(),
		"beyond":       groupState{Committed: 10, Delivered: 20, Acked: []uint64{25}}.encode(),
		"at committed": groupState{Committed: 10, Delivered: 20, Acked: []uint64{10}}.encode(),
		"delivered<c":  groupState{Committed: 10, Delivered: 5}.encode(),
	} {
		_, err := decodeGroupState(b)
		require.ErrorIs(t, err, errBadState, name)
	}
}

// FuzzGroupState: the state decoder never panics, and whatever it accepts
// re-encodes to the same bytes (one encoding per state).
func FuzzGroupState(f *testing.F) {
	f.Add(groupState{}.encode())
	f.Add(groupState{Committed: 10, Delivered: 20, Acked: []uint64{11, 15, 19}}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeGroupState(b)
		if err != nil {
			return
		}
		require.Equal(t, b, s.encode())
	})
}

// A group's state file is per shard; shard 0's is where single-shard queues
// kept it before streams had more than one, so an upgraded broker finds it.
func TestGroupStatePathPerShard(t *testing.T) {
	k := StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}
	require.Equal(t, "/d/queues/t1_default_jobs_0-e021f5291ded5dba/workers-e4dede02383cb9cc.qstate",
		groupStatePath("/d", k, 0, "workers"))
	require.Equal(t, "/d/queues/t1_default_jobs_2-e021f3291ded5a54/workers-e4dede02383cb9cc.qstate",
		groupStatePath("/d", k, 2, "workers"))
}
