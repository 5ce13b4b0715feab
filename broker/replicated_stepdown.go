package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// NotLeaderError is StepDown's refusal on a broker whose replica does not
// lead: Leader is the member it follows ("" while it knows none), where an
// operator asks again.
type NotLeaderError struct {
	Leader string
	msg    string
}

func (e *NotLeaderError) Error() string { return e.msg }
func (e *NotLeaderError) Unwrap() error { return ErrNotOwner }

// StepDown hands the leadership of shard idx of k to voter to (a member
// id; "" picks the most caught up voter that is in sync). It returns the
// new leader once the replica here stopped leading, or an error: a
// *NotLeaderError when this broker's replica does not lead.
func (b *Broker) StepDown(ctx context.Context, k StreamKey, idx int, to string) (string, error) {
	st, err := b.streams.lookup(k)
	if err != nil {
		return "", err
	}
	if idx < 0 || idx >= len(st.shards) {
		return "", fmt.Errorf("%w: shard %d not in [0, %d)", ErrInvalidRequest, idx, len(st.shards))
	}
	r := st.shards[idx].rep.Load()
	if r == nil {
		return "", fmt.Errorf("%w: shard %s/%d has no replica on %s", ErrStreamNotFound, k, idx, b.cfg.NodeID)
	}
	s := r.group.Status()
	if s.Role != "leader" {
		leader := ""
		if s.Leader != 0 {
			leader = r.memberName(s.Leader)
		}
		return "", &NotLeaderError{Leader: leader,
			msg: fmt.Sprintf("the replica of %s/%d on %s is a %s (leader: %q)", k, idx, b.cfg.NodeID, s.Role, leader)}
	}
	target := uint64(0)
	if to != "" {
		target = raftID(to)
		if !slices.Contains(s.Voters, target) {
			return "", fmt.Errorf("%w: %s is not a voter of %s/%d", ErrInvalidRequest, to, k, idx)
		}
	} else {
		target = handOffTarget(s)
	}
	if target == 0 {
		return "", fmt.Errorf("%w: no other voter of %s/%d is in sync", ErrOwnerUnavailable, k, idx)
	}
	if target == s.ID {
		return "", fmt.Errorf("%w: %s already leads %s/%d", ErrInvalidRequest, to, k, idx)
	}
	b.log.Info("replica: handing the leadership over by hand", "stream", k.String(), "shard", idx, "to", r.memberName(target))
	r.group.TransferLeadership(target)
	for started := false; ; {
		s := r.group.Status()
		if s.Role != "leader" && s.Leader != 0 { // the new leader's first message came
			return r.memberName(s.Leader), nil
		}
		started = started || s.Transferee != 0
		if started && s.Transferee == 0 && s.Role == "leader" {
			// Raft gave the transfer up (the target did not catch up
			// within an election timeout).
			return "", fmt.Errorf("%w: %s did not take the leadership of %s/%d", ErrOwnerUnavailable, r.memberName(target), k, idx)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: the leadership of %s/%d was not handed over: %w", ErrOwnerUnavailable, k, idx, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// StepDownRequest is the body of POST .../shards/{shard}/step-down; To
// names the voter to hand the leadership to ("" or no body: the most
// caught up one).
type StepDownRequest struct {
	To string `json:"to,omitempty"`
}

// StepDownAnswer is a step-down's answer: From handed the leadership to
// Leader; on a refusal by a broker whose replica does not lead, Error
// says why and Leader names the member to ask (409).
type StepDownAnswer struct {
	Stream string `json:"stream"`
	Shard  int    `json:"shard"`
	From   string `json:"from,omitempty"`
	Leader string `json:"leader,omitempty"`
	Error  string `json:"error,omitempty"`
}

// stepDownWait bounds a step-down: raft gives a transfer up after an
// election timeout, so this is only a backstop.
const stepDownWait = 10 * time.Second

// postStepDown is POST /v1/streams/{tenant}/{namespace}/{stream}/shards/{shard}/step-down.
func (b *Broker) postStepDown(w http.ResponseWriter, r *http.Request) {
	k := StreamKey{Tenant: r.PathValue("tenant"), Namespace: r.PathValue("namespace"), Stream: r.PathValue("stream")}
	ans := StepDownAnswer{Stream: k.String()}
	idx, err := strconv.Atoi(r.PathValue("shard"))
	if err != nil {
		ans.Error = "shard: want a number, not " + strconv.Quote(r.PathValue("shard"))
		writeJSON(w, http.StatusBadRequest, ans)
		return
	}
	ans.Shard = idx
	var req StepDownRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<12))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		ans.Error = "bad request body: " + err.Error()
		writeJSON(w, http.StatusBadRequest, ans)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), stepDownWait)
	defer cancel()
	leader, err := b.StepDown(ctx, k, idx, req.To)
	if err == nil {
		ans.From, ans.Leader = b.cfg.NodeID, leader
		writeJSON(w, http.StatusOK, ans)
		return
	}
	ans.Error = err.Error()
	code := http.StatusBadRequest
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		code, ans.Leader = http.StatusConflict, nl.Leader
	case errors.Is(err, ErrStreamNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrOwnerUnavailable):
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, ans)
}
