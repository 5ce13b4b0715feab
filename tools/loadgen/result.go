package main

import (
	"fmt"
	"slices"
	"time"
)

// Result is everything a run measured; --json writes it.
type Result struct {
	Tool        string       `json:"tool"`
	Started     time.Time    `json:"started"`
	Config      configReport `json:"config"`
	Streams     []streamInfo `json:"streams"`
	Notes       []string     `json:"notes,omitempty"`
	Rounds      []Round      `json:"rounds"`
	Summary     Summary      `json:"summary"`
	Undersized  bool         `json:"undersized"`
	Interrupted bool         `json:"interrupted,omitempty"`
}

// configReport is Config as the report shows it.
type configReport struct {
	Addr         string  `json:"addr"`
	Admin        string  `json:"admin"`
	Tenant       string  `json:"tenant"`
	Namespace    string  `json:"namespace"`
	Profile      string  `json:"profile"`
	Streams      int     `json:"streams"`
	Shards       int     `json:"shards"`
	Durable      bool    `json:"durable"`
	Fsync        string  `json:"fsync,omitempty"`
	Publishers   int     `json:"publishers"`
	Subscribers  int     `json:"subscribers"`
	Payload      int     `json:"payload_bytes"`
	Batch        int     `json:"batch"`
	Ack          string  `json:"ack"`
	Idempotent   bool    `json:"idempotent,omitempty"`
	Inflight     int     `json:"inflight,omitempty"`
	Rate         float64 `json:"rate_msg_per_s,omitempty"`
	Duration     string  `json:"duration,omitempty"`
	Count        int64   `json:"count,omitempty"`
	Warmup       string  `json:"warmup"`
	Repeat       int     `json:"repeat"`
	Slow         int     `json:"slow,omitempty"`
	Pause        int     `json:"pause,omitempty"`
	PauseAt      string  `json:"pause_at,omitempty"`
	PauseFor     string  `json:"pause_for,omitempty"`
	SlowDelay    string  `json:"slow_delay,omitempty"`
	SlowWindow   int64   `json:"slow_window_bytes,omitempty"`
	StreamWindow int64   `json:"stream_window_bytes"`
	ConnWindow   int64   `json:"conn_window_bytes"`
	Retries      int     `json:"retries"`
}

func reportConfig(c *Config) configReport {
	r := configReport{
		Addr: c.Addr, Admin: c.Admin, Tenant: c.Tenant, Namespace: c.Namespace, Profile: c.Profile,
		Streams: c.Streams, Shards: c.Shards, Durable: c.Durable, Fsync: c.Fsync,
		Publishers: c.Publishers, Subscribers: c.Subscribers, Payload: c.Payload, Batch: c.Batch,
		Ack: c.Ack, Rate: c.Rate, Count: c.Count, Warmup: c.Warmup.String(), Repeat: c.Repeat,
		Slow: c.Slow, SlowWindow: c.SlowWindow, StreamWindow: c.StreamWindow, ConnWindow: c.ConnWindow,
		Retries: c.Retries,
	}
	if c.Ack != "none" {
		r.Inflight, r.Idempotent = c.Inflight, c.Idempotent
	}
	if c.Duration > 0 {
		r.Duration = c.Duration.String()
	}
	if c.Slow > 0 {
		r.SlowDelay = c.SlowDelay.String()
	}
	if c.Pause > 0 {
		r.Pause, r.PauseAt, r.PauseFor = c.Pause, c.PauseAt.String(), c.PauseFor.String()
	}
	return r
}

