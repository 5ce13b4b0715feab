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
//	open [committed=N] [delivered=N] [acked=(a, b)] [first=N] [shard=N] [max-attempts=N]
//	member name=M max=N [visibility=MS] [ident=S conn=N]   (visibility defaults to 1000)
//	take member=M limit=N tail=N now=MS [cap=N] [ledger=I]
//	ack offsets=(a, b) [tail=N] [ledger=I]
//	nack offsets=(a, b) [delay=MS now=MS] [attempts=N] [ledger=I]
//	extend offset=N attempts=N now=MS for=MS
//	release member=M [ledger=I]
//	expire now=MS [ledger=I]
//	dead-letter offset=N | redrive offset=N [first=N] | discard offset=N
//	seek to=N [if-new]  |  reset [first=N]  |  describe
//	reclaim member=M  |  untake member=M offsets=(a, b)
//	restart [first=N] [ledger=I]    (save the state, encode and decode it, open again)
//
// Every command prints the ledger it touched (ledger=I picks one of
// several opened, for a member taking from several shards) and the
// members' in-flight counts. In the in-flight list a* is a claim reserved
// for a, - a record nacked with a delay.
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
			Acked: uintsArg(t, d, "acked"), MaxAttempts: uint32(uintArg(t, d, "max-attempts", 0))}
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
			visibility: time.Duration(uintArg(t, d, "visibility", 1000)) * time.Millisecond, connID: uintArg(t, d, "conn", 0)}
		if d.HasArg("ident") {
			var ident string
			d.ScanArgs(t, "ident", &ident)
			m.ident = memberIdent{principal: "p", consumer: ident}
		}
		e.members[name] = m
		e.names = append(e.names, name)
		return e.dumpMembers()
	case "take":
		m := e.member(t, d)
		taken, moved, dead := l.take(takeArgs{m: m, limit: int(uintArg(t, d, "limit", 0)), tail: uintArg(t, d, "tail", 0),
			now: e.now(t, d), visibility: m.visibility, groupCap: int(uintArg(t, d, "cap", 0))}, nil)
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
		if dead {
			out.WriteString("; dead-lettered")
		}
		out.WriteString("\n")
	case "ack":
		e.result(&out, l.ack(uintsArg(t, d, "offsets"), uintArg(t, d, "tail", 1<<40)), false)
	case "nack":
		a := nackArgs{delay: time.Duration(uintArg(t, d, "delay", 0)) * time.Millisecond, now: e.now(t, d),
			attempts: uintArg(t, d, "attempts", 0)}
		dead, _, err := l.nack(uintsArg(t, d, "offsets"), uintArg(t, d, "tail", 1<<40), a)
		e.result(&out, err, dead)
	case "extend":
		e.result(&out, l.extend(uintArg(t, d, "offset", 0), uintArg(t, d, "attempts", 0), e.now(t, d),
			time.Duration(uintArg(t, d, "for", 0))*time.Millisecond), false)
	case "release":
		e.result(&out, nil, l.release(e.member(t, d)))
	case "expire":
		next, dead := l.expire(e.now(t, d))
		fmt.Fprintf(&out, "next deadline: %s\n", e.at(next))
		e.result(&out, nil, dead)
	case "dead-letter":
		e.result(&out, l.deadLetterNow(uintArg(t, d, "offset", 0), uintArg(t, d, "tail", 1<<40)), false)
	case "redrive":
		e.result(&out, l.redrive(uintArg(t, d, "offset", 0), uintArg(t, d, "first", 0)), false)
	case "discard":
		e.result(&out, l.discard(uintArg(t, d, "offset", 0)), false)
	case "seek":
		pos, moved := l.seek(uintArg(t, d, "to", 0), d.HasArg("if-new"))
		fmt.Fprintf(&out, "position %d moved=%v\n", pos, moved)
	case "reset":
		fmt.Fprintf(&out, "existed=%v\n", l.reset(uintArg(t, d, "first", 0)))
	case "describe":
		info := l.describe()
		fmt.Fprintf(&out, "exists=%v committed=%d in_flight=%d owed=%d dead_letters=%d max_attempts=%d\n",
			info.exists, info.committed, info.inFlight, info.owed, info.deadLetters, info.maxAttempts)
	case "reclaim":
		l.reclaim(e.member(t, d))
	case "untake":
		m := e.member(t, d)
		for _, off := range uintsArg(t, d, "offsets") {
			l.untake(m, off)
		}
	case "restart":
		st, err := decodeGroupState(l.state().encode())
		if err != nil {
			d.Fatalf(t, "the saved state does not decode: %v", err)
		}
		fmt.Fprintf(&out, "saved: committed=%d delivered=%d acked=%v\n", st.Committed, st.Delivered, st.Acked)
		if len(st.Dead)+len(st.Redriven)+len(st.Attempts) > 0 || st.MaxAttempts > 0 {
			fmt.Fprintf(&out, "saved: max_attempts=%d dead=%v redriven=%v attempts=%v\n", st.MaxAttempts, st.Dead, st.Redriven, st.Attempts)
		}
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

// result prints a command's error, and whether it dead-lettered records.
func (e *ledgerEnv) result(out *strings.Builder, err error, dead bool) {
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
	}
	if dead {
		out.WriteString("dead-lettered\n")
	}
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
		who := e.name(r.m)
		switch {
		case r.m == nil:
			who = "-"
		case r.reserved:
			who += "*"
		}
		in = append(in, fmt.Sprintf("%d:%s@%s", off, who, e.at(r.deadline)))
	}
	redo := slices.Clone([]uint64(l.redo))
	slices.Sort(redo)
	s := fmt.Sprintf("committed=%d delivered=%d next=%d acked=%v\ninflight=[%s] redo=%v deadline=%s\n",
		l.committed, l.delivered, l.next, acked, strings.Join(in, " "), redo, e.at(l.nextDeadline))
	if len(l.dead) > 0 || len(l.redriven) > 0 {
		s += fmt.Sprintf("dead=%v redriven=%v\n", sortedKeys(l.dead), sortedKeys(l.redriven))
	}
	return s
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
