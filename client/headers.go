package client

import (
	"context"
	"fmt"

	"github.com/felixmq/felix/wire"
)

// Message is one event and its headers: a small, bounded, ordered set of
// string key/value pairs (a trace context, a content type) that travels
// with the event through the broker, its log, every subscriber that reads
// them (Event.Headers) and consumer groups (GroupRecord.Headers). Bounds:
// wire.MaxHeaders headers, keys of 1 to 255 bytes, values up to
// wire.MaxHeaderValueBytes, wire.MaxHeaderBlockBytes in all.
type Message struct {
	Payload []byte
	Headers []wire.EventHeader
}

// PublishMessages publishes msgs as one atomic batch and waits for its ack.
func (p *Publisher) PublishMessages(ctx context.Context, msgs []Message) error {
	return p.PublishMessagesAsync(msgs).Wait(ctx)
}

// PublishMessagesAsync is PublishAsync for events with headers. It fails
// with ErrNotNegotiated on a broker that does not take headers
// (wire.CapHeaders), and with wire.ErrBadHeaders on headers out of bounds.
func (p *Publisher) PublishMessagesAsync(msgs []Message) *PendingAck {
	payloads, headers, err := p.headed(msgs)
	if err != nil {
		pa := &PendingAck{done: make(chan struct{}), err: err}
		close(pa.done)
		return pa
	}
	pa := p.publishHeaded(-1, nil, payloads, headers, nil)
	p.rr.ask()
	return pa
}

// SendMessages is Send for events with headers.
func (p *Publisher) SendMessages(msgs []Message) error {
	payloads, headers, err := p.headed(msgs)
	if err != nil {
		return err
	}
	return p.sendHeaded(-1, nil, payloads, headers)
}

// headed splits msgs into payloads and header blocks (nil when no message
// has headers, so such a batch is the frame it always was).
func (p *Publisher) headed(msgs []Message) (payloads, headers [][]byte, err error) {
	payloads = make([][]byte, len(msgs))
	any := false
	for i, m := range msgs {
		payloads[i] = m.Payload
		any = any || len(m.Headers) > 0
	}
	if !any {
		return payloads, nil, nil
	}
	if !p.binary || !wire.Supports(p.ct.flags, wire.CapHeaders) {
		return nil, nil, fmt.Errorf("%w: the broker does not take event headers", ErrNotNegotiated)
	}
	headers = make([][]byte, len(msgs))
	for i, m := range msgs {
		if headers[i], err = wire.AppendHeaders(nil, m.Headers); err != nil {
			return nil, nil, err
		}
	}
	return payloads, headers, nil
}

// PublishMessagesAsync is IdempotentPublisher.PublishAsync for events
// with headers (see Message); a broker that does not take headers refuses
// the batch, and the publisher stops.
func (p *IdempotentPublisher) PublishMessagesAsync(ctx context.Context, key []byte, msgs []Message) *PendingAck {
	payloads := make([][]byte, len(msgs))
	var headers [][]byte
	for i, m := range msgs {
		payloads[i] = m.Payload
		if len(m.Headers) == 0 {
			continue
		}
		if headers == nil {
			headers = make([][]byte, len(msgs))
		}
		block, err := wire.AppendHeaders(nil, m.Headers)
		if err != nil {
			pa := &PendingAck{done: make(chan struct{}), err: err}
			close(pa.done)
			return pa
		}
		headers[i] = block
	}
	for i := range headers {
		if headers[i] == nil {
			headers[i] = wire.EmptyHeaderBlock
		}
	}
	return p.publishHeaded(ctx, key, payloads, headers)
}