// Round is one round's measurements. Rates and latencies cover the measured
// phase (sequences past each publisher's warm-up boundary); published,
// delivered, dropped and unaccounted cover the whole round, warm-up included.
type Round struct {
	Round               int             `json:"round"`
	Interrupted         bool            `json:"interrupted,omitempty"`
	MeasuredSeconds     float64         `json:"measured_s"`
	Published           uint64          `json:"published"`
	PublishedMeasured   uint64          `json:"published_measured"`
	MsgPerS             float64         `json:"msg_per_s"`
	MBPerS              float64         `json:"mb_per_s"` // payload bytes, MB = 10^6
	AckLatency          *LatencySummary `json:"ack_latency"`
	DeliveryLatency     *LatencySummary `json:"delivery_latency"`
	DeliveryLatencyNote string          `json:"delivery_latency_note,omitempty"`
	// HealthyDeliveryLatency covers the subscribers that are not --slow
	// (set only when some are).
	HealthyDeliveryLatency *LatencySummary `json:"healthy_delivery_latency,omitempty"`
	HealthyDropped         *uint64         `json:"healthy_dropped,omitempty"`
	Delivered              uint64          `json:"delivered"`
	DeliveredMeasured      uint64          `json:"delivered_measured"`
	DeliveredMsgPerS       float64         `json:"delivered_msg_per_s"`
	Dropped                uint64          `json:"dropped"`
	Unaccounted            int64           `json:"unaccounted"` // Σ |unaccounted| over subscribers
	Duplicates             uint64          `json:"duplicates"`
	Foreign                uint64          `json:"foreign,omitempty"`
	Retries                uint64          `json:"retries"`
	PublishFailed          uint64          `json:"publish_failed"`
	// Redials counts connections the clients replaced after a stalled
	// path; Resumes the subscriptions that moved to the new connection.
	Redials uint64 `json:"redials"`
	Resumes uint64 `json:"resumes"`
	// BrokerRSSMaxBytes is the largest anonymous resident memory of the
	// broker seen during the round (sampled from /debug/felix/stats;
	// mapped log pages left out; 0 without the admin API).
	BrokerRSSMaxBytes uint64              `json:"broker_rss_max_bytes,omitempty"`
	DrainSeconds      float64             `json:"drain_s"`
	Floor             *FloorResult        `json:"floor,omitempty"`
	Transport         TransportCheck      `json:"transport"`
	ShardEvents       map[string][]uint64 `json:"shard_events,omitempty"`
	Publishers        []PublisherResult   `json:"publishers"`
	Subscribers       []SubscriberResult  `json:"subscribers"`
	Errors            []string            `json:"errors,omitempty"`
}

