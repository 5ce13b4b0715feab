package broker

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGroupStateRoundTrip(t *testing.T) {
	for _, s := range []groupState{
		{},
		{Committed: 5, Delivered: 5},
		{Committed: 10, Delivered: 20, Acked: []uint64{11, 15, 19}},
		{Committed: 10, Delivered: 20, MaxAttempts: 5, Exists: true, Acked: []uint64{12}, Dead: []uint64{3, 11},
			Redriven: []uint64{3}, Attempts: []offsetCount{{10, 4}, {13, 1}}},
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

// TestGroupStateReadsVersion1: the state files written before dead letters
// and bounds (version 1) are read as groups that exist, with none.
func TestGroupStateReadsVersion1(t *testing.T) {
	v1 := []byte("FXQG\x01\x00\x00\x00" +
		"\x0a\x00\x00\x00\x00\x00\x00\x00" + "\x14\x00\x00\x00\x00\x00\x00\x00" +
		"\x01\x00\x00\x00" + "\x0b\x00\x00\x00\x00\x00\x00\x00")
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.ChecksumIEEE(v1))
	got, err := decodeGroupState(v1)
	require.NoError(t, err)
	require.Equal(t, groupState{Committed: 10, Delivered: 20, Exists: true, Acked: []uint64{11}}, got)
}

func TestGroupStateRejectsCorruption(t *testing.T) {
	good := groupState{Committed: 10, Delivered: 20, Acked: []uint64{11, 15}}.encode()
	for name, b := range map[string][]byte{
		"short":          good[:10],
		"bad magic":      append([]byte("XXXX"), good[4:]...),
		"flipped bit":    func() []byte { c := append([]byte(nil), good...); c[9] ^= 1; return c }(),
		"unordered":      groupState{Committed: 10, Delivered: 20, Acked: []uint64{15, 11}}.encode(),
		"beyond":         groupState{Committed: 10, Delivered: 20, Acked: []uint64{25}}.encode(),
		"at committed":   groupState{Committed: 10, Delivered: 20, Acked: []uint64{10}}.encode(),
		"delivered<c":    groupState{Committed: 10, Delivered: 5}.encode(),
		"dead unordered": groupState{Committed: 10, Delivered: 20, Dead: []uint64{4, 3}}.encode(),
		"redriven above": groupState{Committed: 10, Delivered: 20, Redriven: []uint64{12}}.encode(),
		"attempts order": groupState{Committed: 10, Delivered: 20, Attempts: []offsetCount{{12, 1}, {11, 1}}}.encode(),
		"trailing":       append(append([]byte(nil), good[:len(good)-4]...), 0, 0, 0, 0, 0),
	} {
		_, err := decodeGroupState(b)
		require.ErrorIs(t, err, errBadState, name)
	}
}

// FuzzGroupState: the state decoder never panics, whatever it accepts
// re-encodes to a state that decodes the same, and a version 2 state to
// the same bytes (one encoding per state).
func FuzzGroupState(f *testing.F) {
	f.Add(groupState{}.encode())
	f.Add(groupState{Committed: 10, Delivered: 20, Acked: []uint64{11, 15, 19}}.encode())
	f.Add(groupState{Committed: 10, Delivered: 20, MaxAttempts: 3, Exists: true, Dead: []uint64{2}, Redriven: []uint64{2},
		Attempts: []offsetCount{{11, 2}}}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeGroupState(b)
		if err != nil {
			return
		}
		again, err := decodeGroupState(s.encode())
		require.NoError(t, err)
		require.Equal(t, s, again)
		if b[4] == stateVersion {
			require.Equal(t, b, s.encode())
		}
	})
}

// A group's state file is per shard; shard 0's is where single-shard groups
// kept it before streams had more than one, so an upgraded broker finds it.
func TestGroupStatePathPerShard(t *testing.T) {
	k := StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"}
	require.Equal(t, "/d/queues/t1_default_jobs_0-e021f5291ded5dba/workers-e4dede02383cb9cc.qstate",
		groupStatePath("/d", k, 0, "workers"))
	require.Equal(t, "/d/queues/t1_default_jobs_2-e021f3291ded5a54/workers-e4dede02383cb9cc.qstate",
		groupStatePath("/d", k, 2, "workers"))
}
