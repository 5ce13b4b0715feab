package broker

import (
	"errors"

	"github.com/felixmq/felix/wire"
)

// The answers to acked publishes, shaped by what the client negotiated:
// the offset of the batch's first record (wire.FlagAckOffset), the shard
// it went to (wire.CapShard), the shard's owner (wire.CapOwner, cluster
// mode) and a refusal's typed code (wire.FlagAckCode with
// wire.FlagAckDetail on binary acks, wire.FeatureErrorCodes in JSON).

// jsonAnswer is publish_ok, publish_refused (an idempotent batch refused
// without writing it) or publish_error for request id.
func (ct *control) jsonAnswer(id uint64, res publishResult, err error) wire.Message {
	shard, own := ct.placed(res)
	var pr *producerRefusal
	if errors.As(err, &pr) {
		return &wire.PublishRefused{RequestID: id, Reason: pr.reason, Message: pr.msg}
	}
	if err != nil {
		return &wire.PublishError{RequestID: id, Message: err.Error(), Err: ct.typed(err), Shard: shard, Owner: own}
	}
	ok := &wire.PublishOK{RequestID: id, Shard: shard, Owner: own}
	if wire.Supports(ct.peer, wire.FlagAckOffset) && !res.noOffset {
		ok.Offset = &res.offset
	}
	return ok
}

// binaryAnswer is the binary ack for request id.
func (ct *control) binaryAnswer(id uint64, res publishResult, err error) wire.PublishAck {
	ack := wire.PublishAck{Status: wire.AckOK, RequestID: id}
	shard, own := ct.placed(res)
	if shard != nil {
		ack.Shard, ack.HasShard = *shard, true
	}
	if own != nil {
		ack.Owner, ack.HasOwner = *own, true
	}
	if err != nil {
		ack.Status, ack.Message = wire.AckError, err.Error()
		if wire.Supports(ct.peer, wire.FlagAckCode) {
			ack.Err = typedError(err)
			ack.HasDetail = wire.Supports(ct.peer, wire.FlagAckDetail) && ack.Err.Reason != ""
		}
		return ack
	}
	if wire.Supports(ct.peer, wire.FlagAckOffset) && !res.noOffset {
		ack.Offset, ack.HasOffset = res.offset, true
	}
	return ack
}

// placed is the shard and owner an answer names, each nil when the client
// did not offer it or there is none.
func (ct *control) placed(res publishResult) (*uint32, *wire.Owner) {
	var shard *uint32
	if res.shard >= 0 && wire.Supports(ct.peer, wire.CapShard) {
		s := uint32(res.shard)
		shard = &s
	}
	if !ct.ownerAcks {
		return shard, nil
	}
	return shard, res.owner
}