// PublisherResult is one publisher's share.
type PublisherResult struct {
	ID        int     `json:"id"`
	Stream    string  `json:"stream"`
	Published uint64  `json:"published"`
	Measured  uint64  `json:"measured"`
	Failed    uint64  `json:"failed"`
	Retries   uint64  `json:"retries"`
	AckP50    float64 `json:"ack_p50_us,omitempty"`
	AckP99    float64 `json:"ack_p99_us,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// SubscriberResult is one subscriber's accounting over all shards of its
// stream: Unaccounted = Published − Delivered − Dropped and must be 0.
type SubscriberResult struct {
	ID          int      `json:"id"`
	Stream      string   `json:"stream"`
	Shards      int      `json:"shards"`
	Slow        bool     `json:"slow"`
	Paused      bool     `json:"paused,omitempty"`
	Published   uint64   `json:"published"`
	Delivered   uint64   `json:"delivered"`
	Dropped     uint64   `json:"dropped"`
	Unaccounted int64    `json:"unaccounted"`
	Redials     uint64   `json:"redials,omitempty"`
	Resumes     uint64   `json:"resumes,omitempty"`
	Duplicates  uint64   `json:"duplicates"`
	Foreign     uint64   `json:"foreign,omitempty"`
	DeliveryP50 *float64 `json:"delivery_p50_us,omitempty"`
	DeliveryP99 *float64 `json:"delivery_p99_us,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// result turns the finished round's workers into a Round.
func (r *round) result(drain time.Duration, interrupted bool) Round {
	cfg := r.cfg
	out := Round{Round: r.n, Interrupted: interrupted, DrainSeconds: drain.Seconds()}
	var ack, delivery, healthy Histogram
	var pubLast, subLast time.Time
	for _, w := range r.pubs {
		out.Published += w.published
		out.PublishedMeasured += w.measured
		out.Retries += w.retries
		out.PublishFailed += w.failed
		ack.Merge(&w.ackHist)
		if w.last.After(pubLast) {
			pubLast = w.last
		}
		if w.c != nil {
			out.Redials += w.c.Redials()
		}
		pr := PublisherResult{ID: w.id, Stream: r.streams[w.stream].Name, Published: w.published, Measured: w.measured, Failed: w.failed, Retries: w.retries}
		if s := w.ackHist.Summary(); s != nil {
			pr.AckP50, pr.AckP99 = s.P50, s.P99
		}
		if w.err != nil {
			pr.Error = w.err.Error()
			out.Errors = append(out.Errors, w.err.Error())
		}
		out.Publishers = append(out.Publishers, pr)
	}
	for _, w := range r.subs {
		sr, h, last := r.subscriberResult(w)
		delivery.Merge(h)
		if !w.slow {
			healthy.Merge(h)
		}
		out.Delivered += sr.Delivered
		out.Dropped += sr.Dropped
		out.Redials += sr.Redials
		out.Resumes += sr.Resumes
		out.Unaccounted += absInt(sr.Unaccounted)
		out.Duplicates += sr.Duplicates
		out.Foreign += sr.Foreign
		for _, rd := range w.readers {
			out.DeliveredMeasured += rd.measured
		}
		if last.After(subLast) {
			subLast = last
		}
		if sr.Error != "" {
			out.Errors = append(out.Errors, sr.Error)
		}
		out.Subscribers = append(out.Subscribers, sr)
	}
	if d := pubLast.Sub(r.warmupEnd); d > 0 {
		out.MeasuredSeconds = d.Seconds()
		out.MsgPerS = float64(out.PublishedMeasured) / d.Seconds()
		out.MBPerS = float64(out.PublishedMeasured) * float64(cfg.Payload) / d.Seconds() / 1e6
	}
	if d := subLast.Sub(r.warmupEnd); d > 0 {
		out.DeliveredMsgPerS = float64(out.DeliveredMeasured) / d.Seconds()
	}
	out.AckLatency = ack.Summary()
	out.DeliveryLatency = delivery.Summary()
	if cfg.Slow > 0 && cfg.Slow < cfg.Subscribers {
		out.HealthyDeliveryLatency = healthy.Summary()
		var dropped uint64
		for _, s := range out.Subscribers {
			if !s.Slow {
				dropped += s.Dropped
			}
		}
		out.HealthyDropped = &dropped
	}
	if cfg.Payload < headerBytes {
		out.DeliveryLatencyNote = "n/a: payloads under 16 bytes carry no timestamp (delivered msg/s counts arrivals after the warm-up by arrival time)"
	}
	out.Transport = r.transportCheck(int64(out.Published) * int64(cfg.Payload))
	return out
}

// subscriberResult sums a subscriber's shards; it also returns their merged
// delivery latencies and the arrival of its last measured event.
func (r *round) subscriberResult(w *subWorker) (SubscriberResult, *Histogram, time.Time) {
	st := r.streams[w.stream]
	out := SubscriberResult{
		ID: w.id, Stream: st.Name, Shards: st.Shards, Slow: w.slow, Paused: w.paused,
		Published: r.expected(w), Delivered: w.delivered.Load(), Dropped: w.dropped.Load(),
	}
	if w.c != nil {
		out.Redials = w.c.Redials()
	}
	out.Unaccounted = int64(out.Published) - int64(out.Delivered) - int64(out.Dropped)
	h := &Histogram{}
	var last time.Time
	for _, rd := range w.readers {
		out.Resumes += rd.sub.Resumes()
		out.Duplicates += rd.duplicates
		out.Foreign += rd.foreign
		h.Merge(&rd.hist)
		if rd.last.After(last) {
			last = rd.last
		}
		if rd.err != nil && out.Error == "" {
			out.Error = fmt.Sprintf("subscriber %d shard %d: %v", w.id, rd.shard, rd.err)
		}
	}
	if s := h.Summary(); s != nil {
		out.DeliveryP50, out.DeliveryP99 = &s.P50, &s.P99
	}
	return out, h, last
}

// Spread is a metric's min, median and max over rounds.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func spreadOf(vs []float64) *Spread {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &Spread{Min: s[0], Median: med, Max: s[len(s)-1]}
}

