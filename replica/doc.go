// Package replica keeps one shard's log on several brokers: a raft group
// (go.etcd.io/raft/v3, driven through its RawNode) whose log is the
// shard's segment log itself.
//
// # What it owns
//
//   - [Group]: one replica of one shard. It drives the raft state machine
//     on a goroutine of its own: it appends what raft hands it to the
//     segment log (truncating a tail its leader's log does not match),
//     syncs per the stream's fsync mode, sends raft's messages through a
//     [Transport], tells the owner which records are committed ([Config].
//     Apply), and answers the proposals of the leader once they are
//     persisted (AckLeader) or committed (AckQuorum).
//   - The raft storage over the log: raft entry index i is log offset
//     i-1, one record per entry, so offsets are the same on every replica.
//     An event's entry carries the record as its leader wrote it (mark,
//     timestamp, payload), so replicas hold the same bytes. Raft's empty
//     entry at the start of a term, and membership changes, are
//     generation-start records (format v4, segment.MarkGeneration): their
//     payload is the term, then, for a membership change, its entry type
//     and encoding. Readers other than replication skip them.
//     The entries appended last are kept in memory until applied (up to
//     16 MiB of data): raft asks for them back to apply them one round
//     trip after it let go of its own copy, and reading them back from
//     the log (checking, decoding, encoding them again) cost a follower
//     about a third of what writing them does.
//   - The raft state beside the segments (file "raft.state"): term, vote,
//     commit, membership, the index at which each term began, and where a
//     snapshot left the log. Written atomically through segment.FS.
//
// # What it must not do
//
// It knows nothing of streams, subscribers, QUIC or the control plane: the
// broker joins it to the shard, the transport and the placement. It never
// decides leadership itself: raft does (elections with PreVote, and
// CheckQuorum, so a leader cut off from its majority steps down).
//
// # Durability
//
// With SyncEachWrite (fsync mode on_commit) a replica syncs what it
// appended before it answers its leader or counts its own copy, so a
// quorum ack means the records are on a majority's disks. Without it
// (periodic, never) a quorum ack means written on a majority: it survives
// the loss of any one host while the others stay up, as Kafka's acks=all
// does by default. Term and vote are synced before any message that
// depends on them leaves; the commit index is saved lazily (raft learns it
// again from its leader).
//
// Snapshots carry no data: a follower behind its leader's retention gets
// the leader's first retained index as its new start (segment.Log.Reset)
// and the records from there on as appends. Nothing is replayed that the
// leader no longer holds.
//
// # Concurrency
//
// A Group's methods are safe for concurrent use; raft runs on the group's
// goroutine only. Config.Apply, the proposals' callbacks and
// Transport.Send are called on that goroutine and must not block.
package replica
