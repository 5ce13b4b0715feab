package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestGroupLedger drives the consumer group's delivery state with the
// commands below, without a broker, a network or a clock (the time is an
// argument in ms from an origin). The files in testdata/group_ledger
// prove docs/design.md, "Semantics", queue: every record out to at most one
// member at a time, redelivery after the visibility timeout and after a
// nack with a count, max_inflight across shards, and a restart from the
// saved state. Run with -rewrite to regenerate the expected output.
//
//	open [committed=N] [delivered=N] [acked=(a, b)] [first=N] [shard=N]
//	member name=M max=N [visibility=MS]      (visibility defaults to 1000)
//	take member=M limit=N tail=N now=MS [ledger=I]
//	ack offsets=(a, b) [ledger=I]
//	nack offsets=(a, b) [ledger=I]
//	release member=M [ledger=I]
//	expire now=MS [ledger=I]
//	restart [first=N] [ledger=I]    (save the state, encode and decode it, open again)
//
// Every command prints the ledger it touched (ledger=I picks one of
// several opened, for a member taking from several shards) and the
// members' in-flight counts.
func TestGroupLedger(t *testing.T) {
	datadriven.Walk(t, "testdata/group_ledger", func(t *testing.T, path string) {
		env := &ledgerEnv{members: map[string]*groupMember{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.run(t, d)
		})
	})
}

var ledgerOrigin = time.Unix(1_000_000, 0)

type ledgerEnv struct {
	ledgers []*groupLedger
	members map[string]*groupMember
	names   []string // member names in creation order
}

func (e *ledgerEnv) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	l := e.ledger(t, d)
	switch d.Cmd {
	case "open":
		st := groupState{Committed: uintArg(t, d, "committed", 0), Delivered: uintArg(t, d, "delivered", 0),
			Acked: uintsArg(t, d, "acked")}
		key := groupKey{group: "g", shard: uint32(uintArg(t, d, "shard", 0))}
		nl, trimmed := newGroupLedger(key, st, uintArg(t, d, "first", 0))
		if trimmed {
			out.WriteString("trimmed by retention\n")
		}
		e.ledgers = append(e.ledgers, nl)
		l = nl
	case "member":
		var name string
		d.ScanArgs(t, "name", &name)
		m := &groupMember{maxInflight: int(uintArg(t, d, "max", 0)),
			visibility: time.Duration(uintArg(t, d, "visibility", 1000)) * time.Millisecond}
		e.members[name] = m
		e.names = append(e.names, name)
		return e.dumpMembers()
	case "take":
		m := e.member(t, d)
		taken, moved := l.take(m, int(uintArg(t, d, "limit", 0)), uintArg(t, d, "tail", 0), e.now(t, d), nil)
		out.WriteString("took:")
		for _, r := range taken {
			fmt.Fprintf(&out, " %d(%d)", r.offset, r.redeliveries)
		}
		if len(taken) == 0 {
			out.WriteString(" nothing")
		}
		if moved {
			out.WriteString("; deadline moved")
		}
		out.WriteString("\n")
	case "ack":
		if err := l.ack(uintsArg(t, d, "offsets")); err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		}
	case "nack":
		if err := l.nack(uintsArg(t, d, "offsets")); err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		}
	case "release":
		l.release(e.member(t, d))
	case "expire":
		next := l.expire(e.now(t, d))
		fmt.Fprintf(&out, "next deadline: %s\n", e.at(next))
	case "restart":
		st, err := decodeGroupState(l.state().encode())
		if err != nil {
			d.Fatalf(t, "the saved state does not decode: %v", err)
		}
		fmt.Fprintf(&out, "saved: committed=%d delivered=%d acked=%v\n", st.Committed, st.Delivered, st.Acked)
		nl, trimmed := newGroupLedger(l.key, st, uintArg(t, d, "first", 0))
		if trimmed {
			out.WriteString("trimmed by retention\n")
		}
		// The members are gone with the old broker.
		for _, m := range e.members {
			m.inflight.Store(0)
		}
		e.ledgers[e.index(t, d)] = nl
		l = nl
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	out.WriteString(e.dump(l))
	out.WriteString(e.dumpMembers())
	return out.String()
}

func (e *ledgerEnv) index(t *testing.T, d *datadriven.TestData) int {
	i := int(uintArg(t, d, "ledger", uint64(max(len(e.ledgers)-1, 0))))
	if d.Cmd != "open" && i >= len(e.ledgers) {
		d.Fatalf(t, "no ledger %d (open one first)", i)
	}
	return i
}

func (e *ledgerEnv) ledger(t *testing.T, d *datadriven.TestData) *groupLedger {
	if d.Cmd == "open" || d.Cmd == "member" {
		return nil
	}
	return e.ledgers[e.index(t, d)]
}

func (e *ledgerEnv) member(t *testing.T, d *datadriven.TestData) *groupMember {
	var name string
	d.ScanArgs(t, "member", &name)
	m := e.members[name]
	if m == nil {
		d.Fatalf(t, "no member %q", name)
	}
	return m
}

func (e *ledgerEnv) now(t *testing.T, d *datadriven.TestData) time.Time {
	return ledgerOrigin.Add(time.Duration(uintArg(t, d, "now", 0)) * time.Millisecond)
}

func (e *ledgerEnv) at(tm time.Time) string {
	if tm.IsZero() {
		return "none"
	}
	return strconv.FormatInt(tm.Sub(ledgerOrigin).Milliseconds(), 10)
}

func (e *ledgerEnv) name(m *groupMember) string {
	for n, x := range e.members {
		if x == m {
			return n
		}
	}
	return "?"
}

// dump prints the ledger in a fixed order.
func (e *ledgerEnv) dump(l *groupLedger) string {
	acked := make([]uint64, 0, len(l.acked))
	for off := range l.acked {
		acked = append(acked, off)
	}
	slices.Sort(acked)
	offs := make([]uint64, 0, len(l.inflight))
	for off := range l.inflight {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	var in []string
	for _, off := range offs {
		r := l.inflight[off]
		in = append(in, fmt.Sprintf("%d:%s@%s", off, e.name(r.m), e.at(r.deadline)))
	}
	redo := slices.Clone([]uint64(l.redo))
	slices.Sort(redo)
	return fmt.Sprintf("committed=%d delivered=%d next=%d acked=%v\ninflight=[%s] redo=%v deadline=%s\n",
		l.committed, l.delivered, l.next, acked, strings.Join(in, " "), redo, e.at(l.nextDeadline))
}

func (e *ledgerEnv) dumpMembers() string {
	var parts []string
	for _, n := range e.names {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", n, e.members[n].inflight.Load(), e.members[n].maxInflight))
	}
	return "members: " + strings.Join(parts, " ") + "\n"
}

func uintArg(t *testing.T, d *datadriven.TestData, key string, def uint64) uint64 {
	if !d.HasArg(key) {
		return def
	}
	var v uint64
	d.ScanArgs(t, key, &v)
	return v
}

func uintsArg(t *testing.T, d *datadriven.TestData, key string) []uint64 {
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		out := make([]uint64, len(a.Vals))
		for i, v := range a.Vals {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %q is not an offset", key, v)
			}
			out[i] = n
		}
		return out
	}
	return nil
}
