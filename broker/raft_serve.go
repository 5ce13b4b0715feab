package broker

import (
	"errors"
	"fmt"
	"io"

	"github.com/felixmq/felix/wire"
)

// serveRaft serves another broker's replication stream (wire.CapRaft):
// after its auth, only RaftBatch frames, one way. Only a stream that
// authenticated with a node credential (verify gives it a nodePrincipal)
// may carry one, and only a cluster broker takes it. A frame that does
// not decode ends the stream: the sender redials and raft sends again.
func (ct *control) serveRaft() {
	b := ct.broker()
	if _, node := ct.principal.(nodePrincipal); !node || b.cfg.NodeID == "" {
		ct.fail(fmt.Errorf("%w: a replication stream needs a node credential and a cluster broker", ErrForbidden))
		return
	}
	ct.fr.SetMax(raftFrameMax(b.cfg.MaxFrameBytes))
	// A sender's frame holds up to raftBatchBytes and one append more:
	// kept between frames, the buffer is not grown anew (from 64 KiB,
	// doubling, a copy at each step) for every frame of a stream that
	// replicates at speed.
	ct.fr.SetKeep(raftBatchBytes + 2*raftMaxAppendBytes)
	var batch []wire.RaftMessage
	for {
		_, payload, err := ct.fr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			if !ct.expired.Load() {
				b.log.Debug("raft: replication stream ended", "conn", ct.c.id, "err", err)
			}
			return
		}
		batch, err = wire.DecodeRaftBatch(payload, batch)
		if err != nil {
			ct.fail(fmt.Errorf("%w: raft batch: %w", ErrInvalidRequest, err))
			return
		}
		b.raft.receive(batch)
	}
}
