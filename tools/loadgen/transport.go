package main

// undersizedFactor: a throughput run should publish at least this many times
// what the transport can hold in flight, or its rate mostly measures how
// fast buffers fill.
const undersizedFactor = 4

// connAbsorb is how many bytes QUIC flow control lets one connection have in
// flight towards its receiver: each stream is bounded by the stream window
// and all of them together by the connection window.
func connAbsorb(streams int, streamWindow, connWindow int64) int64 {
	return min(int64(streams)*streamWindow, connWindow)
}

// TransportCheck is the undersized-run verdict of one round.
type TransportCheck struct {
	// AbsorbBytes is what the receive windows let sit in flight: every
	// publisher connection (one stream each, the broker's windows, assumed
	// to be --stream-window/--conn-window) plus every subscriber connection
	// (one event stream per shard, its own windows).
	AbsorbBytes    int64 `json:"absorb_bytes"`
	PublishedBytes int64 `json:"published_bytes"`
	Factor         int   `json:"factor"`
	Undersized     bool  `json:"undersized"`
}

// absorbBytes sums connAbsorb over the round's connections.
func (r *round) absorbBytes() int64 {
	cfg := r.cfg
	total := int64(cfg.Publishers) * connAbsorb(1, cfg.StreamWindow, cfg.ConnWindow)
	for _, w := range r.subs {
		sw, cw := cfg.windows(w.slow)
		total += connAbsorb(r.streams[w.stream].Shards, sw, cw)
	}
	return total
}

// undersized reports whether a run that published publishedBytes is too
// small for the transport that can absorb absorbBytes.
func undersized(publishedBytes, absorbBytes int64) bool {
	return publishedBytes < undersizedFactor*absorbBytes
}

// transportCheck judges a round; only throughput runs are judged.
func (r *round) transportCheck(publishedBytes int64) TransportCheck {
	absorb := r.absorbBytes()
	return TransportCheck{
		AbsorbBytes: absorb, PublishedBytes: publishedBytes, Factor: undersizedFactor,
		Undersized: r.cfg.Profile == "throughput" && undersized(publishedBytes, absorb),
	}
}