// Summary spreads the headline numbers over rounds and totals the counts.
type Summary struct {
	Rounds           int     `json:"rounds"`
	MsgPerS          *Spread `json:"msg_per_s"`
	MBPerS           *Spread `json:"mb_per_s"`
	DeliveredMsgPerS *Spread `json:"delivered_msg_per_s"`
	AckP50           *Spread `json:"ack_p50_us,omitempty"`
	AckP99           *Spread `json:"ack_p99_us,omitempty"`
	DeliveryP50      *Spread `json:"delivery_p50_us,omitempty"`
	DeliveryP99      *Spread `json:"delivery_p99_us,omitempty"`
	Dropped          uint64  `json:"dropped"`
	Unaccounted      int64   `json:"unaccounted"`
	Duplicates       uint64  `json:"duplicates"`
	Retries          uint64  `json:"retries"`
	PublishFailed    uint64  `json:"publish_failed"`
	Redials          uint64  `json:"redials"`
	BrokerRSSMax     *Spread `json:"broker_rss_max_bytes,omitempty"`
	Errors           int     `json:"errors"`
	// With --floor: ack p50 and p99 over the bare round trip's, delivery
	// p50 minus ack p50, and the broker's CPU per publish over the bare
	// server's per round trip.
	FloorAckP50          *Spread `json:"floor_ack_p50_ratio,omitempty"`
	FloorAckP99          *Spread `json:"floor_ack_p99_ratio,omitempty"`
	FloorDeliveryOverAck *Spread `json:"floor_delivery_minus_ack_p50_us,omitempty"`
	FloorCPU             *Spread `json:"floor_cpu_ratio,omitempty"`
}

func (res *Result) summarize() {
	var msg, mb, del, a50, a99, d50, d99, rss, f50, f99, fd, fcpu []float64
	s := Summary{Rounds: len(res.Rounds)}
	for _, r := range res.Rounds {
		msg, mb, del = append(msg, r.MsgPerS), append(mb, r.MBPerS), append(del, r.DeliveredMsgPerS)
		if r.AckLatency != nil {
			a50, a99 = append(a50, r.AckLatency.P50), append(a99, r.AckLatency.P99)
		}
		if r.DeliveryLatency != nil {
			d50, d99 = append(d50, r.DeliveryLatency.P50), append(d99, r.DeliveryLatency.P99)
		}
		s.Dropped += r.Dropped
		s.Unaccounted += r.Unaccounted
		s.Duplicates += r.Duplicates
		s.Retries += r.Retries
		s.PublishFailed += r.PublishFailed
		s.Redials += r.Redials
		if r.BrokerRSSMaxBytes > 0 {
			rss = append(rss, float64(r.BrokerRSSMaxBytes))
		}
		s.Errors += len(r.Errors)
		res.Undersized = res.Undersized || r.Transport.Undersized
		if f := r.Floor; f != nil {
			if f.AckP50 > 0 {
				f50, f99 = append(f50, f.AckP50), append(f99, f.AckP99)
			}
			if f.DeliveryOverAck != nil {
				fd = append(fd, *f.DeliveryOverAck)
			}
			if f.CPURatio > 0 {
				fcpu = append(fcpu, f.CPURatio)
			}
		}
	}
	s.MsgPerS, s.MBPerS, s.DeliveredMsgPerS = spreadOf(msg), spreadOf(mb), spreadOf(del)
	s.AckP50, s.AckP99, s.DeliveryP50, s.DeliveryP99 = spreadOf(a50), spreadOf(a99), spreadOf(d50), spreadOf(d99)
	s.BrokerRSSMax = spreadOf(rss)
	s.FloorAckP50, s.FloorAckP99, s.FloorDeliveryOverAck, s.FloorCPU = spreadOf(f50), spreadOf(f99), spreadOf(fd), spreadOf(fcpu)
	res.Summary = s
}

func absInt(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
